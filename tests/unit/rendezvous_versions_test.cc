// The root's choice of a communicator's collective message version (collectives/rendezvous.h):
// the newest version the root and every member's daemon speak, 3 for members that name no
// range (daemons from before negotiation), and a refusal that reaches every rank at once
// (not at the timeout) when the versions do not meet. Each rank's daemon is a thread on one
// end of a socketpair; the table serves the other end, as it serves a Register connection.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <cstring>
#include <thread>
#include <vector>

#include "collectives/peer_messages.h"
#include "collectives/rendezvous.h"
#include "common/frame.h"
#include "common/fd_io.h"
#include "security/comm_secret.h"

namespace conduit {
namespace {

constexpr VersionRange kOnly3{3, 3};

struct Answer {
  Status status;
  uint32_t version = 0;
};

class Rendezvous {
 public:
  explicit Rendezvous(VersionRange root) : table_(root) {
    secret_.fill(0);
    secret_[0] = 7;
  }
  ~Rendezvous() {
    for (auto& t : threads_) t.join();
  }

  // Registers `rank` of `nranks` from daemon 10.0.0.<rank>:7650 speaking `versions`, as
  // the payload ParseRegister reads (no range for 3 only); the answer lands in *out.
  void Register(int rank, int nranks, VersionRange versions, Answer* out, int64_t timeout_ms = 5000) {
    int fds[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    UniqueFd member(fds[0]);
    auto root = std::make_shared<UniqueFd>(fds[1]);
    peerproto::RegisterRequest req{};
    req.comm_key = CommKeyOf(secret_);
    req.nranks = nranks;
    req.rank = rank;
    CopyCString(req.daemon_addr, ("10.0.0." + std::to_string(rank + 1) + ":7650").c_str());
    memcpy(req.secret, secret_.data(), sizeof(req.secret));
    std::vector<uint8_t> payload(sizeof(req));
    memcpy(payload.data(), &req, sizeof(req));
    if (versions.oldest != 3 || versions.newest != 3) {
      peerproto::RegisterVersions range{versions.oldest, versions.newest};
      payload.resize(sizeof(req) + sizeof(range));
      memcpy(payload.data() + sizeof(req), &range, sizeof(range));
    }
    peerproto::RegisterRequest parsed;
    VersionRange theirs;
    ASSERT_TRUE(ParseRegister(payload, &parsed, &theirs).ok());
    threads_.emplace_back([this, root, parsed, theirs, timeout_ms] {
      table_.Serve(root->get(), parsed, theirs, "", Deadline::AfterMs(timeout_ms));
    });
    threads_.emplace_back([member = std::make_shared<UniqueFd>(std::move(member)), nranks, out] {
      Frame frame;
      Status st = ReadFrame(member->get(), peerproto::kMagic, peerproto::kVersion, peerproto::kMaxPayload, &frame,
                            Deadline::AfterMs(20000));
      std::vector<std::string> addrs;
      std::vector<int> ring;
      if (st.ok()) st = ParseMembership(frame.payload, nranks, &addrs, &ring, &out->version);
      out->status = st;
    });
  }
  void Wait() {
    for (auto& t : threads_) t.join();
    threads_.clear();
  }
  size_t open() { return table_.open(); }

 private:
  RendezvousTable table_;
  CommSecret secret_;
  std::vector<std::thread> threads_;
};

TEST(RendezvousVersionsTest, MembersWithoutARangeSpeak3) {
  Rendezvous r(VersionRange{3, 4});
  Answer a, b;
  r.Register(0, 2, kOnly3, &a);
  r.Register(1, 2, VersionRange{3, 4}, &b);
  r.Wait();
  ASSERT_TRUE(a.status.ok()) << a.status.message();
  ASSERT_TRUE(b.status.ok()) << b.status.message();
  EXPECT_EQ(a.version, 3u);
  EXPECT_EQ(b.version, 3u);
}

TEST(RendezvousVersionsTest, TheNewestEveryoneSpeaks) {
  Rendezvous r(VersionRange{3, 5});
  Answer a, b, c;
  r.Register(0, 3, VersionRange{3, 5}, &a);
  r.Register(1, 3, VersionRange{4, 6}, &b);
  r.Register(2, 3, VersionRange{3, 5}, &c);
  r.Wait();
  for (const Answer* x : {&a, &b, &c}) {
    ASSERT_TRUE(x->status.ok()) << x->status.message();
    EXPECT_EQ(x->version, 5u);
  }
}

TEST(RendezvousVersionsTest, TheRootsRangeCounts) {
  Rendezvous r(kOnly3);
  Answer a, b;
  r.Register(0, 2, VersionRange{3, 4}, &a);
  r.Register(1, 2, VersionRange{3, 4}, &b);
  r.Wait();
  ASSERT_TRUE(a.status.ok()) << a.status.message();
  EXPECT_EQ(a.version, 3u);
  EXPECT_EQ(b.version, 3u);
}

// The second member speaks nothing the first does: both hear why, long before the deadline.
TEST(RendezvousVersionsTest, NoVersionInCommonFailsEveryRankAtOnce) {
  Rendezvous r(VersionRange{3, 6});
  Answer a, b;
  const auto start = std::chrono::steady_clock::now();
  r.Register(0, 3, VersionRange{3, 4}, &a, 60000);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // rank 0 waits for the others
  r.Register(1, 3, VersionRange{5, 6}, &b, 60000);
  r.Wait();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_FALSE(a.status.ok());
  EXPECT_FALSE(b.status.ok());
  EXPECT_NE(b.status.message().find("speaks collective protocol 5-6"), std::string::npos) << b.status.message();
  EXPECT_NE(b.status.message().find("only 3-4"), std::string::npos) << b.status.message();
  EXPECT_EQ(r.open(), 0u);
}

// A first member the root cannot serve leaves nothing behind.
TEST(RendezvousVersionsTest, AFirstMemberTheRootCannotServeLeavesNoEntry) {
  Rendezvous r(kOnly3);
  Answer a;
  r.Register(0, 2, VersionRange{4, 4}, &a, 60000);
  r.Wait();
  EXPECT_FALSE(a.status.ok());
  EXPECT_EQ(r.open(), 0u);
}

TEST(RendezvousVersionsTest, RegisterPayloads) {
  peerproto::RegisterRequest req{};
  VersionRange v;
  std::vector<uint8_t> bare(sizeof(req));
  ASSERT_TRUE(ParseRegister(bare, &req, &v).ok());
  EXPECT_EQ(v.oldest, 3u);
  EXPECT_EQ(v.newest, 3u);
  std::vector<uint8_t> ranged(sizeof(req) + sizeof(peerproto::RegisterVersions));
  for (auto [oldest, newest, ok] : {std::tuple{3u, 4u, true}, std::tuple{0u, 4u, false}, std::tuple{5u, 4u, false}}) {
    peerproto::RegisterVersions range{oldest, newest};
    memcpy(ranged.data() + sizeof(req), &range, sizeof(range));
    EXPECT_EQ(ParseRegister(ranged, &req, &v).ok(), ok) << oldest << "-" << newest;
  }
  for (size_t size : {size_t{0}, sizeof(req) - 1, sizeof(req) + 4, sizeof(req) + 9}) {
    EXPECT_FALSE(ParseRegister(std::vector<uint8_t>(size), &req, &v).ok()) << size << " bytes";
  }
}

}  // namespace
}  // namespace conduit
