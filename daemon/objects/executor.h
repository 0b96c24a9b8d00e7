// Executor: one thread running queued closures in order. Membership changes and the
// one-way messages a daemon sends itself run here, so they never run on a socket reader
// that a handler might need in order to make progress. Stop (the daemon's shutdown) ends
// the thread after the closure it runs; closures queued or posted later are dropped.
#ifndef CONDUIT_DAEMON_OBJECTS_EXECUTOR_H_
#define CONDUIT_DAEMON_OBJECTS_EXECUTOR_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>

#include "common/detached_thread.h"
#include "common/thread_guard.h"

namespace conduit::objects {

class Executor {
 public:
  Executor() { SpawnDetached("the object executor", [this] { Loop(); }); }
  void Post(std::function<void()> fn) {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return;
    queue_.push_back(std::move(fn));
    cv_.notify_one();
  }
  // True on the executor's own thread (a closure it runs).
  bool OnThread() const { return running_ == this; }
  void Stop() {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
    queue_.clear();
    cv_.notify_one();
  }

 private:
  void Loop() {
    running_ = this;
    for (;;) {
      std::function<void()> fn;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stopped_ || !queue_.empty(); });
        if (stopped_) return;
        fn = std::move(queue_.front());
        queue_.pop_front();
      }
      // A closure that throws (out of memory) loses its work, never the daemon or this loop.
      RunGuarded("the object executor", fn);
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stopped_ = false;
  static inline thread_local const Executor* running_ = nullptr;
};

}  // namespace conduit::objects

#endif  // CONDUIT_DAEMON_OBJECTS_EXECUTOR_H_
