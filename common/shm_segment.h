// A shared-memory segment (memfd) mapped into this process: a program's staging or message
// segment as the daemon sees it, or the daemon's receive segment as a program sees it.
#ifndef CONDUIT_DAEMON_COMMON_SHM_SEGMENT_H_
#define CONDUIT_DAEMON_COMMON_SHM_SEGMENT_H_

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

  // Creates a sealed memfd of `size` bytes (it can never shrink, so whoever maps it cannot
  // be killed by SIGBUS) and maps it read-write here. *fd receives the descriptor to pass.
  Status Create(const char* name, uint64_t size, UniqueFd* fd);
  // Maps `size` bytes of someone else's fd. The segment must be sealed against shrinking,
  // so the other side cannot truncate it under us (that would kill us with SIGBUS), and be
  // plain shared memory (tmpfs): a hugetlbfs memfd's pages can run out under us the same way.
  Status Map(int fd, uint64_t size, uint64_t max_size, bool writable = true);
  void Unmap();

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_COMMON_SHM_SEGMENT_H_
