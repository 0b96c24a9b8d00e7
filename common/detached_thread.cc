#include "common/detached_thread.h"

#include <pthread.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <string_view>
#include <system_error>

namespace conduit {
namespace {

// The detached threads running now, by what they serve.
struct Running {
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, int, std::less<>> by_what;
  int total = 0;
};

// Never destroyed: detached threads may end while the process runs its exit handlers.
Running& TheRunning() {
  static Running* running = new Running;
  return *running;
}

void Started(const char* what) {
  Running& r = TheRunning();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.by_what.find(std::string_view(what));
  if (it == r.by_what.end()) it = r.by_what.emplace(what, 0).first;
  ++it->second;
  ++r.total;
}

std::vector<std::string> ListLocked(const Running& r) {
  std::vector<std::string> out;
  for (const auto& [what, n] : r.by_what) out.push_back(n == 1 ? what : what + " x" + std::to_string(n));
  return out;
}

}  // namespace

void SpawnDetachedThread(const char* what, void* (*entry)(void*), void* arg) {
  pthread_attr_t attr;
  int rc = pthread_attr_init(&attr);
  if (rc != 0) throw std::system_error(rc, std::generic_category(), "pthread_attr_init");
  rc = pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  Started(what);  // before the thread can end
  pthread_t thread;
  if (rc == 0) rc = pthread_create(&thread, &attr, entry, arg);
  pthread_attr_destroy(&attr);
  if (rc != 0) {
    DetachedThreadEnded(what);
    throw std::system_error(rc, std::generic_category(), "cannot create a thread");
  }
}

void DetachedThreadEnded(const char* what) noexcept {
  Running& r = TheRunning();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.by_what.find(std::string_view(what));
  if (it != r.by_what.end() && --it->second == 0) r.by_what.erase(it);
  if (--r.total == 0) r.cv.notify_all();
}

std::vector<std::string> RunningDetachedThreads() {
  Running& r = TheRunning();
  std::lock_guard<std::mutex> lock(r.mu);
  return ListLocked(r);
}

std::vector<std::string> AwaitDetachedThreads(std::chrono::steady_clock::time_point deadline) {
  Running& r = TheRunning();
  std::unique_lock<std::mutex> lock(r.mu);
  r.cv.wait_until(lock, deadline, [&r] { return r.total == 0; });
  return ListLocked(r);
}

}  // namespace conduit
