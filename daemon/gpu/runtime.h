// Runtime: the GPUs this daemon can work on, found once at start.
//
// Device buffers need the CUDA driver (to map programs' allocations and run kernels) and
// NVRTC (to build the combine kernels for these GPUs). On a host without either the
// runtime is simply unavailable, with the reason, and the daemon serves host memory as
// before; programs then stage device buffers through host memory themselves.
#ifndef CONDUIT_DAEMON_GPU_RUNTIME_H_
#define CONDUIT_DAEMON_GPU_RUNTIME_H_

#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "common/status.h"
#include "cuda/cuda_driver.h"
#include "cuda/nvrtc.h"
#include "gpu/ipc_memory.h"
#include "nccl.h"

namespace conduit::gpu {

class Runtime {
 public:
  // The daemon's runtime, probed on first call (driver, devices, NVRTC, kernels).
  static Runtime& Get();

  bool available() const { return available_; }
  const std::string& unavailable_reason() const { return reason_; }
  // Only when available().
  const cuda::CudaDriver& driver() const { return *driver_; }
  int device_count() const { return static_cast<int>(devices_.size()); }
  const cuda::Uuid& uuid(int device) const { return devices_[device].uuid; }
  // The ordinal here of the GPU with this UUID (programs may see other ordinals), or -1.
  int DeviceOfUuid(const uint8_t uuid[16]) const;
  // The daemon's context on `device`: its primary context, retained on first use, so a
  // GPU no program brings device buffers from costs no context (and its memory). nullptr
  // when the driver refuses one (the error is logged; work in it then fails).
  cuda::CUcontext context(int device);
  int multiprocessors(int device) const { return devices_[device].multiprocessors; }

  // The combine kernel for (type, op) on `device` (gpu/reduce_kernels.h).
  Status Kernel(int device, ncclDataType_t type, ncclRedOp_t op, cuda::CUfunction* fn);
  // Writes `value` to the 32-bit word at `word` (memory mapped here) on a stream of
  // `device` that waits for nothing, and waits for that write: how a failed group still
  // releases the streams that wait on its words.
  Status WriteWordNow(int device, uint64_t word, uint32_t value);
  // Copies `bytes` from `src` to `dst` (device or host memory mapped here) on a stream of
  // `device` that waits for nothing, and waits for the copy until `deadline`: a receive
  // into host memory of a send that names device memory (collectives/device_p2p.cc).
  Status CopyNow(int device, uint64_t dst, uint64_t src, size_t bytes, Deadline deadline);
  // Lets kernels on `device` read and write memory of `peer`; false when the hardware
  // cannot (the caller then bounces through host memory).
  bool EnablePeerAccess(int device, int peer);

  // Programs' allocations mapped into this daemon, shared by all sessions.
  IpcMemoryCache& memory() { return *memory_; }
  // Several of them, virtual-memory-managed pages of one program's segment (RegisterSpan),
  // mapped again back to back on `device` from the descriptors their mappings hold, as one
  // mapping (no descriptor of its own): unmapped when the last holder lets go. Fails for a
  // page that is not a virtual-memory mapping on `device`.
  Status MapSpan(int device, const std::vector<std::shared_ptr<const DeviceMapping>>& pages,
                 std::shared_ptr<const DeviceMapping>* out);

 private:
  struct Device {
    cuda::CUdevice handle = 0;
    cuda::Uuid uuid{};
    int cc = 0;  // compute capability, major * 10 + minor
    int multiprocessors = 1;
    int mps = -1;  // contexts on it are MPS clients: 1, 0, or -1 when the driver cannot say
    cuda::CUcontext context = nullptr;  // retained on first use (context())
    cuda::CUmodule module = nullptr;  // combine kernels, loaded on first use
    cuda::CUstream signals = nullptr;  // WriteWordNow's, created on first use
    cuda::CUstream copies = nullptr;  // CopyNow's, created on first use
    std::map<std::string, cuda::CUfunction> kernels;
  };

  Runtime();
  void Probe();
  // Start-up check on one GPU: its kernels load in a context taken for the check and given
  // back. False with reason_ when they cannot; true also when no context can be had now.
  bool CheckKernels(int device, const cuda::Nvrtc& nvrtc);
  cuda::CUcontext ContextLocked(Device& d);  // context(), mu_ held
  // The two ways a program's allocation is mapped here (the memory cache's open function,
  // with the device's context current): its CUDA IPC handle, or the POSIX descriptor of a
  // virtual-memory-managed allocation (imported, mapped at a new reservation, made
  // readable and writable by `device`).
  Status OpenIpc(const shimproto::RegisterBufferRequest& req, DeviceMapping* out);
  Status MapShareable(const shimproto::RegisterBufferRequest& req, int fd, int device, DeviceMapping* out);
  // The mapping granularity of `device`'s memory, and the location that names it.
  Status MappingGranularity(int device, cuda::MemLocation* location, size_t* granularity);
  // Unmaps what MapShareable mapped and closes its descriptor, on a thread of its own:
  // cuMemUnmap is synchronous (it may wait for GPU work queued on any stream, some of which
  // waits on programs), so it never runs on a thread that such work waits for (a
  // collective's, the registry's sweep).
  // `pieces`: the sizes of the mappings back to back at `base` (a span's pages); `fd` is
  // closed after the unmap, -1 for none.
  void UnmapLater(int device, uint64_t base, std::vector<size_t> pieces, int fd);
  void UnmapLoop();
  struct Unmap {
    int device;
    uint64_t base;
    std::vector<size_t> pieces;
    int fd;
  };
  std::mutex unmap_mu_;
  std::condition_variable unmap_cv_;
  std::deque<Unmap> unmaps_;
  bool unmapper_started_ = false;

  bool available_ = false;
  std::string reason_;
  const cuda::CudaDriver* driver_ = nullptr;
  std::vector<Device> devices_;
  std::map<int, std::string> image_by_cc_;  // combine kernels: a cubin, else PTX
  std::map<std::pair<int, int>, bool> peer_;
  std::mutex mu_;  // kernels, modules, peer access
  std::unique_ptr<IpcMemoryCache> memory_;
};

}  // namespace conduit::gpu

#endif  // CONDUIT_DAEMON_GPU_RUNTIME_H_
