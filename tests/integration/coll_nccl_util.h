// Small helpers around NCCL calls shared by coll_check's parts.
#ifndef CONDUIT_TESTS_INTEGRATION_COLL_NCCL_UTIL_H_
#define CONDUIT_TESTS_INTEGRATION_COLL_NCCL_UTIL_H_

#include "nccl.h"

namespace conduit::it {

// "ncclRemoteError" etc.: tests grep for these names, so print the enum, not the prose.
const char* ResultName(ncclResult_t r);

// Non-blocking communicators may answer ncclInProgress; wait (bounded) for the real outcome.
ncclResult_t Settle(ncclComm_t comm, ncclResult_t r);

// Host buffers only: the shim has no device memory, so the stream is a null handle.
inline cudaStream_t NoStream() { return cudaStream_t{}; }

}  // namespace conduit::it

#endif  // CONDUIT_TESTS_INTEGRATION_COLL_NCCL_UTIL_H_
