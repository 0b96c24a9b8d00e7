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

MetricsFilter::Stats* MetricsFilter::For(const std::string& method, const std::string& side) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = stats_[{method, side}];
  if (slot == nullptr) slot = std::make_unique<Stats>();
  return slot.get();
}

void MetricsFilter::OnFinish(const RpcInfo& info, const CallOutcome& outcome) {
  Stats* s = For(info.method, info.side == Side::kClient ? "client" : "server");
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

namespace {

constexpr size_t kMaxSavedMethodBytes = 1024;

// `n` integers >= 0 from a JSON array of exactly that many.
bool Counts(const Json* array, size_t n, uint64_t* out) {
  if (array == nullptr || !array->is_array() || array->size() != n) return false;
  for (size_t i = 0; i < n; ++i) {
    const Json& v = array->items()[i];
    if (!v.is_int() || v.as_int() < 0) return false;
    out[i] = static_cast<uint64_t>(v.as_int());
  }
  return true;
}

bool Count(const Json& entry, const char* key, uint64_t* out) {
  const Json* v = entry.find(key);
  if (v == nullptr || !v->is_int() || v->as_int() < 0) return false;
  *out = static_cast<uint64_t>(v->as_int());
  return true;
}

}  // namespace

Json MetricsFilter::SavedState() const {
  Json methods = Json::Array();
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [key, s] : stats_) {
    if (methods.size() == kMaxSavedMethods) break;
    Json m = Json::Object();
    m["method"] = key.first;
    m["side"] = key.second;
    Json codes = Json::Array();
    for (const auto& c : s->codes) codes.push_back(c.load(std::memory_order_relaxed));
    m["codes"] = std::move(codes);
    m["request_bytes"] = s->request_bytes.load();
    m["response_bytes"] = s->response_bytes.load();
    m["request_messages"] = s->request_messages.load();
    m["response_messages"] = s->response_messages.load();
    const LatencyHistogram::Snapshot h = s->latency.Read();
    Json buckets = Json::Array();
    for (uint64_t c : h.counts) buckets.push_back(c);
    m["latency_buckets"] = std::move(buckets);
    m["latency_sum_ns"] = h.sum_ns;
    methods.push_back(std::move(m));
  }
  Json out = Json::Object();
  out["methods"] = std::move(methods);
  return out;
}

Status MetricsFilter::RestoreState(const Json& state) {
  const Json* methods = state.is_object() ? state.find("methods") : nullptr;
  if (methods == nullptr || !methods->is_array() || methods->size() > kMaxSavedMethods) {
    return InvalidArgument("rpc metrics: the saved state is not {\"methods\": [...]} of at most %zu methods",
                           kMaxSavedMethods);
  }
  // Everything is checked before anything is added: a bad state changes nothing.
  struct Entry {
    std::string method, side;
    uint64_t codes[17];
    uint64_t request_bytes, response_bytes, request_messages, response_messages, sum_ns;
    std::array<uint64_t, LatencyHistogram::kBuckets + 1> buckets;
  };
  std::vector<Entry> entries(methods->size());
  for (size_t i = 0; i < methods->size(); ++i) {
    const Json& m = methods->items()[i];
    Entry& e = entries[i];
    const Json* method = m.is_object() ? m.find("method") : nullptr;
    const Json* side = m.is_object() ? m.find("side") : nullptr;
    const bool ok = method != nullptr && method->is_string() && method->as_string().size() <= kMaxSavedMethodBytes &&
                    side != nullptr && side->is_string() &&
                    (side->as_string() == "client" || side->as_string() == "server") &&
                    Counts(m.find("codes"), 17, e.codes) &&
                    Counts(m.find("latency_buckets"), e.buckets.size(), e.buckets.data()) &&
                    Count(m, "request_bytes", &e.request_bytes) && Count(m, "response_bytes", &e.response_bytes) &&
                    Count(m, "request_messages", &e.request_messages) &&
                    Count(m, "response_messages", &e.response_messages) && Count(m, "latency_sum_ns", &e.sum_ns);
    if (!ok) return InvalidArgument("rpc metrics: saved entry %zu is malformed", i);
    e.method = method->as_string();
    e.side = side->as_string();
  }
  for (const Entry& e : entries) {
    Stats* s = For(e.method, e.side);
    for (int c = 0; c <= 16; ++c) s->codes[c].fetch_add(e.codes[c], std::memory_order_relaxed);
    s->request_bytes.fetch_add(e.request_bytes, std::memory_order_relaxed);
    s->response_bytes.fetch_add(e.response_bytes, std::memory_order_relaxed);
    s->request_messages.fetch_add(e.request_messages, std::memory_order_relaxed);
    s->response_messages.fetch_add(e.response_messages, std::memory_order_relaxed);
    s->latency.Add(e.buckets, e.sum_ns);
  }
  return Status::Ok();
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
