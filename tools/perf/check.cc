#include "check.h"

#include <algorithm>
#include <cmath>

namespace conduit::perf {
namespace {

// Input of reductions: 1..5 for sum/max/min/avg (so a sum over n ranks stays far
// below every type's exact range), mostly ones with an occasional 2 for prod.
double ReduceInput(ncclRedOp_t op, int rank, size_t i) {
  const size_t r = static_cast<size_t>(rank);
  if (op == ncclProd) return (r + i) % 4 == 0 ? 2.0 : 1.0;
  return 1.0 + static_cast<double>((r * 3 + i) % 5);
}

// Input of data-movement ops: spread over the type's exact range so a block that
// lands at the wrong rank or offset is noticed. `key` identifies the source block.
double CopyInput(const DtypeInfo& dt, size_t key, size_t i) {
  return static_cast<double>((key * 131 + i * 7 + 1) % dt.exact_limit);
}

double Reduced(const CheckParams& p, size_t i) {
  double acc = ReduceInput(p.op, 0, i);
  for (int r = 1; r < p.nranks; ++r) {
    const double v = ReduceInput(p.op, r, i);
    switch (p.op) {
      case ncclProd: acc *= v; break;
      case ncclMax: acc = std::max(acc, v); break;
      case ncclMin: acc = std::min(acc, v); break;
      default: acc += v; break;  // sum, avg
    }
  }
  if (p.op == ncclAvg) {
    acc /= p.nranks;
    if (!p.dtype->is_float) acc = std::trunc(acc);  // integer avg divides the integer sum
  }
  return acc;
}

double Expected(const CheckParams& p, size_t j) {
  const size_t n = static_cast<size_t>(p.nranks);
  const size_t rank = static_cast<size_t>(p.rank);
  const size_t count = p.shape.count;
  switch (p.coll) {
    case Coll::kAllReduce:
    case Coll::kReduce: return Reduced(p, j);
    case Coll::kReduceScatter: return Reduced(p, rank * count + j);
    case Coll::kAllGather: return CopyInput(*p.dtype, j / count, j % count);
    case Coll::kBroadcast: return CopyInput(*p.dtype, static_cast<size_t>(p.root), j);
    case Coll::kAllToAll: return CopyInput(*p.dtype, (j / count) * n + rank, j % count);
    case Coll::kSendRecv: return CopyInput(*p.dtype, (rank + n - 1) % n, j);
  }
  return 0;
}

// Only avg can round; everything else must match exactly.
double Tolerance(const CheckParams& p) {
  if (p.op != ncclAvg || !p.dtype->is_float) return 0;
  switch (p.dtype->type) {
    case ncclFloat16:
    case ncclBfloat16: return 1e-2;
    case ncclFloat32: return 1e-5;
    default: return 1e-12;
  }
}

}  // namespace

void FillInput(const CheckParams& p, void* input) {
  const size_t n = static_cast<size_t>(p.nranks);
  const size_t rank = static_cast<size_t>(p.rank);
  const size_t count = p.shape.count;
  for (size_t j = 0; j < p.shape.send_elems; ++j) {
    double v;
    switch (p.coll) {
      case Coll::kAllReduce:
      case Coll::kReduce:
      case Coll::kReduceScatter: v = ReduceInput(p.op, p.rank, j); break;
      case Coll::kAllToAll: v = CopyInput(*p.dtype, rank * n + j / count, j % count); break;
      default: v = CopyInput(*p.dtype, rank, j); break;
    }
    StoreElement(*p.dtype, input, j, v);
  }
}

size_t CountWrong(const CheckParams& p, const void* output) {
  if (p.coll == Coll::kReduce && p.rank != p.root) return 0;
  const double tol = Tolerance(p);
  size_t wrong = 0;
  for (size_t j = 0; j < p.shape.recv_elems; ++j) {
    const double want = Expected(p, j);
    const double got = LoadElement(*p.dtype, output, j);
    // Written so that NaN counts as wrong.
    if (!(std::fabs(got - want) <= tol * std::max(1.0, std::fabs(want)))) ++wrong;
  }
  return wrong;
}

}  // namespace conduit::perf
