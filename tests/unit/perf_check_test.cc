// conduit-perf's result checks (tools/perf/check.h) against a model of every
// collective: what a correct implementation outputs counts 0 wrong elements, and a
// single wrong or misplaced element is seen. Every type and operator of "-d all" and
// "-o all"; the real runs (perf_run_test) can only show the first half.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "check.h"

namespace conduit::perf {
namespace {

using Bytes = std::vector<unsigned char>;

struct World {
  Coll coll;
  const DtypeInfo* dtype;
  const RedOpInfo* op;
  int nranks;
  int root;
  size_t salt;

  CheckParams Params(int rank) const {
    return CheckParams{coll, dtype, op, root, rank, nranks, ShapeFor(coll, 1024, dtype->size, nranks, rank), salt};
  }
};

double Load(const World& w, const Bytes& b, size_t i) { return LoadElement(*w.dtype, b.data(), i); }

// The reduction NCCL computes, element by element, in double (the stored result is
// rounded to the type by StoreElement, as an implementation rounds its result).
double Reduce(const World& w, const std::vector<Bytes>& in, size_t i) {
  double acc = 0;
  for (int r = 0; r < w.nranks; ++r) {
    const double v = Load(w, in[static_cast<size_t>(r)], i) * (w.op->premul ? PreMulScalar(r) : 1.0);
    if (r == 0) acc = v;
    else if (w.op->op == ncclProd) acc *= v;
    else if (w.op->op == ncclMax) acc = std::max(acc, v);
    else if (w.op->op == ncclMin) acc = std::min(acc, v);
    else acc += v;
  }
  if (w.op->op == ncclAvg) {
    acc /= w.nranks;
    if (!w.dtype->is_float) acc = std::trunc(acc);
  }
  return acc;
}

// Each rank's output of a correct implementation, given every rank's input; ranks
// without an output (non-roots of reduce and gather) get an empty one.
std::vector<Bytes> Model(const World& w, const std::vector<Bytes>& in) {
  std::vector<Bytes> out(static_cast<size_t>(w.nranks));
  for (int r = 0; r < w.nranks; ++r) {
    const Shape s = w.Params(r).shape;
    const size_t count = s.count;
    Bytes& o = out[static_cast<size_t>(r)];
    if ((w.coll == Coll::kReduce || w.coll == Coll::kGather) && r != w.root) continue;
    o.assign(s.recv_elems * w.dtype->size, 0);
    for (size_t j = 0; j < s.recv_elems; ++j) {
      const size_t block = count ? j / count : 0, at = count ? j % count : 0;
      double v = 0;
      switch (w.coll) {
        case Coll::kAllReduce:
        case Coll::kReduce:
          v = Reduce(w, in, j);
          break;
        case Coll::kReduceScatter:
          v = Reduce(w, in, static_cast<size_t>(r) * count + j);
          break;
        case Coll::kAllGather:
        case Coll::kGather:
        case Coll::kHyperCube:
          v = Load(w, in[block], at);
          break;
        case Coll::kBroadcast:
          v = Load(w, in[static_cast<size_t>(w.root)], j);
          break;
        case Coll::kScatter:
          v = Load(w, in[static_cast<size_t>(w.root)], static_cast<size_t>(r) * count + j);
          break;
        case Coll::kAllToAll:
          v = Load(w, in[block], static_cast<size_t>(r) * count + at);
          break;
        case Coll::kSendRecv:
          v = Load(w, in[static_cast<size_t>((r + w.nranks - 1) % w.nranks)], j);
          break;
      }
      StoreElement(*w.dtype, o.data(), j, v);
    }
  }
  return out;
}

void CheckWorld(const World& w) {
  SCOPED_TRACE(std::string(w.dtype->name) + " " + w.op->name + " nranks " + std::to_string(w.nranks) + " root " +
               std::to_string(w.root) + " salt " + std::to_string(w.salt));
  std::vector<Bytes> in;
  for (int r = 0; r < w.nranks; ++r) {
    const CheckParams p = w.Params(r);
    in.emplace_back(p.shape.send_elems * w.dtype->size);
    FillInput(p, in.back().data());
  }
  std::vector<Bytes> out = Model(w, in);
  for (int r = 0; r < w.nranks; ++r) {
    Bytes& o = out[static_cast<size_t>(r)];
    const CheckParams p = w.Params(r);
    if (o.empty()) {
      EXPECT_EQ(CountWrong(p, nullptr), 0u);  // nothing to check on this rank
      continue;
    }
    ASSERT_GT(p.shape.recv_elems, 0u);
    EXPECT_EQ(CountWrong(p, o.data()), 0u) << "rank " << r;
    // One wrong element.
    const size_t k = p.shape.recv_elems / 2;
    const double v = LoadElement(*w.dtype, o.data(), k);
    StoreElement(*w.dtype, o.data(), k, v == 0 ? 3.0 : -v);
    EXPECT_EQ(CountWrong(p, o.data()), 1u) << "rank " << r;
    StoreElement(*w.dtype, o.data(), k, v);
    // One element never written (the runner poisons outputs with 0xff bytes).
    std::fill_n(o.begin() + static_cast<std::ptrdiff_t>(k * w.dtype->size), w.dtype->size, 0xff);
    EXPECT_EQ(CountWrong(p, o.data()), 1u) << "rank " << r;
  }
}

const Coll kAllCollectives[] = {Coll::kAllReduce,     Coll::kAllGather, Coll::kBroadcast, Coll::kReduce,
                                Coll::kReduceScatter, Coll::kAllToAll,  Coll::kSendRecv,  Coll::kGather,
                                Coll::kScatter,       Coll::kHyperCube};

TEST(PerfCheck, EveryCollectiveTypeAndOperator) {
  for (const Coll coll : kAllCollectives) {
    const CollInfo* info = nullptr;
    for (const CollInfo& c : AllColls()) {
      if (c.coll == coll) info = &c;
    }
    ASSERT_NE(info, nullptr);
    SCOPED_TRACE(info->name);
    for (const DtypeInfo& dtype : AllDtypes()) {
      for (const RedOpInfo& op : AllRedOps()) {
        if (!info->uses_redop && op.op != ncclSum) continue;
        if (!info->uses_redop && op.premul) continue;
        for (int nranks : {1, 2, 3, 4}) {
          if (coll == Coll::kHyperCube && (nranks & (nranks - 1)) != 0) continue;
          const int root = info->uses_root ? nranks - 1 : 0;
          for (size_t salt : {0, 1, 2}) CheckWorld(World{coll, &dtype, &op, nranks, root, salt});
        }
      }
    }
  }
}

// A block delivered to the wrong place is noticed, not only a wrong value.
TEST(PerfCheck, MisplacedBlocks) {
  for (const DtypeInfo& dtype : AllDtypes()) {
    SCOPED_TRACE(dtype.name);
    const World w{Coll::kAllGather, &dtype, FindRedOp("sum"), 3, 0, 0};
    std::vector<Bytes> in;
    for (int r = 0; r < w.nranks; ++r) {
      in.emplace_back(w.Params(r).shape.send_elems * dtype.size);
      FillInput(w.Params(r), in.back().data());
    }
    std::vector<Bytes> out = Model(w, in);
    const CheckParams p = w.Params(1);
    const size_t block = p.shape.count * dtype.size;
    Bytes& o = out[1];
    std::swap_ranges(o.begin(), o.begin() + static_cast<std::ptrdiff_t>(block),
                     o.begin() + static_cast<std::ptrdiff_t>(block));
    EXPECT_GT(CountWrong(p, o.data()), p.shape.count / 2);
  }
}

// -c N checks N different inputs.
TEST(PerfCheck, SaltChangesTheData) {
  const World a{Coll::kAllReduce, FindDtype("float"), FindRedOp("sum"), 2, 0, 1};
  World b = a;
  b.salt = 2;
  Bytes x(a.Params(0).shape.send_elems * 4), y(x.size());
  FillInput(a.Params(0), x.data());
  FillInput(b.Params(0), y.data());
  EXPECT_NE(x, y);
}

}  // namespace
}  // namespace conduit::perf
