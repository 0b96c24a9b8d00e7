#include "common/shm_segment.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

namespace conduit {

Status ShmSegment::Create(const char* name, uint64_t size, UniqueFd* fd) {
  Unmap();
  UniqueFd memfd(memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!memfd.valid()) return SystemError("memfd_create: %s", strerror(errno));
  if (ftruncate(memfd.get(), static_cast<off_t>(size)) != 0) {
    return SystemError("cannot size a %llu-byte shared segment: %s", static_cast<unsigned long long>(size),
                       strerror(errno));
  }
  if (fcntl(memfd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0) {
    return SystemError("memfd seal: %s", strerror(errno));
  }
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, memfd.get(), 0);
  if (p == MAP_FAILED) {
    return SystemError("mmap of a %llu-byte shared segment failed: %s", static_cast<unsigned long long>(size),
                       strerror(errno));
  }
  data_ = static_cast<uint8_t*>(p);
  size_ = size;
  *fd = std::move(memfd);
  return Status::Ok();
}

Status ShmSegment::Map(int fd, uint64_t size, uint64_t max_size, bool writable) {
  Unmap();
  if (size == 0 || size > max_size) {
    return InvalidArgument("shared segment of %llu bytes refused (limit %llu)", static_cast<unsigned long long>(size),
                           static_cast<unsigned long long>(max_size));
  }
  int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (seals & F_SEAL_SHRINK) == 0) {
    return InvalidArgument("shared segment must be a memfd sealed with F_SEAL_SHRINK");
  }
  // Only shared memory's own file system (a plain memfd). A hugetlbfs memfd (MFD_HUGETLB)
  // also takes seals, but its pages come from a pool the program can empty after punching
  // a hole in the file (which F_SEAL_SHRINK allows): our next store there would then be a
  // SIGBUS, fatal to the whole daemon. Its mapping is also larger than `size`, so Unmap
  // would leave it behind.
  struct statfs fs;
  if (fstatfs(fd, &fs) != 0 || static_cast<unsigned long>(fs.f_type) != TMPFS_MAGIC) {
    return InvalidArgument("shared segment must be a memfd of plain shared memory (not hugetlbfs)");
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) < size) {
    return InvalidArgument("shared segment is smaller than the %llu bytes announced",
                           static_cast<unsigned long long>(size));
  }
  int prot = writable ? PROT_READ | PROT_WRITE : PROT_READ;
  void* p = mmap(nullptr, size, prot, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    return SystemError("mmap of a %llu-byte segment failed: %s", static_cast<unsigned long long>(size), strerror(errno));
  }
  data_ = static_cast<uint8_t*>(p);
  size_ = size;
  return Status::Ok();
}

void ShmSegment::Unmap() {
  if (data_ != nullptr) munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace conduit
