// ReceiveSegments: the daemon's receive segments as this program maps them (read-only), and
// the control region with the release rings.
//
// An incoming message in a segment becomes a gRPC byte buffer whose slice points straight
// at the shared bytes (no copy); when the program destroys the buffer, the block goes back
// to the daemon through the to-daemon ring. Byte buffers may outlive the connection, so
// this object is shared with them and keeps the mappings until the last one is gone.
#ifndef CONDUIT_LIBMRPC_GRPC_RECEIVE_SEGMENTS_H_
#define CONDUIT_LIBMRPC_GRPC_RECEIVE_SEGMENTS_H_

#include <grpc/grpc.h>

#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "common/shm_segment.h"
#include "protocol/rpc_protocol.h"

namespace conduit::grpcshim {

class ReceiveSegments : public std::enable_shared_from_this<ReceiveSegments> {
 public:
  // Releases that do not fit the ring go through this (a Free frame to the daemon).
  using Overflow = std::function<void(const rpcproto::FreeEntry&)>;

  ReceiveSegments(std::unique_ptr<ShmSegment> control, Overflow overflow);

  rpcproto::ControlRegion* control() const { return reinterpret_cast<rpcproto::ControlRegion*>(control_->data()); }

  // Maps a segment the daemon announced (AddSegment).
  Status Add(uint32_t segment, int fd, uint64_t size);
  // A byte buffer over [offset, offset + len) of `segment`; the block is released when the
  // buffer's slice is destroyed.
  Status Wrap(uint32_t segment, uint64_t offset, uint64_t len, grpc_byte_buffer** out);
  // Returns a block to the daemon.
  void Release(uint32_t segment, uint64_t offset);
  // Stops using the overflow path (the connection is gone).
  void Detach();

 private:
  std::unique_ptr<ShmSegment> control_;
  std::mutex mu_;
  Overflow overflow_;
  uint64_t to_daemon_head_ = 0;  // our copy of the producer index
  std::vector<std::unique_ptr<ShmSegment>> segments_;
};

}  // namespace conduit::grpcshim

#endif  // CONDUIT_LIBMRPC_GRPC_RECEIVE_SEGMENTS_H_
