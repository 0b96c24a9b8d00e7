// Access to NVIDIA's own libnccl.so.2, used as the fallback when conduitd is
// absent or refuses a program: the shim then forwards each call unchanged.

#ifndef CONDUIT_LIBMCCS_NCCL_NATIVE_NCCL_H_
#define CONDUIT_LIBMCCS_NCCL_NATIVE_NCCL_H_

#include <string>

#include "conduit/nccl_device_host.h"
#include "nccl.h"

// Every entry point the shim exports, written once. Each row is
//   X(return type, name without the "nccl" prefix, (parameters), (arguments))
// so that a user can declare a pointer, resolve a symbol, or write a
// forwarding body from the same row, e.g. a FORWARD(ret, name, params, args)
// macro expanding to: ret nccl##name params { return native->name args; }
// Keep in step with include/nccl.h; tests/abi catches a missing row by
// comparing against the real library's exports.
#define CONDUIT_NCCL_API_LIST(X)                                               \
  X(ncclResult_t, MemAlloc, (void** ptr, size_t size), (ptr, size))           \
  X(ncclResult_t, MemFree, (void* ptr), (ptr))                                 \
  X(ncclResult_t, GetVersion, (int* version), (version))                       \
  X(ncclResult_t, GetUniqueId, (ncclUniqueId * uniqueId), (uniqueId))          \
  X(ncclResult_t, CommInitRankConfig,                                          \
    (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank,             \
     ncclConfig_t* config),                                                    \
    (comm, nranks, commId, rank, config))                                      \
  X(ncclResult_t, CommInitRank,                                                \
    (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank),            \
    (comm, nranks, commId, rank))                                              \
  X(ncclResult_t, CommInitAll,                                                 \
    (ncclComm_t * comm, int ndev, const int* devlist), (comm, ndev, devlist))  \
  X(ncclResult_t, CommFinalize, (ncclComm_t comm), (comm))                     \
  X(ncclResult_t, CommDestroy, (ncclComm_t comm), (comm))                      \
  X(ncclResult_t, CommAbort, (ncclComm_t comm), (comm))                        \
  X(ncclResult_t, CommRevoke, (ncclComm_t comm, int revokeFlags),              \
    (comm, revokeFlags))                                                       \
  X(ncclResult_t, CommSplit,                                                   \
    (ncclComm_t comm, int color, int key, ncclComm_t* newcomm,                 \
     ncclConfig_t* config),                                                    \
    (comm, color, key, newcomm, config))                                       \
  X(ncclResult_t, CommShrink,                                                  \
    (ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,            \
     ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags),              \
    (comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags)) \
  X(ncclResult_t, CommInitRankScalable,                                        \
    (ncclComm_t * newcomm, int nranks, int myrank, int nId,                    \
     ncclUniqueId* commIds, ncclConfig_t* config),                             \
    (newcomm, nranks, myrank, nId, commIds, config))                           \
  X(const char*, GetErrorString, (ncclResult_t result), (result))              \
  X(const char*, GetLastError, (ncclComm_t comm), (comm))                      \
  X(void, ResetDebugInit, (void), ())                                          \
  X(ncclResult_t, CommGetAsyncError,                                           \
    (ncclComm_t comm, ncclResult_t * asyncError), (comm, asyncError))          \
  X(ncclResult_t, CommCount, (const ncclComm_t comm, int* count),              \
    (comm, count))                                                             \
  X(ncclResult_t, CommCuDevice, (const ncclComm_t comm, int* device),          \
    (comm, device))                                                            \
  X(ncclResult_t, CommUserRank, (const ncclComm_t comm, int* rank),            \
    (comm, rank))                                                              \
  X(ncclResult_t, CommRegister,                                                \
    (const ncclComm_t comm, void* buff, size_t size, void** handle),           \
    (comm, buff, size, handle))                                                \
  X(ncclResult_t, CommDeregister, (const ncclComm_t comm, void* handle),       \
    (comm, handle))                                                            \
  X(ncclResult_t, CommWindowRegister,                                          \
    (ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,              \
     int winFlags),                                                            \
    (comm, buff, size, win, winFlags))                                         \
  X(ncclResult_t, CommWindowDeregister, (ncclComm_t comm, ncclWindow_t win),   \
    (comm, win))                                                               \
  X(ncclResult_t, RedOpCreatePreMulSum,                                        \
    (ncclRedOp_t * op, void* scalar, ncclDataType_t datatype,                  \
     ncclScalarResidence_t residence, ncclComm_t comm),                        \
    (op, scalar, datatype, residence, comm))                                   \
  X(ncclResult_t, RedOpDestroy, (ncclRedOp_t op, ncclComm_t comm), (op, comm)) \
  X(ncclResult_t, Reduce,                                                      \
    (const void* sendbuff, void* recvbuff, size_t count,                       \
     ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,       \
     cudaStream_t stream),                                                     \
    (sendbuff, recvbuff, count, datatype, op, root, comm, stream))             \
  X(ncclResult_t, Bcast,                                                       \
    (void* buff, size_t count, ncclDataType_t datatype, int root,              \
     ncclComm_t comm, cudaStream_t stream),                                    \
    (buff, count, datatype, root, comm, stream))                               \
  X(ncclResult_t, Broadcast,                                                   \
    (const void* sendbuff, void* recvbuff, size_t count,                       \
     ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream), \
    (sendbuff, recvbuff, count, datatype, root, comm, stream))                 \
  X(ncclResult_t, AllReduce,                                                   \
    (const void* sendbuff, void* recvbuff, size_t count,                       \
     ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,                 \
     cudaStream_t stream),                                                     \
    (sendbuff, recvbuff, count, datatype, op, comm, stream))                   \
  X(ncclResult_t, ReduceScatter,                                               \
    (const void* sendbuff, void* recvbuff, size_t recvcount,                   \
     ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,                 \
     cudaStream_t stream),                                                     \
    (sendbuff, recvbuff, recvcount, datatype, op, comm, stream))               \
  X(ncclResult_t, AllGather,                                                   \
    (const void* sendbuff, void* recvbuff, size_t sendcount,                   \
     ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream),           \
    (sendbuff, recvbuff, sendcount, datatype, comm, stream))                   \
  X(ncclResult_t, AlltoAll,                                                    \
    (const void* sendbuff, void* recvbuff, size_t count,                       \
     ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream),           \
    (sendbuff, recvbuff, count, datatype, comm, stream))                       \
  X(ncclResult_t, Gather,                                                      \
    (const void* sendbuff, void* recvbuff, size_t count,                       \
     ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream), \
    (sendbuff, recvbuff, count, datatype, root, comm, stream))                 \
  X(ncclResult_t, Scatter,                                                     \
    (const void* sendbuff, void* recvbuff, size_t count,                       \
     ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream), \
    (sendbuff, recvbuff, count, datatype, root, comm, stream))                 \
  X(ncclResult_t, Send,                                                        \
    (const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,    \
     ncclComm_t comm, cudaStream_t stream),                                    \
    (sendbuff, count, datatype, peer, comm, stream))                           \
  X(ncclResult_t, Recv,                                                        \
    (void* recvbuff, size_t count, ncclDataType_t datatype, int peer,          \
     ncclComm_t comm, cudaStream_t stream),                                    \
    (recvbuff, count, datatype, peer, comm, stream))                           \
  X(ncclResult_t, GroupStart, (void), ())                                      \
  X(ncclResult_t, GroupEnd, (void), ())                                        \
  X(ncclResult_t, GroupSimulateEnd, (ncclSimInfo_t * simInfo), (simInfo))

