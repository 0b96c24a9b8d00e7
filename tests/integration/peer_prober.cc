// peer_prober: a stranger on the network, without the cluster key, against a daemon's peer
// port. For every message type of the daemon-to-daemon protocols (collectives, RPC,
// objects) it opens a fresh connection and sends that message first, twice: as raw
// bytes (no handshake, what a daemon started with --insecure-peers sends) and after a
// handshake it cannot complete (it answers the daemon's challenge with a forged proof). It prints one line per attempt and exits 0 only if the
// daemon answered none of them with anything but its handshake challenge.
//
//   peer_prober --daemon IP:PORT [--id-file F]
//
// With --id-file (a communicator's ncclUniqueId, as a stranger who learned it would have
// it) Register and LinkHello name that communicator's real key and secret.
//
// Other modes, for the daemon's bounds on what a connection may cost it:
//   --mode silent          connect, send nothing: prints "closed after N ms"
//   --mode partial         send half a handshake Hello, then nothing: the same
//   --mode flood --count N --hold S   open N connections at once and keep them S seconds:
//                          prints how many the daemon closed within 2 s ("closed K of N")
//   --mode member --cluster-key FILE --id-file F   a daemon that holds the cluster key (so
//                          it passes the handshake) but is no member of the communicator in
//                          F, against that communicator's root: it claims to be host 1 on a
//                          link, registers a rank under another daemon's address, registers
//                          with nranks -1 and 2^30, and parks a link for a communicator that
//                          never forms. Prints one line each; exit 0 when all are refused (and
//                          the parked link dropped) as docs/daemon-protocol.md says.
#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "common/frame.h"
#include "common/unique_id.h"
#include "protocol/auth_protocol.h"
#include "protocol/object_protocol.h"
#include "protocol/peer_protocol.h"
#include "protocol/rpc_protocol.h"
#include "security/comm_secret.h"
#include "security/peer_security.h"
#include "transport/tcp.h"

