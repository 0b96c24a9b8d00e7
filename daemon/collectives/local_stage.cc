#include "collectives/local_stage.h"

#include <poll.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include "common/stream_copy.h"
#include "reduce/reduce.h"

namespace conduit {
namespace {

// Grain of local combining: big enough that per-chunk bookkeeping is noise, small enough
// that the first bytes reach the network early.
constexpr size_t kCombineChunkBytes = 512 * 1024;
// How often a wait for streamed input looks at aborts and at the program's connection.
constexpr int kWaitSliceMs = 100;
// How far past what it reads the daemon asks a shim for streamed input: the shim copies as
// asked, and this much lead hides its wake-up and copy.
constexpr size_t kReadAheadBytes = 4 << 20;

bool IsReduction(uint8_t kind) {
  return kind == shimproto::kAllReduce || kind == shimproto::kReduce || kind == shimproto::kReduceScatter;
}

ncclRedOp_t CombineOp(uint8_t redop) {
  if (redop == shimproto::kRedOpPreMulSum || redop == ncclAvg) return ncclSum;
  return static_cast<ncclRedOp_t>(redop);
}

}  // namespace

LocalStage::LocalStage(std::vector<StageRank> ranks, int nranks, Deadline deadline, std::function<Status()> failed,
                       MemoryTraffic* traffic, WorkPool* work_pool, const SharedOutput* shared)
    : ranks_(std::move(ranks)),
      nranks_(nranks),
      deadline_(deadline),
      failed_(std::move(failed)),
      traffic_(traffic),
      kind_(ranks_[0].op.kind),
      type_(static_cast<ncclDataType_t>(ranks_[0].op.dtype)),
      combine_op_(CombineOp(ranks_[0].op.redop)),
      elem_(DataTypeSize(type_)),
      block_(ranks_[0].op.count * elem_) {
  const bool per_rank_blocks = kind_ == shimproto::kAllGather || kind_ == shimproto::kReduceScatter;
  work_bytes_ = per_rank_blocks ? block_ * static_cast<size_t>(nranks_) : block_;
  // A broadcast's data starts at its root and a reduce's result ends there: its region (or
  // output) as the work buffer spares a copy on the root's host.
  if (kind_ == shimproto::kBroadcast || kind_ == shimproto::kReduce) {
    for (size_t i = 0; i < ranks_.size(); ++i) {
      if (ranks_[i].rank == ranks_[i].op.peer) work_index_ = i;
    }
  }
  // The result area: only where each rank reads the whole result from a streamed segment
  // (its shim then copies out of the area, as StagingControl::result_area tells it).
  shared_ = shared != nullptr && shared->data != nullptr && shared->size >= work_bytes_ &&
            shimproto::ResultAreaServes(kind_, static_cast<int>(ranks_.size()));
  for (const StageRank& r : ranks_) shared_ = shared_ && r.control != nullptr && !r.in_regions();
  const Range work_out = OutputOf(work_index_);
  if (shared_) {
    work_ = shared->data;
    for (StageRank& r : ranks_) r.control->result_area.store(shared->number, std::memory_order_relaxed);
  } else if (!ranks_[work_index_].in_regions() || (work_out.begin == 0 && work_out.end == work_bytes_)) {
    work_ = OutputAt(work_index_, 0);
  } else if (work_pool != nullptr) {
    ready_ = work_lease_.Take(work_pool, work_bytes_, &work_);
    if (!ready_.ok()) return;
  } else {
    own_work_.reset(new uint8_t[std::max<size_t>(work_bytes_, 1)]);
    work_ = own_work_.get();
  }
  chunk_ = std::max(kCombineChunkBytes - kCombineChunkBytes % elem_, elem_);
  combined_.assign((work_bytes_ + chunk_ - 1) / chunk_, false);

  // Avg: the algorithms pass partial sums between hosts and finish with complete ones; the
  // division must happen once, at the end, so nothing is final before Finish.
  defer_finalize_ = IsReduction(kind_) && ranks_[0].op.redop == ncclAvg;
  std::vector<Range> outs;
  for (size_t i = 0; i < ranks_.size(); ++i) {
    if (!OutputOf(i).empty()) outs.push_back(OutputOf(i));
    // Each shim copies its input into staging and its output out of it (libmccs-nccl/ops.cc),
    // except for ops in host regions, which the daemon reads and writes in place, and a
    // broadcast's root in place, whose buffer already holds its output (kOpOutputIsInput).
    if (traffic_ != nullptr && !ranks_[i].in_regions()) {
      const bool out_is_in = (ranks_[i].op.flags & shimproto::kOpOutputIsInput) != 0;
      const size_t copied_out = out_is_in ? 0 : OutputOf(i).end - OutputOf(i).begin;
      traffic_->AddProgramCopy(InputOf(i).end - InputOf(i).begin + copied_out);
    }
  }
  std::sort(outs.begin(), outs.end(), [](Range a, Range b) { return a.begin < b.begin; });
  for (Range r : outs) {
    if (!outputs_.empty() && r.begin <= outputs_.back().end) {
      outputs_.back().end = std::max(outputs_.back().end, r.end);
    } else {
      outputs_.push_back(r);
    }
  }

  asked_.assign(ranks_.size(), 0);
  pending_.resize(ranks_.size());
  staging_chunk_.resize(ranks_.size(), 0);
  for (size_t i = 0; i < ranks_.size(); ++i) {
    if (ranks_[i].control == nullptr) continue;
    const size_t g = StagingChunkBytes(ranks_[i].segment_bytes);
    staging_chunk_[i] = g;
    Range out = OutputOf(i);
    for (size_t p = ranks_[i].op.offset + out.begin; p < ranks_[i].op.offset + out.end;) {
      size_t c = p / g;
      size_t end = std::min((c + 1) * g, static_cast<size_t>(ranks_[i].op.offset + out.end));
      pending_[i][c] += end - p;
      p = end;
    }
  }
}

LocalStage::Range LocalStage::InputOf(size_t i) const {
  switch (kind_) {
    case shimproto::kAllGather: {
      size_t at = static_cast<size_t>(ranks_[i].rank) * block_;
      return {at, at + block_};
    }
    case shimproto::kBroadcast:
      return ranks_[i].rank == ranks_[i].op.peer ? Range{0, block_} : Range{};
    default:
      return {0, work_bytes_};
  }
}

LocalStage::Range LocalStage::OutputOf(size_t i) const {
  switch (kind_) {
    case shimproto::kReduceScatter: {
      size_t at = static_cast<size_t>(ranks_[i].rank) * block_;
      return {at, at + block_};
    }
    case shimproto::kReduce:
      return ranks_[i].rank == ranks_[i].op.peer ? Range{0, block_} : Range{};
    default:
      return {0, work_bytes_};
  }
}

const uint8_t* LocalStage::InputAt(size_t i, size_t x) const {
  if (!ranks_[i].in_regions()) return DataOf(i) + x;
  return ranks_[i].input + (x - InputOf(i).begin);
}

uint8_t* LocalStage::OutputAt(size_t i, size_t x) const {
  if (!ranks_[i].in_regions()) return DataOf(i) + x;
  return ranks_[i].output + (x - OutputOf(i).begin);
}

Status LocalStage::WaitInput(size_t i, Range r) {
  StagingControl* c = ranks_[i].control;
  if (c == nullptr) return Status::Ok();
  const Range input = InputOf(i);
  Range x = Intersect(r, input);
  if (x.empty()) return Status::Ok();
  const size_t chunk = staging_chunk_[i];
  const size_t base = ranks_[i].op.offset;
  // The shim copies input only as asked (libmccs-nccl/streaming.h): ask for the first chunk
  // missing up to kReadAheadBytes past this range, so the next ones are copied before they
  // are needed.
  const Range ahead = Intersect({x.begin, x.end + kReadAheadBytes}, input);
  for (;;) {
    uint32_t seen = c->input_seq.load(std::memory_order_acquire);
    if (c->input_complete.load(std::memory_order_acquire) != 0) return Status::Ok();
    std::optional<size_t> missing;
    for (size_t k = (base + ahead.begin) / chunk; k * chunk < base + ahead.end && !missing; ++k) {
      if (!TestChunkBit(c->input_done, k)) missing = std::max(base + ahead.begin, k * chunk);
    }
    if (missing && asked_[i] != *missing + 1) {
      asked_[i] = *missing + 1;
      c->input_wanted.store(asked_[i], std::memory_order_relaxed);
      c->output_seq.fetch_add(1, std::memory_order_release);  // the shim sleeps on this word
      FutexWakeAll(&c->output_seq);
    }
    if (!missing || *missing >= base + x.end) return Status::Ok();
    CONDUIT_RETURN_IF_ERROR(failed_());
    if (deadline_.expired()) {
      return RemoteError("timed out waiting for rank %d's program to copy its input into shared memory",
                         ranks_[i].rank);
    }
    if (ranks_[i].session_fd >= 0) {
      pollfd p{ranks_[i].session_fd, POLLRDHUP, 0};
      if (poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR))) {
        return RemoteError("rank %d's program disconnected while copying its input", ranks_[i].rank);
      }
    }
    FutexWait(&c->input_seq, seen, kWaitSliceMs);
  }
}

