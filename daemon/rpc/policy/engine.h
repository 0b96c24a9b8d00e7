// PolicyEngine: the RPC policies an operator installed on this daemon, changed at run time
// (admin API, rpc/rpc_admin.h).
//
// Each policy has a kind ("rpc-acl", "rpc-ratelimit", "rpc-metrics"), a name, the spec it
// was given and the Filter built from it; QoS is a setting of the links' send scheduler.
// The installed set is an immutable snapshot swapped as a whole: the datapath takes it
// without holding a lock across calls, a call keeps the filters it started with, and new
// calls see a change at once.
#ifndef CONDUIT_DAEMON_RPC_POLICY_ENGINE_H_
#define CONDUIT_DAEMON_RPC_POLICY_ENGINE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/json.h"
#include "rpc/policy/filter.h"

namespace conduit::rpc {

struct InstalledPolicy {
  std::string kind;
  std::string name;
  Json spec;
  std::shared_ptr<Filter> filter;
};

class PolicyEngine {
 public:
  // The filters that apply to a call starting now, in installation order.
  FilterChain FiltersFor(const RpcInfo& info) const;
  // Messages up to this size go before larger ones on daemon links; 0: no QoS.
  uint64_t qos_small_bytes() const { return qos_small_bytes_.load(std::memory_order_relaxed); }
  void SetQos(uint64_t small_bytes) { qos_small_bytes_.store(small_bytes, std::memory_order_relaxed); }

  // Adds a policy, or replaces the one of the same kind and name in place: it keeps its place
  // in the order, its state moves to the new filter (Filter::TakeStateFrom), and the other
  // policies' filters are not touched. Calls that started before keep the old filter.
  void Install(InstalledPolicy policy);
  bool Remove(const std::string& kind, const std::string& name);
  std::vector<InstalledPolicy> List() const;
  std::shared_ptr<Filter> Find(const std::string& kind, const std::string& name) const;

 private:
  using Snapshot = std::vector<InstalledPolicy>;
  std::shared_ptr<const Snapshot> Current() const;

  mutable std::mutex mu_;
  std::shared_ptr<const Snapshot> snapshot_ = std::make_shared<Snapshot>();
  std::atomic<uint64_t> qos_small_bytes_{0};
};

}  // namespace conduit::rpc

#endif  // CONDUIT_DAEMON_RPC_POLICY_ENGINE_H_
