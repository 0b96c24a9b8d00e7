#include "common/busy_poll.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>

namespace conduit {
namespace {

std::atomic<int>& Budget() {
  static std::atomic<int> budget{kDefaultBusyPollMicros};
  return budget;
}

std::atomic<int>& PeerBudget() {
  static std::atomic<int> budget{kDefaultPeerBusyPollMicros};
  return budget;
}

}  // namespace

void SetBusyPollMicros(int micros) { Budget().store(std::clamp(micros, 0, kMaxBusyPollMicros)); }

void SetBusyPollFromEnv() {
  if (BusyPollSetByEnv()) SetBusyPollMicros(atoi(getenv("CONDUIT_BUSY_POLL_US")));
}

bool BusyPollSetByEnv() {
  const char* env = getenv("CONDUIT_BUSY_POLL_US");
  return env != nullptr && *env != '\0';
}

int ClientPeerBusyPollMicros() { return BusyPollSetByEnv() ? BusyPollMicros() : PeerBusyPollMicros(); }

int BusyPollMicros() { return Budget().load(std::memory_order_relaxed); }

void SetPeerBusyPollMicros(int micros) { PeerBudget().store(std::clamp(micros, 0, kMaxBusyPollMicros)); }

int PeerBusyPollMicros() { return PeerBudget().load(std::memory_order_relaxed); }

int SpinPoll(pollfd* fds, nfds_t n) { return SpinPollFor(fds, n, BusyPollMicros()); }

int SpinPollFor(pollfd* fds, nfds_t n, int budget) {
  if (budget <= 0) return poll(fds, n, 0);
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(budget);
  int r = 0;
  SpinUntilTrue(until, [&] {
    r = poll(fds, n, 0);
    return r != 0;
  });
  return r;
}

bool SpinUntilReady(int fd, short events, int budget_micros) {
  pollfd p{fd, events, 0};
  return SpinPollFor(&p, 1, budget_micros >= 0 ? budget_micros : BusyPollMicros()) > 0;
}

}  // namespace conduit
