// RefusalLog: the log lines of a server that refuses callers (the admin socket, the metrics
// port), at most kBurst per kWindow; the lines left out are counted in the next one logged,
// so a flood of refused callers cannot flood the log.
#ifndef CONDUIT_DAEMON_ADMIN_REFUSAL_LOG_H_
#define CONDUIT_DAEMON_ADMIN_REFUSAL_LOG_H_

#include <chrono>
#include <mutex>
#include <string>
#include <string_view>

namespace conduit {

class RefusalLog {
 public:
  static constexpr auto kWindow = std::chrono::seconds(10);
  static constexpr int kBurst = 10;

  // Logs `line` as a warning unless this window's lines are used up.
  void Log(const std::string& line);

 private:
  std::mutex mu_;
  std::chrono::steady_clock::time_point window_start_{};
  int logged_in_window_ = 0;
  int unlogged_ = 0;
};

// A caller's text for a log line: control and non-ASCII bytes escaped, at most 200 bytes.
std::string PrintableForLog(std::string_view s);

}  // namespace conduit

#endif  // CONDUIT_DAEMON_ADMIN_REFUSAL_LOG_H_