Status LocalStage::CombineChunk(size_t k) {
  const Range r{k * chunk_, std::min((k + 1) * chunk_, work_bytes_)};
  if (IsReduction(kind_)) {
    const size_t n = (r.end - r.begin) / elem_;
    uint8_t* acc = work_ + r.begin;
    // The work buffer holds the work rank's input already unless that input lives apart
    // (an op in host regions, out of place): then the first combination writes it there
    // (Reduce2), or, alone on this host, a copy does.
    const uint8_t* own = InputAt(work_index_, r.begin);
    bool seeded = own == acc;
    // The work rank first: its input must be in place (streamed) and scaled (PreMulSum)
    // before anything is folded into it.
    for (size_t step = 0; step < ranks_.size(); ++step) {
      const size_t i = step == 0 ? work_index_ : step <= work_index_ ? step - 1 : step;
      CONDUIT_RETURN_IF_ERROR(WaitInput(i, r));
      if (ranks_[i].op.redop == shimproto::kRedOpPreMulSum) {
        // Only staged inputs (HostRegions refuses PreMulSum): the segment is ours to scale.
        ScaleInPlace(DataOf(i) + r.begin, n, type_, ranks_[i].op.scalar);
        CountReduce(traffic_, n * elem_);
      }
      if (i == work_index_) continue;
      if (seeded) {
        ReduceInto(acc, InputAt(i, r.begin), n, type_, combine_op_);
      } else {
        Reduce2(acc, own, InputAt(i, r.begin), n, type_, combine_op_);
        seeded = true;
      }
      CountReduce(traffic_, n * elem_);
    }
    if (!seeded && !input_apart_) CopyLocal(acc, own, r.end - r.begin);
  } else if (kind_ == shimproto::kAllGather) {
    for (size_t i = 0; i < ranks_.size(); ++i) {
      Range x = Intersect(r, InputOf(i));
      if (x.empty()) continue;
      CONDUIT_RETURN_IF_ERROR(WaitInput(i, x));
      const uint8_t* in = InputAt(i, x.begin);
      if (in != work_ + x.begin) CopyLocal(work_ + x.begin, in, x.end - x.begin);
    }
  } else if (kind_ == shimproto::kBroadcast) {
    CONDUIT_RETURN_IF_ERROR(WaitInput(work_index_, r));
    const Range x = Intersect(r, InputOf(work_index_));
    const uint8_t* in = x.empty() ? nullptr : InputAt(work_index_, x.begin);
    if (in != nullptr && in != work_ + x.begin) CopyLocal(work_ + x.begin, in, x.end - x.begin);
  }
  combined_[k] = true;
  // This host's own blocks of a gather, and a broadcast's data at its root, are final as
  // soon as they are in place.
  if (kind_ == shimproto::kAllGather) {
    for (size_t i = 0; i < ranks_.size(); ++i) {
      Range x = Intersect(r, InputOf(i));
      if (!x.empty()) Finalize(x.begin, x.end - x.begin);
    }
  } else if (kind_ == shimproto::kBroadcast && !InputOf(work_index_).empty()) {
    Finalize(r.begin, r.end - r.begin);
  }
  return Status::Ok();
}

