#include "streaming.h"

#include <poll.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "common/staging_control.h"

namespace conduit {
namespace {

// How long the output pump sleeps before looking at the reply socket again.
constexpr int kPumpSliceMs = 20;
// Below this, copies take less than the two futex wakeups streaming adds: latency wins.
// $CONDUIT_STREAM_MIN_BYTES overrides it (tests stream every size to cover both paths).
size_t StreamMinBytes() {
  static const size_t value = [] {
    const char* env = std::getenv("CONDUIT_STREAM_MIN_BYTES");
    return env != nullptr && *env != '\0' ? static_cast<size_t>(std::strtoull(env, nullptr, 10)) : size_t{1} << 20;
  }();
  return value;
}

bool IsCollectiveKind(uint8_t kind) { return kind >= shimproto::kAllReduce && kind <= shimproto::kReduceScatter; }

}  // namespace

bool CanStream(const std::vector<PendingOp*>& ops) {
  return ops.size() == 1 && IsCollectiveKind(ops[0]->desc.kind) && ops[0]->place == MemoryKind::kHost &&
         ops[0]->region_bytes >= StreamMinBytes();
}

void ResetForStreaming(uint8_t* segment) {
  StagingControl* c = ControlOf(segment);
  c->input_complete.store(0, std::memory_order_relaxed);
  c->input_wanted.store(0, std::memory_order_relaxed);
  for (auto& word : c->input_done) word.store(0, std::memory_order_relaxed);
  for (auto& word : c->done) word.store(0, std::memory_order_relaxed);
  // The request's send (a syscall) orders these stores before anything the daemon reads.
}

InputFeeder::InputFeeder(uint8_t* segment, size_t segment_bytes, const PendingOp& op)
    : segment_(segment),
      op_(op),
      chunk_(StagingChunkBytes(segment_bytes)),
      begin_(op.desc.offset + op.in_at),
      end_(op.desc.offset + op.in_at + op.in_bytes) {
  if (op.in_bytes == 0) {
    PublishInputComplete(ControlOf(segment_));
    return;
  }
  first_ = begin_ / chunk_;
  left_ = (end_ - 1) / chunk_ - first_ + 1;
  copied_.assign(left_, false);
}

void InputFeeder::CopyChunk(size_t k) {
  const size_t from = std::max(begin_, k * chunk_), to = std::min(end_, (k + 1) * chunk_);
  memcpy(segment_ + from, static_cast<const uint8_t*>(op_.in) + (from - begin_), to - from);
  copied_[k - first_] = true;
  StagingControl* c = ControlOf(segment_);
  if (--left_ == 0) {
    PublishInputComplete(c);
  } else {
    PublishInputChunk(c, k);
  }
}

bool InputFeeder::Serve() {
  if (left_ == 0) return false;
  const uint64_t wanted = ControlOf(segment_)->input_wanted.load(std::memory_order_relaxed);
  size_t k;
  if (wanted == 0) {
    if (initial_done_) return false;
    initial_done_ = true;
    k = first_;
  } else {
    if (wanted == served_) return false;
    served_ = wanted;
    k = (wanted - 1) / chunk_;
    if (k < first_ || k >= first_ + copied_.size()) return false;  // not this op's input: ignore
  }
  const size_t stop = std::min(first_ + copied_.size(), k + std::max<size_t>(kWindowBytes / chunk_, 1));
  bool any = false;
  for (; k < stop; ++k) {
    if (copied_[k - first_]) continue;
    CopyChunk(k);
    any = true;
  }
  return any;
}

void InputFeeder::CopyAll() {
  for (size_t i = 0; i < copied_.size() && left_ > 0; ++i) {
    if (!copied_[i]) CopyChunk(first_ + i);
  }
}

OutputPump::OutputPump(uint8_t* segment, size_t segment_bytes, const PendingOp& op)
    : segment_(segment),
      op_(op),
      chunk_(StagingChunkBytes(segment_bytes)),
      out_begin_(op.desc.offset + op.out_at),
      out_end_(op.desc.offset + op.out_at + op.out_bytes) {
  if (op.out_bytes == 0) return;
  first_chunk_ = out_begin_ / chunk_;
  left_ = (out_end_ - 1) / chunk_ - first_chunk_ + 1;
  copied_.assign(left_, false);
}

void OutputPump::CopyChunk(size_t c) {
  size_t begin = std::max(out_begin_, c * chunk_);
  size_t end = std::min(out_end_, (c + 1) * chunk_);
  memcpy(static_cast<uint8_t*>(op_.out) + (begin - out_begin_), segment_ + begin, end - begin);
  copied_[c - first_chunk_] = true;
  --left_;
}

bool OutputPump::CopyReady() {
  StagingControl* ctl = ControlOf(segment_);
  for (size_t i = 0; i < copied_.size() && left_ > 0; ++i) {
    if (copied_[i]) continue;
    size_t c = first_chunk_ + i;
    if (TestChunkBit(ctl->done, c)) CopyChunk(c);
  }
  return left_ == 0;
}

void OutputPump::PumpUntilReply(int reply_fd, Deadline deadline, InputFeeder* input) {
  StagingControl* ctl = ControlOf(segment_);
  for (;;) {
    uint32_t seen = ctl->output_seq.load(std::memory_order_acquire);
    const bool fed = input != nullptr && input->Serve();
    if (CopyReady() && (input == nullptr || input->done())) return;
    pollfd p{reply_fd, POLLIN, 0};
    if (poll(&p, 1, 0) > 0 || deadline.expired()) return;
    if (!fed) FutexWait(&ctl->output_seq, seen, kPumpSliceMs);
  }
}

void OutputPump::CopyRest() {
  for (size_t i = 0; i < copied_.size(); ++i) {
    if (!copied_[i]) CopyChunk(first_chunk_ + i);
  }
}

}  // namespace conduit
