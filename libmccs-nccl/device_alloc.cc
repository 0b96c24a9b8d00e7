#include "device_alloc.h"

#include <cstdint>
#include <map>
#include <mutex>

#include "device_memory.h"

namespace conduit {
namespace {

struct DeviceAllocations {
  std::mutex mu;
  std::map<uintptr_t, cuda::CUcontext> by_pointer;  // what ncclMemFree may free
};

DeviceAllocations& Allocations() {
  static auto* allocations = new DeviceAllocations;  // never destroyed: frees may come late
  return *allocations;
}

// The context ncclMemAlloc allocates in: the current one, else device 0's primary context
// (the CUDA runtime's default device). nullptr when this process has no usable GPU.
cuda::CUcontext AllocationContext(const cuda::CudaDriver& d) {
  cuda::CUcontext ctx = nullptr;
  if (d.CtxGetCurrent(&ctx) == cuda::kSuccess && ctx != nullptr) return ctx;
  static cuda::CUcontext primary = [&d]() -> cuda::CUcontext {
    cuda::CUdevice dev = 0;
    cuda::CUcontext c = nullptr;
    if (d.DeviceGet(&dev, 0) != cuda::kSuccess) return nullptr;
    // Retained for the life of the process, as the runtime keeps it.
    if (d.DevicePrimaryCtxRetain(&c, dev) != cuda::kSuccess) return nullptr;
    return c;
  }();
  return primary;
}

}  // namespace

Status AllocateDeviceMemory(size_t size, void** ptr, bool* allocated) {
  *allocated = false;
  const cuda::CudaDriver* d = ProcessCuda();
  if (d == nullptr) return Status::Ok();
  cuda::CUcontext ctx = AllocationContext(*d);
  if (ctx == nullptr) return Status::Ok();
  cuda::ScopedContext scope(*d, ctx);
  cuda::CUdeviceptr p = 0;
  cuda::CUresult r = d->MemAlloc(&p, size);
  if (r != cuda::kSuccess) return d->Error("cuMemAlloc", r);
  DeviceAllocations& a = Allocations();
  std::lock_guard<std::mutex> lock(a.mu);
  a.by_pointer[static_cast<uintptr_t>(p)] = ctx;
  *ptr = reinterpret_cast<void*>(p);
  *allocated = true;
  return Status::Ok();
}

bool FreeDeviceMemory(void* ptr, Status* st) {
  cuda::CUcontext ctx = nullptr;
  {
    DeviceAllocations& a = Allocations();
    std::lock_guard<std::mutex> lock(a.mu);
    auto it = a.by_pointer.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == a.by_pointer.end()) return false;
    ctx = it->second;
    a.by_pointer.erase(it);
  }
  const cuda::CudaDriver* d = ProcessCuda();  // loaded: it allocated the pointer
  cuda::ScopedContext scope(*d, ctx);
  cuda::CUresult r = d->MemFree(reinterpret_cast<cuda::CUdeviceptr>(ptr));
  *st = r == cuda::kSuccess ? Status::Ok() : d->Error("cuMemFree", r);
  return true;
}

}  // namespace conduit
