#include "watchdog.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>

namespace conduit::perf {
namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Watchdog::Watchdog(int timeout_s, int slots)
    : timeout_s_(timeout_s), slots_(slots), since_ns_(new std::atomic<int64_t>[static_cast<size_t>(slots)]) {
  for (int i = 0; i < slots_; ++i) since_ns_[i].store(0, std::memory_order_relaxed);
  if (timeout_s_ > 0) thread_ = std::thread([this] { Watch(); });
}

Watchdog::~Watchdog() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Watchdog::Enter(int slot) {
  if (timeout_s_ > 0) since_ns_[slot].store(NowNs(), std::memory_order_relaxed);
}

void Watchdog::Leave(int slot) {
  if (timeout_s_ > 0) since_ns_[slot].store(0, std::memory_order_relaxed);
}

void Watchdog::Watch() {
  const int64_t limit_ns = static_cast<int64_t>(timeout_s_) * 1000000000;
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, std::chrono::milliseconds(100), [this] { return stop_; })) {
    const int64_t now = NowNs();
    for (int i = 0; i < slots_; ++i) {
      const int64_t since = since_ns_[i].load(std::memory_order_relaxed);
      if (since == 0 || now - since <= limit_ns) continue;
      char host[256] = "localhost";
      gethostname(host, sizeof host - 1);
      std::printf("%s: Test timeout (%ds): an operation did not complete\n", host, timeout_s_);
      std::fflush(stdout);
      // The stuck thread is inside the library; exiting normally would run
      // destructors under it.
      _exit(3);
    }
  }
}

}  // namespace conduit::perf
