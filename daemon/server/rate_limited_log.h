// RateLimitedLog: warnings that come in floods (a connection storm, a full descriptor table,
// callers over a cap) at most one line per second, each saying how many were refused since
// the last line. Shared by the accept loops (acceptor.cc) and the router's caps.
#ifndef CONDUIT_DAEMON_SERVER_RATE_LIMITED_LOG_H_
#define CONDUIT_DAEMON_SERVER_RATE_LIMITED_LOG_H_

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

#include "common/log.h"

namespace conduit {

class RateLimitedLog {
 public:
  void Warn(const char* what, const std::string& detail) {
    auto now = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> lock(mu_);
    ++suppressed_;
    if (now - last_ < std::chrono::seconds(1)) return;
    CLOG_WARN("%s: %s (%llu refused since the last such line)", what, detail.c_str(),
              static_cast<unsigned long long>(suppressed_));
    suppressed_ = 0;
    last_ = now;
  }

 private:
  std::mutex mu_;
  std::chrono::steady_clock::time_point last_{};
  uint64_t suppressed_ = 0;
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_SERVER_RATE_LIMITED_LOG_H_