Status LocalStage::Ensure(size_t offset, size_t len) {
  if (len == 0 || offset >= work_bytes_) return Status::Ok();
  const size_t end = std::min(offset + len, work_bytes_);
  for (size_t k = offset / chunk_; k * chunk_ < end; ++k) {
    if (!combined_[k]) CONDUIT_RETURN_IF_ERROR(CombineChunk(k));
  }
  return Status::Ok();
}

void LocalStage::Finalize(size_t offset, size_t len) {
  if (defer_finalize_) return;
  // Whole elements only: a shim must never copy out half of one.
  Range want{(offset + elem_ - 1) / elem_ * elem_, std::min(offset + len, work_bytes_)};
  want.end -= want.end % elem_;
  if (want.empty()) return;
  // Keep the parts of `want` that are not final yet, and record `want` as final.
  std::vector<Range> fresh;
  size_t cursor = want.begin;
  auto it = finalized_.upper_bound(want.begin);
  if (it != finalized_.begin()) --it;
  for (; it != finalized_.end() && it->first < want.end; ++it) {
    if (it->second <= cursor) continue;
    if (it->first > cursor) fresh.push_back({cursor, it->first});
    cursor = std::max(cursor, it->second);
  }
  if (cursor < want.end) fresh.push_back({cursor, want.end});
  if (fresh.empty()) return;
  size_t begin = want.begin, end = want.end;
  auto lo = finalized_.upper_bound(begin);
  if (lo != finalized_.begin() && std::prev(lo)->second >= begin) --lo;
  auto hi = lo;
  while (hi != finalized_.end() && hi->first <= end) {
    begin = std::min(begin, hi->first);
    end = std::max(end, hi->second);
    ++hi;
  }
  finalized_.erase(lo, hi);
  finalized_[begin] = end;

  // Wake a shim only when one of its chunks became whole: it copies whole chunks only.
  std::vector<bool> woke(ranks_.size(), false);
  for (Range f : fresh) {
    for (size_t i = 0; i < ranks_.size(); ++i) {
      Range x = Intersect(f, OutputOf(i));
      if (x.empty()) continue;
      uint8_t* out = OutputAt(i, x.begin);
      if (out != work_ + x.begin && !output_apart_ && !shared_) CopyToOutput(i, out, work_ + x.begin, x.end - x.begin);
      if (ranks_[i].control != nullptr && MarkDone(i, x)) woke[i] = true;
    }
  }
  for (size_t i = 0; i < ranks_.size(); ++i) {
    if (!woke[i]) continue;
    ranks_[i].control->output_seq.fetch_add(1, std::memory_order_release);
    FutexWakeAll(&ranks_[i].control->output_seq);
  }
}

