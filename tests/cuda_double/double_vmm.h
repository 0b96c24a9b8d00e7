// The test double's virtual memory management: cuMemCreate allocations, address
// reservations, mappings, and sharing as POSIX file descriptors.
//
// An allocation is a memfd. A reservation is PROT_NONE anonymous memory at an address
// aligned to the granularity (2 MiB, as on a GPU). Mapping puts the memfd over part of a
// reservation, PROT_NONE as device memory is to host code, plus a read-write view the
// double's copies and kernels use (double_memory.h). Exporting hands out a duplicate of
// the memfd; importing one makes a new allocation of the same memory, so what the
// exporter and importer map is the same bytes. As in CUDA, a mapping keeps its allocation
// alive after cuMemRelease, and cuMemRetainAllocationHandle finds it from an address.
#ifndef CONDUIT_TESTS_CUDA_DOUBLE_DOUBLE_VMM_H_
#define CONDUIT_TESTS_CUDA_DOUBLE_DOUBLE_VMM_H_

#include <cstddef>
#include <cstdint>

#include "cuda/cuda_abi.h"

namespace cuda_double {

using conduit::cuda::CUcontext;
using conduit::cuda::CUmemGenericAllocationHandle;
using conduit::cuda::CUresult;

inline constexpr size_t kVmmGranularity = size_t{2} << 20;

CUresult CreateAllocation(size_t size, int device, int handle_types, CUmemGenericAllocationHandle* out);
CUresult ReleaseAllocation(CUmemGenericAllocationHandle handle);
CUresult ReserveAddresses(size_t size, size_t alignment, conduit::cuda::CUdeviceptr* out);
CUresult FreeAddresses(uint64_t base, size_t size);
// Maps the first `size` bytes of `handle` at `base` (inside a reservation). `device` and
// `ctx`: what the pointer queries report for it.
CUresult MapAllocation(uint64_t base, size_t size, CUmemGenericAllocationHandle handle, int device, CUcontext ctx);
CUresult UnmapAllocation(uint64_t base, size_t size);
// cuMemSetAccess for one device: the range must be mapped; `flags` (none or read-write)
// applies to every mapping in it.
CUresult SetAccess(uint64_t base, size_t size, int device, int flags);
// cuMemGetAccess: what SetAccess gave `device` on the mapping holding `ptr`.
CUresult GetAccess(uint64_t ptr, int device, unsigned long long* flags);
CUresult ExportAllocation(CUmemGenericAllocationHandle handle, int* fd);
CUresult ImportAllocation(int fd, CUmemGenericAllocationHandle* out);
// The allocation mapped at `addr`, with one more reference.
CUresult RetainAllocation(uint64_t addr, CUmemGenericAllocationHandle* out);

}  // namespace cuda_double

#endif  // CONDUIT_TESTS_CUDA_DOUBLE_DOUBLE_VMM_H_
