// Tenant policies: which programs or communicators the operator singles out, and how
// their collective traffic is treated on this daemon (MCCS's QoS policies):
//   * priority: flow assignment keeps reserved paths for tenants of at least a given
//     priority (priority flow assignment);
//   * max_mbit_per_s: a cap on the tenant's inter-host sending rate from this daemon;
//   * yield: the tenant sends only while every higher-priority tenant on this daemon is
//     idle, i.e. between its collectives (time-window traffic scheduling).
// A communicator's tenant is the first policy (by name) whose match fits it; a match on
// the communicator key beats a match on the executable name.
#ifndef CONDUIT_DAEMON_POLICY_TENANT_POLICY_H_
#define CONDUIT_DAEMON_POLICY_TENANT_POLICY_H_

#include <cstdint>
#include <string>

#include "common/json.h"
#include "common/status.h"

namespace conduit {

struct TenantPolicy {
  static constexpr int kMaxPriority = 7;
  static constexpr int kDefaultYieldMaxMs = 100;

  std::string name;
  std::string match_exe;   // executable basename; "" = any
  std::string match_comm;  // start of a communicator key (8-16 hex digits); "" = any
  int priority = 0;        // 0 (default) .. kMaxPriority
  double max_mbit_per_s = 0;  // 0 = no cap
  bool yield = false;
  // Longest a yielding tenant waits for an idle moment before it sends a piece anyway, so
  // a prioritized tenant that never pauses cannot starve it into a timeout.
  int yield_max_ms = kDefaultYieldMaxMs;

  // {"match": {"exe": "...", "comm": "..."}, "priority": N, "max_mbit_per_s": X, "yield": bool,
  //  "yield_max_ms": N}
  static Status FromJson(const std::string& name, const Json& json, TenantPolicy* out);
  Json ToJson() const;

  // 2: matches the communicator key, 1: matches the executable, 0: no match.
  int MatchStrength(const std::string& exe, const std::string& comm_key) const;
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_POLICY_TENANT_POLICY_H_
