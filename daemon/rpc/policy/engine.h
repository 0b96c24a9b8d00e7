// PolicyEngine: the policies an operator installed on this daemon, changed at run time.
//
// Each policy has a name and is one Filter (or, for QoS, a setting of the links' send
// scheduler). The installed set is an immutable snapshot swapped as a whole, so the
// datapath reads it without locks held across calls, and a call keeps the filters it
// started with while new calls see the change at once.
#ifndef CONDUIT_DAEMON_RPC_POLICY_ENGINE_H_
#define CONDUIT_DAEMON_RPC_POLICY_ENGINE_H_

#include <atomic>
#include <cstdint>
#include <vector>
#include <memory>
#include <mutex>
#include <string>

#include "rpc/policy/filter.h"

namespace conduit::rpc {

class PolicyEngine {
 public:
  // The filters that apply to a call starting now, in installation order.
  FilterChain FiltersFor(const RpcInfo& info) const;
  // Messages up to this size go before larger ones on daemon links; 0: no QoS.
  uint64_t qos_small_bytes() const { return qos_small_bytes_.load(std::memory_order_relaxed); }

  void Install(const std::string& name, std::shared_ptr<Filter> filter);
  void SetQos(uint64_t small_bytes) { qos_small_bytes_.store(small_bytes, std::memory_order_relaxed); }
  bool Remove(const std::string& name);

 private:
  // In installation order; replacing a policy keeps its place.
  using Snapshot = std::vector<std::pair<std::string, std::shared_ptr<Filter>>>;

  mutable std::mutex mu_;
  std::shared_ptr<const Snapshot> snapshot_ = std::make_shared<Snapshot>();
  std::atomic<uint64_t> qos_small_bytes_{0};
};

}  // namespace conduit::rpc

#endif  // CONDUIT_DAEMON_RPC_POLICY_ENGINE_H_
