#include "process.h"

#include <chrono>
#include <cstdlib>
#include <mutex>

#include "common/log.h"

namespace conduit::grpcshim {
namespace {

constexpr auto kRetryInterval = std::chrono::seconds(1);

struct ProcessState {
  std::mutex mu;
  std::shared_ptr<DaemonConnection> conn;
  std::string last_failure;
  std::chrono::steady_clock::time_point last_attempt{};
  bool tried = false;
};

ProcessState& State() {
  static ProcessState* state = [] {
    SetLogTag("conduit");
    const char* level = getenv("CONDUIT_LOG_LEVEL");
    LogLevel parsed;
    if (level != nullptr && ParseLogLevel(level, &parsed)) SetLogLevel(parsed);
    return new ProcessState();
  }();
  return *state;
}

bool Disabled() {
  const char* disable = getenv("CONDUIT_DISABLE");
  return disable != nullptr && *disable != '\0' && *disable != '0';
}

}  // namespace

std::shared_ptr<DaemonConnection> LiveConnection(std::string* why) {
  ProcessState& s = State();
  if (Disabled()) {
    *why = "CONDUIT_DISABLE is set";
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.conn != nullptr && s.conn->alive()) return s.conn;
  auto now = std::chrono::steady_clock::now();
  if (s.tried && now - s.last_attempt < kRetryInterval) {
    *why = s.last_failure;
    return nullptr;
  }
  s.tried = true;
  s.last_attempt = now;
  s.conn = DaemonConnection::Connect(&s.last_failure);
  if (s.conn == nullptr) *why = s.last_failure;
  return s.conn;
}

}  // namespace conduit::grpcshim
