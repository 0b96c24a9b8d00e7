// Locality-aware ring order (MCCS, "locality-aware ring configuration"): hosts of one rack
// sit next to each other and racks of one pod next to each other, so a ring crosses each
// inter-rack (inter-pod) boundary once per direction instead of once per rank that happens
// to land in another rack.
#ifndef CONDUIT_DAEMON_TOPOLOGY_LOCALITY_H_
#define CONDUIT_DAEMON_TOPOLOGY_LOCALITY_H_

#include <string>
#include <vector>

#include "topology/topology.h"

namespace conduit {

// `host_addrs` ("ip:port", in the communicator's host order). Returns a permutation of
// host indices: ring position -> host. Pods, racks within a pod and hosts within a rack
// keep their order of first appearance, so the result is deterministic and equals the
// identity when the topology knows nothing. Hosts the topology does not list form
// single-host racks.
std::vector<int> LocalityRing(const Topology& topology, const std::vector<std::string>& host_addrs);

// How many times a ring crosses from one rack to another (both directions counted once):
// the number of adjacent ring positions in different racks.
int RackCrossings(const Topology& topology, const std::vector<std::string>& host_addrs, const std::vector<int>& ring);

}  // namespace conduit

#endif  // CONDUIT_DAEMON_TOPOLOGY_LOCALITY_H_
