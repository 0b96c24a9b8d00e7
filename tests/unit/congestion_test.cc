// transport/congestion.h: connections between daemons get the congestion control chosen at
// start, from their first byte (a listener's accepted connections inherit it), and a name
// the kernel refuses leaves the host's default in place with a reason.
#include "transport/congestion.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>

#include <string>

#include <gtest/gtest.h>

#include "common/fd_io.h"
#include "common/net_addr.h"
#include "transport/tcp.h"

namespace conduit {
namespace {

std::string CongestionOf(int fd) {
  char name[16] = {};
  socklen_t len = sizeof(name);
  if (getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &len) != 0) return "?";
  return std::string(name, strnlen(name, sizeof(name)));
}

std::string HostDefault() {
  UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  return CongestionOf(fd.get());
}

// A connection made the way the daemon makes its peer connections; returns both ends.
void Connect(UniqueFd* dialed, UniqueFd* accepted) {
  UniqueFd listener;
  SockAddr bound;
  ASSERT_TRUE(TcpListen("127.0.0.1:0", &listener, &bound).ok());
  ApplyPeerCongestion(listener.get());
  ASSERT_TRUE(TcpConnect(FormatSockAddr(bound), Deadline::AfterMs(5000), dialed).ok());
  accepted->reset(accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  ASSERT_TRUE(accepted->valid());
}

class CongestionTest : public ::testing::Test {
 protected:
  void TearDown() override { ASSERT_TRUE(SetPeerCongestion(kHostCongestion).ok()); }
};

// reno is always built into Linux; a process with CAP_NET_ADMIN may pick it even where
// tcp_allowed_congestion_control leaves it out (the tests run as root, as conduitd does).
TEST_F(CongestionTest, BothEndsOfAPeerConnectionUseTheChosenAlgorithm) {
  const std::string other = HostDefault() == "reno" ? "cubic" : "reno";
  Status st = SetPeerCongestion(other);
  if (!st.ok()) GTEST_SKIP() << "this kernel or user may not choose " << other << ": " << st.message();
  EXPECT_EQ(PeerCongestion(), other);
  UniqueFd dialed, accepted;
  Connect(&dialed, &accepted);
  EXPECT_EQ(CongestionOf(dialed.get()), other);
  EXPECT_EQ(CongestionOf(accepted.get()), other) << "accepted connections inherit the listener's choice";
}

TEST_F(CongestionTest, HostKeepsTheHostsDefault) {
  ASSERT_TRUE(SetPeerCongestion(kHostCongestion).ok());
  EXPECT_EQ(PeerCongestion(), "");
  UniqueFd dialed, accepted;
  Connect(&dialed, &accepted);
  EXPECT_EQ(CongestionOf(dialed.get()), HostDefault());
  EXPECT_EQ(CongestionOf(accepted.get()), HostDefault());
}

TEST_F(CongestionTest, AnAlgorithmTheKernelRefusesLeavesTheHostsDefaultAndSaysWhy) {
  Status st = SetPeerCongestion("nosuchcc");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("'nosuchcc'"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("host's default"), std::string::npos) << st.message();
  EXPECT_EQ(PeerCongestion(), "") << "an earlier choice does not linger after a refusal";
  UniqueFd dialed, accepted;
  Connect(&dialed, &accepted);
  EXPECT_EQ(CongestionOf(dialed.get()), HostDefault());
}

TEST_F(CongestionTest, NamesAreCheckedBeforeTheKernelIsAsked) {
  EXPECT_TRUE(CheckCongestionName("cubic").ok());
  EXPECT_TRUE(CheckCongestionName("host").ok());
  EXPECT_TRUE(CheckCongestionName("bbr").ok());
  for (const char* bad : {"", "Cubic", "cubic ", "a/b", "sixteen_chars_xx", "bbr;reboot"}) {
    EXPECT_FALSE(CheckCongestionName(bad).ok()) << "'" << bad << "'";
    EXPECT_FALSE(SetPeerCongestion(bad).ok()) << "'" << bad << "'";
  }
}

}  // namespace
}  // namespace conduit
