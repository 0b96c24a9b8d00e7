// RunGuarded: the outermost frame of every thread that serves something untrusted.
//
// An exception escaping a thread ends the whole process (std::terminate). A thread that
// serves one connection, one communicator's link or one request must never take the
// daemon down with it, whatever it hit (std::bad_alloc on a huge message, std::system_error
// when no thread can be started for a sub-task): the exception becomes a log line and the
// thread ends, which closes what it served; everything else goes on.
#ifndef CONDUIT_DAEMON_COMMON_THREAD_GUARD_H_
#define CONDUIT_DAEMON_COMMON_THREAD_GUARD_H_

#include <chrono>
#include <exception>
#include <functional>
#include <thread>
#include <utility>

#include "common/detached_thread.h"
#include "common/log.h"

namespace conduit {

template <typename Fn>
void RunGuarded(const char* what, Fn&& fn) noexcept {
  try {
    fn();
  } catch (const std::exception& e) {
    CLOG_ERROR("%s stopped on an unexpected error, the daemon goes on: %s", what, e.what());
  } catch (...) {
    CLOG_ERROR("%s stopped on an unexpected non-standard exception, the daemon goes on", what);
  }
}

// For a thread that runs a service loop for the daemon's whole life (reconnecting to a peer,
// sweeping expired state): an exception escaping the loop is logged and the loop starts
// again a second later, so the daemon neither dies nor silently loses the loop.
template <typename Fn>
void KeepRunning(const char* what, Fn&& fn) noexcept {
  for (;;) {
    bool threw = true;
    RunGuarded(what, [&] {
      fn();
      threw = false;
    });
    if (!threw) return;
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

// Starts `fn` on a detached thread, under RunGuarded. False when no thread can be started
// (pthread_create failing on RLIMIT_NPROC or memory throws std::system_error, which would
// end the daemon where it is not caught): the caller then refuses or fails what the thread
// was for, and says so.
template <typename Fn>
[[nodiscard]] bool StartDetached(const char* what, Fn&& fn) noexcept {
  try {
    SpawnDetached(what, [what, f = std::forward<Fn>(fn)]() mutable { RunGuarded(what, f); });
    return true;
  } catch (const std::exception& e) {
    CLOG_WARN("cannot start a thread for %s: %s", what, e.what());
    return false;
  }
}

}  // namespace conduit

#endif  // CONDUIT_DAEMON_COMMON_THREAD_GUARD_H_
