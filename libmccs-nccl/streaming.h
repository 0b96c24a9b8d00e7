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

// After the request went out: copies the op's input into the segment in pieces,
// publishing progress after each so the daemon can start on the first ones.
void StreamInput(uint8_t* segment, const PendingOp& op);

// Copies finalized output chunks to the program's buffer.
class OutputPump {
 public:
  OutputPump(uint8_t* segment, size_t segment_bytes, const PendingOp& op);

  // Copies chunks as the daemon finalizes them, sleeping in between, until every chunk is
  // out, a reply (or EOF) is readable on reply_fd, or the deadline passes.
  void PumpUntilReply(int reply_fd, Deadline deadline);
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
