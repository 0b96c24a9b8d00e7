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

#include "common/auth_protocol.h"
#include "common/frame.h"
#include "common/object_protocol.h"
#include "common/peer_protocol.h"
#include "common/rpc_protocol.h"
#include "common/unique_id.h"
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

int Main(int argc, char** argv) {
  std::string daemon, id_file, mode = "types";
  int count = 100, hold = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--daemon") == 0) daemon = argv[i + 1];
    else if (strcmp(argv[i], "--id-file") == 0) id_file = argv[i + 1];
    else if (strcmp(argv[i], "--mode") == 0) mode = argv[i + 1];
    else if (strcmp(argv[i], "--count") == 0) count = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--hold") == 0) hold = atoi(argv[i + 1]);
  }
  if (mode == "silent") return TimeUntilClosed(daemon, "");
  if (mode == "partial") {
    authproto::Hello h{};
    h.magic = authproto::kMagic;
    h.version = authproto::kVersion;
    return TimeUntilClosed(daemon, std::string(reinterpret_cast<const char*>(&h), sizeof(h) / 2));
  }
  if (mode == "flood") return Flood(daemon, count, hold);
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
