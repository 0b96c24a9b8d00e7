#include "collectives/comm_config.h"

#include <algorithm>
#include <climits>
#include <cstring>

#include "common/frame.h"
#include "config/json_message.h"
#include "config/placement.pb.h"

namespace conduit {

bool IsAllReduceAlgorithm(const std::string& name) {
  return name == "auto" || name == "ring" || name == "rd" || name == "rh";
}

bool ReconfigPlan::Renews(int me, int peer, int* pin) const {
  *pin = kPolicyPath;
  bool pinned = false;
  for (const auto& p : pins) {
    if ((p.a == me && p.b == peer) || (p.a == peer && p.b == me)) {
      *pin = p.path;
      pinned = true;
    }
  }
  return repath || pinned;
}

Status ValidatePlan(const ReconfigPlan& plan, int nhosts) {
  if (plan.set_ring) {
    if (static_cast<int>(plan.ring.size()) != nhosts) {
      return InvalidArgument("the ring must list each of the communicator's %d hosts once (got %zu entries)", nhosts,
                             plan.ring.size());
    }
    std::vector<bool> seen(nhosts, false);
    for (int h : plan.ring) {
      if (h < 0 || h >= nhosts || seen[h]) {
        return InvalidArgument("the ring must be a permutation of host indices 0..%d", nhosts - 1);
      }
      seen[h] = true;
    }
  }
  if (plan.set_algorithm && !IsAllReduceAlgorithm(plan.algorithm)) {
    return InvalidArgument("unknown algorithm '%s' (auto, ring, rd, rh)", plan.algorithm.c_str());
  }
  for (const auto& p : plan.pins) {
    if (p.a < 0 || p.b < 0 || p.a >= nhosts || p.b >= nhosts || p.a == p.b || p.path < -1 || p.path > 63) {
      return InvalidArgument("path pin {hosts [%d, %d], path %d} does not fit %d hosts and paths -1..63", p.a, p.b,
                             p.path, nhosts);
    }
  }
  return Status::Ok();
}

namespace {

Status ReadRing(const google::protobuf::Value& ring, const ReconfigContext& ctx, ReconfigPlan* plan) {
  plan->set_ring = true;
  if (config::IsString(ring)) {
    const std::string& s = ring.string_value();
    if (s == "locality") {
      plan->ring = ctx.locality_ring;
    } else if (s == "rank") {
      for (int h = 0; h < ctx.nhosts; ++h) plan->ring.push_back(h);
    } else if (s == "reverse") {
      plan->ring = ctx.current_ring;
      if (plan->ring.size() > 1) std::reverse(plan->ring.begin() + 1, plan->ring.end());
    } else {
      return InvalidArgument("reconfiguration: unknown ring '%s' (a list of host indices, locality, rank, reverse)",
                             s.c_str());
    }
    return Status::Ok();
  }
  if (!config::IsList(ring)) {
    return InvalidArgument("reconfiguration: \"ring\" must be a list of host indices or locality|rank|reverse");
  }
  for (const auto& h : ring.list_value().values()) {
    int64_t index;
    if (!config::AsInteger(h, &index) || index < INT32_MIN || index > INT32_MAX) {
      return InvalidArgument("reconfiguration: ring entries must be host indices");
    }
    plan->ring.push_back(static_cast<int>(index));
  }
  return Status::Ok();
}

Status ReadPaths(const google::protobuf::Value& paths, ReconfigPlan* plan) {
  if (config::IsString(paths) && paths.string_value() == "policy") {
    plan->repath = true;
    return Status::Ok();
  }
  const char* kShape = "reconfiguration: \"paths\" must be \"policy\" or a list of {\"hosts\": [A, B], \"path\": K} "
                       "(K = -1: primary address)";
  if (!config::IsList(paths)) return InvalidArgument("%s", kShape);
  config::v1::PathPinList pins;  // {"pins": [...]}: protobuf reads the entries as PathPin
  CONDUIT_RETURN_IF_ERROR(config::MessageFromValue(paths, "pins", "reconfiguration: paths", &pins));
  for (const config::v1::PathPin& pin : pins.pins()) {
    if (pin.hosts_size() != 2 || !pin.has_path()) return InvalidArgument("%s", kShape);
    plan->pins.push_back(peerproto::PathPin{pin.hosts(0), pin.hosts(1), pin.path()});
  }
  return Status::Ok();
}

}  // namespace

Status ParseReconfigPlan(const Json& body, const ReconfigContext& ctx, ReconfigPlan* out, int* wait_ms) {
  config::v1::ReconfigRequest doc;
  CONDUIT_RETURN_IF_ERROR(config::MessageFromJson(body, "reconfiguration", &doc));
  ReconfigPlan plan;
  if (!config::IsAbsent(doc.ring())) CONDUIT_RETURN_IF_ERROR(ReadRing(doc.ring(), ctx, &plan));
  if (doc.has_algorithm()) {
    plan.set_algorithm = true;
    plan.algorithm = doc.algorithm();
  }
  if (!config::IsAbsent(doc.paths())) CONDUIT_RETURN_IF_ERROR(ReadPaths(doc.paths(), &plan));
  if (plan.empty()) return InvalidArgument("nothing to change: give ring, algorithm and/or paths");
  CONDUIT_RETURN_IF_ERROR(ValidatePlan(plan, ctx.nhosts));
  if (doc.has_wait_ms() && (doc.wait_ms() < 0 || doc.wait_ms() > kMaxReconfigWaitMs)) {
    return InvalidArgument("reconfiguration: \"wait_ms\" must be 0..%d", kMaxReconfigWaitMs);
  }
  if (wait_ms != nullptr) *wait_ms = doc.has_wait_ms() ? doc.wait_ms() : kDefaultReconfigWaitMs;
  *out = std::move(plan);
  return Status::Ok();
}

std::vector<uint8_t> EncodeReconfig(const peerproto::ReconfigHeader& head_in, const ReconfigPlan& plan) {
  peerproto::ReconfigHeader head = head_in;
  head.flags = 0;
  if (plan.set_ring) head.flags |= peerproto::kSetRing;
  if (plan.set_algorithm) head.flags |= peerproto::kSetAlgorithm;
  if (plan.repath) head.flags |= peerproto::kRepath;
  head.nhosts = plan.set_ring ? static_cast<uint32_t>(plan.ring.size()) : 0;
  head.npins = static_cast<uint32_t>(plan.pins.size());
  CopyCString(head.algorithm, plan.set_algorithm ? plan.algorithm.c_str() : "");
  std::vector<uint8_t> out(sizeof(head) + head.nhosts * sizeof(int32_t) + head.npins * sizeof(peerproto::PathPin));
  uint8_t* p = out.data();
  memcpy(p, &head, sizeof(head));
  p += sizeof(head);
  for (int h : plan.ring) {
    int32_t v = h;
    memcpy(p, &v, sizeof(v));
    p += sizeof(v);
  }
  if (!plan.pins.empty()) memcpy(p, plan.pins.data(), plan.pins.size() * sizeof(peerproto::PathPin));
  return out;
}

Status DecodeReconfig(const std::vector<uint8_t>& payload, int nhosts, peerproto::ReconfigHeader* head,
                      ReconfigPlan* plan) {
  if (payload.size() < sizeof(*head)) return RemoteError("reconfiguration message too short (%zu bytes)", payload.size());
  memcpy(head, payload.data(), sizeof(*head));
  const uint64_t want = sizeof(*head) + static_cast<uint64_t>(head->nhosts) * sizeof(int32_t) +
                        static_cast<uint64_t>(head->npins) * sizeof(peerproto::PathPin);
  if (want != payload.size() || (head->flags & ~7u) != 0 || ((head->flags & peerproto::kSetRing) != 0) != (head->nhosts > 0)) {
    return RemoteError("malformed reconfiguration message (%zu bytes, flags 0x%x, %u ring entries, %u pins)",
                       payload.size(), head->flags, head->nhosts, head->npins);
  }
  ReconfigPlan p;
  p.set_ring = (head->flags & peerproto::kSetRing) != 0;
  p.set_algorithm = (head->flags & peerproto::kSetAlgorithm) != 0;
  p.repath = (head->flags & peerproto::kRepath) != 0;
  p.algorithm = p.set_algorithm ? FromCString(head->algorithm) : "";
  const uint8_t* cur = payload.data() + sizeof(*head);
  for (uint32_t i = 0; i < head->nhosts; ++i) {
    int32_t v;
    memcpy(&v, cur, sizeof(v));
    cur += sizeof(v);
    p.ring.push_back(v);
  }
  p.pins.resize(head->npins);
  if (head->npins > 0) memcpy(p.pins.data(), cur, head->npins * sizeof(peerproto::PathPin));
  Status st = ValidatePlan(p, nhosts);
  if (!st.ok()) return RemoteError("invalid reconfiguration from a peer daemon: %s", st.message().c_str());
  *plan = std::move(p);
  return Status::Ok();
}

bool RingNeighbours(const std::vector<int>& ring, int a, int b) {
  const int n = static_cast<int>(ring.size());
  if (n <= 2) return true;
  const int pa = static_cast<int>(std::find(ring.begin(), ring.end(), a) - ring.begin());
  const int pb = static_cast<int>(std::find(ring.begin(), ring.end(), b) - ring.begin());
  return (pa - pb + n) % n == 1 || (pb - pa + n) % n == 1;
}

std::string RingText(const std::vector<int>& ring) {
  std::string s;
  for (size_t i = 0; i < ring.size(); ++i) {
    if (i > 0) s += '>';
    s += std::to_string(ring[i]);
  }
  return s;
}

}  // namespace conduit
