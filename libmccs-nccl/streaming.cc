#include "streaming.h"

#include <poll.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "common/env_bytes.h"
#include "common/stream_copy.h"
#include "protocol/staging_control.h"

namespace conduit {
namespace {

// How long the output pump sleeps before looking at the reply socket again.
constexpr int kPumpSliceMs = 20;
// Below this, copies take less than the two futex wakeups streaming adds: latency wins.
// $CONDUIT_STREAM_MIN_BYTES overrides it (tests stream every size to cover both paths).
size_t StreamMinBytes() {
  static const size_t value = EnvBytes("CONDUIT_STREAM_MIN_BYTES", size_t{1} << 20);
  return value;
}

}  // namespace

bool CanStream(const std::vector<PendingOp*>& ops) {
  return ops.size() == 1 && shimproto::IsCollectiveKind(ops[0]->desc.kind) && ops[0]->place == MemoryKind::kHost &&
         !ops[0]->in_regions && ops[0]->region_bytes >= StreamMinBytes();
}

void ResetForStreaming(uint8_t* segment) {
  StagingControl* c = ControlOf(segment);
  c->input_complete.store(0, std::memory_order_relaxed);
  c->input_wanted.store(0, std::memory_order_relaxed);
  c->result_area.store(0, std::memory_order_relaxed);
  for (auto& word : c->input_done) word.store(0, std::memory_order_relaxed);
  for (auto& word : c->done) word.store(0, std::memory_order_relaxed);
  // The request's send (a syscall) orders these stores before anything the daemon reads.
}

ChunkSpan::ChunkSpan(size_t segment_bytes, size_t begin_at, size_t end_at)
    : chunk(StagingChunkBytes(segment_bytes)), begin(begin_at), end(end_at) {
  if (end == begin) return;
  first = begin / chunk;
  count = (end - 1) / chunk - first + 1;
}

InputFeeder::InputFeeder(uint8_t* segment, size_t segment_bytes, const PendingOp& op)
    : segment_(segment),
      op_(op),
      input_(ChunkSpan(segment_bytes, op.desc.offset + op.in_at, op.desc.offset + op.in_at + op.in_bytes)) {
  if (input_.left() == 0) PublishInputComplete(ControlOf(segment_));
}

void InputFeeder::CopyChunk(size_t k) {
  const ChunkSpan& in = input_.span();
  const size_t from = in.From(k), to = in.To(k);
  const uint8_t* src = static_cast<const uint8_t*>(op_.in) + (from - in.begin);
  memcpy(segment_ + from, src, to - from);
  input_.Mark(k);
  StagingControl* c = ControlOf(segment_);
  if (input_.left() == 0) {
    PublishInputComplete(c);
  } else {
    PublishInputChunk(c, k);
  }
  // Once the daemon may send the chunk, a broadcast root's result out of place: the same
  // bytes, still in cache, while the daemon sends them (measured against a whole window
  // first, then its result: docs/benchmarks.md).
  if (op_.copies_output_from_input()) memmove(static_cast<uint8_t*>(op_.out) + (from - in.begin), src, to - from);
}

bool InputFeeder::Serve() {
  if (input_.left() == 0) return false;
  const uint64_t wanted = ControlOf(segment_)->input_wanted.load(std::memory_order_relaxed);
  const ChunkSpan& in = input_.span();
  const size_t first = in.first, last = in.first + in.count;
  size_t k;
  if (wanted == 0) {
    if (initial_done_) return false;
    initial_done_ = true;
    k = first;
  } else {
    if (wanted == served_) return false;
    served_ = wanted;
    k = (wanted - 1) / in.chunk;
    if (k < first || k >= last) return false;  // not this op's input: ignore
  }
  const size_t stop = std::min(last, k + std::max<size_t>(kWindowBytes / in.chunk, 1));
  bool any = false;
  for (; k < stop; ++k) {
    if (input_.copied(k)) continue;
    CopyChunk(k);
    any = true;
  }
  return any;
}

void InputFeeder::CopyAll() {
  input_.ForEachMissing([this](size_t k) { CopyChunk(k); });
}

OutputPump::OutputPump(uint8_t* segment, size_t segment_bytes, const PendingOp& op, const ResultAreaView* area)
    : segment_(segment),
      op_(op),
      area_(area),
      output_(ChunkSpan(segment_bytes, op.desc.offset + op.out_at, op.desc.offset + op.out_at + op.copy_out_bytes())) {}

void OutputPump::CopyChunk(size_t c) {
  const ChunkSpan& out = output_.span();
  const size_t begin = out.From(c), end = out.To(c);
  output_.Mark(c);
  // Read after the chunk's done bit (acquire) or the reply: the daemon set it before either.
  const uint64_t number = ControlOf(segment_)->result_area.load(std::memory_order_relaxed);
  const uint8_t* from = segment_ + begin;
  if (number != 0) {
    from = area_ != nullptr ? area_->At(number, begin - op_.desc.offset, end - begin) : nullptr;
    if (from == nullptr) {
      if (status_.ok()) {
        status_ = SystemError("conduitd left this rank's result in result area %llx, bytes %zu-%zu, which this "
                              "program has not mapped", static_cast<unsigned long long>(number),
                              begin - op_.desc.offset, end - op_.desc.offset);
      }
      return;
    }
  }
  uint8_t* to = static_cast<uint8_t*>(op_.out) + (begin - out.begin);
  CopyOutput(to, from, end - begin, op_.copy_out_bytes());
}

bool OutputPump::CopyReady() {
  StagingControl* ctl = ControlOf(segment_);
  output_.ForEachMissing([&](size_t c) {
    if (TestChunkBit(ctl->done, c)) CopyChunk(c);
  });
  return output_.left() == 0;
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
  output_.ForEachMissing([this](size_t c) { CopyChunk(c); });
}

}  // namespace conduit
