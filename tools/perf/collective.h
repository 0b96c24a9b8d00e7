// The collectives conduit-perf measures: buffer geometry, how each is issued, and
// the bus-bandwidth factor that makes numbers comparable across rank counts.
#ifndef CONDUIT_TOOLS_PERF_COLLECTIVE_H_
#define CONDUIT_TOOLS_PERF_COLLECTIVE_H_

#include <cstddef>
#include <string_view>

#include "nccl.h"

namespace conduit::perf {

enum class Coll { kAllReduce, kAllGather, kBroadcast, kReduce, kReduceScatter, kAllToAll, kSendRecv };

struct CollInfo {
  const char* name;
  Coll coll;
  bool uses_redop;
  bool uses_root;
  // Send/recv-based ops cannot run with send == recv: a rank would overwrite data
  // it still has to send.
  bool supports_in_place;
};

// nullptr when the name is unknown.
const CollInfo* FindColl(std::string_view name);
const char* CollNames();

// Per-rank buffer geometry for a requested size, following nccl-tests: the size
// is the largest buffer of the op (the gathered / scattered / exchanged whole for
// allgather, reducescatter and alltoall, the single buffer otherwise).
struct Shape {
  size_t count = 0;       // the `count` argument passed to NCCL (per-peer block for alltoall)
  size_t send_elems = 0;  // input elements per rank
  size_t recv_elems = 0;  // output elements per rank
  size_t bytes = 0;       // size actually measured (request rounded down to whole elements/blocks)
  // In-place: one buffer of max(send, recv) elements; the input starts at in_offset,
  // the output at out_offset (elements).
  size_t in_offset = 0;
  size_t out_offset = 0;
};

Shape ShapeFor(Coll coll, size_t bytes, size_t type_size, int nranks, int rank);

// algbw * factor = busbw: the per-link traffic a bandwidth-optimal algorithm needs.
double BusBwFactor(Coll coll, int nranks);

// Issues one operation for one rank. Point-to-point based ops open their own
// (nested) group, so the call is correct inside or outside an outer group.
ncclResult_t Issue(Coll coll, const void* send, void* recv, const Shape& shape, ncclDataType_t type,
                   size_t type_size, ncclRedOp_t op, int root, int rank, int nranks, ncclComm_t comm,
                   cudaStream_t stream);

}  // namespace conduit::perf

#endif  // CONDUIT_TOOLS_PERF_COLLECTIVE_H_
