// StagingBuffer: a memfd segment shared with the daemon, through which a rank's op data
// moves (host-memory path: the program's buffers are copied in and out of it). Its first
// page is the StagingControl block (common/staging_control.h); op data follows it.
#ifndef CONDUIT_LIBMCCS_NCCL_STAGING_BUFFER_H_
#define CONDUIT_LIBMCCS_NCCL_STAGING_BUFFER_H_

#include <cstddef>
#include <cstdint>

#include "common/status.h"
#include "daemon_connection.h"

namespace conduit {

class StagingBuffer {
 public:
  StagingBuffer() = default;
  StagingBuffer(const StagingBuffer&) = delete;
  StagingBuffer& operator=(const StagingBuffer&) = delete;
  ~StagingBuffer();

  // Makes room for `bytes` of op data after the control page, replacing the segment (and
  // re-attaching it to the daemon) when it must grow. Sizes grow geometrically so steady
  // state never re-attaches.
  Status Reserve(size_t bytes, DaemonConnection& conn);
  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace conduit

#endif  // CONDUIT_LIBMCCS_NCCL_STAGING_BUFFER_H_
