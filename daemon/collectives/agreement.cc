#include "collectives/agreement.h"

#include <cstdio>

#include "collectives/comm_stats.h"
#include "reduce/reduce.h"

namespace conduit {
namespace {

using peerproto::CollectiveHeader;

bool Reduces(uint8_t kind) {
  return kind == shimproto::kAllReduce || kind == shimproto::kReduce || kind == shimproto::kReduceScatter;
}
bool Rooted(uint8_t kind) { return kind == shimproto::kBroadcast || kind == shimproto::kReduce; }

const char* RedOpName(uint8_t op) {
  switch (op) {
    case ncclSum: return "sum";
    case ncclProd: return "prod";
    case ncclMax: return "max";
    case ncclMin: return "min";
    case ncclAvg: return "avg";
    case shimproto::kRedOpPreMulSum: return "premulsum";
    default: return "?";
  }
}

// "allreduce(count 1048576, float32, sum)" / "broadcast(count 10, int8, root 3)".
std::string CallText(const CollectiveHeader& h) {
  char buf[160];
  int n = snprintf(buf, sizeof(buf), "%s(count %llu, %s", OpKindName(h.kind), static_cast<unsigned long long>(h.count),
                   IsValidDataType(h.dtype) ? DataTypeName(static_cast<ncclDataType_t>(h.dtype)) : "bad type");
  if (Reduces(h.kind)) n += snprintf(buf + n, sizeof(buf) - n, ", %s", RedOpName(h.redop));
  if (Rooted(h.kind)) n += snprintf(buf + n, sizeof(buf) - n, ", root %d", h.root);
  snprintf(buf + n, sizeof(buf) - n, ")");
  return buf;
}

const char* AlgorithmName(uint8_t algorithm) {
  switch (algorithm) {
    case peerproto::kAlgorithmRing: return "the ring";
    case peerproto::kAlgorithmRecursiveDoubling: return "recursive doubling";
    case peerproto::kAlgorithmHalvingDoubling: return "recursive halving and doubling";
    default: return "an unknown algorithm";
  }
}

}  // namespace

CollectiveHeader DescribeCollective(const shimproto::OpDesc& op, uint64_t seq, uint64_t epoch) {
  CollectiveHeader h{};
  h.magic = peerproto::kCollectiveMagic;
  h.kind = op.kind;
  h.dtype = op.dtype;
  h.redop = Reduces(op.kind) ? op.redop : 0;  // ranks may pass anything where nothing reduces
  h.seq = seq;
  h.count = op.count;
  h.root = Rooted(op.kind) ? op.peer : -1;
  h.epoch = static_cast<uint32_t>(epoch);
  return h;
}

Status CheckAgreement(const CollectiveHeader& mine, const CollectiveHeader& theirs, const std::string& me,
                      const std::string& peer) {
  if (theirs.magic != peerproto::kCollectiveMagic) {
    return InvalidUsage("daemon %s sent collective data where this daemon (%s) expected the start of collective #%llu: "
                        "the hosts' ranks called different collectives or a different number of them",
                        peer.c_str(), me.c_str(), static_cast<unsigned long long>(mine.seq));
  }
  if (theirs.seq != mine.seq) {
    return InvalidUsage("hosts are out of step: daemon %s is at collective #%llu, this daemon (%s) at #%llu; their "
                        "ranks called a different number of collectives (or ones that use different links)",
                        peer.c_str(), static_cast<unsigned long long>(theirs.seq), me.c_str(),
                        static_cast<unsigned long long>(mine.seq));
  }
  if (theirs.kind != mine.kind || theirs.dtype != mine.dtype || theirs.count != mine.count ||
      theirs.redop != mine.redop || theirs.root != mine.root) {
    return InvalidUsage("ranks on different hosts called different collectives as #%llu: %s on daemon %s, %s on this "
                        "daemon (%s)", static_cast<unsigned long long>(mine.seq), CallText(theirs).c_str(),
                        peer.c_str(), CallText(mine).c_str(), me.c_str());
  }
  if (theirs.algorithm != peerproto::kAlgorithmNotSaid && mine.algorithm != peerproto::kAlgorithmNotSaid &&
      theirs.algorithm != mine.algorithm) {
    return InvalidUsage("daemon %s runs collective #%llu by %s, this daemon (%s) by %s: the daemons' --allreduce-algo, "
                        "--rd-max-bytes, --rd-latency-bytes or --rh-max-bytes differ, and must not",
                        peer.c_str(), static_cast<unsigned long long>(mine.seq), AlgorithmName(theirs.algorithm),
                        me.c_str(), AlgorithmName(mine.algorithm));
  }
  if (theirs.epoch != mine.epoch) {
    return InternalError("daemon %s runs collective #%llu under configuration epoch %u, this daemon (%s) under %u",
                         peer.c_str(), static_cast<unsigned long long>(mine.seq), theirs.epoch, me.c_str(),
                         mine.epoch);
  }
  return Status::Ok();
}

Status AgreementLink::Send(const std::vector<ConstSpan>& out, Deadline deadline, const SendGate& gate) {
  return SendRecv(out, *this, {}, deadline, nullptr, gate);
}

Status AgreementLink::Recv(const std::vector<MutSpan>& in, Deadline deadline, const RecvProgress& progress) {
  return SendRecv({}, *this, in, deadline, progress);
}

Status AgreementLink::SendRecv(const std::vector<ConstSpan>& out, Link& from_link, const std::vector<MutSpan>& in,
                               Deadline deadline, const RecvProgress& progress, const SendGate& gate,
                               const FlowLimits& limits) {
  auto& from = static_cast<AgreementLink&>(from_link);
  constexpr size_t kHeader = sizeof(CollectiveHeader);
  const bool head_out = !out.empty() && !sent_;
  const bool head_in = !in.empty() && !from.received_;
  const size_t out_skip = head_out ? kHeader : 0, in_skip = head_in ? kHeader : 0;

  // Reserved first: GCC 12 at -O3 otherwise reports a false -Warray-bounds on the insert.
  std::vector<ConstSpan> out2;
  out2.reserve(out.size() + 1);
  if (head_out) out2.push_back({mine_, kHeader});
  out2.insert(out2.end(), out.begin(), out.end());
  std::vector<MutSpan> in2;
  in2.reserve(in.size() + 1);
  if (head_in) in2.push_back({&from.theirs_, kHeader});
  in2.insert(in2.end(), in.begin(), in.end());
  sent_ = sent_ || head_out;

  bool checked = !head_in;
  RecvProgress checked_progress;
  if (head_in || progress) {
    checked_progress = [&](size_t got) -> Status {
      if (!checked && got >= kHeader) {
        checked = true;
        from.received_ = true;
        CONDUIT_RETURN_IF_ERROR(CheckAgreement(*mine_, from.theirs_, me_, from.peer_name()));
      }
      if (progress && got > in_skip) return progress(got - in_skip);
      return Status::Ok();
    };
  }
  SendGate header_free_gate = gate;
  if (gate && head_out) {
    // The header is this daemon's own bytes: only the caller's data waits for its gate.
    const auto* head = reinterpret_cast<const uint8_t*>(mine_);
    header_free_gate = [&gate, head](const void* p, size_t n) -> Status {
      const auto* b = static_cast<const uint8_t*>(p);
      if (b >= head && b < head + kHeader) return Status::Ok();
      return gate(p, n);
    };
  }
  FlowLimits shifted;
  if (limits.send_limit) shifted.send_limit = [&] { return limits.send_limit() + out_skip; };
  if (limits.recv_limit) shifted.recv_limit = [&] { return limits.recv_limit() + in_skip; };
  if (limits.sent) {
    shifted.sent = [&](size_t sent) { return sent > out_skip ? limits.sent(sent - out_skip) : Status::Ok(); };
  }
  Status st = inner_->SendRecv(out2, *from.inner_, in2, deadline, checked_progress, header_free_gate, shifted);
  if (st.ok() && traffic_ != nullptr) {
    traffic_->AddSend(TotalBytes(out));
    traffic_->AddReceive(TotalBytes(in));
  }
  return st;
}

}  // namespace conduit
