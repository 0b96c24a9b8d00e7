// -T: nccl-tests gives up on a test whose operation has not completed after this
// many seconds. Here calls return complete (or never), so a watcher thread checks
// how long each benchmark thread has been inside its current NCCL call, and ends
// the process with nccl-tests' message when one is over the limit: a hung peer
// cannot be interrupted from inside the call.
#ifndef CONDUIT_TOOLS_PERF_WATCHDOG_H_
#define CONDUIT_TOOLS_PERF_WATCHDOG_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>

namespace conduit::perf {

class Watchdog {
 public:
  // timeout_s 0: disabled (no thread, Enter/Leave cost one relaxed store).
  Watchdog(int timeout_s, int slots);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Marks benchmark thread `slot` as inside a call from now until Leave.
  void Enter(int slot);
  void Leave(int slot);

 private:
  void Watch();

  const int timeout_s_;
  const int slots_;
  std::unique_ptr<std::atomic<int64_t>[]> since_ns_;  // 0: not inside a call
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

// Enter/Leave for one scope.
class WatchdogScope {
 public:
  WatchdogScope(Watchdog* w, int slot) : w_(w), slot_(slot) { w_->Enter(slot_); }
  ~WatchdogScope() { w_->Leave(slot_); }
  WatchdogScope(const WatchdogScope&) = delete;
  WatchdogScope& operator=(const WatchdogScope&) = delete;

 private:
  Watchdog* w_;
  int slot_;
};

}  // namespace conduit::perf

#endif  // CONDUIT_TOOLS_PERF_WATCHDOG_H_
