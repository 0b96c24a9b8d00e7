#include "coll_cases.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "coll_dtype.h"
#include "coll_nccl_util.h"

namespace conduit::it {
namespace {

constexpr unsigned char kSentinel = 0xCD;  // decodes to no value the inputs can produce
constexpr size_t kMaxPrintedMismatches = 5;

bool IsReducing(const std::string& coll) { return coll == "allreduce" || coll == "reduce" || coll == "reducescatter"; }
bool IsRooted(const std::string& coll) {
  return coll == "broadcast" || coll == "reduce" || coll == "gather" || coll == "scatter";
}
// NCCL defines no in-place form for all-to-all exchanges.
bool HasInPlace(const std::string& coll) {
  return coll != "alltoall" && coll != "sendrecv" && coll != "backlog" && coll != "replace";
}

ncclRedOp_t BuiltinOp(Op op) {
  switch (op) {
    case Op::kSum:
      return ncclSum;
    case Op::kProd:
      return ncclProd;
    case Op::kMax:
      return ncclMax;
    case Op::kMin:
      return ncclMin;
    case Op::kAvg:
      return ncclAvg;
    case Op::kPreMulSum:
      break;
  }
  return ncclSum;
}

}  // namespace

CaseRunner::CaseRunner(ncclComm_t comm, int rank, int nranks, const Options& opt)
    : comm_(comm), rank_(rank), nranks_(nranks), opt_(opt) {}

bool CaseRunner::Call(const std::string& what, ncclResult_t r) {
  r = Settle(comm_, r);
  if (r == ncclSuccess) return true;
  std::printf("FAIL rank %d: %s returned %s (%s): last error: %s\n", rank_, what.c_str(), ResultName(r),
              ncclGetErrorString(r), ncclGetLastError(comm_));
  ++result_.failed;
  result_.aborted = true;
  return false;
}

void CaseRunner::Check(const std::string& desc, const Pattern& p, const unsigned char* buf, size_t n,
                       const ExpectFn& want) {
  size_t es = p.type().size;
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    Expect e = want(i);
    if (p.Matches(buf + i * es, e)) continue;
    if (bad < kMaxPrintedMismatches) {
      std::printf("FAIL rank %d: %s: element %zu: got %s, want %s\n", rank_, desc.c_str(), i,
                  p.Got(buf + i * es).c_str(), p.Want(e).c_str());
    }
    ++bad;
  }
  if (bad == 0) {
    ++result_.passed;
    if (opt_.verbose) std::printf("ok rank %d: %s\n", rank_, desc.c_str());
    return;
  }
  std::printf("FAIL rank %d: %s: %zu of %zu elements wrong\n", rank_, desc.c_str(), bad, n);
  ++result_.failed;
}

CaseRunner::Buffer::Buffer(size_t bytes, unsigned char fill, bool nccl_alloc) : nccl_alloc_(nccl_alloc) {
  void* p = nullptr;
  if (nccl_alloc) {
    if (ncclMemAlloc(&p, bytes) != ncclSuccess) p = nullptr;
  } else {
    p = std::malloc(bytes);
  }
  if (p == nullptr) {
    std::fprintf(stderr, "coll_check: cannot allocate %zu bytes%s\n", bytes, nccl_alloc ? " with ncclMemAlloc" : "");
    std::exit(2);
  }
  data_ = static_cast<unsigned char*>(p);
  std::memset(data_, fill, bytes);
}

CaseRunner::Buffer::~Buffer() {
  if (data_ == nullptr) return;
  if (nccl_alloc_) {
    ncclMemFree(data_);
  } else {
    std::free(data_);
  }
}

CaseRunner::Buffer CaseRunner::Alloc(const Pattern& p, size_t elems) const {
  // Never empty, so count-0 calls still get a valid pointer.
  return Buffer(elems * p.type().size + 1, kSentinel, opt_.mem_alloc);
}

std::vector<int> CaseRunner::Roots() const {
  std::vector<int> roots;
  if (opt_.all_roots) {
    for (int r = 0; r < nranks_; ++r) roots.push_back(r);
  } else {
    roots.push_back(0);
    if (nranks_ > 1) roots.push_back(nranks_ - 1);
  }
  return roots;
}

