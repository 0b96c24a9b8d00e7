// The accept loops' gate (server/acceptor.h): parked loops accept nothing while
// connections wait in the backlog (a live upgrade hands the sockets over meanwhile); resumed
// they take those connections; stopped they return.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "server/acceptor.h"
#include "server/unix_socket.h"

namespace conduit {
namespace {

class AcceptorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = std::filesystem::temp_directory_path() / ("acceptor_test." + std::to_string(getpid()) + ".sock");
    Status st = ListenUnix(path_, 0600, &listener_);
    ASSERT_TRUE(st.ok()) << st.message();
  }
  void TearDown() override { unlink(path_.c_str()); }

  // Connects (the connection waits in the backlog until accepted).
  UniqueFd Connect() {
    UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path_.c_str());
    EXPECT_EQ(connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    return fd;
  }

  bool WaitFor(const std::atomic<int>& n, int want) {
    for (int i = 0; i < 500 && n.load() < want; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return n.load() >= want;
  }

  std::string path_;
  UniqueFd listener_;
};

TEST_F(AcceptorTest, ParkedLoopsLeaveConnectionsInTheBacklog) {
  ListenerGate gate;
  std::atomic<int> accepted{0};
  std::atomic<uint64_t> refused{0};
  std::vector<std::thread> loops;
  for (int i = 0; i < 2; ++i) {  // two loops on one gate, as the daemon's sockets share one
    loops.emplace_back([&] { AcceptLoop(listener_.get(), "test socket", &gate, &refused, [&](UniqueFd, const SockAddr&) { ++accepted; }); });
  }
  UniqueFd first = Connect();
  ASSERT_TRUE(WaitFor(accepted, 1));

  ASSERT_TRUE(gate.Park(Deadline::AfterMs(5000)));
  UniqueFd waiting1 = Connect();
  UniqueFd waiting2 = Connect();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(accepted.load(), 1) << "a parked loop accepted";

  gate.Resume();
  EXPECT_TRUE(WaitFor(accepted, 3)) << "the connections that waited were not accepted after Resume";

  ASSERT_TRUE(gate.Park(Deadline::AfterMs(5000)));  // parks again, and Stop ends parked loops too
  gate.Stop();
  for (auto& t : loops) t.join();
  EXPECT_EQ(refused.load(), 0u);
}

TEST_F(AcceptorTest, StopEndsRunningLoops) {
  ListenerGate gate;
  std::atomic<uint64_t> refused{0};
  std::thread loop([&] { AcceptLoop(listener_.get(), "test socket", &gate, &refused, [](UniqueFd, const SockAddr&) {}); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  gate.Stop();
  loop.join();
}

TEST_F(AcceptorTest, ALoopBusyPastTheDeadlineLeavesTheGateOpen) {
  ListenerGate gate;
  std::atomic<uint64_t> refused{0};
  std::atomic<int> accepted{0};
  std::atomic<bool> release{false};
  std::thread loop([&] {
    AcceptLoop(listener_.get(), "test socket", &gate, &refused, [&](UniqueFd, const SockAddr&) {
      ++accepted;
      while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    });
  });
  UniqueFd first = Connect();
  ASSERT_TRUE(WaitFor(accepted, 1));
  EXPECT_FALSE(gate.Park(Deadline::AfterMs(100))) << "parked while a loop was still handing a connection over";
  release.store(true);
  UniqueFd second = Connect();
  EXPECT_TRUE(WaitFor(accepted, 2)) << "the gate did not open again after a Park that timed out";
  gate.Stop();
  loop.join();
}

TEST_F(AcceptorTest, ParkWithNoLoopReturnsAtOnce) {
  ListenerGate gate;
  EXPECT_TRUE(gate.Park(Deadline::AfterMs(1000)));
  gate.Resume();
  gate.Stop();
}

}  // namespace
}  // namespace conduit
