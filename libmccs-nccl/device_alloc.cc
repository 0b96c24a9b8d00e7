#include "device_alloc.h"

#include <cstdint>
#include <map>
#include <mutex>

#include "common/log.h"
#include "cuda/vmm_map.h"
#include "device_memory.h"

namespace conduit {
namespace {

struct DeviceAllocation {
  cuda::CUcontext context = nullptr;
  size_t mapped = 0;  // a virtual-memory allocation's mapping (0: cuMemAlloc memory)
};

struct DeviceAllocations {
  std::mutex mu;
  std::map<uintptr_t, DeviceAllocation> by_pointer;  // what ncclMemFree may free
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

// Read-write access to [base, base + bytes), mapped for `device`, for every other GPU that
// can reach `device`'s memory, as NCCL's ncclMemAlloc gives it: a program may hand such a
// buffer to kernels on its other GPUs. A refusal only costs that GPU the access (logged).
void LetPeersAccess(const cuda::CudaDriver& d, cuda::CUdevice device, cuda::CUdeviceptr base, size_t bytes) {
  int count = 0;
  if (d.DeviceGetCount(&count) != cuda::kSuccess) return;
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    cuda::CUdevice peer = 0;
    int can = 0;
    if (d.DeviceGet(&peer, ordinal) != cuda::kSuccess || peer == device ||
        d.DeviceCanAccessPeer(&can, peer, device) != cuda::kSuccess || can == 0) {
      continue;
    }
    cuda::MemAccessDesc access{};
    access.location = {cuda::kMemLocationTypeDevice, peer};
    access.flags = cuda::kMemAccessFlagsProtReadWrite;
    cuda::CUresult r = d.MemSetAccess(base, bytes, &access, 1);
    if (r != cuda::kSuccess) {
      CLOG_DEBUG("ncclMemAlloc: GPU %d cannot be given access to GPU %d's memory: %s", ordinal, static_cast<int>(device),
                 d.Error("cuMemSetAccess", r).message().c_str());
    }
  }
}

// A virtual-memory-managed allocation of at least `size` bytes on the current context's
// device, exportable as a POSIX file descriptor, mapped read-write for that device: what
// NCCL's ncclMemAlloc makes, and what conduitd maps without CUDA IPC. *mapped: its size.
Status AllocateVmm(const cuda::CudaDriver& d, size_t size, cuda::CUdeviceptr* out, size_t* mapped) {
  cuda::CUdevice device = 0;
  cuda::CUresult r = d.CtxGetDevice(&device);
  if (r != cuda::kSuccess) return d.Error("cuCtxGetDevice", r);
  cuda::MemAllocationProp prop{};
  prop.type = cuda::kMemAllocationTypePinned;
  prop.requested_handle_types = cuda::kMemHandleTypePosixFileDescriptor;
  prop.location = {cuda::kMemLocationTypeDevice, device};
  size_t granularity = 0;
  r = d.MemGetAllocationGranularity(&granularity, &prop, cuda::kMemAllocGranularityMinimum);
  if (r != cuda::kSuccess || granularity == 0) return d.Error("cuMemGetAllocationGranularity", r);
  const size_t bytes = (size + granularity - 1) / granularity * granularity;
  cuda::CUmemGenericAllocationHandle handle = 0;
  r = d.MemCreate(&handle, bytes, &prop, 0);
  if (r != cuda::kSuccess) return d.Error("cuMemCreate", r);
  cuda::CUdeviceptr base = 0;
  Status st = cuda::MapReadWrite(d, handle, bytes, granularity, prop.location, "cuMemMap", &base);
  d.MemRelease(handle);  // the mapping keeps the memory until ncclMemFree unmaps it
  CONDUIT_RETURN_IF_ERROR(st);
  LetPeersAccess(d, device, base, bytes);
  *out = base;
  *mapped = bytes;
  return Status::Ok();
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
  DeviceAllocation made{ctx, 0};
  // Virtual memory first, as NCCL: conduitd maps it from a file descriptor, which works
  // where CUDA IPC does not (and needs no IPC-capable allocation). A driver or device
  // without it gets an ordinary allocation, which conduitd maps through CUDA IPC.
  Status vmm = AllocateVmm(*d, size, &p, &made.mapped);
  if (!vmm.ok()) {
    CLOG_DEBUG("ncclMemAlloc: %s; allocating with cuMemAlloc instead", vmm.message().c_str());
    made.mapped = 0;
    cuda::CUresult r = d->MemAlloc(&p, size);
    if (r != cuda::kSuccess) return d->Error("cuMemAlloc", r);
  }
  DeviceAllocations& a = Allocations();
  std::lock_guard<std::mutex> lock(a.mu);
  a.by_pointer[static_cast<uintptr_t>(p)] = made;
  *ptr = reinterpret_cast<void*>(p);
  *allocated = true;
  return Status::Ok();
}

bool FreeDeviceMemory(void* ptr, Status* st) {
  DeviceAllocation made;
  {
    DeviceAllocations& a = Allocations();
    std::lock_guard<std::mutex> lock(a.mu);
    auto it = a.by_pointer.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == a.by_pointer.end()) return false;
    made = it->second;
    a.by_pointer.erase(it);
  }
  const cuda::CudaDriver* d = ProcessCuda();  // loaded: it allocated the pointer
  cuda::ScopedContext scope(*d, made.context);
  const auto p = reinterpret_cast<cuda::CUdeviceptr>(ptr);
  if (made.mapped == 0) {
    cuda::CUresult r = d->MemFree(p);
    *st = r == cuda::kSuccess ? Status::Ok() : d->Error("cuMemFree", r);
    return true;
  }
  // The memory itself goes when the last mapping does (conduitd's, too, until the
  // program's next call lets go of it).
  cuda::CUresult r = cuda::Unmap(*d, p, made.mapped);
  *st = r == cuda::kSuccess ? Status::Ok() : d->Error("cuMemUnmap", r);
  return true;
}

}  // namespace conduit
