// InputOnlyPollFd (common/fd_io.h), watched the way gRPC's iomgr watches a
// descriptor: in an epoll set of its own, for input and output, edge-triggered.
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "common/fd_io.h"

namespace conduit {
namespace {

class InputOnlyPollFdTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    program_.reset(sv[0]);
    daemon_.reset(sv[1]);
    ASSERT_TRUE(InputOnlyPollFd(program_.get(), &watched_).ok());
    loop_.reset(epoll_create1(EPOLL_CLOEXEC));
    ASSERT_TRUE(loop_.valid());
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLOUT | EPOLLET;
    ASSERT_EQ(epoll_ctl(loop_.get(), EPOLL_CTL_ADD, watched_.get(), &ev), 0);
  }

  // The events the loop reports now (0 when none).
  static uint32_t Events(int loop) {
    epoll_event ev{};
    return epoll_wait(loop, &ev, 1, 0) == 1 ? ev.events : 0;
  }
  uint32_t Events() { return Events(loop_.get()); }

  static void Write(int fd, const char* what) { ASSERT_EQ(write(fd, what, 1), 1); }
  static void Read(int fd, size_t n) {
    char buf[64];
    ASSERT_EQ(read(fd, buf, n), static_cast<ssize_t>(n));
  }

  UniqueFd program_, daemon_, watched_, loop_;
};

TEST_F(InputOnlyPollFdTest, TheDaemonReadingWhatWeSentWakesNobody) {
  // The socket itself, watched the same way, for comparison: it does report the peer's read.
  UniqueFd direct(epoll_create1(EPOLL_CLOEXEC));
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLOUT | EPOLLET;
  ASSERT_EQ(epoll_ctl(direct.get(), EPOLL_CTL_ADD, program_.get(), &ev), 0);
  EXPECT_EQ(Events(direct.get()), static_cast<uint32_t>(EPOLLOUT));  // writable from the start
  EXPECT_EQ(Events(), 0u);

  Write(program_.get(), "q");
  Read(daemon_.get(), 1);
  EXPECT_EQ(Events(direct.get()), static_cast<uint32_t>(EPOLLOUT));
  EXPECT_EQ(Events(), 0u);
}

TEST_F(InputOnlyPollFdTest, EveryFrameFromTheDaemonIsANewEdge) {
  Write(daemon_.get(), "a");
  EXPECT_EQ(Events(), static_cast<uint32_t>(EPOLLIN));
  EXPECT_EQ(Events(), 0u);  // edge-triggered: reported once
  // More input while the first is still unread (a frame arriving during a drain) must
  // wake the loop again, or it would sit there until the next one.
  Write(daemon_.get(), "b");
  EXPECT_EQ(Events(), static_cast<uint32_t>(EPOLLIN));
  Read(program_.get(), 2);
  EXPECT_EQ(Events(), 0u);
  Write(daemon_.get(), "c");
  EXPECT_EQ(Events(), static_cast<uint32_t>(EPOLLIN));
}

TEST_F(InputOnlyPollFdTest, TheDaemonClosingIsInput) {
  daemon_.reset();
  EXPECT_EQ(Events(), static_cast<uint32_t>(EPOLLIN));
}

}  // namespace
}  // namespace conduit
