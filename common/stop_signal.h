// StopSignal: the end of a service loop's life. A loop that wakes up now and then (to ping,
// sweep, reconnect) sleeps on it instead of sleep_for, so that the daemon's shutdown ends
// the loop at once rather than after its next period, and the shutdown can wait for it.
#ifndef CONDUIT_COMMON_STOP_SIGNAL_H_
#define CONDUIT_COMMON_STOP_SIGNAL_H_

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace conduit {

class StopSignal {
 public:
  // Idempotent; wakes every sleeper.
  void Stop() {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
    cv_.notify_all();
  }
  bool stopped() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stopped_;
  }
  // Sleeps for `period`; false, at once, once stopped.
  bool SleepFor(std::chrono::milliseconds period) {
    std::unique_lock<std::mutex> lock(mu_);
    return !cv_.wait_for(lock, period, [this] { return stopped_; });
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopped_ = false;
};

}  // namespace conduit

#endif  // CONDUIT_COMMON_STOP_SIGNAL_H_
