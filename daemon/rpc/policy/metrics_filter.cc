#include "rpc/policy/metrics_filter.h"

namespace conduit::rpc {

const char* GrpcCodeName(int code) {
  static const char* const kNames[] = {"OK",
                                       "CANCELLED",
                                       "UNKNOWN",
                                       "INVALID_ARGUMENT",
                                       "DEADLINE_EXCEEDED",
                                       "NOT_FOUND",
                                       "ALREADY_EXISTS",
                                       "PERMISSION_DENIED",
                                       "RESOURCE_EXHAUSTED",
                                       "FAILED_PRECONDITION",
                                       "ABORTED",
                                       "OUT_OF_RANGE",
                                       "UNIMPLEMENTED",
                                       "INTERNAL",
                                       "UNAVAILABLE",
                                       "DATA_LOSS",
                                       "UNAUTHENTICATED"};
  return code >= 0 && code <= 16 ? kNames[code] : "UNKNOWN";
}

MetricsFilter::Stats* MetricsFilter::For(const RpcInfo& info) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = stats_[{info.method, info.side == Side::kClient ? "client" : "server"}];
  if (slot == nullptr) slot = std::make_unique<Stats>();
  return slot.get();
}

void MetricsFilter::OnFinish(const RpcInfo& info, const CallOutcome& outcome) {
  Stats* s = For(info);
  int code = outcome.code >= 0 && outcome.code <= 16 ? outcome.code : 2;
  s->codes[code].fetch_add(1, std::memory_order_relaxed);
  s->request_bytes.fetch_add(outcome.request_bytes, std::memory_order_relaxed);
  s->response_bytes.fetch_add(outcome.response_bytes, std::memory_order_relaxed);
  s->request_messages.fetch_add(outcome.request_messages, std::memory_order_relaxed);
  s->response_messages.fetch_add(outcome.response_messages, std::memory_order_relaxed);
  s->latency.Observe(std::chrono::duration<double, std::micro>(outcome.latency).count());
}

Json MetricsFilter::Snapshot() const {
  Json methods = Json::Array();
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [key, s] : stats_) {
    Json m = Json::Object();
    m["method"] = key.first;
    m["side"] = key.second;
    uint64_t calls = 0;
    Json codes = Json::Object();
    for (int c = 0; c <= 16; ++c) {
      uint64_t n = s->codes[c].load(std::memory_order_relaxed);
      calls += n;
      if (n > 0) codes[GrpcCodeName(c)] = n;
    }
    m["calls"] = calls;
    m["codes"] = std::move(codes);
    LatencyHistogram::Snapshot h = s->latency.Read();
    Json lat = Json::Object();
    lat["p50"] = h.Percentile(0.5);
    lat["p90"] = h.Percentile(0.9);
    lat["p99"] = h.Percentile(0.99);
    lat["mean"] = h.count > 0 ? h.sum_us / static_cast<double>(h.count) : 0.0;
    m["latency_us"] = std::move(lat);
    m["request_bytes"] = s->request_bytes.load();
    m["response_bytes"] = s->response_bytes.load();
    m["request_messages"] = s->request_messages.load();
    m["response_messages"] = s->response_messages.load();
    methods.push_back(std::move(m));
  }
  Json out = Json::Object();
  out["methods"] = std::move(methods);
  return out;
}

void MetricsFilter::WriteMetrics(MetricsWriter& w) const {
  std::lock_guard<std::mutex> lock(mu_);
  w.Family("conduit_rpc_calls_total", "counter", "RPCs carried, per method, side and final status.");
  for (const auto& [key, s] : stats_) {
    for (int c = 0; c <= 16; ++c) {
      uint64_t n = s->codes[c].load(std::memory_order_relaxed);
      if (n == 0) continue;
      w.Sample("conduit_rpc_calls_total", {{"method", key.first}, {"side", key.second}, {"code", GrpcCodeName(c)}},
               static_cast<double>(n));
    }
  }
  w.Family("conduit_rpc_request_bytes_total", "counter", "Request message bytes carried, per method and side.");
  for (const auto& [key, s] : stats_) {
    w.Sample("conduit_rpc_request_bytes_total", {{"method", key.first}, {"side", key.second}},
             static_cast<double>(s->request_bytes.load()));
  }
  w.Family("conduit_rpc_response_bytes_total", "counter", "Response message bytes carried, per method and side.");
  for (const auto& [key, s] : stats_) {
    w.Sample("conduit_rpc_response_bytes_total", {{"method", key.first}, {"side", key.second}},
             static_cast<double>(s->response_bytes.load()));
  }
  w.Family("conduit_rpc_latency_seconds", "histogram", "RPC duration as this daemon saw it, per method and side.");
  for (const auto& [key, s] : stats_) {
    w.Histogram("conduit_rpc_latency_seconds", {{"method", key.first}, {"side", key.second}}, s->latency.Read());
  }
}

}  // namespace conduit::rpc
