// Fabric: the operator's view of the network inside one daemon (topology, placement and
// tenant policies, path loads) and the two decisions collectives ask of it: the ring order
// of a new communicator and the path of each collective connection.
#ifndef CONDUIT_DAEMON_POLICY_FABRIC_H_
#define CONDUIT_DAEMON_POLICY_FABRIC_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "policy/path_table.h"
#include "policy/placement_policy.h"
#include "policy/tenants.h"
#include "topology/topology_store.h"

namespace conduit {

// Where one collective connection goes.
struct LinkPath {
  int path = -1;              // index into the topology's paths for the pair; -1 = primary
  std::string local_ip;       // bind here ("" = let the kernel choose)
  std::string connect_addr;   // "ip:port" to connect to
  std::unique_ptr<PathLease> lease;
};

class Fabric {
 public:
  explicit Fabric(std::string topology_file) : topology_(std::move(topology_file)) {}

  TopologyStore& topology() { return topology_; }
  Tenants& tenants() { return tenants_; }
  PathTable& paths() { return paths_; }

  // The policies, and whether the operator set them through the admin API (as opposed to
  // the configuration, at start or on SIGHUP): a live upgrade carries the former over.
  FlowPolicy flow_policy() const;
  void set_flow_policy(FlowPolicy policy, bool from_admin_api = false);
  bool flow_policy_from_api() const;
  RingPolicy ring_policy() const;
  void set_ring_policy(RingPolicy policy, bool from_admin_api = false);
  bool ring_policy_from_api() const;

  // The ring order (position -> host index) for a new communicator's hosts ("ip:port").
  std::vector<int> ChooseRing(const std::vector<std::string>& host_addrs) const;
  // The path for a collective connection this daemon (my_addr) opens to peer_addr, both
  // "ip:port". `ring_neighbours` weights its load; `pinned` >= 0 asks for a path index, -1
  // for the primary address, anything below lets the flow policy choose.
  LinkPath ChooseLinkPath(const std::string& my_addr, const std::string& peer_addr, int priority, uint64_t comm_key,
                          bool ring_neighbours, int pinned);

 private:
  TopologyStore topology_;
  Tenants tenants_;
  PathTable paths_;
  mutable std::mutex mu_;
  FlowPolicy flow_policy_;
  RingPolicy ring_policy_;
  bool flow_policy_from_api_ = false;
  bool ring_policy_from_api_ = false;
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_POLICY_FABRIC_H_
