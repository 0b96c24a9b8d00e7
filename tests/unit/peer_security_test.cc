// The daemon-to-daemon handshake and sealed records (daemon/security), over real loopback
// TCP: who is authenticated, who is refused and how fast, what a sealed connection carries,
// and that a recorded handshake or an altered record gets nobody anywhere.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <future>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/frame.h"
#include "common/net_addr.h"
#include "protocol/auth_protocol.h"
#include "security/aead_record_cipher.h"
#include "security/cluster_key.h"
#include "security/comm_secret.h"
#include "security/peer_security.h"
#include "transport/tcp.h"

namespace conduit {
namespace {

using Clock = std::chrono::steady_clock;

std::unique_ptr<PeerSecurity> Make(PeerMode mode, const ClusterKey& key, const std::string& self, bool seal = false) {
  PeerSecurityOptions o;
  o.mode = mode;
  o.key = key;
  o.self = self;
  o.seal = seal;
  std::unique_ptr<PeerSecurity> s;
  EXPECT_TRUE(PeerSecurity::Create(o, &s).ok());
  return s;
}

ClusterKey RandomKey() {
  ClusterKey k;
  EXPECT_TRUE(EphemeralClusterKey(&k).ok());
  return k;
}

// A listening socket on loopback whose next connection is handed to `accept_side`.
class Listener {
 public:
  Listener() {
    SockAddr bound;
    EXPECT_TRUE(TcpListen("127.0.0.1:0", &fd_, &bound).ok());
    addr_ = FormatSockAddr(bound);
  }
  const std::string& addr() const { return addr_; }
  UniqueFd AcceptOne() {
    int fd = accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC);
    return UniqueFd(fd);
  }

 private:
  UniqueFd fd_;
  std::string addr_;
};

// Forwards one connection both ways and keeps what the dialer sent.
class RecordingProxy {
 public:
  const std::string& addr() const { return listener_.addr(); }
  // Serves the next connection, on its own thread, forwarding it to `target`.
  void Start(const std::string& target) {
    thread_ = std::thread([this, target] { Run(target); });
  }
  void Join() { thread_.join(); }
  const std::string& sent() const { return sent_; }

