#include "common/shm_segment.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
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
