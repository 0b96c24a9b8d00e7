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

#include <atomic>
#include <functional>
#include <map>
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
  // What a live upgrade hands to the next process: every segment's descriptor (duplicates),
  // the receive blocks the program still holds, and this side's ring indices.
  struct Handed {
    UniqueFd control;
    struct Send {
      uint32_t id = 0;
      uint64_t size = 0;
      UniqueFd fd;
    };
    std::vector<Send> send;
    struct Receive {
      uint64_t size = 0;
      UniqueFd fd;
      std::map<uint64_t, uint64_t> held;  // offset -> length
    };
    std::vector<Receive> receive;
    uint64_t to_shim_head = 0;
    uint64_t to_daemon_tail = 0;
  };

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
  // A receive block written by this thread goes to the program. The program releases it
  // through the ring, in shared memory, which ThreadSanitizer cannot follow; this marks the
  // ordering (a write here happens before the block is allocated again). No code in other
  // builds.
  void HandToProgram();
  // Releases reported by the program in a Free frame.
  void ProgramReleased(const rpcproto::FreeEntry& entry);
  // Stops calling `overflow` (the session is gone).
  void Detach();

  // Messages from the send segments that links or programs still hold (each returns its
  // block to the program when released).
  uint64_t sends_in_flight() const { return sends_in_flight_.load(); }
  // The old process, with the session stopped: fails while sends are in flight.
  Status Export(Handed* out);
  // The new process, before the session serves: each segment mapped and checked as when
  // the program attached it or this daemon made it, each held block taken again.
  Status Import(Handed in);

 private:
  struct ReceiveSegment {
    std::unique_ptr<ShmSegment> shm;
    std::unique_ptr<ShmHeap> heap;
    UniqueFd fd;  // kept for a live upgrade
  };
  Status AttachSendLocked(const rpcproto::SegmentInfo& info, int fd);
  void ReleaseSend(uint32_t segment, uint64_t offset);
  void DrainProgramReleases();  // mu_ held
  void FreeReceiveLocked(const rpcproto::FreeEntry& e);
  rpcproto::ControlRegion* control() const { return reinterpret_cast<rpcproto::ControlRegion*>(control_.data()); }

  std::function<void(const rpcproto::FreeEntry&)> overflow_;
  uint64_t max_receive_bytes_;
  uint64_t max_send_bytes_;
  ShmSegment control_;
  UniqueFd control_fd_;
  std::mutex mu_;
  std::vector<std::shared_ptr<ShmSegment>> send_;
  std::vector<UniqueFd> send_fds_;  // kept for a live upgrade, by segment id
  uint64_t send_bytes_ = 0;
  std::vector<ReceiveSegment> receive_;
  uint64_t receive_bytes_ = 0;
  uint64_t to_shim_head_ = 0;    // our producer index
  uint64_t to_daemon_tail_ = 0;  // our consumer index
  bool warned_ = false;
  std::atomic<uint64_t> sends_in_flight_{0};
};

}  // namespace conduit::rpc

#endif  // CONDUIT_DAEMON_RPC_PROGRAM_MEMORY_H_
