// LocalStage: one collective as this host's ranks see it.
//
// The inter-host algorithms work on one buffer per host (the "work" buffer: the first local
// rank's region, or the root's for a broadcast or a reduce; for an op in host regions, that
// rank's own output buffer, or daemon memory where no output holds the whole buffer: a
// ReduceScatter's, a Reduce's away from its root). LocalStage stands between that buffer
// and the local ranks' segments, a chunk at a time:
//  * Ensure(range): the range holds this host's contribution: it waits for streamed input
//    (the shim may still be copying it in), scales PreMulSum inputs, and folds the other
//    local ranks' data into the work buffer (reductions) or copies their blocks in (gather);
//  * Finalize(range): the range holds its final result: copies to the other local ranks
//    (none where they all read it from the communicator's result area, SharedOutput),
//    and the done bits that let each shim copy it out at once. (ncclAvg is the exception:
//    its division happens once in Finish, so it finalizes only there.)
// Both are idempotent, so algorithms call them wherever they first read or complete bytes,
// and Finish covers whatever an algorithm did not.
#ifndef CONDUIT_DAEMON_COLLECTIVES_LOCAL_STAGE_H_
#define CONDUIT_DAEMON_COLLECTIVES_LOCAL_STAGE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "collectives/memory_traffic.h"
#include "collectives/work_pool.h"
#include "common/deadline.h"
#include "common/status.h"
#include "nccl.h"
#include "protocol/shim_protocol.h"
#include "protocol/staging_control.h"

namespace conduit {

// One local rank's side of the collective.
struct StageRank {
  int rank = 0;
  uint8_t* segment = nullptr;  // the rank's whole staging segment as mapped here
  size_t segment_bytes = 0;
  shimproto::OpDesc op{};      // its op (offset into the segment, scalar for PreMulSum)
  StagingControl* control = nullptr;  // streamed group: input may still be arriving
  int session_fd = -1;                // the program's connection, to notice it dying
  // An op in host regions: the program's own buffers replace the segment. `input` holds
  // the rank's input bytes (InputOf) from their start, `output` its output (OutputOf);
  // they may be the same bytes, and either is null where the rank has none (a broadcast's
  // non-root input, a reduce's non-root output). Never written: `input`.
  bool regions = false;
  const uint8_t* input = nullptr;
  uint8_t* output = nullptr;
  bool in_regions() const { return regions; }
};

// The communicator's result area (collectives/result_area.h) as mapped here, offered to
// a collective whose local ranks have all attached it.
struct SharedOutput {
  uint8_t* data = nullptr;
  size_t size = 0;
  uint64_t number = 0;  // ResultArea::Area::number, what the shims compare with theirs
};

class LocalStage {
 public:
  // `ranks`: this host's ranks in local order (ranks[0] leads). `failed` reports a
  // communicator abort, so waits end promptly. `traffic` (may be null) counts the copies
  // and reductions done here, and the shims' copies in and out that the op implies.
  // `work_pool` (may be null: fresh memory) holds the work buffer when it cannot be a
  // rank's output; ready() says whether it could.
  // `shared` (may be null): the result area. The stage takes it as its work buffer when it
  // holds the whole result, every local rank reads its result from a streamed segment, and
  // shimproto::ResultAreaServes says so (see shares_output()).
  LocalStage(std::vector<StageRank> ranks, int nranks, Deadline deadline, std::function<Status()> failed,
             MemoryTraffic* traffic = nullptr, WorkPool* work_pool = nullptr, const SharedOutput* shared = nullptr);

  // Whether the local ranks read the result from the result area (no copies into their
  // segments).
  bool shares_output() const { return shared_; }

  // Whether the stage has its work buffer (WorkPool's cap); nothing else may be called
  // otherwise.
  const Status& ready() const { return ready_; }

  // The buffer the inter-host algorithm runs on, and its length.
  uint8_t* work() const { return work_; }
  size_t work_bytes() const { return work_bytes_; }

