#include "policy/fabric.h"

#include <functional>

#include "common/log.h"
#include "common/net_addr.h"
#include "topology/locality.h"

namespace conduit {

FlowPolicy Fabric::flow_policy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return flow_policy_;
}

void Fabric::set_flow_policy(FlowPolicy policy, bool from_admin_api) {
  std::lock_guard<std::mutex> lock(mu_);
  flow_policy_ = std::move(policy);
  flow_policy_from_api_ = from_admin_api;
}

bool Fabric::flow_policy_from_api() const {
  std::lock_guard<std::mutex> lock(mu_);
  return flow_policy_from_api_;
}

RingPolicy Fabric::ring_policy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ring_policy_;
}

void Fabric::set_ring_policy(RingPolicy policy, bool from_admin_api) {
  std::lock_guard<std::mutex> lock(mu_);
  ring_policy_ = policy;
  ring_policy_from_api_ = from_admin_api;
}

bool Fabric::ring_policy_from_api() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ring_policy_from_api_;
}

std::vector<int> Fabric::ChooseRing(const std::vector<std::string>& host_addrs) const {
  if (ring_policy().order == RingPolicy::Order::kLocality) return LocalityRing(*topology_.Get(), host_addrs);
  std::vector<int> ring(host_addrs.size());
  for (size_t i = 0; i < ring.size(); ++i) ring[i] = static_cast<int>(i);
  return ring;
}

LinkPath Fabric::ChooseLinkPath(const std::string& my_addr, const std::string& peer_addr, int priority,
                                uint64_t comm_key, bool ring_neighbours, int pinned) {
  auto topology = topology_.Get();
  const std::string my_ip = HostOfAddr(my_addr), peer_ip = HostOfAddr(peer_addr);
  std::vector<PathAddrs> paths = topology->PathsBetween(my_ip, peer_ip);
  // Loads are kept per destination rack: that is where connections from here compete.
  std::string group = peer_ip;
  if (const TopoHost* h = topology->FindByAddr(peer_ip); h != nullptr && !h->rack.empty()) {
    group = h->pod.empty() ? h->rack : h->pod + "/" + h->rack;
  }
  if (pinned >= static_cast<int>(paths.size())) {
    CLOG_WARN("path %d asked for %s -> %s, but the topology lists %zu paths; choosing by policy", pinned,
              my_addr.c_str(), peer_addr.c_str(), paths.size());
    pinned = -1;
  }
  const uint64_t hash = comm_key ^ std::hash<std::string>()(my_ip < peer_ip ? my_ip + peer_ip : peer_ip + my_ip);
  LinkPath out;
  const int npaths = pinned == -1 ? 0 : static_cast<int>(paths.size());  // -1: the primary address
  out.lease = paths_.Choose(group, npaths, flow_policy(), priority, hash, ring_neighbours ? 1 : 0, pinned);
  out.path = out.lease->path();
  if (out.path < 0) {
    out.connect_addr = peer_addr;
    return out;
  }
  out.local_ip = paths[out.path].local;
  const std::string port = peer_addr.substr(peer_addr.rfind(':') + 1);
  const std::string& remote = paths[out.path].remote;
  out.connect_addr = (remote.find(':') != std::string::npos ? "[" + remote + "]" : remote) + ":" + port;
  return out;
}

}  // namespace conduit
