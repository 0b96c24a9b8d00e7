// Point-to-point ops of a rank to itself on host memory, done in the shim.
//
// A group's Send to its own rank and its Recv from it (an all-to-all's own block, a
// sendrecv ring of one) would otherwise go through the daemon as any message: the shim
// copies the send buffer into its staging segment, the daemon copies it to the receive's
// place in the segment, and the shim copies that out: three copies of every byte where one
// does, and on two hosts the own block is half an all-to-all. So the shim matches them as
// the daemon would (the k-th Send to itself with its k-th Recv from itself, in the group's
// order) and copies each send buffer into its receive buffer itself: while the daemon runs
// the rest of the group when that works on inputs the shim staged before the request, else
// (a streamed group, ops in host regions: the daemon reads their inputs as it goes) once the
// reply has come, as a staged group's outputs are written. A group of only these sends no
// request at all.
//
// Only ops on host memory (MemoryKind::kHost): device buffers go to the daemon as before.
// When the group's own sends and receives do not pair up (different counts, or a pair of
// different sizes) none is taken, and the daemon reports the mismatch as it always has.
#ifndef CONDUIT_LIBMCCS_NCCL_SELF_P2P_H_
#define CONDUIT_LIBMCCS_NCCL_SELF_P2P_H_

#include <vector>

#include "pending_op.h"

namespace conduit {

struct SelfCopy {
  const void* from;
  void* to;
  size_t bytes;
};

// Removes from `list` (one communicator's ops, of rank `rank`) the Sends to `rank` and
// Recvs from it that pair up, as described above, and returns their copies.
std::vector<SelfCopy> TakeSelfCopies(int rank, std::vector<PendingOp*>* list);

// Does the copies (memmove: NCCL leaves overlapping send and receive buffers undefined,
// this leaves them defined).
void RunSelfCopies(const std::vector<SelfCopy>& copies);

}  // namespace conduit

#endif  // CONDUIT_LIBMCCS_NCCL_SELF_P2P_H_
