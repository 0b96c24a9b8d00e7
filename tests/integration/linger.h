// Lingering: a test program (coll_check, device_probe) keeps its communicators open after
// its checks, so that a test can read the daemon's view of them (communicators, traces,
// counters) before they go. The program prints a line with "lingering", which the test
// waits for; it then stays until the test creates the release file, at most `max_ms`.
// The test releases it as soon as it has read what it needed, so no run waits out a fixed
// time sized for the slowest (sanitizer) builds. Without a release file, it stays `max_ms`.
#ifndef CONDUIT_TESTS_INTEGRATION_LINGER_H_
#define CONDUIT_TESTS_INTEGRATION_LINGER_H_

#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

namespace conduit::it {

inline void LingerUntilReleased(int max_ms, const std::string& release_file) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(max_ms);
  while (std::chrono::steady_clock::now() < until) {
    if (!release_file.empty() && ::access(release_file.c_str(), F_OK) == 0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// The test's side: the programs lingering on `release_file` may end.
inline void ReleaseLingerers(const std::string& release_file) { std::ofstream(release_file) << "release\n"; }

}  // namespace conduit::it

#endif  // CONDUIT_TESTS_INTEGRATION_LINGER_H_
