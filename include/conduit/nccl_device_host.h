// Host-side entry points of NCCL's device API.
//
// NVIDIA's libnccl.so.2 exports these besides the classic API; a program
// built against nccl_device.h links to them, so Conduit's drop-in library has
// to export them too. The device API itself (kernels using ncclDevComm) is
// not something Conduit can forward, so only the handful of C-linkage host
// functions and the types their signatures need are declared here.
//
// Types that travel by pointer are left incomplete: the shim never looks
// inside them, it either hands them on to the native library or refuses the
// call. ncclTeam travels by value and therefore needs its real layout. Tag
// names match NVIDIA's so the mangled names of C++ callers agree; this header
// must not be included together with nccl_device/*.h.

#ifndef CONDUIT_INCLUDE_CONDUIT_NCCL_DEVICE_HOST_H_
#define CONDUIT_INCLUDE_CONDUIT_NCCL_DEVICE_HOST_H_

#include "nccl.h"

#ifdef __cplusplus
extern "C" {
#endif

struct ncclTeam {
  int nRanks, rank, stride;
};
typedef struct ncclTeam ncclTeam_t;

typedef struct ncclDevComm ncclDevComm_t;
typedef struct ncclDevCommRequirements ncclDevCommRequirements_t;
typedef struct ncclDevResourceRequirements ncclDevResourceRequirements_t;
typedef struct ncclLsaBarrierHandle ncclLsaBarrierHandle_t;
typedef struct ncclGinBarrierHandle ncclGinBarrierHandle_t;
typedef struct ncclLLA2AHandle ncclLLA2AHandle_t;

// Device communicator lifetime.
ncclResult_t ncclDevCommCreate(ncclComm_t comm,
                               ncclDevCommRequirements_t const* reqs,
                               ncclDevComm_t* outDevComm);
ncclResult_t pncclDevCommCreate(ncclComm_t comm,
                                ncclDevCommRequirements_t const* reqs,
                                ncclDevComm_t* outDevComm);
ncclResult_t ncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const* devComm);
ncclResult_t pncclDevCommDestroy(ncclComm_t comm,
                                 ncclDevComm_t const* devComm);

// Teams: the whole communicator, the load/store-accessible (NVLink) subset,
// and the rail (one rank per LSA domain).
ncclTeam_t ncclTeamWorld(ncclComm_t comm);
ncclTeam_t pncclTeamWorld(ncclComm_t comm);
ncclTeam_t ncclTeamLsa(ncclComm_t comm);
ncclTeam_t pncclTeamLsa(ncclComm_t comm);
ncclTeam_t ncclTeamRail(ncclComm_t comm);
ncclTeam_t pncclTeamRail(ncclComm_t comm);
int ncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank);
int pncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank);
int ncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank);
int pncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank);

// Resource requirements that feed ncclDevCommCreate.
ncclResult_t ncclGinBarrierCreateRequirement(
    ncclComm_t comm, ncclTeam_t team, int nBarriers,
    ncclGinBarrierHandle_t* outHandle, ncclDevResourceRequirements_t* outReq);
ncclResult_t pncclGinBarrierCreateRequirement(
    ncclComm_t comm, ncclTeam_t team, int nBarriers,
    ncclGinBarrierHandle_t* outHandle, ncclDevResourceRequirements_t* outReq);
ncclResult_t ncclLsaBarrierCreateRequirement(
    ncclTeam_t team, int nBarriers, ncclLsaBarrierHandle_t* outHandle,
    ncclDevResourceRequirements_t* outReq);
ncclResult_t pncclLsaBarrierCreateRequirement(
    ncclTeam_t team, int nBarriers, ncclLsaBarrierHandle_t* outHandle,
    ncclDevResourceRequirements_t* outReq);
int ncclLLA2ACalcSlots(int maxElts, int maxEltSize);
int pncclLLA2ACalcSlots(int maxElts, int maxEltSize);
ncclResult_t ncclLLA2ACreateRequirement(int nBlocks, int nSlots,
                                        ncclLLA2AHandle_t* outHandle,
                                        ncclDevResourceRequirements_t* outReq);
ncclResult_t pncclLLA2ACreateRequirement(
    int nBlocks, int nSlots, ncclLLA2AHandle_t* outHandle,
    ncclDevResourceRequirements_t* outReq);

// Exported without a pncclX twin and declared in no public header; the real
// pncclResetDebugInit simply jumps here.
void ncclResetDebugInitInternal(void);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // CONDUIT_INCLUDE_CONDUIT_NCCL_DEVICE_HOST_H_