bool LocalStage::MarkDone(size_t i, Range r) {
  bool any = false;
  const size_t g = staging_chunk_[i];
  const size_t base = ranks_[i].op.offset;
  for (size_t p = base + r.begin; p < base + r.end;) {
    size_t c = p / g;
    size_t end = std::min((c + 1) * g, base + r.end);
    auto it = pending_[i].find(c);
    if (it != pending_[i].end()) {
      it->second -= std::min(it->second, end - p);
      if (it->second == 0) {
        SetChunkBit(ranks_[i].control->done, c);
        pending_[i].erase(it);
        any = true;
      }
    }
    p = end;
  }
  return any;
}

Status LocalStage::Finish() {
  CONDUIT_RETURN_IF_ERROR(Ensure(0, work_bytes_));
  if (defer_finalize_) {
    // Each byte of this host's outputs divided exactly once, after every contribution.
    for (Range u : outputs_) {
      DivideInPlace(output_apart_ ? OutputAt(0, u.begin) : work_ + u.begin, (u.end - u.begin) / elem_, type_, nranks_);
      CountReduce(traffic_, u.end - u.begin);
    }
    defer_finalize_ = false;
  }
  Finalize(0, work_bytes_);
  return Status::Ok();
}

void LocalStage::CopyLocal(uint8_t* dst, const uint8_t* src, size_t n) {
  memcpy(dst, src, n);
  if (traffic_ != nullptr) traffic_->AddLocalCopy(n);
}

void LocalStage::CopyToOutput(size_t i, uint8_t* dst, const uint8_t* src, size_t n) {
  // A staged output is read right after by its shim, from the cache: memcpy.
  if (!ranks_[i].in_regions()) {
    CopyLocal(dst, src, n);
    return;
  }
  const Range out = OutputOf(i);
  CopyOutput(dst, src, n, out.end - out.begin);
  if (traffic_ != nullptr) traffic_->AddLocalCopy(n);
}

const uint8_t* LocalStage::TakeInputApart() {
  if (!IsReduction(kind_) || ranks_.size() != 1 || !ranks_[0].in_regions() ||
      ranks_[0].control != nullptr || ranks_[0].op.redop == shimproto::kRedOpPreMulSum) {
    return nullptr;
  }
  const uint8_t* input = InputAt(0, 0);
  if (input == work_) return nullptr;  // in place: nothing to save
  input_apart_ = true;
  return input;
}

uint8_t* LocalStage::FinalPlace(size_t offset, size_t len) {
  if (!input_apart_ || kind_ != shimproto::kReduceScatter) return nullptr;
  const Range out = OutputOf(0);
  if (offset < out.begin || offset > out.end || len > out.end - offset) return nullptr;
  output_apart_ = true;
  return OutputAt(0, offset);
}

Status LocalStage::EnsureAt(const uint8_t* p, size_t len) {
  if (p < work_ || p >= work_ + work_bytes_) return Status::Ok();
  return Ensure(static_cast<size_t>(p - work_), len);
}

void LocalStage::FinalizeAt(const uint8_t* p, size_t len) {
  if (p < work_ || p >= work_ + work_bytes_) return;
  Finalize(static_cast<size_t>(p - work_), len);
}

}  // namespace conduit
