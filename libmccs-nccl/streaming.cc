#include "streaming.h"

#include <poll.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "common/staging_control.h"

namespace conduit {
namespace {

// Input is published in pieces this big: small enough that the daemon starts early, big
// enough that the wakeups cost nothing next to the copy.
constexpr size_t kInputPieceBytes = 1 << 20;
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
  c->input_ready.store(0, std::memory_order_relaxed);
  for (auto& word : c->done) word.store(0, std::memory_order_relaxed);
  // The request's send (a syscall) orders these stores before anything the daemon reads.
}

void StreamInput(uint8_t* segment, const PendingOp& op) {
  StagingControl* c = ControlOf(segment);
  const size_t base = op.desc.offset + op.in_at;
  const auto* in = static_cast<const uint8_t*>(op.in);
  for (size_t done = 0; done < op.in_bytes;) {
    size_t take = std::min(kInputPieceBytes, op.in_bytes - done);
    memcpy(segment + base + done, in + done, take);
    done += take;
    PublishInput(c, base + done);
  }
  PublishInput(c, kInputComplete);
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
    if (ctl->done[c / 64].load(std::memory_order_acquire) & (1ull << (c % 64))) CopyChunk(c);
  }
  return left_ == 0;
}

void OutputPump::PumpUntilReply(int reply_fd, Deadline deadline) {
  StagingControl* ctl = ControlOf(segment_);
  for (;;) {
    uint32_t seen = ctl->output_seq.load(std::memory_order_acquire);
    if (CopyReady()) return;
    pollfd p{reply_fd, POLLIN, 0};
    if (poll(&p, 1, 0) > 0 || deadline.expired()) return;
    FutexWait(&ctl->output_seq, seen, kPumpSliceMs);
  }
}

void OutputPump::CopyRest() {
  for (size_t i = 0; i < copied_.size(); ++i) {
    if (!copied_[i]) CopyChunk(first_chunk_ + i);
  }
}

}  // namespace conduit
