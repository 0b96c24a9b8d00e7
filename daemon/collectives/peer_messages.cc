#include "collectives/peer_messages.h"

#include <cstring>

#include "common/unique_id.h"
#include "protocol/shim_protocol.h"
#include "security/comm_secret.h"

namespace conduit {

Status ValidateRegister(const peerproto::RegisterRequest& request, const std::string& proven, std::string* daemon) {
  const std::string claimed = FromCString(request.daemon_addr);
  if (!proven.empty() && claimed != proven) {
    return InvalidUsage("daemon %s registered a rank as daemon %s: a daemon registers only its own ranks",
                        proven.c_str(), claimed.c_str());
  }
  *daemon = proven.empty() ? claimed : proven;
  if (request.nranks < 1 || request.nranks > peerproto::kMaxRanks) {
    return InvalidArgument("nranks %d is out of range [1, %d]", request.nranks, peerproto::kMaxRanks);
  }
  if (request.rank < 0 || request.rank >= request.nranks) {
    return InvalidArgument("rank %d out of range for nranks %d", request.rank, request.nranks);
  }
  CommSecret secret;
  memcpy(secret.data(), request.secret, secret.size());
  if (CommKeyOf(secret) != request.comm_key) {
    return InvalidUsage("rank %d registered for communicator %s with a secret that is not that communicator's: a "
                        "forged or altered ncclUniqueId", request.rank, CommKeyShort(request.comm_key).c_str());
  }
  if (daemon->empty() || daemon->size() >= sizeof(request.daemon_addr)) {
    return InvalidArgument("rank %d's daemon has no usable address", request.rank);
  }
  return Status::Ok();
}

Status ParseRegister(const std::vector<uint8_t>& payload, peerproto::RegisterRequest* request,
                     VersionRange* versions) {
  peerproto::RegisterVersions v{peerproto::kCollectiveVersionBeforeNegotiation,
                                peerproto::kCollectiveVersionBeforeNegotiation};
  if (payload.size() != sizeof(*request) && payload.size() != sizeof(*request) + sizeof(v)) {
    return InvalidArgument("Register of %zu bytes (expected %zu, or %zu with versions)", payload.size(),
                           sizeof(*request), sizeof(*request) + sizeof(v));
  }
  memcpy(request, payload.data(), sizeof(*request));
  if (payload.size() > sizeof(*request)) memcpy(&v, payload.data() + sizeof(*request), sizeof(v));
  if (v.oldest == 0 || v.oldest > v.newest) {
    return InvalidArgument("Register names collective protocol versions %u to %u", v.oldest, v.newest);
  }
  *versions = VersionRange{v.oldest, v.newest};
  return Status::Ok();
}

Status ValidateLinkHello(const peerproto::LinkHello& hello) {
  if (hello.channel > peerproto::kP2p || hello.from_host <= 0 || hello.from_host >= peerproto::kMaxRanks ||
      (hello.epoch > 0 && hello.channel != peerproto::kCollective) || hello.path < -1) {
    return InvalidArgument("bad link hello (channel %u, host %d, epoch %u, path %d)", hello.channel, hello.from_host,
                           hello.epoch, hello.path);
  }
  return Status::Ok();
}

Status ParseMembership(const std::vector<uint8_t>& payload, int nranks, std::vector<std::string>* rank_addrs,
                       std::vector<int>* ring, uint32_t* version) {
  peerproto::MembershipReply head;
  if (nranks < 1 || nranks > peerproto::kMaxRanks) return InvalidArgument("nranks %d out of range", nranks);
  if (payload.size() < sizeof(head)) return RemoteError("membership reply of %zu bytes", payload.size());
  memcpy(&head, payload.data(), sizeof(head));
  CONDUIT_RETURN_IF_ERROR(FromWire(head.status));
  *version = head.version == 0 ? peerproto::kCollectiveVersionBeforeNegotiation : head.version;
  const size_t addrs_end = sizeof(head) + static_cast<size_t>(nranks) * sizeof(shimproto::DaemonAddr);
  peerproto::RingOrder order{};
  if (head.nranks != nranks || payload.size() < addrs_end + sizeof(order)) {
    return RemoteError("membership of the wrong size (%d ranks in %zu bytes, expected %d)", head.nranks,
                       payload.size(), nranks);
  }
  rank_addrs->assign(nranks, std::string());
  for (int r = 0; r < nranks; ++r) {
    shimproto::DaemonAddr a;
    memcpy(&a, payload.data() + sizeof(head) + r * sizeof(a), sizeof(a));
    (*rank_addrs)[r] = FromCString(a.text);
    if ((*rank_addrs)[r].empty() || (*rank_addrs)[r].size() >= sizeof(a.text)) {
      return RemoteError("membership names no daemon (or an unterminated one) for rank %d", r);
    }
  }
  memcpy(&order, payload.data() + addrs_end, sizeof(order));
  if (order.nhosts < 0 || order.nhosts > nranks ||
      payload.size() != addrs_end + sizeof(order) + static_cast<size_t>(order.nhosts) * sizeof(int32_t)) {
    return RemoteError("malformed ring order (%d hosts)", order.nhosts);
  }
  ring->assign(order.nhosts, 0);
  for (int i = 0; i < order.nhosts; ++i) {
    memcpy(&(*ring)[i], payload.data() + addrs_end + sizeof(order) + i * sizeof(int32_t), sizeof(int32_t));
  }
  return Status::Ok();
}

Status CheckP2pFrameHeader(const FrameHeader& h) {
  const bool control = h.type == peerproto::kReconfigForward || h.type == peerproto::kReconfigPropose ||
                       h.type == peerproto::kReconfigSeq;
  const bool ok = h.magic == peerproto::kMagic && h.version == peerproto::kVersion &&
                  ((h.type == peerproto::kP2pData && h.length == sizeof(peerproto::P2pData)) ||
                   (h.type == peerproto::kAbort && h.length == sizeof(WireStatus)) ||
                   (control && h.length <= peerproto::kMaxControlPayload));
  if (!ok) {
    return RemoteError("malformed frame on a point-to-point link (magic 0x%08x type %u length %u)", h.magic, h.type,
                       h.length);
  }
  return Status::Ok();
}

Status CheckP2pData(const peerproto::P2pData& head, const std::vector<int>& host_of_rank, int from, int me,
                    uint64_t max_bytes) {
  const int nranks = static_cast<int>(host_of_rank.size());
  const bool src_ok = head.src_rank >= 0 && head.src_rank < nranks && host_of_rank[head.src_rank] == from;
  const bool dst_ok = head.dst_rank >= 0 && head.dst_rank < nranks && host_of_rank[head.dst_rank] == me;
  if (!src_ok || !dst_ok || head.bytes > max_bytes) {
    return RemoteError("malformed point-to-point frame (src %d dst %d bytes %llu)", head.src_rank, head.dst_rank,
                       static_cast<unsigned long long>(head.bytes));
  }
  return Status::Ok();
}

}  // namespace conduit
