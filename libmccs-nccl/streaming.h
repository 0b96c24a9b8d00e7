// Streaming one collective through the staging segment (common/staging_control.h): the
// shim copies its input in while the daemon already sends the first bytes, and copies the
// output out chunk by chunk as the daemon finalizes it, instead of copy-in, network,
// copy-out one after the other.
#ifndef CONDUIT_LIBMCCS_NCCL_STREAMING_H_
#define CONDUIT_LIBMCCS_NCCL_STREAMING_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/deadline.h"
#include "ops.h"

namespace conduit {

// Whether a group's ops for one communicator should stream: exactly one collective on
// host memory, big enough that overlapping its copies beats the wakeups streaming costs.
bool CanStream(const std::vector<PendingOp*>& ops);

// Before the request goes out: no input yet, no output chunk done.
void ResetForStreaming(uint8_t* segment);

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
  bool done() const { return left_ == 0; }

 private:
  void CopyChunk(size_t k);

  uint8_t* segment_;
  const PendingOp& op_;
  size_t chunk_;
  size_t begin_, end_;  // segment offsets of the input
  size_t first_ = 0;    // its first chunk
  std::vector<bool> copied_;
  size_t left_ = 0;
  bool initial_done_ = false;  // the first window, copied before any request
  uint64_t served_ = 0;        // the request last served
};

// Copies finalized output chunks to the program's buffer.
class OutputPump {
 public:
  OutputPump(uint8_t* segment, size_t segment_bytes, const PendingOp& op);

  // Copies chunks as the daemon finalizes them, and feeds `input` (if any) as the daemon
  // asks, sleeping in between, until every output chunk is out and all input in, a reply
  // (or EOF) is readable on reply_fd, or the deadline passes.
  void PumpUntilReply(int reply_fd, Deadline deadline, InputFeeder* input);
  // After a successful reply: copies whatever is still missing.
  void CopyRest();

 private:
  // Copies every chunk whose done bit is set; true when all are out.
  bool CopyReady();
  void CopyChunk(size_t c);

  uint8_t* segment_;
  const PendingOp& op_;
  size_t chunk_;
  size_t out_begin_, out_end_;  // segment offsets of the output
  size_t first_chunk_ = 0;
  std::vector<bool> copied_;
  size_t left_ = 0;
};

}  // namespace conduit

#endif  // CONDUIT_LIBMCCS_NCCL_STREAMING_H_
