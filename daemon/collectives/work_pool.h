// WorkPool: the daemon memory a communicator's reductions in host regions work in when no
// output on this host is as large as the op (a ReduceScatter's whole input; a Reduce's
// buffer on hosts without its root; LocalStage). Programs choose these sizes, so the
// daemon bounds them: an op's buffer comes from its communicator's pool, which keeps one
// buffer of up to kKeepBytes for the next call (fresh memory costs a page fault and a
// zeroing per page on the collective's thread) while all pools together keep at most
// kKeepTotalBytes, and every pool's buffers, kept or in use, stay under kTotalBytes. An
// op that would pass it fails with RESOURCE_EXHAUSTED instead of taking the host's memory. The shims keep ops larger than
// shimproto::kMaxReduceInRegionsBytes out of regions, so a legitimate program meets the
// total only with several such ops at once on one daemon.
#ifndef CONDUIT_DAEMON_COLLECTIVES_WORK_POOL_H_
#define CONDUIT_DAEMON_COLLECTIVES_WORK_POOL_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "common/status.h"

namespace conduit {

class WorkPool {
 public:
  static constexpr size_t kKeepBytes = 256u << 20;
  static constexpr uint64_t kKeepTotalBytes = uint64_t{1} << 30;
  static constexpr uint64_t kTotalBytes = uint64_t{4} << 30;

  WorkPool() = default;
  WorkPool(const WorkPool&) = delete;
  WorkPool& operator=(const WorkPool&) = delete;
  ~WorkPool();

  // `bytes` (at least 1) of work memory for one op, until Release. One op at a time per
  // pool (a communicator runs one collective at a time).
  Status Acquire(size_t bytes, uint8_t** out);
  // The op is done with it: kept for the next one if small enough, else freed.
  void Release();

  // Every pool's bytes, kept or in use (for tests and the cap).
  static uint64_t total_bytes() { return total_.load(std::memory_order_relaxed); }
  static uint64_t kept_bytes() { return kept_total_.load(std::memory_order_relaxed); }

 private:
  void Free();

  std::unique_ptr<uint8_t[]> buffer_;
  size_t bytes_ = 0;    // buffer_'s size, counted in total_
  bool kept_ = false;   // between ops, counted in kept_total_ too
  static std::atomic<uint64_t> total_;
  static std::atomic<uint64_t> kept_total_;
};

// Holds a pool's buffer for one op and releases it when the op ends, however it ends.
class WorkLease {
 public:
  WorkLease() = default;
  WorkLease(const WorkLease&) = delete;
  WorkLease& operator=(const WorkLease&) = delete;
  ~WorkLease() {
    if (pool_ != nullptr) pool_->Release();
  }
  Status Take(WorkPool* pool, size_t bytes, uint8_t** out) {
    Status st = pool->Acquire(bytes, out);
    if (st.ok()) pool_ = pool;
    return st;
  }

 private:
  WorkPool* pool_ = nullptr;
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_COLLECTIVES_WORK_POOL_H_
