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

#include <memory>
#include <type_traits>
#include <utility>

namespace conduit {

// Creates a detached thread running entry(arg); throws std::system_error when none can be
// created (as std::thread does: RLIMIT_NPROC, memory), entry then never runs.
void SpawnDetachedThread(void* (*entry)(void*), void* arg);

namespace detached_thread_internal {
// The thread's first frame: owns the task, runs it, frees it. An exception escaping the
// task ends the process, as it would from a std::thread (callers wrap tasks in RunGuarded).
template <typename Task>
void* Run(void* arg) noexcept {
  std::unique_ptr<Task> task(static_cast<Task*>(arg));
  (*task)();
  return nullptr;
}
}  // namespace detached_thread_internal

// Runs `fn` (a callable, moved onto the heap; it may hold move-only state such as a
// UniqueFd) on a new detached thread. Throws std::system_error when no thread can be
// created; `fn` is then destroyed unrun.
template <typename Fn>
void SpawnDetached(Fn&& fn) {
  using Task = std::decay_t<Fn>;
  auto task = std::make_unique<Task>(std::forward<Fn>(fn));
  SpawnDetachedThread(&detached_thread_internal::Run<Task>, task.get());
  task.release();  // the thread owns it now
}

}  // namespace conduit

#endif  // CONDUIT_COMMON_DETACHED_THREAD_H_
