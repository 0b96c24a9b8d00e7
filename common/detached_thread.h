// SpawnDetached: starts a thread that nobody joins, created detached.
//
// Why not std::thread(fn).detach(): that creates the thread joinable and detaches it
// afterwards, and glibc's pthread_detach (2.36, Debian 12) reads the thread's descriptor
// again after marking it detached. A thread that ends in that instant frees its own stack,
// and with many threads starting and ending (a caller that connects and hangs up
// thousands of times a second) the stack cache unmaps it before that read: conduitd died
// with SIGSEGV inside pthread_detach (upgrade_test, core file, 2026-11-26). A thread created
// detached is never detached afterwards, so nothing touches it once it has started.
#ifndef CONDUIT_COMMON_DETACHED_THREAD_H_
#define CONDUIT_COMMON_DETACHED_THREAD_H_

#include <chrono>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace conduit {

// Creates a detached thread running entry(arg), counted as running under `what` until it
// calls DetachedThreadEnded(what); throws std::system_error when none can be created (as
// std::thread does: RLIMIT_NPROC, memory), entry then never runs.
void SpawnDetachedThread(const char* what, void* (*entry)(void*), void* arg);
void DetachedThreadEnded(const char* what) noexcept;

// Nobody joins a detached thread, but a process that is about to end can wait for them:
// what still runs, as "what" or "what xN" (empty when nothing does)...
std::vector<std::string> RunningDetachedThreads();
// ... and a wait until nothing does or `deadline` passes, returning what still runs.
std::vector<std::string> AwaitDetachedThreads(std::chrono::steady_clock::time_point deadline);

namespace detached_thread_internal {
template <typename Task>
struct Named {
  const char* what;
  Task task;
};
// The thread's first frame: owns the task, runs it, frees it, and is counted out. An
// exception escaping the task ends the process, as it would from a std::thread (callers
// wrap tasks in RunGuarded).
template <typename Task>
void* Run(void* arg) noexcept {
  std::unique_ptr<Named<Task>> named(static_cast<Named<Task>*>(arg));
  const char* what = named->what;
  named->task();
  named.reset();  // what the task held (a connection) is released before it counts as ended
  DetachedThreadEnded(what);
  return nullptr;
}
}  // namespace detached_thread_internal

// Runs `fn` (a callable, moved onto the heap; it may hold move-only state such as a
// UniqueFd) on a new detached thread; `what` (a string literal) says what it serves, in
// RunningDetachedThreads. Throws std::system_error when no thread can be created; `fn` is
// then destroyed unrun.
template <typename Fn>
void SpawnDetached(const char* what, Fn&& fn) {
  using Task = std::decay_t<Fn>;
  auto named = std::make_unique<detached_thread_internal::Named<Task>>(
      detached_thread_internal::Named<Task>{what, Task(std::forward<Fn>(fn))});
  SpawnDetachedThread(what, &detached_thread_internal::Run<Task>, named.get());
  named.release();  // the thread owns it now
}

}  // namespace conduit

#endif  // CONDUIT_COMMON_DETACHED_THREAD_H_
