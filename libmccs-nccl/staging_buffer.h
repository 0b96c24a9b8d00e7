// StagingBuffer: a memfd segment shared with the daemon, through which a rank's op data
// moves (host-memory path: the program's buffers are copied in and out of it). Its first
// page is the StagingControl block (protocol/staging_control.h); op data follows it.
#ifndef CONDUIT_LIBMCCS_NCCL_STAGING_BUFFER_H_
#define CONDUIT_LIBMCCS_NCCL_STAGING_BUFFER_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "common/shm_segment.h"
#include "common/status.h"
#include "daemon_connection.h"

namespace conduit {

class StagingBuffer {
 public:
  StagingBuffer() = default;
  StagingBuffer(const StagingBuffer&) = delete;
  StagingBuffer& operator=(const StagingBuffer&) = delete;

  // Makes room for `bytes` of op data after the control page, replacing the segment (and
  // re-attaching it to the daemon) when it must grow. Sizes grow geometrically so steady
  // state never re-attaches.
  Status Reserve(size_t bytes, DaemonConnection& conn);
  uint8_t* data() const { return shm_ != nullptr ? shm_->data() : nullptr; }
  size_t size() const { return shm_ != nullptr ? shm_->size() : 0; }

 private:
  std::unique_ptr<ShmSegment> shm_;
};

}  // namespace conduit

#endif  // CONDUIT_LIBMCCS_NCCL_STAGING_BUFFER_H_
