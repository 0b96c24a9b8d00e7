#include "check.h"

#include <algorithm>
#include <cmath>

namespace conduit::perf {
namespace {

// How many distinct reduction inputs (1..k) keep every partial result below the
// type's exact limit for this many ranks: at most 5, at least 1.
size_t InputSpan(const CheckParams& p) {
  const double scale = p.op->premul ? 2.0 : 1.0;  // PreMulScalar is at most 2
  const double room = static_cast<double>(p.dtype->exact_limit - 1) / (scale * p.nranks);
  return static_cast<size_t>(std::clamp(room, 1.0, 5.0));
}

// Input of reductions: 1..k for sum/max/min/avg/mulsum, mostly ones with an
// occasional 2 for prod (a product over n ranks stays a small power of two).
double ReduceInput(const CheckParams& p, int rank, size_t i) {
  const size_t r = static_cast<size_t>(rank);
  if (p.op->op == ncclProd && !p.op->premul) return (r + i + p.salt) % 4 == 0 ? 2.0 : 1.0;
  return 1.0 + static_cast<double>((r * 3 + i + p.salt) % InputSpan(p));
}

// Input of data-movement ops: spread over the type's exact range so a block that
// lands at the wrong rank or offset is noticed. `key` identifies the source block.
double CopyInput(const CheckParams& p, size_t key, size_t i) {
  return static_cast<double>((key * 131 + i * 7 + 1 + p.salt * 17) % p.dtype->exact_limit);
}

double Reduced(const CheckParams& p, size_t i) {
  const auto input = [&](int r) { return ReduceInput(p, r, i) * (p.op->premul ? PreMulScalar(r) : 1.0); };
  double acc = input(0);
  for (int r = 1; r < p.nranks; ++r) {
    const double v = input(r);
    switch (p.op->op) {
      case ncclProd: acc *= v; break;
      case ncclMax: acc = std::max(acc, v); break;
      case ncclMin: acc = std::min(acc, v); break;
      default: acc += v; break;  // sum, avg, mulsum
    }
  }
  if (p.op->op == ncclAvg) {
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
    case Coll::kAllGather:
    case Coll::kGather:
    case Coll::kHyperCube: return CopyInput(p, j / count, j % count);
    case Coll::kBroadcast: return CopyInput(p, static_cast<size_t>(p.root), j);
    case Coll::kScatter: return CopyInput(p, rank, j);
    case Coll::kAllToAll: return CopyInput(p, (j / count) * n + rank, j % count);
    case Coll::kSendRecv: return CopyInput(p, (rank + n - 1) % n, j);
  }
  return 0;
}

// Only avg can round; everything else must match exactly.
double Tolerance(const CheckParams& p) {
  if (p.op->op != ncclAvg || !p.dtype->is_float) return 0;
  switch (p.dtype->type) {
    case ncclFloat8e5m2: return 0.25;
    case ncclFloat8e4m3: return 0.125;
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
      case Coll::kReduceScatter: v = ReduceInput(p, p.rank, j); break;
      case Coll::kAllToAll: v = CopyInput(p, rank * n + j / count, j % count); break;
      case Coll::kScatter: v = CopyInput(p, j / count, j % count); break;  // block k goes to rank k
      default: v = CopyInput(p, rank, j); break;
    }
    StoreElement(*p.dtype, input, j, v);
  }
}

size_t CountWrong(const CheckParams& p, const void* output) {
  if ((p.coll == Coll::kReduce || p.coll == Coll::kGather) && p.rank != p.root) return 0;
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