 private:
  void Run(const std::string& target) {
    UniqueFd in = listener_.AcceptOne();
    UniqueFd out;
    ASSERT_TRUE(TcpConnect(target, Deadline::AfterMs(2000), &out).ok());
    fcntl(out.get(), F_SETFL, fcntl(out.get(), F_GETFL) & ~O_NONBLOCK);  // the pumps block
    std::thread back([&] { Pump(out.get(), in.get(), nullptr); });
    Pump(in.get(), out.get(), &sent_);
    shutdown(out.get(), SHUT_WR);
    back.join();
  }
  static void Pump(int from, int to, std::string* keep) {
    char buf[4096];
    for (;;) {
      ssize_t r = read(from, buf, sizeof(buf));
      if (r <= 0) return;
      if (keep != nullptr) keep->append(buf, static_cast<size_t>(r));
      if (write(to, buf, static_cast<size_t>(r)) != r) return;
    }
  }
  Listener listener_;
  std::thread thread_;
  std::string sent_;
};

struct Sides {
  Status dial, accept;
  Conn dialer, acceptor;
  PeerIdentity dialer_saw, acceptor_saw;
};

// One connection from `dialer` to `acceptor`, through `via` when given.
Sides Connect(const PeerSecurity& dialer, const PeerSecurity& acceptor, bool sealable, RecordingProxy* via = nullptr) {
  Listener l;
  Sides s;
  if (via != nullptr) via->Start(l.addr());
  std::thread t([&] { s.accept = acceptor.Accept(l.AcceptOne(), "test", &s.acceptor, &s.acceptor_saw); });
  s.dial = dialer.Dial(via != nullptr ? via->addr() : l.addr(), Deadline::AfterMs(5000), sealable, &s.dialer,
                       &s.dialer_saw);
  t.join();
  return s;
}

TEST(PeerSecurityTest, SameKeyAuthenticatesBothWaysWithProvenIdentities) {
  ClusterKey key = RandomKey();
  auto a = Make(PeerMode::kClusterKey, key, "10.0.0.1:7650");
  auto b = Make(PeerMode::kClusterKey, key, "10.0.0.2:7650");
  Sides s = Connect(*a, *b, /*sealable=*/false);
  ASSERT_TRUE(s.dial.ok()) << s.dial.message();
  ASSERT_TRUE(s.accept.ok()) << s.accept.message();
  EXPECT_EQ(s.dialer_saw.daemon, "10.0.0.2:7650");
  EXPECT_EQ(s.acceptor_saw.daemon, "10.0.0.1:7650");
  EXPECT_FALSE(s.dialer.sealed());
  EXPECT_FALSE(s.acceptor.sealed());
  // Unsealed: the bytes after the handshake are the protocol's own.
  ASSERT_TRUE(WriteFrame(s.dialer, 0x1234, 1, 7, 9, "hello", 5, Deadline::AfterMs(1000)).ok());
  Frame f;
  ASSERT_TRUE(ReadFrame(s.acceptor.fd(), 0x1234, 1, 100, &f, Deadline::AfterMs(1000)).ok());
  EXPECT_EQ(std::string(f.payload.begin(), f.payload.end()), "hello");
}

TEST(PeerSecurityTest, DifferentKeysAreRefusedOnBothSidesNamingTheKeyIds) {
  auto a = Make(PeerMode::kClusterKey, RandomKey(), "10.0.0.1:7650");
  auto b = Make(PeerMode::kClusterKey, RandomKey(), "10.0.0.2:7650");
  Sides s = Connect(*a, *b, false);
  EXPECT_FALSE(s.dial.ok());
  EXPECT_FALSE(s.accept.ok());
  EXPECT_NE(s.dial.message().find("different cluster key"), std::string::npos) << s.dial.message();
  EXPECT_NE(s.accept.message().find("key"), std::string::npos) << s.accept.message();
}

TEST(PeerSecurityTest, DaemonsWithoutAClusterKeyTalkOnlyToThemselves) {
  auto a = Make(PeerMode::kSelfOnly, ClusterKey(), "10.0.0.1:7650");
  auto b = Make(PeerMode::kSelfOnly, ClusterKey(), "10.0.0.2:7650");
  Sides other = Connect(*a, *b, false);
  EXPECT_FALSE(other.dial.ok());
  EXPECT_NE(other.dial.message().find("no --cluster-key"), std::string::npos) << other.dial.message();
  EXPECT_FALSE(other.accept.ok());
  Sides self = Connect(*a, *a, false);
  EXPECT_TRUE(self.dial.ok()) << self.dial.message();
  EXPECT_TRUE(self.accept.ok()) << self.accept.message();
}

TEST(PeerSecurityTest, AFrameWithoutHandshakeIsRefusedAtOnce) {
  auto b = Make(PeerMode::kClusterKey, RandomKey(), "10.0.0.2:7650");
  Listener l;
  Status accepted;
  Conn conn;
  PeerIdentity who;
  auto start = Clock::now();
  std::thread t([&] { accepted = b->Accept(l.AcceptOne(), "stranger", &conn, &who); });
  UniqueFd fd;
  ASSERT_TRUE(TcpConnect(l.addr(), Deadline::AfterMs(2000), &fd).ok());
  // What a daemon started with --insecure-peers sends first: a peer-protocol frame header.
  FrameHeader h{0x50544443, 2, 3, 24, 0};
  ASSERT_TRUE(WriteFull(fd.get(), &h, sizeof(h), Deadline::AfterMs(1000)).ok());
  t.join();
  EXPECT_FALSE(accepted.ok());
  EXPECT_NE(accepted.message().find("insecure-peers"), std::string::npos) << accepted.message();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
}

TEST(PeerSecurityTest, ASilentConnectionIsDroppedAfterTheHandshakeTimeout) {
  auto b = Make(PeerMode::kClusterKey, RandomKey(), "10.0.0.2:7650");
  Listener l;
  UniqueFd fd;
  ASSERT_TRUE(TcpConnect(l.addr(), Deadline::AfterMs(2000), &fd).ok());
  Conn conn;
  PeerIdentity who;
  auto start = Clock::now();
  Status st = b->Accept(l.AcceptOne(), "silent", &conn, &who);
  auto took = Clock::now() - start;
  EXPECT_FALSE(st.ok());
  EXPECT_GE(took, std::chrono::milliseconds(authproto::kHandshakeTimeoutMs - 100));
  EXPECT_LT(took, std::chrono::milliseconds(authproto::kHandshakeTimeoutMs + 2000));
}

TEST(PeerSecurityTest, ARecordedHandshakeCannotBeReplayed) {
  ClusterKey key = RandomKey();
  auto a = Make(PeerMode::kClusterKey, key, "10.0.0.1:7650");
  auto b = Make(PeerMode::kClusterKey, key, "10.0.0.2:7650");
  // A real handshake through a recording proxy.
  RecordingProxy proxy;
  Sides real = Connect(*a, *b, false, &proxy);
  ASSERT_TRUE(real.dial.ok()) << real.dial.message();
  ASSERT_TRUE(real.accept.ok()) << real.accept.message();
  real = Sides();
  proxy.Join();
  ASSERT_EQ(proxy.sent().size(), sizeof(authproto::Hello) + sizeof(authproto::Finish));

  // The same bytes, replayed by someone without the key, to a new connection.
  Listener victim_port;
  Status replayed;
  Conn victim_conn;
  PeerIdentity who;
  std::thread victim([&] { replayed = b->Accept(victim_port.AcceptOne(), "replayer", &victim_conn, &who); });
  UniqueFd fd;
  ASSERT_TRUE(TcpConnect(victim_port.addr(), Deadline::AfterMs(2000), &fd).ok());
  ASSERT_TRUE(WriteFull(fd.get(), proxy.sent().data(), sizeof(authproto::Hello), Deadline::AfterMs(1000)).ok());
  authproto::Challenge c;
  ASSERT_TRUE(ReadFull(fd.get(), &c, sizeof(c), Deadline::AfterMs(2000)).ok());
  ASSERT_TRUE(WriteFull(fd.get(), proxy.sent().data() + sizeof(authproto::Hello), sizeof(authproto::Finish),
                        Deadline::AfterMs(1000))
                  .ok());
  victim.join();
  EXPECT_FALSE(replayed.ok());
  EXPECT_NE(replayed.message().find("failed authentication"), std::string::npos) << replayed.message();
}

TEST(PeerSecurityTest, SealedConnectionsCarryEveryByteInOrder) {
  ClusterKey key = RandomKey();
  auto a = Make(PeerMode::kClusterKey, key, "10.0.0.1:7650", /*seal=*/true);
  auto b = Make(PeerMode::kClusterKey, key, "10.0.0.2:7650", /*seal=*/false);  // the dialer asks
  Sides s = Connect(*a, *b, /*sealable=*/true);
  ASSERT_TRUE(s.dial.ok()) << s.dial.message();
  ASSERT_TRUE(s.accept.ok()) << s.accept.message();
  ASSERT_TRUE(s.dialer.sealed());
  ASSERT_TRUE(s.acceptor.sealed());
  std::mt19937 rng(7);
  for (size_t size : {size_t{1}, size_t{15}, size_t{65536}, size_t{65537}, size_t{5u << 20}}) {
    std::vector<uint8_t> data(size);
    for (auto& b : data) b = static_cast<uint8_t>(rng());
    // Two pieces, so records straddle iovec boundaries.
    iovec iov[2] = {{data.data(), size / 3}, {data.data() + size / 3, size - size / 3}};
    std::thread writer([&] { ASSERT_TRUE(s.dialer.WriteV(iov, 2, Deadline::AfterMs(5000)).ok()); });
    std::vector<uint8_t> got(size);
    uint8_t first = 0;
    ASSERT_TRUE(s.acceptor.Peek(&first, 1, Deadline::AfterMs(5000)).ok());
    EXPECT_EQ(first, data[0]);
    ASSERT_TRUE(s.acceptor.ReadFull(got.data(), size, Deadline::AfterMs(5000)).ok());
    writer.join();
    EXPECT_EQ(got, data) << size;
  }
  // The other direction, and a frame through the frame helpers.
  ASSERT_TRUE(WriteFrame(s.acceptor, 0x1234, 1, 7, 9, "reply", 5, Deadline::AfterMs(1000)).ok());
  FrameHeader h;
  ASSERT_TRUE(PeekFrameHeader(s.dialer, 0x1234, 1, &h, Deadline::AfterMs(1000)).ok());
  Frame f;
  ASSERT_TRUE(ReadFrame(s.dialer, 0x1234, 1, 100, &f, Deadline::AfterMs(1000)).ok());
  EXPECT_EQ(std::string(f.payload.begin(), f.payload.end()), "reply");
  EXPECT_EQ(f.header.tag, 9u);
}

TEST(PeerSecurityTest, SealedBytesOnTheWireAreNotThePlaintext) {
  ClusterKey key = RandomKey();
  auto a = Make(PeerMode::kClusterKey, key, "10.0.0.1:7650", /*seal=*/true);
  auto b = Make(PeerMode::kClusterKey, key, "10.0.0.2:7650", /*seal=*/true);
  RecordingProxy proxy;
  Sides s = Connect(*a, *b, true, &proxy);
  ASSERT_TRUE(s.dial.ok() && s.accept.ok()) << s.dial.message() << s.accept.message();
  Conn& dialer_conn = s.dialer;
  Conn& acceptor_conn = s.acceptor;
  const std::string secret = "the quick brown fox jumps over the lazy dog";
  ASSERT_TRUE(dialer_conn.Write(secret.data(), secret.size(), Deadline::AfterMs(1000)).ok());
  std::string got(secret.size(), '\0');
  ASSERT_TRUE(acceptor_conn.ReadFull(got.data(), got.size(), Deadline::AfterMs(1000)).ok());
  EXPECT_EQ(got, secret);
  s = Sides();
  proxy.Join();
  EXPECT_EQ(proxy.sent().find("quick brown fox"), std::string::npos);
  EXPECT_EQ(proxy.sent().size(), sizeof(authproto::Hello) + sizeof(authproto::Finish) + authproto::kRecordHeaderBytes +
                                     secret.size() + authproto::kRecordTagBytes);
}

// A live upgrade hands a sealed connection to a new process between two reads
// (docs/upgrade.md, "RPC links"): the keys, the next record numbers and the bytes received
// but not yet read move, and both directions go on as if nothing happened, including the
// records the old side had received whole and not opened yet.
TEST(PeerSecurityTest, ASealedConnectionHandedOverGoesOnWhereItStopped) {
  ClusterKey key = RandomKey();
  auto a = Make(PeerMode::kClusterKey, key, "10.0.0.1:7650", /*seal=*/true);
  auto b = Make(PeerMode::kClusterKey, key, "10.0.0.2:7650", /*seal=*/true);
  Sides s = Connect(*a, *b, /*sealable=*/true);
  ASSERT_TRUE(s.dial.ok() && s.accept.ok()) << s.dial.message() << s.accept.message();
  // Three records on the wire before the acceptor reads any.
  for (const std::string m : {"first.", "second", "third!"}) {
    ASSERT_TRUE(s.dialer.Write(m.data(), m.size(), Deadline::AfterMs(1000)).ok());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::string got(6, '\0');
  ASSERT_TRUE(s.acceptor.ReadFull(got.data(), 6, Deadline::AfterMs(1000)).ok());
  EXPECT_EQ(got, "first.");
  EXPECT_GT(s.acceptor.received(), 0u) << "the other records arrived with the first";
  Conn::Handed handed;
  s.acceptor.Export(&handed);
  EXPECT_FALSE(handed.sealer.empty());
  EXPECT_EQ(handed.sealer.size(), handed.opener.size());
  // The new process: a duplicate of the socket, the imported keys, the bytes received.
  std::unique_ptr<RecordSealer> sealer;
  std::unique_ptr<RecordOpener> opener;
  ASSERT_TRUE(ImportAesGcmSealer(handed.sealer, &sealer).ok());
  ASSERT_TRUE(ImportAesGcmOpener(handed.opener, &opener).ok());
  Conn moved(UniqueFd(dup(s.acceptor.fd())), std::move(sealer), std::move(opener));
  ASSERT_TRUE(moved.Prime(handed.opened, handed.unopened));
  EXPECT_EQ(moved.received(), s.acceptor.received());
  std::string rest(12, '\0');
  ASSERT_TRUE(moved.ReadFull(rest.data(), 12, Deadline::AfterMs(1000)).ok());
  EXPECT_EQ(rest, "secondthird!");
  const std::string reply = "from the new process";
  ASSERT_TRUE(moved.Write(reply.data(), reply.size(), Deadline::AfterMs(1000)).ok());
  std::string heard(reply.size(), '\0');
  ASSERT_TRUE(s.dialer.ReadFull(heard.data(), heard.size(), Deadline::AfterMs(1000)).ok());
  EXPECT_EQ(heard, reply);
  // A state of the wrong size is refused, not used.
  EXPECT_FALSE(ImportAesGcmSealer(handed.sealer.substr(1), &sealer).ok());
  Conn plain(UniqueFd(dup(s.acceptor.fd())));
  EXPECT_FALSE(plain.Prime("", "stray")) << "bytes to open on a connection that is not sealed";
}

TEST(PeerSecurityTest, AlteredReplayedOrReorderedRecordsFailToOpen) {
  DirectionKeys keys;
  for (size_t i = 0; i < keys.key.size(); ++i) keys.key[i] = static_cast<uint8_t>(i);
  std::unique_ptr<RecordSealer> sealer;
  std::unique_ptr<RecordOpener> opener;
  ASSERT_TRUE(NewAesGcmSealer(keys, &sealer).ok());
  auto seal = [&](const std::string& text) {
    std::vector<uint8_t> rec(text.size() + sealer->tag_bytes());
    uint8_t aad[4] = {1, 2, 3, 4};
    iovec piece{const_cast<char*>(text.data()), text.size()};
    EXPECT_TRUE(sealer->Seal(aad, 4, &piece, 1, rec.data()).ok());
    return rec;
  };
  auto open = [&](const std::vector<uint8_t>& rec) {
    std::vector<uint8_t> plain(rec.size() - 16);
    uint8_t aad[4] = {1, 2, 3, 4};
    return opener->Open(aad, 4, rec.data(), rec.size(), plain.data());
  };
  std::vector<uint8_t> r0 = seal("record zero"), r1 = seal("record one");

  ASSERT_TRUE(NewAesGcmOpener(keys, &opener).ok());
  EXPECT_TRUE(open(r0).ok());
  EXPECT_FALSE(open(r0).ok()) << "a replayed record opened";

  ASSERT_TRUE(NewAesGcmOpener(keys, &opener).ok());
  EXPECT_FALSE(open(r1).ok()) << "a record opened out of order";

  ASSERT_TRUE(NewAesGcmOpener(keys, &opener).ok());
  std::vector<uint8_t> altered = r0;
  altered[3] ^= 1;
  EXPECT_FALSE(open(altered).ok()) << "an altered record opened";
}

TEST(PeerSecurityTest, KeyFilesReadableByOthersAreRefused) {
  std::string dir = std::filesystem::temp_directory_path() / ("cdt-key-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::string path = dir + "/cluster.key";
  ASSERT_TRUE(WriteNewClusterKeyFile(path).ok());
  struct stat st{};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ClusterKey k1, k2;
  ASSERT_TRUE(LoadClusterKey(path, &k1).ok());
  EXPECT_EQ(k1.id.size(), 16u);
  EXPECT_FALSE(WriteNewClusterKeyFile(path).ok()) << "an existing key file was overwritten";
  chmod(path.c_str(), 0640);
  Status st640 = LoadClusterKey(path, &k2);
  EXPECT_FALSE(st640.ok());
  EXPECT_NE(st640.message().find("chmod 600"), std::string::npos) << st640.message();
  chmod(path.c_str(), 0600);
  std::string link = dir + "/link.key";
  ASSERT_EQ(symlink(path.c_str(), link.c_str()), 0);
  EXPECT_FALSE(LoadClusterKey(link, &k2).ok());
  int fd = open((dir + "/short.key").c_str(), O_WRONLY | O_CREAT, 0600);
  ASSERT_EQ(write(fd, "abcd\n", 5), 5);
  close(fd);
  EXPECT_FALSE(LoadClusterKey(dir + "/short.key", &k2).ok());
  std::filesystem::remove_all(dir);
}

// NCCL_COMM_ID ids: every daemon of the cluster computes the same one for the same user
// and address; another user, another address or another cluster gets another communicator;
// and the id is a valid one (its key is its secret's).
TEST(CommSecretTest, AddressIdentitiesAgreeAcrossDaemonsAndDifferAcrossUsersAddressesAndClusters) {
  std::array<uint8_t, 32> key{}, other_key{};
  key.fill(7);
  other_key.fill(8);
  auto id = [&](const std::array<uint8_t, 32>& k, uint32_t uid, const std::string& address) {
    return AddressCommIdentity(k.data(), k.size(), uid, address, "10.0.0.1:7650");
  };
  const CommIdentity a = id(key, 1000, "10.0.0.1:29500");
  EXPECT_EQ(a.secret, id(key, 1000, "10.0.0.1:29500").secret);
  EXPECT_TRUE(CheckCommIdentity(a).ok());
  EXPECT_EQ(a.root_addr, "10.0.0.1:7650");
  EXPECT_NE(a.key, id(key, 1001, "10.0.0.1:29500").key);
  EXPECT_NE(a.key, id(key, 1000, "10.0.0.1:29501").key);
  EXPECT_NE(a.key, id(other_key, 1000, "10.0.0.1:29500").key);
}

}  // namespace
}  // namespace conduit
