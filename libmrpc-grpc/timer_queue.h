// TimerQueue: deadlines of managed calls. gRPC core fails a call whose deadline passed;
// for calls it does not carry, one thread here does the same.
#ifndef CONDUIT_LIBMRPC_GRPC_TIMER_QUEUE_H_
#define CONDUIT_LIBMRPC_GRPC_TIMER_QUEUE_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

#include "call_sink.h"

namespace conduit::grpcshim {


class TimerQueue {
 public:
  using Clock = std::chrono::steady_clock;
  static TimerQueue& Get();

  // Calls call->OnDeadline() at `when` (taking a reference until then); returns an id.
  uint64_t Schedule(Clock::time_point when, CallSink* call);
  // Unschedules; returns the call whose reference the caller must now drop, or nullptr if
  // the timer already fired.
  CallSink* Cancel(uint64_t id);

 private:
  TimerQueue() = default;
  void Run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::set<std::pair<Clock::time_point, uint64_t>> order_;
  std::map<uint64_t, std::pair<Clock::time_point, CallSink*>> timers_;
  uint64_t next_id_ = 1;
  bool running_ = false;
};

}  // namespace conduit::grpcshim

#endif  // CONDUIT_LIBMRPC_GRPC_TIMER_QUEUE_H_
