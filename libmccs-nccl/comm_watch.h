// The watch over communicators between their calls.
//
// Two things need doing on a communicator that makes no call for a while, and a thread of
// the shim does them every 200 ms (skipping any communicator whose call is in progress):
//
// - Freed device buffers. conduitd maps each device allocation a collective used (CUDA
//   IPC) and keeps it mapped for the next call; while it does, the program's cudaFree does
//   not give the memory back to the GPU. Before each device call the shim releases the
//   allocations the program freed (DevicePath::ReleaseFreed); the watch does the same for
//   communicators that make no call: a program that frees its buffers (PyTorch's
//   empty_cache) and then computes, or waits, gets the memory back without a collective.
// - A daemon that went away. The program's streams wait on conduitd's done word for the
//   asynchronous groups it accepted; if conduitd exits (a crash, a kill, an OOM) nobody
//   would ever write it, and every later kernel on those streams, and cudaStreamSynchronize,
//   would wait for good. When the connection reads as closed, the watch writes the words
//   itself (DevicePath::ReleaseStreamsOfLostDaemon) and the communicator's asynchronous
//   error becomes ncclSystemError, which is how PyTorch's watchdog learns of it.
#ifndef CONDUIT_LIBMCCS_NCCL_COMM_WATCH_H_
#define CONDUIT_LIBMCCS_NCCL_COMM_WATCH_H_

struct ncclComm;

namespace conduit {

// Adds `comm` (its init done, a device buffer registered; called under its op_mu). The
// watch thread starts with the first. Idempotent.
void WatchComm(ncclComm* comm);
// Before `comm` is freed: the watch lets go of it (and is not using it on return).
void StopWatchingComm(ncclComm* comm);
// With comm->op_mu held: if conduitd closed the connection, releases the streams waiting
// for it and records the asynchronous error. True when the connection is closed.
bool CheckDaemonGone(ncclComm* comm);

}  // namespace conduit

#endif  // CONDUIT_LIBMCCS_NCCL_COMM_WATCH_H_
