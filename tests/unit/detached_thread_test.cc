// SpawnDetached (common/detached_thread.h): every task runs once on its own thread, tasks
// may own move-only state, and a thread that cannot be created is an exception with the
// task destroyed unrun. The churn test starts threads that end at once from two starters
// at a time, the pattern (a caller connecting and hanging up in a loop) under which
// std::thread::detach crashed conduitd inside pthread_detach.
#include "common/detached_thread.h"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "common/fd_io.h"

namespace conduit {
namespace {

// Waits (bounded) until `counter` reaches `n`.
bool WaitForCount(const std::atomic<int>& counter, int n, std::chrono::seconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (counter.load() < n) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

TEST(SpawnDetached, ThreadsThatEndAtOnceAllRunWhileOthersStart) {
  constexpr int kStarters = 2;
  constexpr int kPerStarter = 2000;
  std::atomic<int> ran{0};
  std::vector<std::thread> starters;
  for (int s = 0; s < kStarters; ++s) {
    starters.emplace_back([&ran] {
      for (int i = 0; i < kPerStarter; ++i) SpawnDetached("test", [&ran] { ran.fetch_add(1); });
    });
  }
  for (auto& t : starters) t.join();
  EXPECT_TRUE(WaitForCount(ran, kStarters * kPerStarter, std::chrono::seconds(60))) << ran.load() << " ran";
}

TEST(SpawnDetached, TheThreadOwnsMoveOnlyStateAndFreesIt) {
  int fds[2];
  ASSERT_EQ(pipe2(fds, O_CLOEXEC), 0);
  UniqueFd write_end(fds[1]);
  std::atomic<int> ran{0};
  SpawnDetached("test", [fd = std::move(write_end), &ran] {
    EXPECT_EQ(write(fd.get(), "x", 1), 1);
    ran.fetch_add(1);
  });
  EXPECT_FALSE(write_end.valid());
  ASSERT_TRUE(WaitForCount(ran, 1, std::chrono::seconds(10)));
  // The task (and its descriptor) is freed when the thread ends: the reader sees the byte,
  // then end of file.
  char buf[2];
  EXPECT_EQ(read(fds[0], buf, sizeof(buf)), 1);
  EXPECT_EQ(read(fds[0], buf, sizeof(buf)), 0);
  close(fds[0]);
}

TEST(SpawnDetached, NoThreadIsAnExceptionAndTheTaskIsDestroyedUnrun) {
  // The tests above may still have threads on their way out (a CI run once counted one
  // here): wait for them, so that the count below is this test's alone.
  ASSERT_TRUE(AwaitDetachedThreads(std::chrono::steady_clock::now() + std::chrono::seconds(10)).empty())
      << "threads of the tests above";
  // Threads created from now on ask for a stack no machine can map.
  pthread_attr_t saved, huge;
  ASSERT_EQ(pthread_getattr_default_np(&saved), 0);
  ASSERT_EQ(pthread_attr_init(&huge), 0);
  ASSERT_EQ(pthread_attr_setstacksize(&huge, size_t{1} << 46), 0);
  ASSERT_EQ(pthread_setattr_default_np(&huge), 0);
  auto token = std::make_shared<int>(0);
  bool ran = false;
  bool threw = false;
  try {
    SpawnDetached("test", [token, &ran] { ran = true; });
  } catch (const std::system_error&) {
    threw = true;
  }
  ASSERT_EQ(pthread_setattr_default_np(&saved), 0);
  pthread_attr_destroy(&huge);
  pthread_attr_destroy(&saved);
  EXPECT_TRUE(threw);
  EXPECT_FALSE(ran);
  EXPECT_EQ(token.use_count(), 1) << "the task that never ran is destroyed";
  EXPECT_TRUE(RunningDetachedThreads().empty()) << "a thread never created is not counted";
}

// A process about to end can wait for its detached threads (conduitd at SIGTERM): what
// still runs is named, and the wait ends once the last one has released what it held.
TEST(SpawnDetached, RunningThreadsAreCountedByWhatTheyServeUntilTheyEnd) {
  ASSERT_TRUE(AwaitDetachedThreads(std::chrono::steady_clock::now() + std::chrono::seconds(10)).empty())
      << "threads of the tests above";
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  UniqueFd read_end(fds[0]), write_end(fds[1]);
  auto held = std::make_shared<int>(0);
  std::atomic<int> started{0};
  for (int i = 0; i < 3; ++i) {
    SpawnDetached("a reader", [fd = read_end.get(), held, &started] {
      started.fetch_add(1);
      char c;
      (void)read(fd, &c, 1);  // until the write end closes
    });
  }
  SpawnDetached("a loop", [fd = read_end.get(), held] {
    char c;
    (void)read(fd, &c, 1);
  });
  ASSERT_TRUE(WaitForCount(started, 3, std::chrono::seconds(10)));
  EXPECT_EQ(RunningDetachedThreads(), (std::vector<std::string>{"a loop", "a reader x3"}));
  const auto soon = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
  EXPECT_EQ(AwaitDetachedThreads(soon).size(), 2u) << "the wait is bounded";
  write_end.reset();
  EXPECT_TRUE(AwaitDetachedThreads(std::chrono::steady_clock::now() + std::chrono::seconds(10)).empty());
  EXPECT_EQ(held.use_count(), 1) << "every task was destroyed before its thread counted as ended";
}

}  // namespace
}  // namespace conduit
