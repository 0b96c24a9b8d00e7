// The watch for device buffers a program freed on communicators that make no more calls.
//
// conduitd maps each device allocation a collective used (CUDA IPC) and keeps it mapped for
// the next call; while it does, the program's cudaFree does not give the memory back to
// the GPU. Before each device call the shim releases the allocations the program freed
// (DevicePath::ReleaseFreed); this watch does the same, every 200 ms, for communicators
// that make no call: a program that frees its buffers (PyTorch's empty_cache) and then
// computes, or waits, gets the memory back without a collective to trigger it.
#ifndef CONDUIT_LIBMCCS_NCCL_FREED_BUFFER_WATCH_H_
#define CONDUIT_LIBMCCS_NCCL_FREED_BUFFER_WATCH_H_

struct ncclComm;

namespace conduit {

// Adds `comm` (its init done, a device buffer registered; called under its op_mu). The
// watch thread starts with the first. Idempotent.
void WatchForFreedBuffers(ncclComm* comm);
// Before `comm` is freed: the watch lets go of it (and is not using it on return).
void StopWatchingForFreedBuffers(ncclComm* comm);

}  // namespace conduit

#endif  // CONDUIT_LIBMCCS_NCCL_FREED_BUFFER_WATCH_H_