  Status Ensure(size_t offset, size_t len);
  // For a reduction (AllReduce, Reduce, ReduceScatter) whose algorithm folds this host's
  // contribution in where it lives (HostGroup::input) and writes every byte of the work
  // buffer it reads or finalizes itself: the contribution, and Ensure copies nothing into
  // the work buffer from now on. Only one rank on this host, in host regions, out of place,
  // and not streamed qualifies; otherwise nullptr and nothing changes. The caller must run
  // such an algorithm (2 hosts or more) after a non-null answer.
  const uint8_t* TakeInputApart();
  // After TakeInputApart granted a reduce-scatter: where the final results for the work
  // buffer's [offset, offset + len) go, the rank's own output (HostGroup::final_place), so
  // they are not copied there from the work buffer; nullptr for bytes outside it, and
  // always before or without the grant. The algorithm must then write every byte of the
  // output there.
  uint8_t* FinalPlace(size_t offset, size_t len);
  void Finalize(size_t offset, size_t len);
  // Ensures and finalizes everything; then the shims have their whole output.
  Status Finish();

  // Pointer-based forms for the algorithms' hooks; ranges outside the work buffer (the
  // algorithms' own scratch space) are ignored.
  Status EnsureAt(const uint8_t* p, size_t len);
  void FinalizeAt(const uint8_t* p, size_t len);

 private:
  struct Range {
    size_t begin = 0, end = 0;
    bool empty() const { return begin >= end; }
  };
  static Range Intersect(Range a, Range b) { return {std::max(a.begin, b.begin), std::min(a.end, b.end)}; }

  uint8_t* DataOf(size_t i) const { return ranks_[i].segment + ranks_[i].op.offset; }
  // Where rank i's input (output) byte at op-relative offset x lives: its segment, or its
  // own buffer for an op in host regions.
  const uint8_t* InputAt(size_t i, size_t x) const;
  uint8_t* OutputAt(size_t i, size_t x) const;
  Range InputOf(size_t i) const;   // op-relative bytes rank i contributes
  Range OutputOf(size_t i) const;  // op-relative bytes rank i's program reads back
  Status WaitInput(size_t i, Range r);
  Status CombineChunk(size_t chunk);
  bool MarkDone(size_t i, Range r);  // true if a done bit was set
  void CopyLocal(uint8_t* dst, const uint8_t* src, size_t n);  // memcpy, counted
  // The same, for bytes of rank i's output: into a large output in the program's own
  // buffer (a host region) with non-temporal stores (common/stream_copy.h), since this
  // daemon does not read it again.
  void CopyToOutput(size_t i, uint8_t* dst, const uint8_t* src, size_t n);

  std::vector<StageRank> ranks_;
  const int nranks_;
  const Deadline deadline_;
  const std::function<Status()> failed_;
  MemoryTraffic* const traffic_;
  const uint8_t kind_;
  const ncclDataType_t type_;
  const ncclRedOp_t combine_op_;  // PreMulSum and Avg combine as Sum
  const size_t elem_;
  const size_t block_;  // bytes of one rank's block (AllGather, ReduceScatter)
  size_t work_index_ = 0;  // which local rank's region is the work buffer
  uint8_t* work_ = nullptr;
  std::unique_ptr<uint8_t[]> own_work_;  // the work buffer when neither an output nor a pool holds it
  WorkLease work_lease_;                 // or the pool's
  Status ready_;
  size_t work_bytes_ = 0;
  size_t chunk_ = 0;
  std::vector<bool> combined_;
  std::vector<Range> outputs_;  // union of the local ranks' outputs, sorted, disjoint
  bool defer_finalize_ = false;
  bool input_apart_ = false;  // TakeInputApart: the algorithm reads the input where it is
  bool output_apart_ = false;  // FinalPlace: the algorithm writes the output where it is
  bool shared_ = false;        // the work buffer is the result area every rank reads
  std::map<size_t, size_t> finalized_;  // disjoint [begin, end) ranges already final
  // Per streamed rank: output bytes not yet final in each done-bit chunk of its segment.
  std::vector<std::map<size_t, size_t>> pending_;
  std::vector<size_t> staging_chunk_;  // per streamed rank: its input and done bits' chunk size
  std::vector<uint64_t> asked_;  // per rank: the input_wanted value last stored
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_COLLECTIVES_LOCAL_STAGE_H_
