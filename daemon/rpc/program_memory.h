// ProgramMemory: the shared memory of one program connection, from the daemon's side.
//
//   * send segments the program attached (mapped read-only): a message there becomes a
//     Message::Shared that releases its block back through the to-shim ring;
//   * receive segments this daemon creates and announces (AddSegment): incoming messages
//     are placed there; the program releases blocks through the to-daemon ring, and every
//     release is checked against the blocks actually handed out;
//   * the control region holding both rings.
// Messages may outlive the session (queued on a link), so this is shared with them.
#ifndef CONDUIT_DAEMON_RPC_PROGRAM_MEMORY_H_
#define CONDUIT_DAEMON_RPC_PROGRAM_MEMORY_H_

#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "common/frame_stream.h"
#include "common/shm_heap.h"
#include "common/shm_segment.h"
#include "protocol/rpc_protocol.h"
#include "rpc/message.h"

namespace conduit::rpc {

class ProgramMemory : public std::enable_shared_from_this<ProgramMemory> {
 public:
  // `overflow` sends a Free frame when the to-shim ring is full; `max_receive_bytes` caps
  // the receive segments, `max_send_bytes` the send segments the program may attach.
  ProgramMemory(std::function<void(const rpcproto::FreeEntry&)> overflow, uint64_t max_receive_bytes,
                uint64_t max_send_bytes);

  Status MapControl(int fd);
  Status AttachSend(const rpcproto::SegmentInfo& info, int fd);
  // The message the program placed at [offset, +len) of send segment `segment`.
  Status SendMessage(uint32_t segment, uint64_t offset, uint64_t len, Message* out);

  // A receive block for `len` bytes (growing the segments; announcements to send before
  // any frame naming the block are appended to *announce). False when exhausted.
  bool AllocateReceive(size_t len, uint32_t* segment, uint64_t* offset, uint8_t** data,
                       std::vector<OutFrame>* announce);
  // Releases a receive block the daemon never handed to the program.
  void FreeReceive(uint32_t segment, uint64_t offset);
  // Releases reported by the program in a Free frame.
  void ProgramReleased(const rpcproto::FreeEntry& entry);
  // Stops calling `overflow` (the session is gone).
  void Detach();

 private:
  struct ReceiveSegment {
    std::unique_ptr<ShmSegment> shm;
    std::unique_ptr<ShmHeap> heap;
  };
  void ReleaseSend(uint32_t segment, uint64_t offset);
  void DrainProgramReleases();  // mu_ held
  void FreeReceiveLocked(const rpcproto::FreeEntry& e);
  rpcproto::ControlRegion* control() const { return reinterpret_cast<rpcproto::ControlRegion*>(control_.data()); }

  std::function<void(const rpcproto::FreeEntry&)> overflow_;
  uint64_t max_receive_bytes_;
  uint64_t max_send_bytes_;
  ShmSegment control_;
  std::mutex mu_;
  std::vector<std::shared_ptr<ShmSegment>> send_;
  uint64_t send_bytes_ = 0;
  std::vector<ReceiveSegment> receive_;
  uint64_t receive_bytes_ = 0;
  uint64_t to_shim_head_ = 0;    // our producer index
  uint64_t to_daemon_tail_ = 0;  // our consumer index
  bool warned_ = false;
};

}  // namespace conduit::rpc

#endif  // CONDUIT_DAEMON_RPC_PROGRAM_MEMORY_H_
