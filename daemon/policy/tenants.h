// Tenants: the tenant policies in force on this daemon and their run-time state (rate
// buckets, counters), plus which priority levels are inside a collective right now.
#ifndef CONDUIT_DAEMON_POLICY_TENANTS_H_
#define CONDUIT_DAEMON_POLICY_TENANTS_H_

#include <array>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "common/json.h"
#include "common/metrics.h"
#include "policy/tenant_policy.h"

namespace conduit {

// The run-time side of one tenant policy, shared by every communicator it covers here.
class TenantState {
 public:
  explicit TenantState(TenantPolicy policy);

  const TenantPolicy& policy() const { return policy_; }
  // Token bucket of the rate cap: bytes that may be sent now (<= want), or 0 and how long
  // to wait. Always `want` when the tenant is not capped.
  size_t TakeTokens(size_t want, std::chrono::microseconds* wait);
  void ReturnTokens(size_t bytes);

  std::atomic<uint64_t> sent_bytes{0};
  std::atomic<uint64_t> capped_us{0};   // time sends waited for the rate cap
  std::atomic<uint64_t> yielded_us{0};  // time sends waited for a prioritized tenant
  std::atomic<uint64_t> collectives{0};

 private:
  const TenantPolicy policy_;
  const double rate_bytes_per_us_;
  const double burst_bytes_;
  std::mutex mu_;
  double tokens_;
  std::chrono::steady_clock::time_point refilled_;
};

// How many collectives of each priority level are running on this daemon.
class ActivityBoard {
 public:
  void Enter(int priority) { busy_[priority].fetch_add(1, std::memory_order_relaxed); }
  void Exit(int priority) { busy_[priority].fetch_sub(1, std::memory_order_relaxed); }
  // True while a tenant of higher priority than `priority` is inside a collective.
  bool HigherBusy(int priority) const;

 private:
  std::array<std::atomic<int>, TenantPolicy::kMaxPriority + 1> busy_{};
};

class Tenants {
 public:
  // Creates or replaces the named policy. Communicators pick the change up at their next
  // collective.
  Status Put(const std::string& name, const Json& body);
  Status Remove(const std::string& name);
  Json List() const;
  Status Get(const std::string& name, Json* out) const;
  // A live upgrade carries each policy's counters (the conduit_tenant_*_total metrics) to
  // the next process: {"sent_bytes", "capped_us", "yielded_us", "collectives"}, null for an
  // unknown name. Restore checks the whole object before adding anything to the policy's.
  Json SavedCounters(const std::string& name) const;
  Status RestoreCounters(const std::string& name, const Json& saved);

  // The tenant of a communicator (its programs' executable, its key); nullptr when no
  // policy matches (default treatment: priority 0, no cap, no yield).
  std::shared_ptr<TenantState> Resolve(const std::string& exe, const std::string& comm_key) const;
  // Bumped on every change, so communicators can cache Resolve.
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }

  ActivityBoard& board() { return board_; }
  const ActivityBoard& board() const { return board_; }
  void WriteMetrics(MetricsWriter& w) const;

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<TenantState>> by_name_;
  std::atomic<uint64_t> generation_{1};
  ActivityBoard board_;
};

// Policy names in URLs: 1..64 of [A-Za-z0-9_.-].
bool IsValidPolicyName(const std::string& name);

}  // namespace conduit

#endif  // CONDUIT_DAEMON_POLICY_TENANTS_H_
