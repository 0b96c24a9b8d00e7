// CommConfig: how a communicator's collectives run right now (ring order, inter-host
// all-reduce algorithm), numbered by epoch; ReconfigPlan: a change an operator asked for.
// Every daemon of a communicator holds the same CommConfig for the same collective
// sequence numbers: changes apply only through the agreement (epoch_barrier.h, reconfig.cc).
#ifndef CONDUIT_DAEMON_COLLECTIVES_COMM_CONFIG_H_
#define CONDUIT_DAEMON_COLLECTIVES_COMM_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "protocol/peer_protocol.h"

namespace conduit {

struct CommConfig {
  uint64_t epoch = 0;
  std::vector<int> ring;            // ring position -> host index
  std::string allreduce_algo = "auto";  // auto | ring | rd | rh
};

// A pin value meaning "whatever the flow policy chooses".
inline constexpr int kPolicyPath = -2;

struct ReconfigPlan {
  bool set_ring = false;
  std::vector<int> ring;
  bool set_algorithm = false;
  std::string algorithm;
  bool repath = false;
  std::vector<peerproto::PathPin> pins;

  bool empty() const { return !set_ring && !set_algorithm && !repath && pins.empty(); }
  // Whether the collective link between hosts `me` and `peer` is replaced; *pin is then
  // the path it must take (-1: primary) or kPolicyPath.
  bool Renews(int me, int peer, int* pin) const;
};

bool IsAllReduceAlgorithm(const std::string& name);

// What the operator's JSON may refer to when asking for a change.
struct ReconfigContext {
  int nhosts = 0;
  std::vector<int> current_ring;
  std::vector<int> locality_ring;  // what the locality policy gives for these hosts now
};

// How long POST /v1/communicators/{key}/reconfigure waits for the change by default, and at most.
inline constexpr int kDefaultReconfigWaitMs = 10000;
inline constexpr int kMaxReconfigWaitMs = 600000;

// {"ring": [host, ...] | "locality" | "rank" | "reverse", "algorithm": "auto|ring|rd|rh",
//  "paths": "policy" | [{"hosts": [a, b], "path": K}], "wait_ms": N}
// (config/placement.proto, ReconfigRequest); *wait_ms, when given, gets the wait asked for.
Status ParseReconfigPlan(const Json& body, const ReconfigContext& ctx, ReconfigPlan* out, int* wait_ms = nullptr);
// Structural checks for a plan that came over the wire.
Status ValidatePlan(const ReconfigPlan& plan, int nhosts);

// Wire form of ReconfigForward / ReconfigPropose payloads.
std::vector<uint8_t> EncodeReconfig(const peerproto::ReconfigHeader& head, const ReconfigPlan& plan);
Status DecodeReconfig(const std::vector<uint8_t>& payload, int nhosts, peerproto::ReconfigHeader* head,
                      ReconfigPlan* plan);

// Whether hosts a and b sit next to each other in `ring` (their link carries ring traffic).
bool RingNeighbours(const std::vector<int>& ring, int a, int b);

// "0>2>1>3" for logs and traces.
std::string RingText(const std::vector<int>& ring);

}  // namespace conduit

#endif  // CONDUIT_DAEMON_COLLECTIVES_COMM_CONFIG_H_
