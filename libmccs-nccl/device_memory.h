// Where a program's buffer lives, as the CUDA driver sees it.
//
// The shim serves three kinds of buffer:
//  * host: plain memory CUDA does not know (and every buffer of a process without the
//    CUDA driver loaded: such a process cannot hold device memory). Copied with memcpy
//    through the staging segment, as before.
//  * staged: memory the GPU may be writing in stream order (device memory that cannot be
//    shared with the daemon, such as virtual-memory-managed allocations; managed memory;
//    pinned host memory). Copied with CUDA copies ordered on the caller's stream.
//  * device: an ordinary device allocation (cudaMalloc, PyTorch's caching allocator) that
//    the daemon maps through CUDA IPC, or a virtual-memory-managed one (cuMemCreate:
//    PyTorch's expandable segments, ncclMemAlloc) that it maps from the POSIX file
//    descriptor CUDA exports for it; no copy on the program's side.
#ifndef CONDUIT_LIBMCCS_NCCL_DEVICE_MEMORY_H_
#define CONDUIT_LIBMCCS_NCCL_DEVICE_MEMORY_H_

#include <cstdint>

#include "common/status.h"
#include "cuda/cuda_driver.h"

namespace conduit {

enum class MemoryKind : uint8_t { kHost, kStaged, kDevice };

struct BufferInfo {
  MemoryKind kind = MemoryKind::kHost;
  // kDevice: the allocation holding the buffer (shareable through CUDA IPC).
  uint64_t buffer_id = 0;  // the driver's process-unique id of the allocation
  bool vmm = false;        // kDevice: not legacy-IPC capable, shared as a file descriptor
  int device = -1;         // CUDA ordinal in this process
  cuda::CUcontext context = nullptr;
};

// The driver when this process has loaded it (the CUDA runtime did), else nullptr.
inline const cuda::CudaDriver* ProcessCuda() { return cuda::CudaDriver::IfLoaded(); }

// Classifies `p` (nullptr is host memory). Never fails for host memory; fails only when
// the driver cannot answer for a pointer it knows.
Status ClassifyBuffer(const void* p, BufferInfo* out);

}  // namespace conduit

#endif  // CONDUIT_LIBMCCS_NCCL_DEVICE_MEMORY_H_
