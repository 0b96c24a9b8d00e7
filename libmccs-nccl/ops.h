// Data ops on the managed path: how each NCCL call lays its data out in the staging
// segment, and the group machinery (ncclGroupStart/End) that batches them.
#ifndef CONDUIT_LIBMCCS_NCCL_OPS_H_
#define CONDUIT_LIBMCCS_NCCL_OPS_H_

#include <cstddef>
#include <functional>
#include <vector>

#include "nccl.h"
#include "pending_op.h"

namespace conduit {

// Queues `op` inside a group, or runs it now. `call` names the API call for errors.
ncclResult_t SubmitOp(const char* call, const PendingOp& op);

// Runs `op` now, outside any group the calling thread may have open.
ncclResult_t RunOpNow(const char* call, const PendingOp& op);

// Builders; they validate the arguments and fill the layout for each op kind.
ncclResult_t BuildReduceLike(const char* call, uint8_t kind, const void* send, void* recv, size_t count,
                             ncclDataType_t type, ncclRedOp_t op, int root, ncclComm* comm, PendingOp* out);
ncclResult_t BuildBroadcast(const char* call, const void* send, void* recv, size_t count, ncclDataType_t type, int root,
                            ncclComm* comm, PendingOp* out);
ncclResult_t BuildAllGather(const char* call, const void* send, void* recv, size_t count, ncclDataType_t type,
                            ncclComm* comm, PendingOp* out);
ncclResult_t BuildP2p(const char* call, uint8_t kind, const void* send, void* recv, size_t count, ncclDataType_t type,
                      int peer, ncclComm* comm, PendingOp* out);

// Group nesting, per thread as in NCCL.
void GroupStart();
ncclResult_t GroupEnd();
bool InGroup();
// Drops the queued work of the outermost group without running it (GroupSimulateEnd);
// returns the ops that were queued.
std::vector<PendingOp> GroupDiscard();
// Work (non-blocking communicator inits) that must run at the outermost GroupEnd.
void GroupDefer(std::function<ncclResult_t()> job);

}  // namespace conduit

#endif  // CONDUIT_LIBMCCS_NCCL_OPS_H_
