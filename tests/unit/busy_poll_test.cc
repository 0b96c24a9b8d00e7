// SpinPoll (common/busy_poll.h): what a spinning wait returns, never how fast.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "common/busy_poll.h"
#include "common/fd_io.h"

namespace conduit {
namespace {

class BusyPollTest : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_ = BusyPollMicros();
    saved_peer_ = PeerBusyPollMicros();
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    a_.reset(sv[0]);
    b_.reset(sv[1]);
  }
  void TearDown() override {
    SetBusyPollMicros(saved_);
    SetPeerBusyPollMicros(saved_peer_);
  }

  int saved_ = 0, saved_peer_ = 0;
  UniqueFd a_, b_;
};

TEST_F(BusyPollTest, BudgetIsClampedToItsRange) {
  SetBusyPollMicros(-5);
  EXPECT_EQ(BusyPollMicros(), 0);
  SetBusyPollMicros(kMaxBusyPollMicros + 1);
  EXPECT_EQ(BusyPollMicros(), kMaxBusyPollMicros);
  SetBusyPollMicros(30);
  EXPECT_EQ(BusyPollMicros(), 30);
}

TEST_F(BusyPollTest, ReadyDescriptorIsReportedWithoutSpinning) {
  SetBusyPollMicros(0);
  ASSERT_EQ(write(b_.get(), "x", 1), 1);
  EXPECT_TRUE(SpinUntilReady(a_.get(), POLLIN));
  pollfd p[2] = {{b_.get(), POLLIN, 0}, {a_.get(), POLLIN, 0}};
  EXPECT_EQ(SpinPoll(p, 2), 1);
  EXPECT_EQ(p[0].revents, 0);
  EXPECT_TRUE(p[1].revents & POLLIN);
}

TEST_F(BusyPollTest, NothingWithinTheBudgetReturnsZeroSoTheCallerBlocks) {
  SetBusyPollMicros(0);
  EXPECT_FALSE(SpinUntilReady(a_.get(), POLLIN));
  SetBusyPollMicros(2000);
  EXPECT_FALSE(SpinUntilReady(a_.get(), POLLIN));
  SetBusyPollMicros(0);
  EXPECT_FALSE(SpinUntilReady(a_.get(), POLLIN, 2000)) << "a budget of its own";
  ASSERT_EQ(write(b_.get(), "x", 1), 1);
  EXPECT_TRUE(SpinUntilReady(a_.get(), POLLIN, 2000));
}

TEST_F(BusyPollTest, BytesArrivingWhileSpinningAreCaught) {
  SetBusyPollMicros(kMaxBusyPollMicros);  // 100 ms: far longer than the writer's delay
  std::thread writer([this] {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    ASSERT_EQ(write(b_.get(), "x", 1), 1);
  });
  EXPECT_TRUE(SpinUntilReady(a_.get(), POLLIN));
  writer.join();
  char c = 0;
  EXPECT_EQ(read(a_.get(), &c, 1), 1);
  EXPECT_EQ(c, 'x');
}

// The peer budget is its own: setting one leaves the other, and SpinPollFor spins for the
// budget it is given.
TEST_F(BusyPollTest, ThePeerBudgetIsSeparate) {
  SetBusyPollMicros(30);
  SetPeerBusyPollMicros(kMaxBusyPollMicros + 1);
  EXPECT_EQ(PeerBusyPollMicros(), kMaxBusyPollMicros);
  EXPECT_EQ(BusyPollMicros(), 30);
  SetPeerBusyPollMicros(-1);
  EXPECT_EQ(PeerBusyPollMicros(), 0);
  EXPECT_EQ(BusyPollMicros(), 30);
  std::thread writer([this] {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    ASSERT_EQ(write(b_.get(), "x", 1), 1);
  });
  pollfd p{a_.get(), POLLIN, 0};
  EXPECT_EQ(SpinPollFor(&p, 1, kMaxBusyPollMicros), 1) << "bytes within the given budget are caught";
  writer.join();
  pollfd q{b_.get(), POLLIN, 0};
  EXPECT_EQ(SpinPollFor(&q, 1, 0), 0) << "budget 0: one poll, nothing ready";
}

// A client library's waits on other daemons take the peer budget, unless the user set
// $CONDUIT_BUSY_POLL_US: then every wait takes that, 0 (never spin) included.
TEST_F(BusyPollTest, ClientPeerWaitsTakeThePeerBudgetUnlessTheUserSetOne) {
  const char* before = getenv("CONDUIT_BUSY_POLL_US");
  const std::string saved_env = before != nullptr ? before : "";
  SetBusyPollMicros(50);
  SetPeerBusyPollMicros(200);
  unsetenv("CONDUIT_BUSY_POLL_US");
  EXPECT_FALSE(BusyPollSetByEnv());
  EXPECT_EQ(ClientPeerBusyPollMicros(), 200);
  setenv("CONDUIT_BUSY_POLL_US", "", 1);  // empty: not set
  EXPECT_FALSE(BusyPollSetByEnv());
  EXPECT_EQ(ClientPeerBusyPollMicros(), 200);
  setenv("CONDUIT_BUSY_POLL_US", "0", 1);
  SetBusyPollFromEnv();
  EXPECT_TRUE(BusyPollSetByEnv());
  EXPECT_EQ(BusyPollMicros(), 0);
  EXPECT_EQ(ClientPeerBusyPollMicros(), 0) << "a user who turned spinning off gets none";
  setenv("CONDUIT_BUSY_POLL_US", "75", 1);
  SetBusyPollFromEnv();
  EXPECT_EQ(ClientPeerBusyPollMicros(), 75);
  if (before != nullptr) {
    setenv("CONDUIT_BUSY_POLL_US", saved_env.c_str(), 1);
  } else {
    unsetenv("CONDUIT_BUSY_POLL_US");
  }
}

TEST_F(BusyPollTest, HangupCountsAsReady) {
  SetBusyPollMicros(1000);
  b_.reset();
  EXPECT_TRUE(SpinUntilReady(a_.get(), POLLIN));
}

}  // namespace
}  // namespace conduit