// With --seconds, whether to run another round: every rank must stop after the same one,
// so the ranks all-reduce (max) whether their own time is up.
bool CaseRunner::AnotherRound(std::chrono::steady_clock::time_point start) {
  int32_t up = std::chrono::steady_clock::now() - start >= std::chrono::seconds(opt_.seconds) ||
                       (!opt_.stop_file.empty() && access(opt_.stop_file.c_str(), F_OK) == 0)
                   ? 1
                   : 0;
  int32_t any = 0;
  if (!Call("ncclAllReduce(stop vote)", Settle(comm_, ncclAllReduce(&up, &any, 1, ncclInt32, ncclMax, comm_, NoStream())))) {
    return false;
  }
  return any == 0;
}

void CaseRunner::RunAll() {
  CheckIdentity("after init");
  const auto start = std::chrono::steady_clock::now();
  for (int it = 0; (it < opt_.iters || (opt_.seconds > 0 && AnotherRound(start))) && !result_.aborted; ++it) {
    for (const std::string& coll : opt_.colls) {
      if (coll == "split") {
        Split();
        continue;
      }
      std::vector<Op> ops = IsReducing(coll) ? opt_.ops : std::vector<Op>{Op::kSum};
      for (ncclDataType_t type : opt_.types) {
        for (Op op : ops) {
          for (const SizeSpec& size : opt_.sizes) {
            size_t count = size.Elements(GetTypeInfo(type).size);
            if (opt_.outofplace || !HasInPlace(coll)) RunColl(coll, type, op, count, false);
            if (opt_.inplace && HasInPlace(coll)) RunColl(coll, type, op, count, true);
            if (result_.aborted) return;
          }
        }
      }
    }
  }
  CheckIdentity("at the end");
}

void CaseRunner::CheckIdentity(const char* when) {
  int count = -1, rank = -1, dev = -1;
  ncclResult_t async = ncclInternalError;
  if (!Call("ncclCommCount", ncclCommCount(comm_, &count)) ||
      !Call("ncclCommUserRank", ncclCommUserRank(comm_, &rank)) ||
      !Call("ncclCommCuDevice", ncclCommCuDevice(comm_, &dev)) ||
      !Call("ncclCommGetAsyncError", ncclCommGetAsyncError(comm_, &async)))
    return;
  if (count != nranks_ || rank != rank_ || async != ncclSuccess) {
    std::printf("FAIL rank %d: identity %s: count %d (want %d) rank %d (want %d) async error %s (want ncclSuccess)\n",
                rank_, when, count, nranks_, rank, rank_, ResultName(async));
    ++result_.failed;
    return;
  }
  ++result_.passed;
}

void CaseRunner::RunColl(const std::string& coll, ncclDataType_t type, Op op, size_t count, bool inplace) {
  const TypeInfo& t = GetTypeInfo(type);
  Pattern p(t, op, NextCaseSeed(), nranks_);
  char head[160];
  std::snprintf(head, sizeof head, "%s type=%s%s%s count=%zu %s", coll.c_str(), t.name, IsReducing(coll) ? " op=" : "",
                IsReducing(coll) ? OpName(op) : "", count, inplace ? "in-place" : "out-of-place");
  std::string desc = head;

  ncclRedOp_t redop = BuiltinOp(op);
  bool custom = IsReducing(coll) && op == Op::kPreMulSum;
  if (custom && premul_cases_++ % 2 == 0) {
    // The scalar is read before the call returns (host immediate), so a stack copy is fine.
    unsigned char scalar[8] = {};
    StoreValue(t, scalar, p.Scalar(rank_));
    if (!Call(desc + ": ncclRedOpCreatePreMulSum",
              ncclRedOpCreatePreMulSum(&redop, scalar, type, ncclScalarHostImmediate, comm_)))
      return;
  } else if (custom) {
    // By pointer: NCCL reads such a factor when the op runs, so it may change until then.
    std::memset(premul_factor_, 0, sizeof(premul_factor_));
    if (!Call(desc + ": ncclRedOpCreatePreMulSum (ncclScalarDevice)",
              ncclRedOpCreatePreMulSum(&redop, premul_factor_, type, ncclScalarDevice, comm_)))
      return;
    StoreValue(t, premul_factor_, p.Scalar(rank_));
    desc += " factor-by-pointer";
  }
  if (coll == "allreduce") AllReduce(p, desc, redop, count, inplace);
  if (coll == "reducescatter") ReduceScatter(p, desc, redop, count, inplace);
  if (coll == "allgather") AllGather(p, desc, count, inplace);
  if (coll == "alltoall") AllToAll(p, desc, count);
  if (coll == "sendrecv") {
    SendRecvRing(p, desc + " ring", count, /*one_buffer=*/false);
    if (!result_.aborted) SendRecvAllPairs(p, desc + " all-pairs", count);
  }
  if (coll == "backlog") Backlog(p, desc, count);
  if (coll == "replace") SendRecvRing(p, desc, count, /*one_buffer=*/true);
  if (IsRooted(coll)) {
    for (int root : Roots()) {
      if (result_.aborted) break;
      std::string d = desc + " root=" + std::to_string(root);
      if (coll == "broadcast") Broadcast(p, d, root, count, inplace);
      if (coll == "reduce") Reduce(p, d, redop, root, count, inplace);
      if (coll == "gather") Gather(p, d, root, count, inplace);
      if (coll == "scatter") Scatter(p, d, root, count, inplace);
    }
  }
  if (custom && !result_.aborted) Call(desc + ": ncclRedOpDestroy", ncclRedOpDestroy(redop, comm_));
}

