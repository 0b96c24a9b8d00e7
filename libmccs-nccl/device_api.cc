// Host functions of NCCL's device API. Device-initiated communication needs GPU-resident
// communicator state that this host-memory path does not have, so creation calls report
// that clearly; the team queries answer truthfully for a host path (each rank is its own
// load/store domain).
#include "comm.h"
#include "managed.h"
#include "shim_log.h"

namespace conduit::managed {
namespace {
ncclResult_t NoDeviceApi(const char* call) {
  return Fail(call, ncclInvalidUsage, "the NCCL device API needs GPU communicators; Conduit's host-memory path has none");
}
}  // namespace

ncclResult_t DevCommCreate(ncclComm_t, ncclDevCommRequirements_t const*, ncclDevComm_t*) {
  return NoDeviceApi("ncclDevCommCreate");
}
ncclResult_t DevCommDestroy(ncclComm_t, ncclDevComm_t const*) { return NoDeviceApi("ncclDevCommDestroy"); }

ncclTeam_t TeamWorld(ncclComm_t comm) {
  if (!ValidComm(comm)) return ncclTeam_t{0, 0, 0};
  return ncclTeam_t{comm->nranks, comm->rank, 1};
}
ncclTeam_t TeamLsa(ncclComm_t comm) {
  if (!ValidComm(comm)) return ncclTeam_t{0, 0, 0};
  return ncclTeam_t{1, 0, 1};
}
ncclTeam_t TeamRail(ncclComm_t comm) { return TeamWorld(comm); }  // one rank per LSA domain

int TeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank) {
  if (!ValidComm(comm) || rank < 0 || rank >= team.nRanks) return -1;
  return comm->rank + (rank - team.rank) * team.stride;
}
int TeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank) {
  return TeamRankToWorld(comm, team, rank) == (ValidComm(comm) ? comm->rank : -2) ? 0 : -1;
}

ncclResult_t GinBarrierCreateRequirement(ncclComm_t, ncclTeam_t, int, ncclGinBarrierHandle_t*,
                                         ncclDevResourceRequirements_t*) {
  return NoDeviceApi("ncclGinBarrierCreateRequirement");
}
ncclResult_t LsaBarrierCreateRequirement(ncclTeam_t, int, ncclLsaBarrierHandle_t*, ncclDevResourceRequirements_t*) {
  return NoDeviceApi("ncclLsaBarrierCreateRequirement");
}
int LLA2ACalcSlots(int, int) { return 0; }
ncclResult_t LLA2ACreateRequirement(int, int, ncclLLA2AHandle_t*, ncclDevResourceRequirements_t*) {
  return NoDeviceApi("ncclLLA2ACreateRequirement");
}

}  // namespace conduit::managed
