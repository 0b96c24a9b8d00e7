// MetricsFilter: per-method statistics of the calls this daemon carries: how many, with
// which status, how long (histogram and percentiles) and how many bytes each way, on
// each side (next to the caller, or next to the server). Enabled as the policy
// "rpc-metrics"; read through GET /v1/rpc/methods and /metrics.
#ifndef CONDUIT_DAEMON_RPC_POLICY_METRICS_FILTER_H_
#define CONDUIT_DAEMON_RPC_POLICY_METRICS_FILTER_H_

#include <array>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "common/json.h"
#include "common/metrics.h"
#include "rpc/policy/filter.h"

namespace conduit::rpc {

class MetricsFilter : public Filter {
 public:
  std::string name() const override { return "metrics"; }
  bool Applies(const RpcInfo&) const override { return true; }
  void OnFinish(const RpcInfo& info, const CallOutcome& outcome) override;

  // {"methods": [{method, side, calls, codes: {name: n}, latency_us: {p50, p90, p99, mean},
  //   request_bytes, response_bytes, request_messages, response_messages}]}
  Json Snapshot() const;
  void WriteMetrics(MetricsWriter& w) const;

  // Across a live upgrade the counts go on where they were (no counter reset for
  // Prometheus): {"methods": [{method, side, codes: [17], request_bytes, response_bytes,
  // request_messages, response_messages, latency_buckets: [121], latency_sum_ns}]}, at
  // most kMaxSavedMethods of them.
  static constexpr size_t kMaxSavedMethods = 4096;
  Json SavedState() const override;
  Status RestoreState(const Json& state) override;

 private:
  struct Stats {
    std::array<std::atomic<uint64_t>, 17> codes{};
    std::atomic<uint64_t> request_bytes{0};
    std::atomic<uint64_t> response_bytes{0};
    std::atomic<uint64_t> request_messages{0};
    std::atomic<uint64_t> response_messages{0};
    LatencyHistogram latency;
  };
  Stats* For(const std::string& method, const std::string& side);

  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, std::unique_ptr<Stats>> stats_;  // (method, side)
};

// "OK", "CANCELLED", ... for a gRPC status code.
const char* GrpcCodeName(int code);

}  // namespace conduit::rpc

#endif  // CONDUIT_DAEMON_RPC_POLICY_METRICS_FILTER_H_
