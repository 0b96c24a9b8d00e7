#include "admin/refusal_log.h"

#include <cstdio>
#include <utility>

#include "common/log.h"

namespace conduit {

void RefusalLog::Log(const std::string& line) {
  int unlogged = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto now = std::chrono::steady_clock::now();
    if (now - window_start_ >= kWindow) {
      window_start_ = now;
      logged_in_window_ = 0;
    }
    if (logged_in_window_ >= kBurst) {
      ++unlogged_;
      return;
    }
    ++logged_in_window_;
    unlogged = std::exchange(unlogged_, 0);
  }
  if (unlogged > 0) {
    CLOG_WARN("%s (and %d refusals before it not logged: at most %d lines per %lld s)", line.c_str(), unlogged, kBurst,
              static_cast<long long>(kWindow.count()));
  } else {
    CLOG_WARN("%s", line.c_str());
  }
}

std::string PrintableForLog(std::string_view s) {
  std::string out;
  for (unsigned char c : s.substr(0, 200)) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      char buf[8];
      snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    }
  }
  if (s.size() > 200) out += "...";
  return out;
}

}  // namespace conduit
