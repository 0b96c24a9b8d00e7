// Topology: what the operator tells conduitd about the physical network, which programs
// never see (MCCS keeps it inside the service): each daemon's rack and pod, and the paths
// between hosts as pairs of addresses, one pair per path.
//
// The description is JSON (docs/topology.md):
//
//   {"hosts": [{"name": "h0", "addr": "10.0.0.1", "rack": "r0", "pod": "p0",
//               "path_addrs": ["10.1.0.1", "10.2.0.1"]}, ...],
//    "links": [{"hosts": ["h0", "h1"], "paths": [["10.9.0.1", "10.9.0.2"], ...]}]}
//
// `addr` is the address the daemon advertises to its peers (its identity). A host pair's
// paths are its `links` entry when there is one, else path k joins the two hosts'
// path_addrs[k] (one network per path, as with one NIC per rail).
#ifndef CONDUIT_DAEMON_TOPOLOGY_TOPOLOGY_H_
#define CONDUIT_DAEMON_TOPOLOGY_TOPOLOGY_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/json.h"
#include "common/status.h"

namespace conduit {

struct TopoHost {
  std::string name;
  std::string addr;  // IP only, no port
  std::string rack;  // "" when unknown
  std::string pod;   // "" when unknown
  std::vector<std::string> path_addrs;
};

// One path between two hosts, seen from the first: bind to `local`, connect to `remote`.
struct PathAddrs {
  std::string local;
  std::string remote;
};

class Topology {
 public:
  // Validates and builds a topology from its JSON description.
  static Status FromJson(const Json& json, Topology* out);
  Json ToJson() const;

  const std::vector<TopoHost>& hosts() const { return hosts_; }
  // The host whose `addr` is `ip`; nullptr when the topology does not know it.
  const TopoHost* FindByAddr(const std::string& ip) const;
  // The paths from host a to host b (IPs), path index = position; empty when unknown.
  std::vector<PathAddrs> PathsBetween(const std::string& a_ip, const std::string& b_ip) const;

 private:
  const TopoHost* FindByNameOrAddr(const std::string& key) const;

  std::vector<TopoHost> hosts_;
  // Explicit per-pair paths, keyed by (a addr, b addr) with a < b; addresses as (a side, b side).
  std::map<std::pair<std::string, std::string>, std::vector<PathAddrs>> links_;
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_TOPOLOGY_TOPOLOGY_H_
