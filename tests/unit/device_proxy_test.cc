// DeviceProxy: a connection's asynchronous device groups run in order on one thread, the
// first failure is kept as the connection's error, Drain waits for what is queued, and
// groups queued when the connection closes are let go (each told so, so it can release the
// streams waiting on it) instead of being run or forgotten.
#include "session/device_proxy.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

namespace conduit {
namespace {

TEST(DeviceProxyTest, RunsGroupsInOrderAndDrains) {
  DeviceProxy proxy;
  std::mutex mu;
  std::vector<int> ran;
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(proxy.Push([&, i](bool run) {
                       EXPECT_TRUE(run);
                       std::lock_guard<std::mutex> lock(mu);
                       ran.push_back(i);
                       return Status::Ok();
                     }).ok());
  }
  proxy.Drain();
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(ran.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(ran[i], i);
  EXPECT_TRUE(proxy.error().ok());
  EXPECT_FALSE(proxy.busy());
}

TEST(DeviceProxyTest, KeepsTheFirstFailure) {
  DeviceProxy proxy;
  ASSERT_TRUE(proxy.Push([](bool) { return Status::Ok(); }).ok());
  ASSERT_TRUE(proxy.Push([](bool) { return RemoteError("peer 3 died"); }).ok());
  ASSERT_TRUE(proxy.Push([](bool) { return InternalError("later"); }).ok());
  proxy.Drain();
  EXPECT_EQ(proxy.error().code(), ncclRemoteError);
  EXPECT_EQ(proxy.error().message(), "peer 3 died");
}

TEST(DeviceProxyTest, AnExceptionIsAFailureNotACrash) {
  DeviceProxy proxy;
  ASSERT_TRUE(proxy.Push([](bool) -> Status { throw std::runtime_error("boom"); }).ok());
  proxy.Drain();
  EXPECT_FALSE(proxy.error().ok());
}

TEST(DeviceProxyTest, StopLetsQueuedGroupsGoAndRefusesMore) {
  std::atomic<bool> release{false};
  std::atomic<int> run_true{0}, run_false{0};
  {
    DeviceProxy proxy;
    // The first group blocks until released; the ones behind it are still queued at Stop.
    ASSERT_TRUE(proxy.Push([&](bool run) {
                       while (run && !release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
                       ++(run ? run_true : run_false);
                       return Status::Ok();
                     }).ok());
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(proxy.Push([&](bool run) {
                         ++(run ? run_true : run_false);
                         return Status::Ok();
                       }).ok());
    }
    while (!proxy.busy()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the first is running
    proxy.Stop();
    EXPECT_EQ(run_false.load(), 3);  // let go at once, each told it did not run
    EXPECT_FALSE(proxy.Push([](bool) { return Status::Ok(); }).ok());
    release = true;
  }  // the destructor waits for the running group
  EXPECT_EQ(run_true.load(), 1);
  EXPECT_EQ(run_false.load(), 3);
}

}  // namespace
}  // namespace conduit
