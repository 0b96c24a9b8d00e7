#include "staging_buffer.h"

#include "protocol/shim_protocol.h"
#include "protocol/staging_control.h"

namespace conduit {

Status StagingBuffer::Reserve(size_t data_bytes, DaemonConnection& conn) {
  const size_t bytes = kStagingControlBytes + data_bytes;
  if (shm_ != nullptr && bytes <= shm_->size()) return Status::Ok();
  size_t size = 1 << 20;
  while (size < bytes) size *= 2;
  // Sealed against shrinking: the daemon refuses segments that could shrink under it.
  auto next = std::make_unique<ShmSegment>();
  UniqueFd fd;
  CONDUIT_RETURN_IF_ERROR(next->Create("conduit-staging", size, &fd));
  shimproto::AttachShmRequest req{size};
  Frame reply;
  CONDUIT_RETURN_IF_ERROR(
      conn.Call(shimproto::kAttachShm, &req, sizeof(req), shimproto::kAttachShmReply, &reply, fd.get()));
  shm_ = std::move(next);
  return Status::Ok();
}

}  // namespace conduit
