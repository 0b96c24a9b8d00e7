// ncclMemAlloc's device memory.
//
// NCCL's ncclMemAlloc returns device memory of the current device, and programs use it as
// such: nccl-tests (built against NCCL >= 2.19) allocates every buffer with it and runs
// CUDA kernels on them, PyTorch's NCCL allocator hooks hand it to tensors. So in a process
// that uses CUDA (the driver is loaded and has a GPU) the shim allocates device memory in
// the current context (device 0's primary context if none is current, as cudaGetDevice
// defaults to 0). As NCCL's, it is a virtual-memory-managed allocation (cuMemCreate,
// exportable as a POSIX file descriptor, which the daemon maps: device_path.h); where the
// driver will not make one, an ordinary cuMemAlloc allocation, which the daemon maps through
// CUDA IPC like any cudaMalloc buffer. Processes without CUDA keep getting host memory
// shared with the daemon (host_regions.h).
#ifndef CONDUIT_LIBMCCS_NCCL_DEVICE_ALLOC_H_
#define CONDUIT_LIBMCCS_NCCL_DEVICE_ALLOC_H_

#include <cstddef>

#include "common/status.h"

namespace conduit {

// Device memory of `size` bytes in *ptr when this process uses a GPU; *allocated false
// (and Ok) when it does not, so the caller falls back to host memory. An error means the
// GPU refused (out of memory, a broken context).
Status AllocateDeviceMemory(size_t size, void** ptr, bool* allocated);

// Frees `ptr` if AllocateDeviceMemory returned it: true (and *st the driver's answer),
// else false and nothing is done.
bool FreeDeviceMemory(void* ptr, Status* st);

}  // namespace conduit

#endif  // CONDUIT_LIBMCCS_NCCL_DEVICE_ALLOC_H_
