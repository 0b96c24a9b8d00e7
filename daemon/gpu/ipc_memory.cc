#include "gpu/ipc_memory.h"

namespace conduit::gpu {

Status IpcMemoryCache::Acquire(int pid, const shimproto::RegisterBufferRequest& request, int fd, int device,
                               std::shared_ptr<const DeviceMapping>* out) {
  const Key key{pid, request.buffer_id};
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(key);
  if (it != entries_.end()) {
    if (std::shared_ptr<const DeviceMapping> live = it->second.lock()) {
      if (live->size != request.size || live->device != device || (live->fd >= 0) != (fd >= 0) ||
          memcmp(live->handle, request.ipc_handle, sizeof(live->handle)) != 0) {
        return InvalidArgument("buffer id %llu of pid %d is registered with a different handle, size or GPU",
                               static_cast<unsigned long long>(request.buffer_id), pid);
      }
      *out = std::move(live);
      return Status::Ok();
    }
    entries_.erase(it);
  }
  DeviceMapping mapping;
  {
    std::lock_guard<std::mutex> io(*io_mu_);
    CONDUIT_RETURN_IF_ERROR(open_(request, fd, device, &mapping));
  }
  mapping.device = device;
  mapping.size = request.size;
  memcpy(mapping.handle, request.ipc_handle, sizeof(mapping.handle));
  // The deleter may run on any thread, after this cache is gone from the caller's view:
  // it owns copies of what it needs.
  auto shared = std::shared_ptr<const DeviceMapping>(
      new DeviceMapping(mapping), [close = close_, io_mu = io_mu_](const DeviceMapping* m) {
        {
          std::lock_guard<std::mutex> io(*io_mu);
          close(*m);
        }
        delete m;
      });
  entries_[key] = shared;
  *out = std::move(shared);
  return Status::Ok();
}

size_t IpcMemoryCache::open_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& [key, weak] : entries_) n += weak.expired() ? 0 : 1;
  return n;
}

}  // namespace conduit::gpu