void CaseRunner::AllReduce(const Pattern& p, const std::string& d, ncclRedOp_t op, size_t n, bool inplace) {
  Buffer send = Alloc(p, n), recv = Alloc(p, n);
  p.Fill(send.data(), rank_, 0, n);
  unsigned char* out = inplace ? send.data() : recv.data();
  if (!Call(d, ncclAllReduce(send.data(), out, n, p.type().type, op, comm_, NoStream()))) return;
  Check(d, p, out, n, [&](size_t i) { return p.Reduce(i); });
}

void CaseRunner::Broadcast(const Pattern& p, const std::string& d, int root, size_t n, bool inplace) {
  Buffer send = Alloc(p, n), recv = Alloc(p, n);
  if (rank_ == root) p.Fill(send.data(), rank_, 0, n);
  unsigned char* out = inplace ? send.data() : recv.data();
  if (!Call(d, ncclBroadcast(send.data(), out, n, p.type().type, root, comm_, NoStream()))) return;
  Check(d, p, out, n, [&](size_t i) { return p.Copy(root, i); });
}

void CaseRunner::Reduce(const Pattern& p, const std::string& d, ncclRedOp_t op, int root, size_t n, bool inplace) {
  Buffer send = Alloc(p, n), recv = Alloc(p, n);
  p.Fill(send.data(), rank_, 0, n);
  unsigned char* out = inplace ? send.data() : recv.data();
  if (!Call(d, ncclReduce(send.data(), out, n, p.type().type, op, root, comm_, NoStream()))) return;
  if (rank_ != root) {
    ++result_.passed;  // only the root's recvbuff is defined
    return;
  }
  Check(d, p, out, n, [&](size_t i) { return p.Reduce(i); });
}

void CaseRunner::AllGather(const Pattern& p, const std::string& d, size_t n, bool inplace) {
  size_t es = p.type().size;
  Buffer send = Alloc(p, n), recv = Alloc(p, n * nranks_);
  unsigned char* in = inplace ? recv.data() + rank_ * n * es : send.data();
  p.Fill(in, rank_, 0, n);
  if (!Call(d, ncclAllGather(in, recv.data(), n, p.type().type, comm_, NoStream()))) return;
  Check(d, p, recv.data(), n * nranks_, [&](size_t i) { return p.Copy(static_cast<int>(i / n), i % n); });
}

void CaseRunner::ReduceScatter(const Pattern& p, const std::string& d, ncclRedOp_t op, size_t n, bool inplace) {
  size_t es = p.type().size;
  Buffer send = Alloc(p, n * nranks_), recv = Alloc(p, n);
  p.Fill(send.data(), rank_, 0, n * nranks_);
  unsigned char* out = inplace ? send.data() + rank_ * n * es : recv.data();
  if (!Call(d, ncclReduceScatter(send.data(), out, n, p.type().type, op, comm_, NoStream()))) return;
  Check(d, p, out, n, [&](size_t i) { return p.Reduce(rank_ * n + i); });
}

