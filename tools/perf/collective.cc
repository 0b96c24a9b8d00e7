#include "collective.h"

namespace conduit::perf {
namespace {

constexpr CollInfo kColls[] = {
    {"all_reduce", "all_reduce_perf", Coll::kAllReduce, true, false, true},
    {"all_gather", "all_gather_perf", Coll::kAllGather, false, false, true},
    {"broadcast", "broadcast_perf", Coll::kBroadcast, false, true, true},
    {"reduce", "reduce_perf", Coll::kReduce, true, true, true},
    {"reduce_scatter", "reduce_scatter_perf", Coll::kReduceScatter, true, false, true},
    {"alltoall", "alltoall_perf", Coll::kAllToAll, false, false, true},
    {"sendrecv", "sendrecv_perf", Coll::kSendRecv, false, false, false},
    {"gather", "gather_perf", Coll::kGather, false, true, true},
    {"scatter", "scatter_perf", Coll::kScatter, false, true, true},
    {"hypercube", "hypercube_perf", Coll::kHyperCube, false, false, true},
};

// Spellings from before conduit-perf took nccl-tests' names, so old scripts still run.
struct OldName {
  std::string_view old_name;
  std::string_view name;
};
constexpr OldName kOldNames[] = {
    {"allreduce", "all_reduce"},
    {"allgather", "all_gather"},
    {"reducescatter", "reduce_scatter"},
};

// The per-rank part of split ops: whole elements, then down to a multiple of 16
// bytes as nccl-tests does, so sizes (and rows) match its output.
size_t SplitCount(size_t bytes, size_t type_size, size_t n) {
  const size_t per_rank = bytes / type_size / n;
  const size_t align = type_size < 16 ? 16 / type_size : 1;
  return per_rank & ~(align - 1);
}

}  // namespace

const CollInfo* FindColl(std::string_view name) {
  for (const OldName& o : kOldNames) {
    if (name == o.old_name) name = o.name;
  }
  for (const CollInfo& c : kColls) {
    if (name == c.name || name == c.program) return &c;
  }
  return nullptr;
}

const CollInfo* CollForProgram(std::string_view argv0) {
  const size_t slash = argv0.rfind('/');
  const std::string_view base = slash == std::string_view::npos ? argv0 : argv0.substr(slash + 1);
  for (const CollInfo& c : kColls) {
    if (base == c.program) return &c;
  }
  return nullptr;
}

std::span<const CollInfo> AllColls() { return kColls; }

const CollInfo* DefaultColl() { return &kColls[0]; }

Shape ShapeFor(Coll coll, size_t bytes, size_t type_size, int nranks, int rank) {
  Shape s;
  const size_t n = static_cast<size_t>(nranks);
  const size_t r = static_cast<size_t>(rank);
  switch (coll) {
    case Coll::kAllReduce:
    case Coll::kBroadcast:
    case Coll::kReduce:
    case Coll::kSendRecv:
      s.count = bytes / type_size;
      s.send_elems = s.recv_elems = s.count;
      break;
    case Coll::kAllGather:
    case Coll::kGather:
    case Coll::kHyperCube:
      s.count = SplitCount(bytes, type_size, n);
      s.send_elems = s.count;
      s.recv_elems = s.count * n;
      s.in_offset = s.count * r;
      break;
    case Coll::kReduceScatter:
    case Coll::kScatter:
      s.count = SplitCount(bytes, type_size, n);
      s.send_elems = s.count * n;
      s.recv_elems = s.count;
      s.out_offset = s.count * r;
      break;
    case Coll::kAllToAll:
      s.count = SplitCount(bytes, type_size, n);
      s.send_elems = s.recv_elems = s.count * n;
      break;
  }
  s.bytes = (s.send_elems > s.recv_elems ? s.send_elems : s.recv_elems) * type_size;
  return s;
}

double AlgBwFactor(Coll coll, int nranks) {
  // hypercube's algbw counts what each rank receives from the others only.
  if (coll == Coll::kHyperCube) return static_cast<double>(nranks - 1) / nranks;
  return 1.0;
}

double BusBwFactor(Coll coll, int nranks) {
  const double n = nranks;
  switch (coll) {
    case Coll::kAllReduce: return 2.0 * (n - 1) / n;
    case Coll::kAllGather:
    case Coll::kReduceScatter:
    case Coll::kAllToAll:
    case Coll::kGather:
    case Coll::kScatter: return (n - 1) / n;
    case Coll::kBroadcast:
    case Coll::kReduce:
    case Coll::kSendRecv:
    case Coll::kHyperCube: return 1.0;
  }
  return 1.0;
}

}  // namespace conduit::perf
