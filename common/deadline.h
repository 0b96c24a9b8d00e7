// Deadline: a point in time after which a blocking wait gives up.
#ifndef CONDUIT_DAEMON_COMMON_DEADLINE_H_
#define CONDUIT_DAEMON_COMMON_DEADLINE_H_

#include <chrono>
#include <cstdint>

namespace conduit {

class Deadline {
 public:
  using Clock = std::chrono::steady_clock;

  static Deadline AfterMs(int64_t ms) { return Deadline(Clock::now() + std::chrono::milliseconds(ms)); }
  static Deadline Never() { return Deadline(Clock::time_point::max()); }
  static Deadline Earlier(Deadline a, Deadline b) { return a.when_ <= b.when_ ? a : b; }

  bool expired() const { return Clock::now() >= when_; }
  bool is_never() const { return when_ == Clock::time_point::max(); }
  Clock::time_point when() const { return when_; }
  // Milliseconds left, clamped to [0, INT32_MAX], for poll(2); -1 for Never.
  int PollTimeoutMs() const;

 private:
  explicit Deadline(Clock::time_point when) : when_(when) {}
  Clock::time_point when_;
};

inline int Deadline::PollTimeoutMs() const {
  if (when_ == Clock::time_point::max()) return -1;
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(when_ - Clock::now()).count();
  if (left <= 0) return 0;
  if (left > INT32_MAX) return INT32_MAX;
  return static_cast<int>(left);
}

}  // namespace conduit

#endif  // CONDUIT_DAEMON_COMMON_DEADLINE_H_