void CaseRunner::AllToAll(const Pattern& p, const std::string& d, size_t n) {
  Buffer send = Alloc(p, n * nranks_), recv = Alloc(p, n * nranks_);
  p.Fill(send.data(), rank_, 0, n * nranks_);
  if (!Call(d, ncclAlltoAll(send.data(), recv.data(), n, p.type().type, comm_, NoStream()))) return;
  Check(d, p, recv.data(), n * nranks_, [&](size_t i) { return p.Copy(static_cast<int>(i / n), rank_ * n + i % n); });
}

// With `one_buffer` each rank receives into the very buffer it sends from (as
// MPI_Sendrecv_replace): what a rank sends is what its buffer held when the group began,
// whatever order the daemon reads and writes it in.
void CaseRunner::SendRecvRing(const Pattern& p, const std::string& d, size_t n, bool one_buffer) {
  Buffer send = Alloc(p, n), recv = Alloc(p, one_buffer ? 0 : n);
  unsigned char* into = one_buffer ? send.data() : recv.data();
  p.Fill(send.data(), rank_, 0, n);
  int next = (rank_ + 1) % nranks_, prev = (rank_ + nranks_ - 1) % nranks_;
  ncclDataType_t dt = p.type().type;
  if (!Call(d + ": ncclGroupStart", ncclGroupStart())) return;
  ncclResult_t s = ncclSend(send.data(), n, dt, next, comm_, NoStream());
  ncclResult_t r = ncclRecv(into, n, dt, prev, comm_, NoStream());
  ncclResult_t e = ncclGroupEnd();
  if (!Call(d + ": ncclSend", s) || !Call(d + ": ncclRecv", r) || !Call(d + ": ncclGroupEnd", e)) return;
  Check(d, p, into, n, [&](size_t i) { return p.Copy(prev, i); });
}

void CaseRunner::SendRecvAllPairs(const Pattern& p, const std::string& d, size_t n) {
  size_t es = p.type().size;
  Buffer send = Alloc(p, n * nranks_), recv = Alloc(p, n * nranks_);
  p.Fill(send.data(), rank_, 0, n * nranks_);
  ncclDataType_t dt = p.type().type;
  if (!Call(d + ": ncclGroupStart", ncclGroupStart())) return;
  ncclResult_t first_err = ncclSuccess;
  for (int peer = 0; peer < nranks_; ++peer) {
    ncclResult_t s = ncclSend(send.data() + peer * n * es, n, dt, peer, comm_, NoStream());
    ncclResult_t r = ncclRecv(recv.data() + peer * n * es, n, dt, peer, comm_, NoStream());
    if (first_err == ncclSuccess) first_err = s != ncclSuccess ? s : r;
  }
  ncclResult_t e = ncclGroupEnd();
  if (!Call(d + ": ncclSend/ncclRecv", first_err) || !Call(d + ": ncclGroupEnd", e)) return;
  Check(d, p, recv.data(), n * nranks_, [&](size_t i) { return p.Copy(static_cast<int>(i / n), rank_ * n + i % n); });
}

// Sends that run ahead of their receives: rank 0 sends the last rank K messages while that
// rank waits (its daemon keeps them up to --p2p-queue-bytes, and further sends wait), then
// it receives them in order (or the first J) and checks each.
void CaseRunner::Backlog(const Pattern& p, const std::string& d, size_t n) {
  const int last = nranks_ - 1, k = opt_.messages;
  ncclDataType_t dt = p.type().type;
  if (rank_ == 0 && last != 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(opt_.send_hold_ms));
    Buffer send = Alloc(p, n);
    for (int i = 0; i < k; ++i) {
      p.Fill(send.data(), 0, static_cast<size_t>(i) * n, n);
      if (!Call(d + ": ncclSend " + std::to_string(i), ncclSend(send.data(), n, dt, last, comm_, NoStream()))) return;
    }
    ++result_.passed;
  } else if (rank_ == last && last != 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(opt_.hold_ms));
    Buffer recv = Alloc(p, n);
    const int receives = opt_.receives < 0 ? k : std::min(k, opt_.receives);
    for (int i = 0; i < receives; ++i) {
      const std::string what = d + " message " + std::to_string(i);
      if (!Call(what + ": ncclRecv", ncclRecv(recv.data(), n, dt, 0, comm_, NoStream()))) return;
      Check(what, p, recv.data(), n, [&](size_t e) { return p.Copy(0, static_cast<size_t>(i) * n + e); });
    }
  } else {
    ++result_.passed;
  }
}