namespace conduit {
namespace {

constexpr int kWaitMs = 3000;

struct Probe {
  uint16_t type;
  const char* name;
};

// Every daemon-to-daemon message type there is.
const Probe kProbes[] = {
    {peerproto::kRegister, "Register"},
    {peerproto::kMembership, "Membership"},
    {peerproto::kLinkHello, "LinkHello"},
    {peerproto::kLinkHelloReply, "LinkHelloReply"},
    {peerproto::kP2pData, "P2pData"},
    {peerproto::kReconfigForward, "ReconfigForward"},
    {peerproto::kReconfigPropose, "ReconfigPropose"},
    {peerproto::kReconfigSeq, "ReconfigSeq"},
    {peerproto::kAbort, "Abort"},
    {rpcproto::kPeerHello, "RpcPeerHello"},
    {rpcproto::kCall, "RpcCall"},
    {rpcproto::kProbe, "RpcProbe"},
    {objproto::kPeerHello, "ObjPeerHello"},
    {objproto::kPing, "ObjPing"},
    {objproto::kDirPublish, "DirPublish"},
    {objproto::kDirUnpublish, "DirUnpublish"},
    {objproto::kDirAcquire, "DirAcquire"},
    {objproto::kDirRelease, "DirRelease"},
    {objproto::kDirSubscribe, "DirSubscribe"},
    {objproto::kDirDelete, "DirDelete"},
    {objproto::kDirCount, "DirCount"},
    {objproto::kDropCopy, "DropCopy"},
    {objproto::kDropCopyDone, "DropCopyDone"},
    {objproto::kDirStoreCopy, "DirStoreCopy"},
    {objproto::kFetch, "Fetch"},
    {objproto::kNodeStart, "NodeStart"},
    {objproto::kNodeChild, "NodeChild"},
    {objproto::kNodeCancel, "NodeCancel"},
    {objproto::kNodeReport, "NodeReport"},
};

// A plausible payload: the real structs where the prober knows the communicator.
std::string Payload(uint16_t type, const CommIdentity& id, std::mt19937& rng) {
  if (type == peerproto::kRegister) {
    peerproto::RegisterRequest r{};
    r.comm_key = id.key;
    r.nranks = 2;
    r.rank = 1;
    CopyCString(r.daemon_addr, "10.0.0.99:7650");
    memcpy(r.secret, id.secret.data(), sizeof(r.secret));
    return std::string(reinterpret_cast<const char*>(&r), sizeof(r));
  }
  if (type == peerproto::kLinkHello) {
    peerproto::LinkHello h{id.key, 1, peerproto::kCollective, 0, -1};
    return std::string(reinterpret_cast<const char*>(&h), sizeof(h));
  }
  std::string junk(64, '\0');
  for (char& c : junk) c = static_cast<char>(rng());
  return junk;
}

std::string Frame(uint16_t type, const std::string& payload) {
  FrameHeader h{peerproto::kMagic, peerproto::kVersion, type, static_cast<uint32_t>(payload.size()), 0};
  return std::string(reinterpret_cast<const char*>(&h), sizeof(h)) + payload;
}

// Bytes the daemon sends back until it closes (or kWaitMs passes: -1 means still open).
long Answer(int fd) {
  long got = 0;
  char buf[4096];
  Deadline deadline = Deadline::AfterMs(kWaitMs);
  for (;;) {
    if (!WaitFd(fd, POLLIN, deadline, "read").ok()) return -1;
    ssize_t r = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (r == 0) return got;
    if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (r < 0) return got;  // reset: closed
    got += r;
  }
}

// Connects and sends `prefix`, then waits for the daemon to close the connection.
int TimeUntilClosed(const std::string& daemon, const std::string& prefix) {
  UniqueFd fd;
  if (!TcpConnect(daemon, Deadline::AfterMs(kWaitMs), &fd).ok()) return 2;
  auto start = std::chrono::steady_clock::now();
  if (!prefix.empty()) (void)WriteFull(fd.get(), prefix.data(), prefix.size(), Deadline::AfterMs(kWaitMs));
  char buf[256];
  Deadline give_up = Deadline::AfterMs(60000);
  for (;;) {
    if (!WaitFd(fd.get(), POLLIN, give_up, "read").ok()) {
      printf("still open after 60 s\n");
      return 1;
    }
    ssize_t r = recv(fd.get(), buf, sizeof(buf), MSG_DONTWAIT);
    if (r > 0 || (r < 0 && (errno == EAGAIN || errno == EINTR))) continue;
    break;
  }
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  printf("closed after %lld ms\n", static_cast<long long>(ms));
  return 0;
}

int Flood(const std::string& daemon, int count, int hold_s) {
  std::vector<UniqueFd> fds;
  for (int i = 0; i < count; ++i) {
    UniqueFd fd;
    if (TcpConnect(daemon, Deadline::AfterMs(kWaitMs), &fd).ok()) fds.push_back(std::move(fd));
  }
  std::this_thread::sleep_for(std::chrono::seconds(2));
  int closed = 0;
  for (auto& fd : fds) {
    char c;
    ssize_t r = recv(fd.get(), &c, 1, MSG_DONTWAIT);
    if (r == 0 || (r < 0 && errno != EAGAIN)) ++closed;
  }
  printf("connected %zu of %d, closed %d of %zu\n", fds.size(), count, closed, fds.size());
  fflush(stdout);
  std::this_thread::sleep_for(std::chrono::seconds(hold_s));
  return 0;
}

// One message on a fresh authenticated connection; the daemon's answer (its status text, or
// how the connection ended).
std::string Ask(const PeerSecurity& me, const std::string& daemon, uint16_t type, const void* body, size_t len,
                conduit::Frame* reply) {
  Conn conn;
  PeerIdentity peer;
  Status st = me.Dial(daemon, Deadline::AfterMs(kWaitMs), false, &conn, &peer);
  if (!st.ok()) return "handshake failed: " + st.message();
  if (!WriteFrame(conn, peerproto::kMagic, peerproto::kVersion, type, 0, body, static_cast<uint32_t>(len),
                  Deadline::AfterMs(kWaitMs))
           .ok()) {
    return "closed";
  }
  st = ReadFrame(conn, peerproto::kMagic, peerproto::kVersion, peerproto::kMaxPayload, reply, Deadline::AfterMs(15000));
  if (!st.ok()) return "closed: " + st.message();
  if (reply->payload.size() < sizeof(WireStatus)) return "malformed answer";
  WireStatus wire;
  memcpy(&wire, reply->payload.data(), sizeof(wire));
  Status answer = FromWire(wire);
  return answer.ok() ? "ok" : "refused: " + answer.message();
}

int Member(const std::string& daemon, const std::string& key_file, const CommIdentity& id) {
  PeerSecurityOptions o;
  o.mode = PeerMode::kClusterKey;
  o.self = "10.0.0.99:7650";  // no member of anything
  std::unique_ptr<PeerSecurity> me;
  if (!LoadClusterKey(key_file, &o.key).ok() || !PeerSecurity::Create(o, &me).ok()) return 2;
  int wrong = 0;
  auto expect_refused = [&](const char* what, const std::string& answer) {
    const bool refused = answer.rfind("refused", 0) == 0 || answer.rfind("closed", 0) == 0;
    printf("%s %s: %s\n", refused ? "refused" : "ACCEPTED", what, answer.c_str());
    wrong += refused ? 0 : 1;
  };
  conduit::Frame reply;
  peerproto::LinkHello claim{id.key, 1, peerproto::kCollective, 0, -1};
  expect_refused("link claiming host 1", Ask(*me, daemon, peerproto::kLinkHello, &claim, sizeof(claim), &reply));
  peerproto::RegisterRequest reg{};
  reg.comm_key = id.key;
  reg.nranks = 2;
  reg.rank = 1;
  memcpy(reg.secret, id.secret.data(), sizeof(reg.secret));
  CopyCString(reg.daemon_addr, daemon.c_str());  // someone else's address
  expect_refused("register as another daemon", Ask(*me, daemon, peerproto::kRegister, &reg, sizeof(reg), &reply));
  for (int32_t nranks : {-1, 1 << 30}) {
    peerproto::RegisterRequest bad{};
    CommSecret secret{};
    secret[0] = static_cast<uint8_t>(nranks);
    memcpy(bad.secret, secret.data(), sizeof(bad.secret));
    bad.comm_key = CommKeyOf(secret);
    bad.nranks = nranks;
    bad.rank = 0;
    CopyCString(bad.daemon_addr, "10.0.0.99:7650");
    expect_refused(nranks < 0 ? "register with nranks -1" : "register with nranks 2^30",
                   Ask(*me, daemon, peerproto::kRegister, &bad, sizeof(bad), &reply));
  }
  // A link for a communicator that never forms here is parked, then dropped on a timer.
  Conn conn;
  PeerIdentity peer;
  if (!me->Dial(daemon, Deadline::AfterMs(kWaitMs), false, &conn, &peer).ok()) return 2;
  peerproto::LinkHello orphan{id.key ^ 0x5a5a5a5a5a5a5a5aull, 1, peerproto::kCollective, 0, -1};
  auto start = std::chrono::steady_clock::now();
  if (!WriteFrame(conn, peerproto::kMagic, peerproto::kVersion, peerproto::kLinkHello, 0, &orphan, sizeof(orphan),
                  Deadline::AfterMs(kWaitMs))
           .ok() ||
      !ReadFrame(conn, peerproto::kMagic, peerproto::kVersion, peerproto::kMaxPayload, &reply, Deadline::AfterMs(kWaitMs))
           .ok()) {
    printf("ACCEPTED? the orphan link was not even parked\n");
    return 1;
  }
  char c;
  Status closed = conn.ReadFull(&c, 1, Deadline::AfterMs(120000));
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
  printf("parked link dropped after %lld ms (%s)\n", static_cast<long long>(ms), closed.message().c_str());
  return wrong == 0 && !closed.ok() ? 0 : 1;
}

int Main(int argc, char** argv) {
  std::string daemon, id_file, mode = "types", key_file;
  int count = 100, hold = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--daemon") == 0) daemon = argv[i + 1];
    else if (strcmp(argv[i], "--id-file") == 0) id_file = argv[i + 1];
    else if (strcmp(argv[i], "--mode") == 0) mode = argv[i + 1];
    else if (strcmp(argv[i], "--count") == 0) count = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--hold") == 0) hold = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--cluster-key") == 0) key_file = argv[i + 1];
  }
  if (mode == "silent") return TimeUntilClosed(daemon, "");
  if (mode == "partial") {
    authproto::Hello h{};
    h.magic = authproto::kMagic;
    h.version = authproto::kVersion;
    return TimeUntilClosed(daemon, std::string(reinterpret_cast<const char*>(&h), sizeof(h) / 2));
  }
  if (mode == "flood") return Flood(daemon, count, hold);
  if (mode == "member") {
    CommIdentity member_of;
    std::ifstream in(id_file, std::ios::binary);
    char raw[128] = {};
    in.read(raw, sizeof(raw));
    if (!DecodeUniqueId(raw, &member_of).ok()) return 2;
    return Member(daemon, key_file, member_of);
  }
  CommIdentity id;
  if (!id_file.empty()) {
    std::ifstream in(id_file, std::ios::binary);
    char raw[128] = {};
    in.read(raw, sizeof(raw));
    Status st = DecodeUniqueId(raw, &id);
    if (!st.ok()) {
      printf("cannot read the unique id: %s\n", st.message().c_str());
      return 2;
    }
  }
  std::mt19937 rng(7);
  int answered = 0;
  for (const Probe& p : kProbes) {
    const std::string frame = Frame(p.type, Payload(p.type, id, rng));
    // 1. Raw: no handshake at all.
    UniqueFd fd;
    Status st = TcpConnect(daemon, Deadline::AfterMs(kWaitMs), &fd);
    if (!st.ok()) {
      printf("cannot connect: %s\n", st.message().c_str());
      return 2;
    }
    (void)WriteFull(fd.get(), frame.data(), frame.size(), Deadline::AfterMs(kWaitMs));
    long got = Answer(fd.get());
    bool refused = got == 0;
    printf("%s %s raw: %s\n", refused ? "refused" : "ANSWERED", p.name,
           got < 0 ? "still open after 3 s" : (std::to_string(got) + " bytes back, closed").c_str());
    answered += refused ? 0 : 1;
    // 2. A handshake with a key of its own: the daemon's challenge comes back; the
    // stranger answers it with a proof it cannot make and sends the message anyway.
    UniqueFd hs;
    if (!TcpConnect(daemon, Deadline::AfterMs(kWaitMs), &hs).ok()) return 2;
    authproto::Hello hello{};
    hello.magic = authproto::kMagic;
    hello.version = authproto::kVersion;
    for (auto& b : hello.nonce) b = static_cast<uint8_t>(rng());
    for (auto& b : hello.share) b = static_cast<uint8_t>(rng());
    CopyCString(hello.daemon, "10.0.0.99:7650");
    authproto::Challenge challenge{};
    authproto::Finish forged{};
    for (auto& b : forged.mac) b = static_cast<uint8_t>(rng());
    bool challenged = WriteFull(hs.get(), &hello, sizeof(hello), Deadline::AfterMs(kWaitMs)).ok() &&
                      ReadFull(hs.get(), &challenge, sizeof(challenge), Deadline::AfterMs(kWaitMs)).ok();
    std::string rest(reinterpret_cast<const char*>(&forged), sizeof(forged));
    rest += frame;
    (void)WriteFull(hs.get(), rest.data(), rest.size(), Deadline::AfterMs(kWaitMs));
    got = Answer(hs.get());
    refused = challenged && got == 0;
    printf("%s %s after a forged handshake: %s\n", refused ? "refused" : "ANSWERED", p.name,
           !challenged ? "no challenge" : got < 0 ? "still open after 3 s" : (std::to_string(got) + " bytes back, closed").c_str());
    answered += refused ? 0 : 1;
  }
  printf("%s: %d of %zu message types got an answer\n", answered == 0 ? "all refused" : "FAIL", answered,
         sizeof(kProbes) / sizeof(kProbes[0]));
  return answered == 0 ? 0 : 1;
}

}  // namespace
}  // namespace conduit

int main(int argc, char** argv) { return conduit::Main(argc, argv); }
