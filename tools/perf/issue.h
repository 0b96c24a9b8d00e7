// Issuing one operation of a collective for one rank through the NCCL API, the way
// nccl-tests issues it (ncclAlltoAll, ncclGather and ncclScatter of NCCL 2.28; a
// send/recv ring for sendrecv; grouped send/recv rounds for hypercube).
#ifndef CONDUIT_TOOLS_PERF_ISSUE_H_
#define CONDUIT_TOOLS_PERF_ISSUE_H_

#include <cstddef>

#include "collective.h"
#include "nccl.h"

namespace conduit::perf {

struct IssueArgs {
  Coll coll;
  const void* send;
  void* recv;
  const Shape* shape;
  ncclDataType_t type;
  size_t type_size;
  ncclRedOp_t op;
  int root;
  int rank;
  int nranks;
  ncclComm_t comm;
};

// Most ops are one call. hypercube is log2(nranks) rounds, each depending on the
// data the previous one received, so a caller driving several ranks from one thread
// must finish a round on all of them (one group) before starting the next.
int IssueRounds(Coll coll, int nranks);

// Issues round `round` of the op. Point-to-point based ops open their own (nested)
// groups, so the call is correct inside or outside an outer group.
ncclResult_t Issue(const IssueArgs& a, int round);

}  // namespace conduit::perf

#endif  // CONDUIT_TOOLS_PERF_ISSUE_H_
