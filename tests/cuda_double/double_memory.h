// The test double's memory: device allocations, pinned host memory and CUDA IPC.
//
// A device allocation is a memfd mapped twice in its process: the "device address" the
// program gets is a PROT_NONE view (so host code that touches device memory faults, as it
// would on a GPU), and a second, read-write view is what the double's copies and kernels
// use. Another process opens an IPC handle through /proc/<pid>/fd/<fd> of the owner,
// checked against the memfd's inode, and maps it the same two ways. As with CUDA, the
// owner's free does not take the memory from under a process that opened it.
#ifndef CONDUIT_TESTS_CUDA_DOUBLE_DOUBLE_MEMORY_H_
#define CONDUIT_TESTS_CUDA_DOUBLE_DOUBLE_MEMORY_H_

#include <cstddef>
#include <cstdint>

#include "cuda/cuda_abi.h"

namespace cuda_double {

using conduit::cuda::CUcontext;
using conduit::cuda::CUresult;

// What cuPointerGetAttribute(s) reports for an address.
struct PointerFacts {
  unsigned memory_type = 0;  // 0: memory the double does not know (plain host memory)
  uint64_t base = 0;
  size_t size = 0;
  uint64_t buffer_id = 0;
  int device = -1;
  bool ipc_capable = false;
  CUcontext context = nullptr;
};

CUresult AllocateDevice(size_t bytes, int device, CUcontext ctx, conduit::cuda::CUdeviceptr* out);
CUresult FreeDevice(uint64_t ptr);
CUresult AllocatePinned(size_t bytes, CUcontext ctx, void** out);
CUresult FreePinned(void* ptr);

PointerFacts Describe(uint64_t ptr);

// The address at which the double itself may read or write [ptr, ptr + bytes): the
// read-write view of device memory, the address itself for host memory. nullptr when
// the range starts in an allocation and runs past its end.
uint8_t* HostView(uint64_t ptr, size_t bytes);

CUresult ExportMemory(uint64_t base, conduit::cuda::IpcMemHandle* handle);
CUresult OpenMemory(const conduit::cuda::IpcMemHandle& handle, int device, CUcontext ctx, conduit::cuda::CUdeviceptr* out);
CUresult CloseMemory(uint64_t ptr);  // unmaps at once, queued work or not (as CUDA)

// A virtual-memory mapping (double_vmm.h) made known to the pointer queries and copies:
// [base, base + size) is device memory of `device` (not legacy-IPC capable), whose bytes
// the double reaches at `rw`. A new buffer id per mapping, as CUDA gives.
void AddMapping(uint64_t base, size_t size, uint8_t* rw, int device, CUcontext ctx);
// Forgets the mapping that is exactly [base, base + size); its read-write view in *rw.
bool RemoveMapping(uint64_t base, size_t size, uint8_t** rw);
// Whether any region lies in [base, base + size).
bool AnyRegionIn(uint64_t base, size_t size);

// A memfd of `bytes` and the pid/inode another process needs to open it: the shared
// state of interprocess events uses the same mechanism as memory.
struct SharedFile {
  int fd = -1;
  uint64_t inode = 0;
};
bool CreateSharedFile(const char* name, size_t bytes, SharedFile* out);
// Opens fd `fd` of process `pid`; -1 unless it is the file with `inode`.
int OpenSharedFile(int pid, int fd, uint64_t inode);

}  // namespace cuda_double

#endif  // CONDUIT_TESTS_CUDA_DOUBLE_DOUBLE_MEMORY_H_
