// IpcMemoryCache: programs' device allocations mapped into the daemon (CUDA IPC, or the
// POSIX file descriptor of a virtual-memory-managed allocation), shared by every session
// of the daemon and kept until no session uses them.
//
// A program registers each allocation once per connection under the driver's buffer id,
// which is unique within the program's life: a freed and reallocated range gets a new
// id, so a stale mapping is never found under a live id (the program releases the old id
// when it notices the change). Mappings are keyed by (program pid, buffer id); opening
// the same handle twice in one process is not allowed by CUDA, so several connections of
// one program (one per communicator) share one mapping, counted by shared_ptr.
#ifndef CONDUIT_DAEMON_GPU_IPC_MEMORY_H_
#define CONDUIT_DAEMON_GPU_IPC_MEMORY_H_

#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "common/status.h"
#include "protocol/shim_protocol.h"

namespace conduit::gpu {

// One program allocation as mapped here.
struct DeviceMapping {
  int device = -1;         // this daemon's ordinal of its GPU
  uint64_t base = 0;       // CUdeviceptr of its first byte in the daemon
  uint64_t size = 0;
  uint8_t handle[shimproto::kIpcHandleBytes] = {};
  // A virtual-memory-managed allocation: this daemon's own duplicate of the descriptor the
  // program sent (a live upgrade hands it to the next process), closed with the mapping.
  // -1 for a CUDA IPC mapping.
  int fd = -1;
};

class IpcMemoryCache {
 public:
  // Maps a registration (`device` is this daemon's ordinal; `fd` the allocation's
  // descriptor for a virtual-memory-managed one, borrowed, else -1). Closes what Open mapped.
  using OpenFn = std::function<Status(const shimproto::RegisterBufferRequest&, int fd, int device, DeviceMapping*)>;
  using CloseFn = std::function<void(const DeviceMapping&)>;
  IpcMemoryCache(OpenFn open, CloseFn close) : open_(std::move(open)), close_(std::move(close)) {}

  // The mapping of (pid, request.buffer_id), opened now or shared with earlier users. A
  // live entry registered with a different handle, size or kind is refused (ids are unique
  // per program, so that program is confused or lying). `fd`: as OpenFn's.
  Status Acquire(int pid, const shimproto::RegisterBufferRequest& request, int fd, int device,
                 std::shared_ptr<const DeviceMapping>* out);
  // Mappings currently open (for tests and the operator).
  size_t open_count() const;

 private:
  using Key = std::pair<int, uint64_t>;
  mutable std::mutex mu_;  // entries_
  std::map<Key, std::weak_ptr<const DeviceMapping>> entries_;
  OpenFn open_;
  CloseFn close_;
  // Orders every open after the close of the same mapping it may race with (a mapping's
  // last user can drop it on any thread). Taken after mu_, never before it.
  std::shared_ptr<std::mutex> io_mu_ = std::make_shared<std::mutex>();
};

}  // namespace conduit::gpu

#endif  // CONDUIT_DAEMON_GPU_IPC_MEMORY_H_
