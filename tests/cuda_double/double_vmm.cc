#include "double_vmm.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "double_errors.h"
#include "double_memory.h"
#include "double_streams.h"

namespace cuda_double {
namespace {

using conduit::cuda::kErrorInvalidValue;
using conduit::cuda::kSuccess;

// One cuMemCreate (or import): the memfd closes when the last handle and mapping let go.
struct Allocation {
  ~Allocation() {
    if (fd >= 0) close(fd);
  }
  int fd = -1;
  size_t size = 0;
  int handle_types = 0;
};

struct Handle {
  std::shared_ptr<Allocation> allocation;
  int references = 0;
};

struct Mapping {
  size_t size = 0;
  CUmemGenericAllocationHandle handle = 0;  // the value Retain gives back
  std::shared_ptr<Allocation> allocation;
  uint64_t readable_by = 0;  // bit d: cuMemSetAccess gave device d read-write access
};

struct Vmm {
  std::mutex mu;
  CUmemGenericAllocationHandle next_handle = 0x1000;
  std::map<CUmemGenericAllocationHandle, Handle> handles;
  struct Reservation {
    size_t size = 0;
    uint8_t* shadow = nullptr;  // where the read-write views of its mappings go, side by side
  };
  std::map<uint64_t, Reservation> reservations;  // by base
  std::map<uint64_t, Mapping> mappings;     // by base
};

Vmm& State() {
  static auto* state = new Vmm;  // never destroyed: streams may still run at exit
  return *state;
}

// How long an unmap waits for queued work (which may use the memory) before it unmaps anyway.
constexpr int kUnmapWaitMs = 10000;

bool Aligned(uint64_t v) { return v % kVmmGranularity == 0; }

// The address of [base, base + size)'s read-write view when it lies inside one
// reservation, else nullptr. Caller holds mu. Views of neighbouring mappings are
// neighbours too, so the double copies across them as a GPU copies across mappings.
uint8_t* ShadowOf(const Vmm& v, uint64_t base, size_t size) {
  auto it = v.reservations.upper_bound(base);
  if (it == v.reservations.begin()) return nullptr;
  --it;
  const bool inside = base >= it->first && size <= it->second.size && base - it->first <= it->second.size - size;
  return inside ? it->second.shadow + (base - it->first) : nullptr;
}

// Puts reserved (inaccessible) addresses back over [at, at + size).
void Rereserve(void* at, size_t size) {
  mmap(at, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
}

// `size` bytes of reserved addresses aligned to `alignment`, or nullptr.
void* ReserveAligned(size_t size, size_t alignment) {
  const size_t span = size + alignment;  // over-reserve, then trim to an aligned range
  void* p = mmap(nullptr, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  const uint64_t start = reinterpret_cast<uint64_t>(p);
  const uint64_t base = (start + alignment - 1) / alignment * alignment;
  if (base > start) munmap(p, base - start);
  const uint64_t end = base + size;
  if (start + span > end) munmap(reinterpret_cast<void*>(end), start + span - end);
  return reinterpret_cast<void*>(base);
}

CUmemGenericAllocationHandle AddHandle(Vmm& v, std::shared_ptr<Allocation> allocation) {
  const CUmemGenericAllocationHandle h = v.next_handle++;
  v.handles[h] = Handle{std::move(allocation), 1};
  return h;
}

}  // namespace

CUresult CreateAllocation(size_t size, int device, int handle_types, CUmemGenericAllocationHandle* out) {
  if (out == nullptr || size == 0 || !Aligned(size) || device < 0) return kErrorInvalidValue;
  auto a = std::make_shared<Allocation>();
  SharedFile file;
  if (!CreateSharedFile("cuda-double-vmm", size, &file)) return kErrorOutOfMemory;
  a->fd = file.fd;
  a->size = size;
  a->handle_types = handle_types;
  Vmm& v = State();
  std::lock_guard<std::mutex> lock(v.mu);
  *out = AddHandle(v, std::move(a));
  return kSuccess;
}

CUresult ReleaseAllocation(CUmemGenericAllocationHandle handle) {
  Vmm& v = State();
  std::lock_guard<std::mutex> lock(v.mu);
  auto it = v.handles.find(handle);
  if (it == v.handles.end()) return kErrorInvalidValue;
  if (--it->second.references == 0) v.handles.erase(it);
  return kSuccess;
}

CUresult ReserveAddresses(size_t size, size_t alignment, conduit::cuda::CUdeviceptr* out) {
  if (out == nullptr || size == 0 || !Aligned(size)) return kErrorInvalidValue;
  if (alignment < kVmmGranularity) alignment = kVmmGranularity;
  if (alignment % kVmmGranularity != 0) return kErrorInvalidValue;
  void* base = ReserveAligned(size, alignment);
  if (base == nullptr) return kErrorOutOfMemory;
  void* shadow = ReserveAligned(size, kVmmGranularity);
  if (shadow == nullptr) {
    munmap(base, size);
    return kErrorOutOfMemory;
  }
  Vmm& v = State();
  std::lock_guard<std::mutex> lock(v.mu);
  v.reservations[reinterpret_cast<uint64_t>(base)] = {size, static_cast<uint8_t*>(shadow)};
  *out = reinterpret_cast<uint64_t>(base);
  return kSuccess;
}

CUresult FreeAddresses(uint64_t base, size_t size) {
  Vmm& v = State();
  std::lock_guard<std::mutex> lock(v.mu);
  auto it = v.reservations.find(base);
  if (it == v.reservations.end() || it->second.size != size) return kErrorInvalidValue;
  auto m = v.mappings.lower_bound(base);
  if (m != v.mappings.end() && m->first < base + size) return kErrorInvalidValue;  // still mapped
  munmap(reinterpret_cast<void*>(base), size);
  munmap(it->second.shadow, size);
  v.reservations.erase(it);
  return kSuccess;
}

CUresult MapAllocation(uint64_t base, size_t size, CUmemGenericAllocationHandle handle, int device, CUcontext ctx) {
  if (size == 0 || !Aligned(base) || !Aligned(size)) return kErrorInvalidValue;
  Vmm& v = State();
  std::lock_guard<std::mutex> lock(v.mu);
  auto h = v.handles.find(handle);
  if (h == v.handles.end()) return kErrorInvalidValue;
  const std::shared_ptr<Allocation>& a = h->second.allocation;
  uint8_t* shadow = ShadowOf(v, base, size);
  if (size > a->size || shadow == nullptr || AnyRegionIn(base, size)) return kErrorInvalidValue;
  void* none = mmap(reinterpret_cast<void*>(base), size, PROT_NONE, MAP_SHARED | MAP_FIXED, a->fd, 0);
  if (none == MAP_FAILED) return kErrorOutOfMemory;
  void* rw = mmap(shadow, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, a->fd, 0);
  if (rw == MAP_FAILED) {
    Rereserve(none, size);
    return kErrorOutOfMemory;
  }
  v.mappings[base] = Mapping{size, handle, a};
  AddMapping(base, size, static_cast<uint8_t*>(rw), device, ctx);
  return kSuccess;
}

CUresult UnmapAllocation(uint64_t base, size_t size) {
  const bool idle = SynchronizeAllStreams(kUnmapWaitMs);
  Vmm& v = State();
  std::lock_guard<std::mutex> lock(v.mu);
  auto it = v.mappings.find(base);
  if (it == v.mappings.end() || it->second.size != size) return kErrorInvalidValue;
  uint8_t* rw = nullptr;
  if (!RemoveMapping(base, size, &rw)) return kErrorInvalidValue;
  v.mappings.erase(it);
  if (!idle) return kSuccess;  // work that never ends may still touch it: leave it mapped
  Rereserve(rw, size);  // back to reserved addresses
  Rereserve(reinterpret_cast<void*>(base), size);
  return kSuccess;
}

CUresult SetAccess(uint64_t base, size_t size, int device, int flags) {
  using conduit::cuda::kMemAccessFlagsProtNone;
  using conduit::cuda::kMemAccessFlagsProtReadWrite;
  if (device < 0 || device >= 64 || (flags != kMemAccessFlagsProtNone && flags != kMemAccessFlagsProtReadWrite)) {
    return kErrorInvalidValue;
  }
  Vmm& v = State();
  std::lock_guard<std::mutex> lock(v.mu);
  // Every byte of the range in some mapping, the mappings back to back; nothing changes
  // unless all are.
  std::vector<Mapping*> covered;
  for (uint64_t at = base; at < base + size;) {
    auto it = v.mappings.find(at);
    if (it == v.mappings.end()) return kErrorInvalidValue;
    covered.push_back(&it->second);
    at += it->second.size;
  }
  const uint64_t bit = uint64_t{1} << device;
  for (Mapping* m : covered) m->readable_by = flags == kMemAccessFlagsProtNone ? m->readable_by & ~bit : m->readable_by | bit;
  return kSuccess;
}

CUresult GetAccess(uint64_t ptr, int device, unsigned long long* flags) {
  if (flags == nullptr || device < 0 || device >= 64) return kErrorInvalidValue;
  Vmm& v = State();
  std::lock_guard<std::mutex> lock(v.mu);
  auto it = v.mappings.upper_bound(ptr);
  if (it == v.mappings.begin()) return kErrorInvalidValue;
  --it;
  if (ptr >= it->first + it->second.size) return kErrorInvalidValue;
  *flags = (it->second.readable_by >> device) & 1 ? conduit::cuda::kMemAccessFlagsProtReadWrite
                                                  : conduit::cuda::kMemAccessFlagsProtNone;
  return kSuccess;
}

CUresult ExportAllocation(CUmemGenericAllocationHandle handle, int* fd) {
  if (fd == nullptr) return kErrorInvalidValue;
  if (Injected("cuMemExportToShareableHandle")) return kErrorNotSupported;
  Vmm& v = State();
  std::lock_guard<std::mutex> lock(v.mu);
  auto h = v.handles.find(handle);
  if (h == v.handles.end()) return kErrorInvalidValue;
  // As CUDA: only the handle types the allocation was created for.
  if ((h->second.allocation->handle_types & conduit::cuda::kMemHandleTypePosixFileDescriptor) == 0) {
    return kErrorInvalidValue;
  }
  const int dup = fcntl(h->second.allocation->fd, F_DUPFD_CLOEXEC, 0);
  if (dup < 0) return kErrorOutOfMemory;
  *fd = dup;
  return kSuccess;
}

CUresult ImportAllocation(int fd, CUmemGenericAllocationHandle* out) {
  if (out == nullptr) return kErrorInvalidValue;
  if (Injected("cuMemImportFromShareableHandle")) return kErrorNotSupported;
  struct stat st {};
  if (fd < 0 || fstat(fd, &st) != 0 || st.st_size <= 0 || !Aligned(static_cast<uint64_t>(st.st_size))) {
    return kErrorInvalidValue;
  }
  auto a = std::make_shared<Allocation>();
  a->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);  // the caller keeps (and closes) its own
  if (a->fd < 0) return kErrorOutOfMemory;
  a->size = static_cast<size_t>(st.st_size);
  a->handle_types = conduit::cuda::kMemHandleTypePosixFileDescriptor;
  Vmm& v = State();
  std::lock_guard<std::mutex> lock(v.mu);
  *out = AddHandle(v, std::move(a));
  return kSuccess;
}

CUresult RetainAllocation(uint64_t addr, CUmemGenericAllocationHandle* out) {
  if (out == nullptr) return kErrorInvalidValue;
  Vmm& v = State();
  std::lock_guard<std::mutex> lock(v.mu);
  auto it = v.mappings.upper_bound(addr);
  if (it == v.mappings.begin()) return kErrorInvalidValue;
  --it;
  if (addr >= it->first + it->second.size) return kErrorInvalidValue;  // not VMM memory
  Handle& h = v.handles[it->second.handle];
  if (h.references == 0) h.allocation = it->second.allocation;  // released since: the mapping kept it
  ++h.references;
  *out = it->second.handle;
  return kSuccess;
}

}  // namespace cuda_double
