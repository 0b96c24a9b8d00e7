// Placement policies: how this daemon lays new communicators onto the network.
//   * RingPolicy: the ring order of a communicator's hosts (locality-aware or rank order);
//     decided by the communicator's root daemon at rendezvous.
//   * FlowPolicy: which of the topology's paths each collective connection takes (MCCS's
//     flow assignment): all on the advertised address ("primary"), all on the first path
//     ("single"), a hash of communicator and host pair (what ECMP would do: "hash"), or the
//     path with the least load from this daemon toward the peer's rack ("balance", fair
//     flow assignment). Paths can be reserved for tenants of a minimum priority (priority
//     flow assignment). Decided by the daemon that opens the connection.
#ifndef CONDUIT_DAEMON_POLICY_PLACEMENT_POLICY_H_
#define CONDUIT_DAEMON_POLICY_PLACEMENT_POLICY_H_

#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"

namespace conduit {

struct RingPolicy {
  enum class Order { kLocality, kRank };
  Order order = Order::kLocality;

  static Status FromJson(const Json& json, RingPolicy* out);
  Json ToJson() const;
};

enum class FlowAssignment { kPrimary, kSingle, kHash, kBalance };
const char* FlowAssignmentName(FlowAssignment a);
bool ParseFlowAssignment(const std::string& text, FlowAssignment* out);

struct ReservedPath {
  int path = 0;
  int min_priority = 1;
};

struct FlowPolicy {
  FlowAssignment assignment = FlowAssignment::kBalance;
  std::vector<ReservedPath> reserved;

  // {"assignment": "primary|single|hash|balance", "reserve": [{"path": 1, "min_priority": 1}]}
  static Status FromJson(const Json& json, FlowPolicy* out);
  Json ToJson() const;

  // Whether a tenant of `priority` may use path `path`.
  bool Allows(int path, int priority) const;
  // Whether `path` is reserved and `priority` qualifies for it (such tenants prefer it).
  bool ReservedFor(int path, int priority) const;
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_POLICY_PLACEMENT_POLICY_H_
