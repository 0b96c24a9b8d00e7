// Streaming one collective through the staging segment (protocol/staging_control.h): the
// shim copies its input in while the daemon already sends the first bytes, and copies the
// output out chunk by chunk as the daemon finalizes it, instead of copy-in, network,
// copy-out one after the other.
#ifndef CONDUIT_LIBMCCS_NCCL_STREAMING_H_
#define CONDUIT_LIBMCCS_NCCL_STREAMING_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/deadline.h"
#include "common/status.h"
#include "pending_op.h"
#include "result_area.h"

namespace conduit {

// Whether a group's ops for one communicator should stream: exactly one collective on
// host memory, big enough that overlapping its copies beats the wakeups streaming costs.
bool CanStream(const std::vector<PendingOp*>& ops);

// Before the request goes out: no input yet, no output chunk done.
void ResetForStreaming(uint8_t* segment);

// The staging chunks (StagingChunkBytes of the segment: the unit of the input and done
// bits) that segment bytes [begin, end) touch: chunks first .. first + count - 1.
struct ChunkSpan {
  ChunkSpan(size_t segment_bytes, size_t begin, size_t end);
  // The part of [begin, end) in chunk k.
  size_t From(size_t k) const { return std::max(begin, k * chunk); }
  size_t To(size_t k) const { return std::min(end, (k + 1) * chunk); }

  size_t chunk, begin, end;
  size_t first = 0, count = 0;
};

// The chunks of a ChunkSpan copied so far (the shim's side of the input or done bits).
class CopiedChunks {
 public:
  explicit CopiedChunks(const ChunkSpan& span) : span_(span), copied_(span.count, false), left_(span.count) {}
  const ChunkSpan& span() const { return span_; }
  bool copied(size_t k) const { return copied_[k - span_.first]; }
  void Mark(size_t k) {
    copied_[k - span_.first] = true;
    --left_;
  }
  size_t left() const { return left_; }
  // Calls fn(k) for each chunk not copied yet, in order, until none is left (fn may Mark).
  template <typename Fn>
  void ForEachMissing(Fn fn) {
    for (size_t k = span_.first; k < span_.first + span_.count && left_ > 0; ++k) {
      if (!copied(k)) fn(k);
    }
  }

 private:
  ChunkSpan span_;
  std::vector<bool> copied_;
  size_t left_;
};

// Copies a streamed op's input into the segment, a chunk (StagingChunkBytes) at a time,
// as the daemon asks for it: the daemon names, in input_wanted, the first chunk it lacks
// within a read-ahead window of where its algorithm reads, and the feeder copies a window
// from there. Copying on demand rather than all at once keeps the copies from competing
// for the CPU with the daemon's network threads just when every program starts a large
// collective (on a 2-core host, copying 256 MiB in one go stalled the ring's first step).
class InputFeeder {
 public:
  // Chunks copied per request, and before the first one (most algorithms start at the
  // beginning of the buffer). Matches the daemon's read-ahead.
  static constexpr size_t kWindowBytes = size_t{4} << 20;

  InputFeeder(uint8_t* segment, size_t segment_bytes, const PendingOp& op);

  // Copies the window the daemon last asked for (the input's first window before any
  // request); true if it copied anything.
  bool Serve();
  // Copies everything not yet copied, in segment order.
  void CopyAll();
  bool done() const { return input_.left() == 0; }

 private:
  void CopyChunk(size_t k);

  uint8_t* segment_;
  const PendingOp& op_;
  CopiedChunks input_;  // where the input goes in the segment, and what is there
  bool initial_done_ = false;  // the first window, copied before any request
  uint64_t served_ = 0;        // the request last served
};

// Copies finalized output chunks to the program's buffer, from the segment or from the
// communicator's result area, as the daemon says (StagingControl::result_area).
class OutputPump {
 public:
  // `area` (may be null): the communicator's result area as mapped here.
  OutputPump(uint8_t* segment, size_t segment_bytes, const PendingOp& op, const ResultAreaView* area = nullptr);

  // Copies chunks as the daemon finalizes them, and feeds `input` (if any) as the daemon
  // asks, sleeping in between, until every output chunk is out and all input in, a reply
  // (or EOF) is readable on reply_fd, or the deadline passes.
  void PumpUntilReply(int reply_fd, Deadline deadline, InputFeeder* input);
  // After a successful reply: copies whatever is still missing.
  void CopyRest();
  // Not OK when the daemon named a result area this rank has not mapped (or bytes outside
  // it): those chunks were not copied.
  const Status& status() const { return status_; }

 private:
  // Copies every chunk whose done bit is set; true when all are out.
  bool CopyReady();
  void CopyChunk(size_t c);

  uint8_t* segment_;
  const PendingOp& op_;
  const ResultAreaView* area_;
  CopiedChunks output_;  // where the output is in the segment, and what is out
  Status status_;
};

}  // namespace conduit

#endif  // CONDUIT_LIBMCCS_NCCL_STREAMING_H_