void CaseRunner::Gather(const Pattern& p, const std::string& d, int root, size_t n, bool inplace) {
  size_t es = p.type().size;
  Buffer send = Alloc(p, n), recv = Alloc(p, n * nranks_);
  // In place only means something at the root: its contribution already sits in recvbuff.
  unsigned char* in = inplace && rank_ == root ? recv.data() + root * n * es : send.data();
  p.Fill(in, rank_, 0, n);
  if (!Call(d, ncclGather(in, recv.data(), n, p.type().type, root, comm_, NoStream()))) return;
  if (rank_ != root) {
    ++result_.passed;
    return;
  }
  Check(d, p, recv.data(), n * nranks_, [&](size_t i) { return p.Copy(static_cast<int>(i / n), i % n); });
}

void CaseRunner::Scatter(const Pattern& p, const std::string& d, int root, size_t n, bool inplace) {
  size_t es = p.type().size;
  Buffer send = Alloc(p, n * nranks_), recv = Alloc(p, n);
  if (rank_ == root) p.Fill(send.data(), root, 0, n * nranks_);
  unsigned char* out = inplace && rank_ == root ? send.data() + root * n * es : recv.data();
  if (!Call(d, ncclScatter(send.data(), out, n, p.type().type, root, comm_, NoStream()))) return;
  Check(d, p, out, n, [&](size_t i) { return p.Copy(root, rank_ * n + i); });
}

void CaseRunner::Split() {
  int color = rank_ % 2;
  int want_count = (nranks_ + 1 - color) / 2;
  ncclComm_t child = nullptr;
  if (!Call("ncclCommSplit", ncclCommSplit(comm_, color, rank_, &child, nullptr))) return;
  // A non-blocking parent makes a non-blocking child; wait for the child itself too.
  ncclResult_t ready = Settle(child, ncclInProgress);
  if (!Call("ncclCommSplit (child ready)", ready)) return;
  int count = -1, rank = -1;
  ncclCommCount(child, &count);
  ncclCommUserRank(child, &rank);
  char desc[128];
  std::snprintf(desc, sizeof desc, "split color=%d child allreduce type=int32 op=sum count=1000", color);
  if (count != want_count || rank != rank_ / 2) {
    std::printf("FAIL rank %d: split color=%d: child count %d (want %d) rank %d (want %d)\n", rank_, color, count,
                want_count, rank, rank_ / 2);
    ++result_.failed;
  } else {
    // Seeded by color: a child that mixed the two groups would reduce the wrong inputs.
    Pattern p(GetTypeInfo(ncclInt32), Op::kSum, Mix(NextCaseSeed(), color), want_count);
    const size_t n = 1000;
    Buffer send = Alloc(p, n), recv = Alloc(p, n);
    p.Fill(send.data(), rank, 0, n);
    ncclResult_t r = Settle(child, ncclAllReduce(send.data(), recv.data(), n, ncclInt32, ncclSum, child, NoStream()));
    if (r != ncclSuccess) {
      std::printf("FAIL rank %d: %s returned %s: %s\n", rank_, desc, ResultName(r), ncclGetLastError(child));
      ++result_.failed;
    } else {
      Check(desc, p, recv.data(), n, [&](size_t i) { return p.Reduce(i); });
    }
  }
  ncclResult_t fin = Settle(child, ncclCommFinalize(child));
  ncclResult_t des = ncclCommDestroy(child);
  if (fin != ncclSuccess || des != ncclSuccess) {
    std::printf("FAIL rank %d: child finalize %s destroy %s\n", rank_, ResultName(fin), ResultName(des));
    ++result_.failed;
  }
}

}  // namespace conduit::it
