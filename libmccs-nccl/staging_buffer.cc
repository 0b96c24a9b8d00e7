#include "staging_buffer.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/shim_protocol.h"
#include "common/staging_control.h"

namespace conduit {

StagingBuffer::~StagingBuffer() {
  if (data_ != nullptr) munmap(data_, size_);
}

Status StagingBuffer::Reserve(size_t data_bytes, DaemonConnection& conn) {
  const size_t bytes = kStagingControlBytes + data_bytes;
  if (bytes <= size_ && data_ != nullptr) return Status::Ok();
  size_t size = 1 << 20;
  while (size < bytes) size *= 2;
  UniqueFd fd(memfd_create("conduit-staging", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd.valid()) return SystemError("memfd_create: %s", strerror(errno));
  if (ftruncate(fd.get(), static_cast<off_t>(size)) != 0) {
    return SystemError("cannot size a %zu-byte staging segment: %s", size, strerror(errno));
  }
  // The daemon refuses segments that could shrink under it.
  if (fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK) != 0) return SystemError("memfd seal: %s", strerror(errno));
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (p == MAP_FAILED) return SystemError("mmap of a %zu-byte staging segment: %s", size, strerror(errno));
  shimproto::AttachShmRequest req{size};
  Frame reply;
  Status st = conn.Call(shimproto::kAttachShm, &req, sizeof(req), shimproto::kAttachShmReply, &reply, fd.get());
  if (!st.ok()) {
    munmap(p, size);
    return st;
  }
  if (data_ != nullptr) munmap(data_, size_);
  data_ = static_cast<uint8_t*>(p);
  size_ = size;
  return Status::Ok();
}

}  // namespace conduit
