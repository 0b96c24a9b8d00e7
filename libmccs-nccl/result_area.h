// ResultAreaView: this rank's read-only mapping of its communicator's result area (shim
// protocol, "Result area"): conduitd leaves a streamed AllReduce's, AllGather's or
// Broadcast's result there once for all local ranks, and each copies its output from it
// instead of from its own segment (which would cost conduitd a copy per rank).
#ifndef CONDUIT_LIBMCCS_NCCL_RESULT_AREA_H_
#define CONDUIT_LIBMCCS_NCCL_RESULT_AREA_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "common/shm_segment.h"
#include "daemon_connection.h"

namespace conduit {

class ResultAreaView {
 public:
  // Before a streamed group of one collective that shimproto::ResultAreaServes: attaches
  // the area (again) unless the one mapped is current and holds `bytes`. A refusal is not the op's failure: its result then comes through the segment,
  // and this connection never asks again (a daemon that predates the area, or one at its
  // memory limit).
  void Prepare(size_t bytes, DaemonConnection& conn);
  // The daemon replaced the area, or lost track of this mapping (kReplyResultAttach).
  void MarkStale() { current_ = false; }
  // Where bytes [x, x + n) of an op's output, counted from its OpDesc::offset, lie in area
  // `number`; null when that is not the area mapped here or the bytes are outside it.
  const uint8_t* At(uint64_t number, size_t x, size_t n) const {
    if (mapping_ == nullptr || number != number_ || x > mapping_->size() || n > mapping_->size() - x) return nullptr;
    return mapping_->data() + x;
  }

 private:
  std::unique_ptr<ShmSegment> mapping_;
  uint64_t number_ = 0;
  bool current_ = false;
  bool refused_ = false;
};

}  // namespace conduit

#endif  // CONDUIT_LIBMCCS_NCCL_RESULT_AREA_H_