// Host functions of the device API (include/conduit/nccl_device_host.h).
// Kept apart because older native libraries lack them all.
#define CONDUIT_NCCL_DEVICE_HOST_API_LIST(X)                                   \
  X(ncclResult_t, DevCommCreate,                                               \
    (ncclComm_t comm, ncclDevCommRequirements_t const* reqs,                   \
     ncclDevComm_t* outDevComm),                                               \
    (comm, reqs, outDevComm))                                                  \
  X(ncclResult_t, DevCommDestroy,                                              \
    (ncclComm_t comm, ncclDevComm_t const* devComm), (comm, devComm))          \
  X(ncclTeam_t, TeamWorld, (ncclComm_t comm), (comm))                          \
  X(ncclTeam_t, TeamLsa, (ncclComm_t comm), (comm))                            \
  X(ncclTeam_t, TeamRail, (ncclComm_t comm), (comm))                           \
  X(int, TeamRankToWorld, (ncclComm_t comm, ncclTeam_t team, int rank),        \
    (comm, team, rank))                                                        \
  X(int, TeamRankToLsa, (ncclComm_t comm, ncclTeam_t team, int rank),          \
    (comm, team, rank))                                                        \
  X(ncclResult_t, GinBarrierCreateRequirement,                                 \
    (ncclComm_t comm, ncclTeam_t team, int nBarriers,                          \
     ncclGinBarrierHandle_t* outHandle,                                        \
     ncclDevResourceRequirements_t* outReq),                                   \
    (comm, team, nBarriers, outHandle, outReq))                                \
  X(ncclResult_t, LsaBarrierCreateRequirement,                                 \
    (ncclTeam_t team, int nBarriers, ncclLsaBarrierHandle_t* outHandle,        \
     ncclDevResourceRequirements_t* outReq),                                   \
    (team, nBarriers, outHandle, outReq))                                      \
  X(int, LLA2ACalcSlots, (int maxElts, int maxEltSize), (maxElts, maxEltSize)) \
  X(ncclResult_t, LLA2ACreateRequirement,                                      \
    (int nBlocks, int nSlots, ncclLLA2AHandle_t* outHandle,                    \
     ncclDevResourceRequirements_t* outReq),                                   \
    (nBlocks, nSlots, outHandle, outReq))

// ncclResetDebugInitInternal has no pncclX twin and is not in either list; it
// is resolved separately below.

namespace conduit {

// Function pointers into the native library. A pointer is null when that
// library does not export the symbol (an older NCCL); callers must check and
// answer ncclInvalidUsage rather than call through it.
struct NativeNccl {
#define CONDUIT_NCCL_DECLARE_POINTER_(ret, name, params, args) \
  ret(*name) params = nullptr;
  CONDUIT_NCCL_API_LIST(CONDUIT_NCCL_DECLARE_POINTER_)
  CONDUIT_NCCL_DEVICE_HOST_API_LIST(CONDUIT_NCCL_DECLARE_POINTER_)
#undef CONDUIT_NCCL_DECLARE_POINTER_
  void (*ResetDebugInitInternal)(void) = nullptr;

  std::string path;  // The file that was loaded, as found (not resolved).
  int version = 0;   // What its ncclGetVersion reported.
};

// Loads the native library on first use; later calls, from any thread, get
// the same answer. The result is never unloaded. Returns nullptr and, if why
// is non-null, explains what was tried when no usable library exists.
const NativeNccl* LoadNativeNccl(std::string* why);

}  // namespace conduit

#endif  // CONDUIT_LIBMCCS_NCCL_NATIVE_NCCL_H_
