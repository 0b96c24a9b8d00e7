#include "common/busy_poll.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>

namespace conduit {
namespace {

int DefaultBudget() {
  cpu_set_t cpus;
  if (sched_getaffinity(0, sizeof(cpus), &cpus) == 0 && CPU_COUNT(&cpus) <= 1) return 0;
  return kDefaultBusyPollMicros;
}

std::atomic<int>& Budget() {
  static std::atomic<int> budget{DefaultBudget()};
  return budget;
}

}  // namespace

void SetBusyPollMicros(int micros) { Budget().store(std::clamp(micros, 0, kMaxBusyPollMicros)); }

void SetBusyPollFromEnv() {
  const char* env = getenv("CONDUIT_BUSY_POLL_US");
  if (env != nullptr && *env != '\0') SetBusyPollMicros(atoi(env));
}

int BusyPollMicros() { return Budget().load(std::memory_order_relaxed); }

int SpinPoll(pollfd* fds, nfds_t n) {
  int r = poll(fds, n, 0);
  const int budget = BusyPollMicros();
  if (r != 0 || budget == 0) return r;
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(budget);
  do {
    sched_yield();
    r = poll(fds, n, 0);
  } while (r == 0 && std::chrono::steady_clock::now() < until);
  return r;
}

bool SpinUntilReady(int fd, short events) {
  pollfd p{fd, events, 0};
  return SpinPoll(&p, 1) > 0;
}

}  // namespace conduit
