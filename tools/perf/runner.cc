#include "runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "check.h"
#include "issue.h"

namespace conduit::perf {
namespace {

constexpr size_t kMaxTypeSize = 8;

// Page-aligned like a real allocator's large blocks, so the shim can map or copy
// whole pages. Host memory on purpose: the checks read and write it from the CPU. With -R 1
// from ncclMemAlloc, as nccl-tests allocates registered buffers (on Conduit's host path
// that memory is shared with the daemon, which then needs no staging copies).
char* Allocate(size_t bytes, bool nccl_alloc) {
  void* p = nullptr;
  const size_t n = std::max<size_t>(bytes, 64);
  const bool ok = nccl_alloc ? ncclMemAlloc(&p, n) == ncclSuccess : posix_memalign(&p, 4096, n) == 0;
  if (!ok) {
    std::fprintf(stderr, "conduit-perf: cannot allocate %zu bytes%s\n", bytes, nccl_alloc ? " with ncclMemAlloc" : "");
    std::exit(3);
  }
  std::memset(p, 0, n);  // touch it now, not inside the first timed run
  return static_cast<char*>(p);
}

void Free(char* p, bool nccl_alloc) {
  if (nccl_alloc) {
    ncclMemFree(p);
  } else {
    std::free(p);
  }
}

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

Runner::Runner(const Options& o, std::span<const ncclComm_t> comms, std::span<const int> ranks, int nranks,
               Watchdog* watchdog, int watchdog_slot)
    : o_(o),
      comms_(comms.begin(), comms.end()),
      ranks_(ranks.begin(), ranks.end()),
      nranks_(nranks),
      watchdog_(watchdog),
      watchdog_slot_(watchdog_slot) {
  // Sized once for the largest row as nccl-tests does: no shape uses more than
  // max_bytes in either buffer, plus room for -u's shift of the widest type.
  const size_t bytes = o.max_bytes + kMaxTypeSize * static_cast<size_t>(o.unalign);
  for (ncclComm_t comm : comms_) {
    Buffers b;
    b.send = Allocate(bytes, o.local_register == 1);
    b.recv = Allocate(bytes, o.local_register == 1);
    buffer_bytes_ += 2 * bytes;
    if (o.local_register == 1) {
      Check(ncclCommRegister(comm, b.send, o.max_bytes, &b.send_handle), "ncclCommRegister");
      Check(ncclCommRegister(comm, b.recv, o.max_bytes, &b.recv_handle), "ncclCommRegister");
    } else if (o.local_register == 2) {
      ncclWindow_t w = nullptr;
      Check(ncclCommWindowRegister(comm, b.send, o.max_bytes, &w, NCCL_WIN_COLL_SYMMETRIC), "ncclCommWindowRegister");
      b.send_handle = w;
      Check(ncclCommWindowRegister(comm, b.recv, o.max_bytes, &w, NCCL_WIN_COLL_SYMMETRIC), "ncclCommWindowRegister");
      b.recv_handle = w;
    }
    buffers_.push_back(b);
  }
}

Runner::~Runner() {
  for (size_t i = 0; i < buffers_.size(); ++i) {
    Buffers& b = buffers_[i];
    if (o_.local_register == 1) {
      ncclCommDeregister(comms_[i], b.send_handle);
      ncclCommDeregister(comms_[i], b.recv_handle);
    } else if (o_.local_register == 2) {
      ncclCommWindowDeregister(comms_[i], static_cast<ncclWindow_t>(b.send_handle));
      ncclCommWindowDeregister(comms_[i], static_cast<ncclWindow_t>(b.recv_handle));
    }
    Free(b.send, o_.local_register == 1);
    Free(b.recv, o_.local_register == 1);
  }
}

void Runner::Check(ncclResult_t r, const char* what) {
  if (r == ncclSuccess) return;
  const char* detail = ncclGetLastError(nullptr);
  std::fprintf(stderr, "conduit-perf: %s failed: %s%s%s\n", what, ncclGetErrorString(r),
               detail != nullptr && *detail != '\0' ? ": " : "", detail != nullptr ? detail : "");
  std::exit(3);
}

Shape Runner::ShapeOf(size_t bytes, size_t local) const {
  return ShapeFor(o_.coll->coll, bytes, case_.dtype->size, nranks_, ranks_[local]);
}

char* Runner::SendOf(size_t local, const Shape& s, bool in_place) const {
  const size_t ts = case_.dtype->size;
  char* base = buffers_[local].send + static_cast<size_t>(o_.unalign) * ts;
  return in_place ? base + s.in_offset * ts : base;
}

char* Runner::RecvOf(size_t local, const Shape& s, bool in_place) const {
  const size_t ts = case_.dtype->size;
  if (in_place) return buffers_[local].send + static_cast<size_t>(o_.unalign) * ts + s.out_offset * ts;
  return buffers_[local].recv + static_cast<size_t>(o_.unalign) * ts;
}

void Runner::RunOnce(const std::vector<Shape>& shapes, bool in_place) {
  const size_t n = comms_.size();
  const int rounds = IssueRounds(o_.coll->coll, nranks_);
  WatchdogScope watch(watchdog_, watchdog_slot_);
  for (int round = 0; round < rounds; ++round) {
    // Several ranks in one thread must be issued as one group, or the first
    // blocking call would wait for peers that are never issued.
    if (n > 1) Check(ncclGroupStart(), "ncclGroupStart");
    for (size_t i = 0; i < n; ++i) {
      const IssueArgs a{o_.coll->coll, SendOf(i, shapes[i], in_place), RecvOf(i, shapes[i], in_place), &shapes[i],
                        case_.dtype->type, case_.dtype->size, ops_[i], case_.root, ranks_[i], nranks_, comms_[i]};
      Check(Issue(a, round), o_.coll->name);
    }
    if (n > 1) Check(ncclGroupEnd(), "ncclGroupEnd");
  }
}

void Runner::RunIteration(const std::vector<Shape>& shapes, bool in_place) {
  if (o_.agg_iters == 1) {
    RunOnce(shapes, in_place);
    if (o_.blocking == Blocking::kBarrier) Barrier();
    return;
  }
  WatchdogScope watch(watchdog_, watchdog_slot_);
  Check(ncclGroupStart(), "ncclGroupStart");
  for (int a = 0; a < o_.agg_iters; ++a) RunOnce(shapes, in_place);
  Check(ncclGroupEnd(), "ncclGroupEnd");
}

void Runner::ReadResults(const std::vector<Shape>& shapes, bool in_place) {
  // Words summed in independent lanes, so the loop runs at the speed of memory (or of the
  // cache the result is in), not of one addition chain.
  constexpr size_t kLanes = 8;
  uint64_t lanes[kLanes] = {};
  for (size_t i = 0; i < buffers_.size(); ++i) {
    const char* out = RecvOf(i, shapes[i], in_place);
    const size_t bytes = shapes[i].recv_elems * case_.dtype->size;
    const size_t words = bytes / sizeof(uint64_t);
    size_t w = 0;
    for (; w + kLanes <= words; w += kLanes) {
      for (size_t k = 0; k < kLanes; ++k) {
        uint64_t v;
        std::memcpy(&v, out + (w + k) * sizeof(v), sizeof(v));
        lanes[k] += v;
      }
    }
    for (size_t b = w * sizeof(uint64_t); b < bytes; ++b) lanes[0] += static_cast<unsigned char>(out[b]);
  }
  uint64_t sum = 0;
  for (uint64_t v : lanes) sum += v;
  result_sink_ = result_sink_ + sum;  // kept, so the reads are not optimized away
}

void Runner::Prepare(const std::vector<Shape>& shapes, bool in_place, bool poison_output, size_t salt) {
  const size_t ts = case_.dtype->size;
  for (size_t i = 0; i < buffers_.size(); ++i) {
    const Shape& s = shapes[i];
    // 0xff bytes decode to NaN or to values the patterns never produce, so an
    // output element the operation failed to write is counted as wrong.
    if (poison_output) {
      if (in_place) std::memset(SendOf(i, s, false), 0xff, std::max(s.send_elems, s.recv_elems) * ts);
      else std::memset(RecvOf(i, s, false), 0xff, s.recv_elems * ts);
    }
    const CheckParams p{o_.coll->coll, case_.dtype, case_.op, case_.root, ranks_[i], nranks_, s, salt};
    FillInput(p, SendOf(i, s, in_place));
  }
}

size_t Runner::CountWrongHere(const std::vector<Shape>& shapes, bool in_place, size_t salt) {
  size_t wrong = 0;
  for (size_t i = 0; i < buffers_.size(); ++i) {
    const CheckParams p{o_.coll->coll, case_.dtype, case_.op, case_.root, ranks_[i], nranks_, shapes[i], salt};
    wrong += CountWrong(p, RecvOf(i, shapes[i], in_place));
  }
  return wrong;
}

std::vector<double> Runner::Agree(std::vector<double> values, size_t count, ncclRedOp_t op) {
  const size_t n = comms_.size();
  WatchdogScope watch(watchdog_, watchdog_slot_);
  if (n > 1) Check(ncclGroupStart(), "ncclGroupStart");
  for (size_t i = 0; i < n; ++i) {
    double* v = values.data() + i * count;
    Check(ncclAllReduce(v, v, count, ncclFloat64, op, comms_[i], cudaStream_t{}), "ncclAllReduce (agreement)");
  }
  if (n > 1) Check(ncclGroupEnd(), "ncclGroupEnd");
  values.resize(count);
  return values;
}

double Runner::AgreeOne(double v, ncclRedOp_t op) { return Agree(std::vector<double>(comms_.size(), v), 1, op)[0]; }

void Runner::Barrier() { AgreeOne(0, ncclSum); }

double Runner::CombineTimes(double mine) {
  switch (o_.average) {
    case Average::kRank0: {
      // Only rank 0 contributes, so the sum is its time.
      std::vector<double> v(comms_.size(), 0.0);
      for (size_t i = 0; i < comms_.size(); ++i) {
        if (ranks_[i] == 0) v[i] = mine;
      }
      return Agree(std::move(v), 1, ncclSum)[0];
    }
    case Average::kMean: return AgreeOne(mine, ncclSum) / nranks_;
    case Average::kMin: return AgreeOne(mine, ncclMin);
    case Average::kMax: return AgreeOne(mine, ncclMax);
  }
  return mine;
}

IterStats Runner::Summarize(std::vector<double> times_s) {
  // Per iteration, the slowest rank's time (nccl-tests takes the maximum over GPUs,
  // threads and processes).
  const size_t iters = times_s.size();
  std::vector<double> all;
  for (size_t i = 0; i < comms_.size(); ++i) all.insert(all.end(), times_s.begin(), times_s.end());
  const std::vector<double> slowest = Agree(std::move(all), iters, ncclMax);
  IterStats st;
  for (double t : slowest) st.times_us.push_back(t * 1e6);
  const size_t skip = std::min(static_cast<size_t>(o_.per_iter_skip), iters - 1);
  std::vector<double> sorted(st.times_us.begin() + static_cast<std::ptrdiff_t>(skip), st.times_us.end());
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  // Nearest-rank percentiles, as nccl-tests computes them.
  const auto pct = [&](size_t p) { return sorted[std::min(n - 1, (n * p + 99) / 100 - 1)]; };
  double sum = 0;
  for (double t : sorted) sum += t;
  st.min_us = sorted.front();
  st.max_us = sorted.back();
  st.avg_us = sum / static_cast<double>(n);
  st.p50_us = pct(50);
  st.p95_us = pct(95);
  st.p99_us = pct(99);
  double var = 0;
  for (double t : sorted) var += (t - st.avg_us) * (t - st.avg_us);
  st.stdev_us = std::sqrt(var / static_cast<double>(n));
  return st;
}

void Runner::BeginCase(const Case& c) {
  case_ = c;
  ops_.assign(comms_.size(), c.op->op);
  if (c.op->premul) {
    for (size_t i = 0; i < comms_.size(); ++i) {
      alignas(8) unsigned char scalar[kMaxTypeSize] = {};
      StoreElement(*c.dtype, scalar, 0, PreMulScalar(ranks_[i]));
      Check(ncclRedOpCreatePreMulSum(&ops_[i], scalar, c.dtype->type, ncclScalarHostImmediate, comms_[i]),
            "ncclRedOpCreatePreMulSum");
    }
  }
  // Warm-up over every size, doubling, out of place (nccl-tests' TimeTest).
  for (size_t bytes = o_.min_bytes; bytes <= o_.max_bytes; bytes = bytes ? bytes * 2 : 1) {
    std::vector<Shape> shapes;
    for (size_t i = 0; i < comms_.size(); ++i) shapes.push_back(ShapeOf(bytes, i));
    for (int w = 0; w < o_.warmup_iters; ++w) RunOnce(shapes, false);
  }
}

void Runner::EndCase() {
  if (case_.op != nullptr && case_.op->premul) {
    for (size_t i = 0; i < comms_.size(); ++i) Check(ncclRedOpDestroy(ops_[i], comms_[i]), "ncclRedOpDestroy");
  }
  case_ = Case{};
}

Measurement Runner::Measure(size_t bytes, bool in_place) {
  std::vector<Shape> shapes;
  for (size_t i = 0; i < comms_.size(); ++i) shapes.push_back(ShapeOf(bytes, i));
  if (o_.check_iters > 0) Prepare(shapes, in_place, false, 0);

  // One untimed run, then a barrier so every rank starts the clock together. Its
  // time (slowest rank) sizes --time-budget's loop, identically on every rank.
  const double t_sync = Now();
  RunOnce(shapes, in_place);
  const double sync_s = AgreeOne(Now() - t_sync, ncclMax);
  int iters = o_.iters;
  if (o_.time_budget_s > 0) {
    const double per_iter = std::max(sync_s * o_.agg_iters, 1e-9);
    iters = static_cast<int>(std::clamp(std::floor(o_.time_budget_s / per_iter), 1.0, static_cast<double>(o_.iters)));
  }

  std::vector<double> per_iter;
  if (o_.per_iter_timing) per_iter.reserve(static_cast<size_t>(iters));
  double timed = 0;  // -z 3: only the operations, not the barriers between iterations
  const double t0 = Now();
  for (int it = 0; it < iters; ++it) {
    const double ti = Now();
    RunIteration(shapes, in_place);
    if (o_.read_result != 0) ReadResults(shapes, in_place);
    const double dt = Now() - ti;
    timed += dt;
    if (o_.per_iter_timing) per_iter.push_back(dt / o_.agg_iters);
    if (o_.blocking == Blocking::kOuterBarrier) Barrier();
  }
  const double total = o_.blocking == Blocking::kOuterBarrier ? timed : Now() - t0;

  Measurement m;
  m.iters = iters;
  m.time_us = CombineTimes(total / (static_cast<double>(iters) * o_.agg_iters)) * 1e6;
  if (o_.per_iter_timing) m.per_iter = Summarize(std::move(per_iter));

  // Checked on fresh runs: timed in-place iterations have reduced the data
  // repeatedly, and a stale correct output must not hide a broken last run.
  // nccl-tests reports no errors for in-place sendrecv (see CollInfo).
  m.checked = o_.check_iters > 0 && (!in_place || o_.coll->checks_in_place);
  for (int c = 0; m.checked && c < o_.check_iters; ++c) {
    const size_t salt = static_cast<size_t>(c) + 1;
    Prepare(shapes, in_place, true, salt);
    RunOnce(shapes, in_place);
    m.wrong = static_cast<size_t>(AgreeOne(static_cast<double>(CountWrongHere(shapes, in_place, salt)), ncclSum));
    if (m.wrong > 0) break;
  }
  return m;
}

}  // namespace conduit::perf
