// The ABI surface compared by abi_test, listed once. Both table builders
// expand these lists, one against NVIDIA's nccl.h and one against ours, so a
// name added here is checked on both sides.

#ifndef CONDUIT_TESTS_ABI_ABI_LISTS_H_
#define CONDUIT_TESTS_ABI_ABI_LISTS_H_

// X(enumerator)
#define ABI_ENUMERATORS(X)                                                    \
  X(ncclSuccess) X(ncclUnhandledCudaError) X(ncclSystemError)                 \
  X(ncclInternalError) X(ncclInvalidArgument) X(ncclInvalidUsage)             \
  X(ncclRemoteError) X(ncclInProgress) X(ncclNumResults)                      \
  X(ncclNumOps_dummy)                                                         \
  X(ncclSum) X(ncclProd) X(ncclMax) X(ncclMin) X(ncclAvg) X(ncclNumOps)       \
  X(ncclMaxRedOp)                                                             \
  X(ncclInt8) X(ncclChar) X(ncclUint8) X(ncclInt32) X(ncclInt) X(ncclUint32)  \
  X(ncclInt64) X(ncclUint64) X(ncclFloat16) X(ncclHalf) X(ncclFloat32)        \
  X(ncclFloat) X(ncclFloat64) X(ncclDouble) X(ncclBfloat16)                   \
  X(ncclFloat8e4m3) X(ncclFloat8e5m2) X(ncclNumTypes)                         \
  X(ncclScalarDevice) X(ncclScalarHostImmediate)

// X(macro): every object-like #define; value and type are both compared.
#define ABI_DEFINES(X)                                                        \
  X(NCCL_MAJOR) X(NCCL_MINOR) X(NCCL_PATCH) X(NCCL_SUFFIX)                    \
  X(NCCL_VERSION_CODE) X(NCCL_UNIQUE_ID_BYTES) X(NCCL_CONFIG_UNDEF_INT)       \
  X(NCCL_SPLIT_NOCOLOR) X(NCCL_UNDEF_FLOAT) X(NCCL_WIN_DEFAULT)               \
  X(NCCL_WIN_COLL_SYMMETRIC) X(NCCL_WIN_REQUIRED_ALIGNMENT)                   \
  X(NCCL_CTA_POLICY_DEFAULT) X(NCCL_CTA_POLICY_EFFICIENCY)                    \
  X(NCCL_CTA_POLICY_ZERO) X(NCCL_SHRINK_DEFAULT) X(NCCL_SHRINK_ABORT)         \
  X(NCCL_REVOKE_DEFAULT)

// Null-pointer macros, whose value and type depend on the C++ library's
// NULL; only their nullness is compared.
#define ABI_NULL_DEFINES(X) X(NCCL_CONFIG_UNDEF_PTR) X(NCCL_COMM_NULL)

// X(x, y, z): arguments fed to the NCCL_VERSION function-like macro, on both
// sides of its 2.8/2.9 encoding switch.
#define ABI_VERSION_ARGS(X)                                                   \
  X(1, 0, 0) X(2, 8, 4) X(2, 8, 99) X(2, 9, 6) X(2, 28, 9) X(3, 0, 0)         \
  X(3, 1, 2)

// X(type)
#define ABI_TYPES(X)                                                          \
  X(ncclComm_t) X(ncclWindow_t) X(ncclUniqueId) X(ncclResult_t)               \
  X(ncclConfig_t) X(ncclSimInfo_t) X(ncclRedOp_dummy_t) X(ncclRedOp_t)        \
  X(ncclDataType_t) X(ncclScalarResidence_t) X(cudaStream_t)

// X(enum type): underlying types matter for by-value passing.
#define ABI_ENUM_TYPES(X)                                                     \
  X(ncclResult_t) X(ncclRedOp_dummy_t) X(ncclRedOp_t) X(ncclDataType_t)       \
  X(ncclScalarResidence_t)

// X(field) of ncclConfig_t, in declaration order.
#define ABI_CONFIG_FIELDS(X)                                                  \
  X(size) X(magic) X(version) X(blocking) X(cgaClusterSize) X(minCTAs)        \
  X(maxCTAs) X(netName) X(splitShare) X(trafficClass) X(commName)             \
  X(collnetEnable) X(CTAPolicy) X(shrinkShare) X(nvlsCTAs)                    \
  X(nChannelsPerNetPeer) X(nvlinkCentricSched)

// X(field) of ncclSimInfo_t.
#define ABI_SIM_INFO_FIELDS(X) X(size) X(magic) X(version) X(estimatedTime)

// X(name without the nccl prefix): functions of nccl.h, each checked in its
// ncclX and pncclX spelling.
#define ABI_FUNCTIONS(X)                                                      \
  X(MemAlloc) X(MemFree) X(GetVersion) X(GetUniqueId) X(CommInitRankConfig)   \
  X(CommInitRank) X(CommInitAll) X(CommFinalize) X(CommDestroy) X(CommAbort)  \
  X(CommRevoke) X(CommSplit) X(CommShrink) X(CommInitRankScalable)            \
  X(GetErrorString) X(GetLastError) X(ResetDebugInit) X(CommGetAsyncError)    \
  X(CommCount) X(CommCuDevice) X(CommUserRank) X(CommRegister)                \
  X(CommDeregister) X(CommWindowRegister) X(CommWindowDeregister)             \
  X(RedOpCreatePreMulSum) X(RedOpDestroy) X(Reduce) X(Bcast) X(Broadcast)     \
  X(AllReduce) X(ReduceScatter) X(AllGather) X(AlltoAll) X(Gather)            \
  X(Scatter) X(Send) X(Recv) X(GroupStart) X(GroupEnd) X(GroupSimulateEnd)

// X(name): host functions of the device API whose name is not overloaded in
// NVIDIA's C++ headers, so &ncclX names one function on both sides.
#define ABI_DEVICE_HOST_FUNCTIONS(X)                                          \
  X(DevCommCreate) X(DevCommDestroy) X(GinBarrierCreateRequirement)           \
  X(LsaBarrierCreateRequirement) X(LLA2ACalcSlots) X(LLA2ACreateRequirement)

// X(name, pointer type): device-API host functions that NVIDIA overloads
// with inline device-side versions. The NVIDIA side must pick the overload
// by type (a missing match fails to compile); our side is unconstrained.
#define ABI_DEVICE_HOST_OVERLOADED(X)                                         \
  X(TeamWorld, ncclTeam_t (*)(ncclComm_t))                                    \
  X(TeamLsa, ncclTeam_t (*)(ncclComm_t))                                      \
  X(TeamRail, ncclTeam_t (*)(ncclComm_t))                                     \
  X(TeamRankToWorld, int (*)(ncclComm_t, ncclTeam_t, int))                    \
  X(TeamRankToLsa, int (*)(ncclComm_t, ncclTeam_t, int))

// X(field) of struct ncclTeam, passed by value.
#define ABI_TEAM_FIELDS(X) X(nRanks) X(rank) X(stride)

#endif  // CONDUIT_TESTS_ABI_ABI_LISTS_H_
