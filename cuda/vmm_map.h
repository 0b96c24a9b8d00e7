// Mapping allocations of CUDA's virtual memory API (cuMemCreate or an imported shareable
// handle) into this process: reserve an address range, map the allocation there, let its
// device read and write it; and the undoing of that. The NCCL shim's ncclMemAlloc and
// conduitd's import of a program's allocation (RegisterVmmBuffer) both need exactly this
// sequence, with the same clean-up when a step fails.
#ifndef CONDUIT_CUDA_VMM_MAP_H_
#define CONDUIT_CUDA_VMM_MAP_H_

#include <cstddef>

#include "common/status.h"
#include "cuda/cuda_abi.h"
#include "cuda/cuda_driver.h"

namespace conduit::cuda {

// Maps `size` bytes of `handle` from its offset 0 at a new range aligned to `alignment`
// (the allocation granularity), read-write for `device`, into *out. On failure nothing is
// left reserved or mapped, and the error names the step; `map_step` is how a failed cuMemMap
// is described (the importer's hint that a size may be wrong). The handle is not released.
Status MapReadWrite(const CudaDriver& d, CUmemGenericAllocationHandle handle, size_t size, size_t alignment,
                    const MemLocation& device, const char* map_step, CUdeviceptr* out);

// Unmaps what MapReadWrite mapped and frees its range (the memory goes with its last mapping).
CUresult Unmap(const CudaDriver& d, CUdeviceptr base, size_t size);

}  // namespace conduit::cuda

#endif  // CONDUIT_CUDA_VMM_MAP_H_
