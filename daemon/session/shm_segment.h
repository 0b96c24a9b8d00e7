// A program's shared-memory segment (memfd) mapped into the daemon.
#ifndef CONDUIT_DAEMON_SESSION_SHM_SEGMENT_H_
#define CONDUIT_DAEMON_SESSION_SHM_SEGMENT_H_

#include <cstddef>
#include <cstdint>

#include "common/fd_io.h"
#include "common/status.h"

namespace conduit {

class ShmSegment {
 public:
  ShmSegment() = default;
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;
  ~ShmSegment() { Unmap(); }

  // Maps `size` bytes of fd. The segment must be sealed against shrinking, so the program
  // cannot truncate it under the daemon (that would kill the daemon with SIGBUS).
  Status Map(int fd, uint64_t size, uint64_t max_size);
  void Unmap();

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_SESSION_SHM_SEGMENT_H_
