#include "runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "check.h"

namespace conduit::perf {
namespace {

// Page-aligned like a real allocator's large blocks, so the shim can map or copy
// whole pages.
char* Allocate(size_t bytes) {
  void* p = nullptr;
  if (posix_memalign(&p, 4096, std::max<size_t>(bytes, 64)) != 0) {
    std::fprintf(stderr, "conduit-perf: cannot allocate %zu bytes\n", bytes);
    std::exit(3);
  }
  return static_cast<char*>(p);
}

void Check(ncclResult_t r, const char* what) {
  if (r == ncclSuccess) return;
  std::fprintf(stderr, "conduit-perf: %s failed: %s\n", what, ncclGetErrorString(r));
  std::exit(3);
}

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

Runner::Runner(const Options& o, LocalRanks& ranks) : o_(o), ranks_(ranks) {
  const size_t ts = o.dtype->size;
  for (size_t i = 0; i < ranks_.comms.size(); ++i) {
    // Buffers are sized once for the largest row, as nccl-tests does; the send
    // buffer doubles as the in-place buffer, so it is the larger of the two.
    const Shape s = ShapeOf(o.max_bytes, i);
    Buffers b;
    b.send = Allocate(std::max(s.send_elems, s.recv_elems) * ts);
    b.recv = Allocate(s.recv_elems * ts);
    buffers_.push_back(b);
  }
  scratch_.resize(ranks_.comms.size());
}

Runner::~Runner() {
  for (Buffers& b : buffers_) {
    std::free(b.send);
    std::free(b.recv);
  }
}

Shape Runner::ShapeOf(size_t bytes, size_t local) const {
  return ShapeFor(o_.coll->coll, bytes, o_.dtype->size, ranks_.nranks, ranks_.ranks[local]);
}

void Runner::RunAll(const std::vector<Shape>& shapes, bool in_place) {
  const size_t ts = o_.dtype->size;
  const size_t n = ranks_.comms.size();
  // Several ranks in one thread must be issued as one group, or the first blocking
  // call would wait for peers that are never issued.
  if (n > 1) Check(ncclGroupStart(), "ncclGroupStart");
  for (size_t i = 0; i < n; ++i) {
    const Shape& s = shapes[i];
    const Buffers& b = buffers_[i];
    const void* send = in_place ? b.send + s.in_offset * ts : b.send;
    void* recv = in_place ? b.send + s.out_offset * ts : b.recv;
    Check(Issue(o_.coll->coll, send, recv, s, o_.dtype->type, ts, o_.op, o_.root, ranks_.ranks[i], ranks_.nranks,
                ranks_.comms[i], cudaStream_t{}),
          o_.coll->name);
  }
  if (n > 1) Check(ncclGroupEnd(), "ncclGroupEnd");
}

void Runner::Prepare(const std::vector<Shape>& shapes, bool in_place, bool poison_output) {
  const size_t ts = o_.dtype->size;
  for (size_t i = 0; i < buffers_.size(); ++i) {
    const Shape& s = shapes[i];
    Buffers& b = buffers_[i];
    // 0xff bytes decode to NaN or to values the patterns never produce, so an
    // output element the operation failed to write is counted as wrong.
    if (poison_output) {
      if (in_place) std::memset(b.send, 0xff, std::max(s.send_elems, s.recv_elems) * ts);
      else std::memset(b.recv, 0xff, s.recv_elems * ts);
    }
    CheckParams p{o_.coll->coll, o_.dtype, o_.op, o_.root, ranks_.ranks[i], ranks_.nranks, s};
    FillInput(p, in_place ? b.send + s.in_offset * ts : b.send);
  }
}

double Runner::Agree(const std::vector<double>& per_local, ncclRedOp_t op) {
  const size_t n = ranks_.comms.size();
  scratch_ = per_local;
  if (n > 1) Check(ncclGroupStart(), "ncclGroupStart");
  for (size_t i = 0; i < n; ++i) {
    Check(ncclAllReduce(&scratch_[i], &scratch_[i], 1, ncclFloat64, op, ranks_.comms[i], cudaStream_t{}),
          "ncclAllReduce (agreement)");
  }
  if (n > 1) Check(ncclGroupEnd(), "ncclGroupEnd");
  return scratch_[0];
}

double Runner::AgreeMax(double v) { return Agree(std::vector<double>(ranks_.comms.size(), v), ncclMax); }

Measurement Runner::Measure(size_t bytes, bool in_place) {
  std::vector<Shape> shapes;
  for (size_t i = 0; i < ranks_.comms.size(); ++i) shapes.push_back(ShapeOf(bytes, i));
  Prepare(shapes, in_place, false);

  // Warmup doubles as the speed probe for the budget. It stops early once it has
  // used a third of the budget, decided on the agreed (max) elapsed time so every
  // rank leaves the loop after the same iteration.
  int iters = o_.iters;
  if (o_.warmup > 0) {
    const double t0 = Now();
    int done = 0;
    double elapsed = 0;
    while (done < o_.warmup) {
      RunAll(shapes, in_place);
      ++done;
      elapsed = Now() - t0;
      if (o_.budget_s > 0 && AgreeMax(elapsed) > o_.budget_s / 3) break;
    }
    if (o_.budget_s > 0) {
      const double per_iter = AgreeMax(elapsed / done);
      const double fit = std::floor(o_.budget_s / std::max(per_iter, 1e-9));
      iters = static_cast<int>(std::clamp(fit, 1.0, static_cast<double>(o_.iters)));
    }
  }

  const double t0 = Now();
  for (int i = 0; i < iters; ++i) RunAll(shapes, in_place);
  const double mine = (Now() - t0) / iters;
  Measurement m;
  m.iters = iters;
  m.time_us = AgreeMax(mine) * 1e6;

  // Checked on a fresh run: timed in-place iterations have reduced the data
  // repeatedly, and a stale correct output must not hide a broken last run.
  if (o_.check) {
    Prepare(shapes, in_place, true);
    RunAll(shapes, in_place);
    const size_t ts = o_.dtype->size;
    std::vector<double> wrong(buffers_.size());
    for (size_t i = 0; i < buffers_.size(); ++i) {
      const Shape& s = shapes[i];
      const char* out = in_place ? buffers_[i].send + s.out_offset * ts : buffers_[i].recv;
      CheckParams p{o_.coll->coll, o_.dtype, o_.op, o_.root, ranks_.ranks[i], ranks_.nranks, s};
      wrong[i] = static_cast<double>(CountWrong(p, out));
    }
    m.wrong = static_cast<size_t>(Agree(wrong, ncclSum));
  }
  return m;
}

}  // namespace conduit::perf
