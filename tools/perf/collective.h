// The collectives conduit-perf measures: their names (nccl-tests' binary names),
// buffer geometry, and the bandwidth factors that make numbers comparable across
// rank counts. How each is issued through NCCL is issue.h.
#ifndef CONDUIT_TOOLS_PERF_COLLECTIVE_H_
#define CONDUIT_TOOLS_PERF_COLLECTIVE_H_

#include <cstddef>
#include <span>
#include <string_view>

namespace conduit::perf {

enum class Coll {
  kAllReduce,
  kAllGather,
  kBroadcast,
  kReduce,
  kReduceScatter,
  kAllToAll,
  kSendRecv,
  kGather,
  kScatter,
  kHyperCube,
};

struct CollInfo {
  const char* name;     // nccl-tests' name: the binary is <name>_perf
  const char* program;  // that binary's name
  Coll coll;
  bool uses_redop;
  bool uses_root;
  // In-place results are checked. nccl-tests runs sendrecv in place (send == recv
  // buffer) but does not check it: the data a rank sends is overwritten by what it
  // receives, so no result is "right".
  bool checks_in_place;
};

// By nccl-tests name ("all_reduce"), binary name ("all_reduce_perf") or the names
// conduit-perf used before it followed nccl-tests ("allreduce"); nullptr when unknown.
const CollInfo* FindColl(std::string_view name);

// The collective a program invoked as `argv0` runs: its basename must be one of
// nccl-tests' binary names (a symlink all_reduce_perf -> conduit-perf); nullptr
// for any other name.
const CollInfo* CollForProgram(std::string_view argv0);

std::span<const CollInfo> AllColls();
const CollInfo* DefaultColl();  // all_reduce

// Per-rank buffer geometry for a requested size, as nccl-tests computes it: the size
// is the largest buffer of the op (the gathered / scattered / exchanged whole for
// the ops that split it by rank, whose per-rank part is rounded down to 16 bytes).
struct Shape {
  size_t count = 0;       // the `count` argument passed to NCCL (per-rank block for split ops)
  size_t send_elems = 0;  // input elements per rank
  size_t recv_elems = 0;  // output elements per rank
  size_t bytes = 0;       // the "size" column: max(send, recv) bytes actually used
  // In-place runs use one buffer of max(send, recv) elements; the input starts at
  // in_offset, the output at out_offset (elements; NCCL's in-place conventions).
  size_t in_offset = 0;
  size_t out_offset = 0;
};

Shape ShapeFor(Coll coll, size_t bytes, size_t type_size, int nranks, int rank);

// nccl-tests' bandwidths: algbw = bytes * AlgBwFactor / time, busbw = algbw *
// BusBwFactor (the per-link traffic a bandwidth-optimal algorithm needs).
double AlgBwFactor(Coll coll, int nranks);
double BusBwFactor(Coll coll, int nranks);

}  // namespace conduit::perf

#endif  // CONDUIT_TOOLS_PERF_COLLECTIVE_H_
