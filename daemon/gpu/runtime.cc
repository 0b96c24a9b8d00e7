#include "gpu/runtime.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "common/detached_thread.h"
#include "common/fd_io.h"
#include "common/log.h"
#include "common/thread_guard.h"
#include "cuda/nvrtc.h"
#include "cuda/vmm_map.h"
#include "gpu/reduce_kernels.h"

namespace conduit::gpu {

Runtime& Runtime::Get() {
  static Runtime* runtime = new Runtime;  // never destroyed: mappings may outlive main()
  return *runtime;
}

Runtime::Runtime() {
  Probe();
  const cuda::CudaDriver* driver = driver_;
  memory_ = std::make_unique<IpcMemoryCache>(
      [this](const shimproto::RegisterBufferRequest& req, int fd, int device, DeviceMapping* out) -> Status {
        if (!available_) return InvalidUsage("this daemon has no GPU support: %s", reason_.c_str());
        cuda::ScopedContext ctx(*driver_, context(device));
        return fd >= 0 ? MapShareable(req, fd, device, out) : OpenIpc(req, out);
      },
      [this, driver](const DeviceMapping& m) {
        if (driver == nullptr) return;
        if (m.fd >= 0) {
          UnmapLater(m.device, m.base, {m.size}, m.fd);
          return;
        }
        cuda::ScopedContext ctx(*driver, context(m.device));
        cuda::CUresult r = driver->IpcCloseMemHandle(m.base);
        if (r != cuda::kSuccess) CLOG_WARN("%s", driver->Error("cuIpcCloseMemHandle", r).message().c_str());
      });
  if (available_) {
    CLOG_INFO("GPU support on: %d device(s), CUDA driver %d", device_count(), driver_->version());
    for (int i = 0; i < device_count(); ++i) {
      if (devices_[i].mps == 1) continue;
      // Measured on an H200 (docs/gpu.md, "MPS"): without MPS the GPU time-slices the
      // contexts of the programs and of this daemon. One program's asynchronous collectives
      // hardly notice (8 B: ~16 us either way), but programs sharing a GPU do, and the
      // event-ordered path pays two context switches per collective.
      CLOG_WARN("GPU %d: %s: the GPU time-slices the contexts of the programs sharing it and this daemon's (on an H200 "
                "DDP of 2 ranks sharing a GPU ran 3.3x slower per step than under MPS, 4 ranks 6.2x; an event-ordered "
                "collective took ~280 us against ~20 us); start the MPS control daemon (nvidia-cuda-mps-control -d) "
                "before conduitd and the programs (docs/gpu.md)",
                i, devices_[i].mps == 0 ? "MPS is off" : "the driver cannot say whether MPS is on");
    }
  } else {
    CLOG_INFO("GPU support off (device buffers are staged by the programs): %s", reason_.c_str());
  }
}

void Runtime::Probe() {
  std::string why;
  driver_ = cuda::CudaDriver::Load(&why);
  if (driver_ == nullptr) {
    reason_ = why;
    return;
  }
  int count = 0;
  cuda::CUresult r = driver_->DeviceGetCount(&count);
  if (r != cuda::kSuccess || count == 0) {
    reason_ = r != cuda::kSuccess ? driver_->Error("cuDeviceGetCount", r).message() : "the CUDA driver sees no GPU";
    return;
  }
  for (int i = 0; i < count; ++i) {
    Device d;
    int major = 0, minor = 0;
    if ((r = driver_->DeviceGet(&d.handle, i)) != cuda::kSuccess ||
        (r = driver_->DeviceGetUuid(&d.uuid, d.handle)) != cuda::kSuccess ||
        (r = driver_->DeviceGetAttribute(&major, cuda::kDeviceAttributeComputeCapabilityMajor, d.handle)) != cuda::kSuccess ||
        (r = driver_->DeviceGetAttribute(&minor, cuda::kDeviceAttributeComputeCapabilityMinor, d.handle)) != cuda::kSuccess ||
        (r = driver_->DeviceGetAttribute(&d.multiprocessors, cuda::kDeviceAttributeMultiprocessorCount, d.handle)) !=
            cuda::kSuccess) {
      reason_ = driver_->Error(("probing GPU " + std::to_string(i)).c_str(), r).message();
      return;
    }
    d.cc = major * 10 + minor;
    int mps = 0;
    if (driver_->DeviceGetAttribute(&mps, cuda::kDeviceAttributeMpsEnabled, d.handle) == cuda::kSuccess) d.mps = mps != 0;
    devices_.push_back(std::move(d));
  }
  const cuda::Nvrtc* nvrtc = cuda::Nvrtc::Load(&why);
  if (nvrtc == nullptr) {
    reason_ = why + " (the combine kernels are compiled at run time)";
    return;
  }
  // Compiled once per architecture now, so no collective waits for the compiler: machine
  // code where NVRTC can emit it for the GPU (the driver then compiles nothing, and a driver
  // older than NVRTC loads it), else PTX for the driver's JIT.
  for (const Device& d : devices_) {
    if (image_by_cc_.count(d.cc)) continue;
    std::string image;
    Status st = CompileCombineCubin(*nvrtc, d.cc, &image);
    if (!st.ok()) {
      CLOG_INFO("combine kernels for sm_%d: no machine code from %s (%s); compiling PTX for the driver instead", d.cc,
                nvrtc->path().c_str(), st.message().c_str());
      st = CompileCombineKernels(*nvrtc, d.cc, &image);
    }
    if (!st.ok()) {
      reason_ = st.message();
      return;
    }
    image_by_cc_[d.cc] = std::move(image);
  }
  for (int i = 0; i < device_count(); ++i) {
    if (!CheckKernels(i, *nvrtc)) return;
  }
  available_ = true;
}

bool Runtime::CheckKernels(int device, const cuda::Nvrtc& nvrtc) {
  // Loaded now on every GPU, and one kernel looked up, so a driver that cannot run them
  // turns GPU support off at start with the reason instead of failing the first collective.
  // The context is given back after: kept, it would hold GPU memory on GPUs no program
  // uses, and take a GPU in EXCLUSIVE_PROCESS mode from the programs.
  Device& d = devices_[device];
  cuda::CUcontext ctx = nullptr;
  cuda::CUresult r = driver_->DevicePrimaryCtxRetain(&ctx, d.handle);
  if (r != cuda::kSuccess) {
    CLOG_WARN("GPU %d: %s; its kernels are loaded and checked at first use", device,
              driver_->Error("no context for the start-up check", r).message().c_str());
    return true;
  }
  {
    cuda::ScopedContext scope(*driver_, ctx);
    cuda::CUmodule module = nullptr;
    cuda::CUfunction probe = nullptr;
    r = driver_->ModuleLoadData(&module, image_by_cc_[d.cc].data());
    if (r == cuda::kSuccess) r = driver_->ModuleGetFunction(&probe, module, CombineKernelName(ncclFloat32, ncclSum).c_str());
    if (module != nullptr) driver_->ModuleUnload(module);
  }
  driver_->DevicePrimaryCtxRelease(d.handle);
  if (r == cuda::kSuccess) return true;
  reason_ = driver_->Error(("loading the combine kernels NVRTC " + std::to_string(nvrtc.major()) + "." +
                            std::to_string(nvrtc.minor()) + " compiled for sm_" + std::to_string(d.cc) +
                            " (CUDA driver " + std::to_string(driver_->version()) + ")")
                               .c_str(),
                           r)
                .message();
  return false;
}

cuda::CUcontext Runtime::context(int device) {
  std::lock_guard<std::mutex> lock(mu_);
  return ContextLocked(devices_[device]);
}

cuda::CUcontext Runtime::ContextLocked(Device& d) {
  if (d.context != nullptr) return d.context;
  cuda::CUcontext ctx = nullptr;
  cuda::CUresult r = driver_->DevicePrimaryCtxRetain(&ctx, d.handle);
  if (r != cuda::kSuccess) {
    CLOG_WARN("%s", driver_->Error("taking a context on a GPU for programs' device buffers", r).message().c_str());
    return nullptr;
  }
  d.context = ctx;  // kept for the daemon's life, as programs may come back to this GPU
  return ctx;
}

Status Runtime::OpenIpc(const shimproto::RegisterBufferRequest& req, DeviceMapping* out) {
  cuda::IpcMemHandle handle;
  memcpy(handle.reserved, req.ipc_handle, sizeof(handle.reserved));
  cuda::CUdeviceptr base = 0;
  cuda::CUresult r = driver_->IpcOpenMemHandle(&base, handle, cuda::kIpcMemLazyEnablePeerAccess);
  if (r != cuda::kSuccess) return driver_->Error("cuIpcOpenMemHandle of a program's buffer", r);
  // The size is the program's word; the mapping's is the driver's. Kernels and copies
  // are bounded by the registered size, so it must not exceed what was mapped.
  cuda::CUdeviceptr range_base = 0;
  size_t mapped = 0;
  r = driver_->MemGetAddressRange(&range_base, &mapped, base);
  Status refused;
  if (r != cuda::kSuccess) {
    refused = driver_->Error("cuMemGetAddressRange of a program's mapped buffer", r);
  } else if (range_base != base || req.size > mapped) {
    refused = InvalidArgument("RegisterBuffer claims %llu bytes, but the allocation behind its IPC handle has %zu",
                              static_cast<unsigned long long>(req.size), mapped);
  }
  if (!refused.ok()) {
    driver_->IpcCloseMemHandle(base);
    return refused;
  }
  out->base = base;
  return Status::Ok();
}

Status Runtime::MappingGranularity(int device, cuda::MemLocation* location, size_t* granularity) {
  cuda::MemAllocationProp prop{};
  prop.type = cuda::kMemAllocationTypePinned;
  prop.location = {cuda::kMemLocationTypeDevice, devices_[device].handle};
  cuda::CUresult r = driver_->MemGetAllocationGranularity(granularity, &prop, cuda::kMemAllocGranularityMinimum);
  if (r != cuda::kSuccess) return driver_->Error("cuMemGetAllocationGranularity", r);
  *location = prop.location;
  return Status::Ok();
}

Status Runtime::MapShareable(const shimproto::RegisterBufferRequest& req, int fd, int device, DeviceMapping* out) {
  // The program's mapping starts at offset 0 of its allocation (cuMemMap allows no other),
  // so mapping the same size from offset 0 here shows the same bytes. cuMemMap refuses a
  // size beyond the allocation: the program's word on the size is checked by the driver.
  cuda::MemLocation location{};
  size_t granularity = 0;
  CONDUIT_RETURN_IF_ERROR(MappingGranularity(device, &location, &granularity));
  if (granularity == 0 || req.size % granularity != 0) {
    return InvalidArgument("RegisterVmmBuffer of %llu bytes: not a multiple of the GPU's mapping granularity (%zu)",
                           static_cast<unsigned long long>(req.size), granularity);
  }
  UniqueFd kept(fcntl(fd, F_DUPFD_CLOEXEC, 0));
  if (!kept.valid()) return Status(ncclSystemError, std::string("dup of a program's allocation descriptor: ") + strerror(errno));
  cuda::CUmemGenericAllocationHandle handle = 0;
  cuda::CUresult r = driver_->MemImportFromShareableHandle(
      &handle, reinterpret_cast<void*>(static_cast<intptr_t>(fd)), cuda::kMemHandleTypePosixFileDescriptor);
  if (r != cuda::kSuccess) return driver_->Error("cuMemImportFromShareableHandle of a program's buffer", r);
  cuda::CUdeviceptr base = 0;
  Status mapped = cuda::MapReadWrite(*driver_, handle, req.size, granularity, location,
                                     "cuMemMap of a program's buffer (is it as large as it claims?)", &base);
  driver_->MemRelease(handle);  // the mapping, if made, keeps the memory
  CONDUIT_RETURN_IF_ERROR(mapped);
  out->base = base;
  out->fd = kept.release();
  return Status::Ok();
}

Status Runtime::MapSpan(int device, const std::vector<std::shared_ptr<const DeviceMapping>>& pages,
                        std::shared_ptr<const DeviceMapping>* out) {
  if (!available_) return InvalidUsage("this daemon has no GPU support: %s", reason_.c_str());
  if (device < 0 || device >= device_count()) return InternalError("no GPU %d", device);
  cuda::ScopedContext ctx(*driver_, context(device));
  cuda::MemLocation location{};
  size_t granularity = 0;
  CONDUIT_RETURN_IF_ERROR(MappingGranularity(device, &location, &granularity));
  // Each page is imported again from the descriptor its own mapping keeps: the handle the
  // first import made was released once that mapping held the memory.
  std::vector<cuda::CUmemGenericAllocationHandle> handles;
  std::vector<size_t> sizes;
  Status st = Status::Ok();
  for (const auto& page : pages) {
    if (page == nullptr || page->fd < 0 || page->device != device) {
      st = InvalidArgument("a span's page is not a virtual-memory registration on the span's GPU");
      break;
    }
    cuda::CUmemGenericAllocationHandle h = 0;
    cuda::CUresult r = driver_->MemImportFromShareableHandle(
        &h, reinterpret_cast<void*>(static_cast<intptr_t>(page->fd)), cuda::kMemHandleTypePosixFileDescriptor);
    if (r != cuda::kSuccess) {
      st = driver_->Error("cuMemImportFromShareableHandle of a span's page", r);
      break;
    }
    handles.push_back(h);
    sizes.push_back(page->size);
  }
  cuda::CUdeviceptr base = 0;
  if (st.ok()) st = cuda::MapPiecesReadWrite(*driver_, handles, sizes, granularity, location, "cuMemMap of a span's page", &base);
  for (cuda::CUmemGenericAllocationHandle h : handles) driver_->MemRelease(h);  // the mappings, if made, keep the memory
  CONDUIT_RETURN_IF_ERROR(st);
  auto span = std::make_unique<DeviceMapping>();
  span->device = device;
  span->base = base;
  for (size_t s : sizes) span->size += s;
  *out = std::shared_ptr<const DeviceMapping>(span.release(), [this, sizes](const DeviceMapping* m) {
    UnmapLater(m->device, m->base, sizes, -1);
    delete m;
  });
  return Status::Ok();
}

void Runtime::UnmapLater(int device, uint64_t base, std::vector<size_t> pieces, int fd) {
  std::lock_guard<std::mutex> lock(unmap_mu_);
  unmaps_.push_back(Unmap{device, base, std::move(pieces), fd});
  unmap_cv_.notify_one();
  if (unmapper_started_) return;
  unmapper_started_ = true;
  try {
    SpawnDetached("GPU unmapper", [this] { RunGuarded("GPU unmapper", [this] { UnmapLoop(); }); });
  } catch (const std::system_error& e) {
    // Left for a later close to try again; the mappings stay until then.
    unmapper_started_ = false;
    CLOG_WARN("cannot start the thread that unmaps programs' GPU memory: %s", e.what());
  }
}

void Runtime::UnmapLoop() {
  std::unique_lock<std::mutex> lock(unmap_mu_);
  for (;;) {
    // Ends when idle, so a daemon that stops does not wait for it; the next close starts it.
    if (!unmap_cv_.wait_for(lock, std::chrono::milliseconds(500), [this] { return !unmaps_.empty(); })) {
      unmapper_started_ = false;
      return;
    }
    const Unmap u = unmaps_.front();
    unmaps_.pop_front();
    lock.unlock();
    {
      cuda::ScopedContext ctx(*driver_, context(u.device));
      cuda::CUresult r = cuda::UnmapPieces(*driver_, u.base, u.pieces);
      if (r != cuda::kSuccess) CLOG_WARN("%s", driver_->Error("cuMemUnmap of a program's buffer", r).message().c_str());
      if (u.fd >= 0) close(u.fd);
    }
    lock.lock();
  }
}

int Runtime::DeviceOfUuid(const uint8_t uuid[16]) const {
  for (size_t i = 0; i < devices_.size(); ++i) {
    if (memcmp(devices_[i].uuid.bytes, uuid, sizeof(devices_[i].uuid.bytes)) == 0) return static_cast<int>(i);
  }
  return -1;
}

Status Runtime::Kernel(int device, ncclDataType_t type, ncclRedOp_t op, cuda::CUfunction* fn) {
  if (!available_) return InvalidUsage("this daemon has no GPU support: %s", reason_.c_str());
  if (device < 0 || device >= device_count()) return InternalError("no GPU %d", device);
  std::lock_guard<std::mutex> lock(mu_);
  Device& d = devices_[device];
  cuda::ScopedContext ctx(*driver_, ContextLocked(d));
  if (d.module == nullptr) {
    cuda::CUresult r = driver_->ModuleLoadData(&d.module, image_by_cc_[d.cc].data());
    if (r != cuda::kSuccess) return driver_->Error("loading the combine kernels (cuModuleLoadData)", r);
  }
  const std::string name = CombineKernelName(type, op);
  auto it = d.kernels.find(name);
  if (it == d.kernels.end()) {
    cuda::CUfunction f = nullptr;
    cuda::CUresult r = driver_->ModuleGetFunction(&f, d.module, name.c_str());
    if (r != cuda::kSuccess) return driver_->Error(("cuModuleGetFunction(" + name + ")").c_str(), r);
    it = d.kernels.emplace(name, f).first;
  }
  *fn = it->second;
  return Status::Ok();
}

Status Runtime::WriteWordNow(int device, uint64_t word, uint32_t value) {
  if (!available_) return InvalidUsage("this daemon has no GPU support: %s", reason_.c_str());
  if (device < 0 || device >= device_count()) return InternalError("no GPU %d", device);
  std::lock_guard<std::mutex> lock(mu_);
  Device& d = devices_[device];
  cuda::ScopedContext ctx(*driver_, ContextLocked(d));
  if (d.signals == nullptr) {
    cuda::CUresult r = driver_->StreamCreate(&d.signals, cuda::kStreamNonBlocking);
    if (r != cuda::kSuccess) return driver_->Error("cuStreamCreate (signals)", r);
  }
  cuda::CUresult r = driver_->StreamWriteValue32(d.signals, word, value, cuda::kStreamWriteValueDefault);
  // Done before returning: the caller may close the mapping of `word` next. The stream
  // waits for nothing, so this is one write's time.
  if (r == cuda::kSuccess) r = driver_->StreamSynchronize(d.signals);
  return r == cuda::kSuccess ? Status::Ok() : driver_->Error("cuStreamWriteValue32 (releasing a failed group)", r);
}

Status Runtime::CopyNow(int device, uint64_t dst, uint64_t src, size_t bytes, Deadline deadline) {
  if (!available_) return InvalidUsage("this daemon has no GPU support: %s", reason_.c_str());
  if (device < 0 || device >= device_count()) return InternalError("no GPU %d", device);
  cuda::CUcontext context = nullptr;
  cuda::CUstream stream = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Device& d = devices_[device];
    context = ContextLocked(d);
    cuda::ScopedContext ctx(*driver_, context);
    if (d.copies == nullptr) {
      cuda::CUresult r = driver_->StreamCreate(&d.copies, cuda::kStreamNonBlocking);
      if (r != cuda::kSuccess) return driver_->Error("cuStreamCreate (copies)", r);
    }
    stream = d.copies;
  }
  // Outside mu_: the wait is bounded by the caller's deadline, not one write's time. Other
  // threads may queue copies on the same stream; waiting for theirs too only costs time.
  cuda::ScopedContext ctx(*driver_, context);
  cuda::CUresult r = driver_->MemcpyAsync(dst, src, bytes, stream);
  if (r != cuda::kSuccess) return driver_->Error("cuMemcpyAsync (a device send into host memory)", r);
  for (long pause_us = 10;; pause_us = std::min(pause_us * 2, 1000L)) {
    r = driver_->StreamQuery(stream);
    if (r == cuda::kSuccess) return Status::Ok();
    if (r != cuda::kErrorNotReady) return driver_->Error("a copy of a device send into host memory (cuStreamQuery)", r);
    if (deadline.expired()) return RemoteError("timed out copying a device send into host memory (the GPU hangs)");
    std::this_thread::sleep_for(std::chrono::microseconds(pause_us));
  }
}

bool Runtime::EnablePeerAccess(int device, int peer) {
  if (device == peer) return true;
  std::lock_guard<std::mutex> lock(mu_);
  auto key = std::make_pair(device, peer);
  auto it = peer_.find(key);
  if (it != peer_.end()) return it->second;
  int can = 0;
  bool ok = driver_->DeviceCanAccessPeer(&can, devices_[device].handle, devices_[peer].handle) == cuda::kSuccess && can;
  if (ok) {
    cuda::ScopedContext ctx(*driver_, ContextLocked(devices_[device]));
    cuda::CUresult r = driver_->CtxEnablePeerAccess(ContextLocked(devices_[peer]), 0);
    ok = r == cuda::kSuccess || r == cuda::kErrorPeerAccessAlreadyEnabled;
  }
  peer_[key] = ok;
  return ok;
}

}  // namespace conduit::gpu
