// Mapping allocations of CUDA's virtual memory API (cuMemCreate or an imported shareable
// handle) into this process: reserve an address range, map the allocations there back to
// back, let the device read and write them; and the undoing of that. The NCCL shim's
// ncclMemAlloc and conduitd's import of a program's allocation (RegisterVmmBuffer) map one
// allocation; conduitd's span of a program's pages (RegisterSpan) maps several. All need
// exactly this sequence, with the same clean-up when a step fails.
#ifndef CONDUIT_CUDA_VMM_MAP_H_
#define CONDUIT_CUDA_VMM_MAP_H_

#include <cstddef>
#include <vector>

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

// As MapReadWrite for several allocations: sizes[i] bytes of handles[i], each from its
// offset 0, back to back in one new range (each size a multiple of `alignment`), with one
// cuMemSetAccess over the whole.
Status MapPiecesReadWrite(const CudaDriver& d, const std::vector<CUmemGenericAllocationHandle>& handles,
                          const std::vector<size_t>& sizes, size_t alignment, const MemLocation& device,
                          const char* map_step, CUdeviceptr* out);

// Unmaps what MapReadWrite mapped and frees its range (the memory goes with its last mapping).
CUresult Unmap(const CudaDriver& d, CUdeviceptr base, size_t size);
// Unmaps what MapPiecesReadWrite mapped, mapping by mapping (cuMemUnmap takes whole
// mappings), and frees the range. The first error, after trying every step.
CUresult UnmapPieces(const CudaDriver& d, CUdeviceptr base, const std::vector<size_t>& sizes);

}  // namespace conduit::cuda

#endif  // CONDUIT_CUDA_VMM_MAP_H_
