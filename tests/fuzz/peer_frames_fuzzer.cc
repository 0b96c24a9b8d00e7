// What one daemon reads from another (or from anyone who reaches its peer port), through
// the daemon's own checks: the authentication Hello, a Register, a LinkHello, a Membership
// reply, point-to-point frame headers and P2pData, reconfiguration messages, collective
// headers, and sealed records arriving on a connection. The first byte picks the message,
// the rest is its bytes.
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "collectives/agreement.h"
#include "collectives/comm_config.h"
#include "collectives/peer_messages.h"
#include "common/conn.h"
#include "fuzz_check.h"
#include "protocol/auth_protocol.h"
#include "protocol/peer_protocol.h"
#include "security/aead_record_cipher.h"
#include "security/comm_secret.h"
#include "security/peer_handshake.h"

using namespace conduit;

namespace {

template <typename T>
bool Take(const uint8_t* data, size_t size, T* out) {
  if (size < sizeof(T)) return false;
  memcpy(out, data, sizeof(T));
  return true;
}

void Hello(const uint8_t* data, size_t size) {
  authproto::Hello h;
  if (!Take(data, size, &h)) return;
  std::string daemon;
  if (!CheckHello(h, "fuzz", &daemon).ok()) return;
  FUZZ_CHECK(h.magic == authproto::kMagic && h.version == authproto::kVersion, "accepted a foreign hello");
  FUZZ_CHECK(!daemon.empty() && daemon.size() < sizeof(h.daemon), "identity of %zu bytes", daemon.size());
  for (char c : daemon) FUZZ_CHECK(c > ' ' && c < 127, "unprintable identity byte %d", c);
}

void Register(const uint8_t* data, size_t size) {
  peerproto::RegisterRequest r;
  VersionRange versions;
  // The whole input as a Register's payload: the request and the versions its daemon speaks.
  if (ParseRegister(std::vector<uint8_t>(data, data + size), &r, &versions).ok()) {
    FUZZ_CHECK(size == sizeof(r) || size == sizeof(r) + sizeof(peerproto::RegisterVersions), "Register of %zu bytes",
               size);
    FUZZ_CHECK(versions.oldest >= 1 && versions.oldest <= versions.newest, "versions %u-%u", versions.oldest,
               versions.newest);
  }
  if (!Take(data, size, &r)) return;
  std::string proven(reinterpret_cast<const char*>(data + sizeof(r)), size - sizeof(r)), daemon;
  if (!ValidateRegister(r, proven, &daemon).ok()) return;
  FUZZ_CHECK(!daemon.empty() && daemon.size() < sizeof(r.daemon_addr), "rank daemon of %zu bytes", daemon.size());
  FUZZ_CHECK(proven.empty() || daemon == proven, "a rank kept under a daemon other than the proven one");
  FUZZ_CHECK(r.nranks >= 1 && r.nranks <= peerproto::kMaxRanks, "nranks %d", r.nranks);
  FUZZ_CHECK(r.rank >= 0 && r.rank < r.nranks, "rank %d of %d", r.rank, r.nranks);
  CommSecret secret;
  memcpy(secret.data(), r.secret, secret.size());
  FUZZ_CHECK(CommKeyOf(secret) == r.comm_key, "a key that is not its secret's was accepted");
}

void LinkHello(const uint8_t* data, size_t size) {
  peerproto::LinkHello h;
  if (!Take(data, size, &h) || !ValidateLinkHello(h).ok()) return;
  FUZZ_CHECK(h.channel <= peerproto::kP2p && h.from_host > 0 && h.from_host < peerproto::kMaxRanks && h.path >= -1,
             "link hello channel %u host %d path %d", h.channel, h.from_host, h.path);
}

void Membership(const uint8_t* data, size_t size) {
  if (size < 2) return;
  const int nranks = 1 + data[0] % 64;  // as the member that registered knows it
  std::vector<uint8_t> payload(data + 1, data + size);
  std::vector<std::string> addrs;
  std::vector<int> ring;
  uint32_t version = 0;
  if (!ParseMembership(payload, nranks, &addrs, &ring, &version).ok()) return;
  FUZZ_CHECK(version != 0, "no collective protocol version");
  FUZZ_CHECK(addrs.size() == static_cast<size_t>(nranks), "%zu addresses for %d ranks", addrs.size(), nranks);
  FUZZ_CHECK(ring.size() <= addrs.size(), "ring of %zu for %zu ranks", ring.size(), addrs.size());
  for (const auto& a : addrs) FUZZ_CHECK(!a.empty() && a.size() < 64, "address of %zu bytes", a.size());
}

void P2p(const uint8_t* data, size_t size) {
  FrameHeader h;
  if (!Take(data, size, &h)) return;
  if (CheckP2pFrameHeader(h).ok()) {
    FUZZ_CHECK(h.length <= peerproto::kMaxControlPayload, "frame of %u bytes accepted", h.length);
  }
  peerproto::P2pData head;
  if (!Take(data + sizeof(h), size - sizeof(h), &head)) return;
  // Ranks 0-1 on host 0, 2-3 on host 1, 4 on host 2; this is host 1, the frame from host 0.
  const std::vector<int> host_of_rank = {0, 0, 1, 1, 2};
  if (!CheckP2pData(head, host_of_rank, 0, 1, 1ull << 36).ok()) return;
  FUZZ_CHECK(head.src_rank >= 0 && head.src_rank < 2 && (head.dst_rank == 2 || head.dst_rank == 3),
             "src %d dst %d accepted", head.src_rank, head.dst_rank);
}

void Reconfig(const uint8_t* data, size_t size) {
  if (size < 1) return;
  const int nhosts = 1 + data[0] % 16;
  std::vector<uint8_t> payload(data + 1, data + size);
  peerproto::ReconfigHeader head;
  ReconfigPlan plan;
  if (!DecodeReconfig(payload, nhosts, &head, &plan).ok()) return;
  if (plan.set_ring) {
    FUZZ_CHECK(plan.ring.size() == static_cast<size_t>(nhosts), "ring of %zu for %d hosts", plan.ring.size(), nhosts);
    std::vector<bool> seen(nhosts, false);
    for (int h : plan.ring) {
      FUZZ_CHECK(h >= 0 && h < nhosts && !seen[h], "ring entry %d is not a permutation", h);
      seen[h] = true;
    }
  }
}

void Agreement(const uint8_t* data, size_t size) {
  peerproto::CollectiveHeader theirs;
  if (!Take(data, size, &theirs)) return;
  shimproto::OpDesc op{};
  op.kind = shimproto::kAllReduce;
  op.dtype = ncclFloat32;
  op.redop = ncclSum;
  op.count = 1 << 20;
  // This host names no algorithm (a daemon before the field) or recursive doubling.
  for (uint8_t algorithm : {uint8_t{peerproto::kAlgorithmNotSaid}, uint8_t{peerproto::kAlgorithmRecursiveDoubling}}) {
    peerproto::CollectiveHeader mine = DescribeCollective(op, 7, 0);
    mine.algorithm = algorithm;
    const bool same = memcmp(&mine, &theirs, sizeof(mine)) == 0;
    const bool ok = CheckAgreement(mine, theirs, "10.0.0.1:7650", "10.0.0.2:7650").ok();
    // The algorithm is compared only where both hosts name one: anything else that differs
    // must be refused.
    peerproto::CollectiveHeader masked = theirs;
    if (masked.algorithm == peerproto::kAlgorithmNotSaid || mine.algorithm == peerproto::kAlgorithmNotSaid) {
      masked.algorithm = mine.algorithm;
    }
    FUZZ_CHECK(ok == (memcmp(&mine, &masked, sizeof(mine)) == 0), "agreement %d for a header that is %s", ok,
               same ? "the same" : "different");
  }
}

// Bytes arriving on a sealed connection from someone who does not have its keys: nothing
// may come out of it as plaintext, and nothing may crash.
void SealedRecords(const uint8_t* data, size_t size) {
  UniqueFd reader(FuzzSocket(data, size));
  if (!reader.valid()) return;
  DirectionKeys keys;
  std::unique_ptr<RecordSealer> sealer;
  std::unique_ptr<RecordOpener> opener;
  if (!NewAesGcmSealer(keys, &sealer).ok() || !NewAesGcmOpener(keys, &opener).ok()) return;
  Conn conn(std::move(reader), std::move(sealer), std::move(opener));
  std::vector<uint8_t> out(1 << 16);
  size_t plaintext = 0;
  for (int i = 0; i < 64; ++i) {
    size_t got = 0;
    bool would_block = false;
    if (!conn.ReadNow(out.data(), out.size(), &got, /*blocking=*/false, &would_block).ok()) break;
    if (would_block || got == 0) break;
    plaintext += got;
  }
  FUZZ_CHECK(plaintext == 0, "%zu bytes opened from records nobody sealed", plaintext);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t* body = data + 1;
  const size_t n = size - 1;
  switch (data[0] % 8) {
    case 0: Hello(body, n); break;
    case 1: Register(body, n); break;
    case 2: LinkHello(body, n); break;
    case 3: Membership(body, n); break;
    case 4: P2p(body, n); break;
    case 5: Reconfig(body, n); break;
    case 6: Agreement(body, n); break;
    case 7: SealedRecords(body, n); break;
  }
  return 0;
}
