#include "collectives/comm_stats.h"

namespace conduit {

const char* OpKindName(uint8_t kind) {
  switch (kind) {
    case shimproto::kAllReduce: return "AllReduce";
    case shimproto::kBroadcast: return "Broadcast";
    case shimproto::kReduce: return "Reduce";
    case shimproto::kAllGather: return "AllGather";
    case shimproto::kReduceScatter: return "ReduceScatter";
    case shimproto::kSend: return "Send";
    case shimproto::kRecv: return "Recv";
    default: return "?";
  }
}

void CommStats::Record(CollRecord record) {
  ops_.fetch_add(1, std::memory_order_relaxed);
  bytes_.fetch_add(record.bytes, std::memory_order_relaxed);
  if (!record.error.empty()) errors_.fetch_add(1, std::memory_order_relaxed);
  if (record.kind < kKinds) {
    kind_ops_[record.kind].fetch_add(1, std::memory_order_relaxed);
    kind_bytes_[record.kind].fetch_add(record.bytes, std::memory_order_relaxed);
    latency_[record.kind].Observe(record.duration_us);
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (record.kind < kKinds) kind_traffic_[record.kind] += record.traffic;
  if (trace_.size() == kTraceCapacity) trace_.pop_front();
  trace_.push_back(std::move(record));
}

uint64_t CommStats::ops_of(uint8_t kind) const {
  return kind < kKinds ? kind_ops_[kind].load(std::memory_order_relaxed) : 0;
}

uint64_t CommStats::bytes_of(uint8_t kind) const {
  return kind < kKinds ? kind_bytes_[kind].load(std::memory_order_relaxed) : 0;
}

LatencyHistogram::Snapshot CommStats::latency_of(uint8_t kind) const {
  return kind < kKinds ? latency_[kind].Read() : LatencyHistogram::Snapshot{};
}

TrafficCounts CommStats::traffic_of(uint8_t kind) const {
  std::lock_guard<std::mutex> lock(mu_);
  return kind < kKinds ? kind_traffic_[kind] : TrafficCounts{};
}

void CommStats::AddP2pTraffic(const TrafficCounts& t) {
  std::lock_guard<std::mutex> lock(mu_);
  p2p_traffic_ += t;
}

TrafficCounts CommStats::p2p_traffic() const {
  std::lock_guard<std::mutex> lock(mu_);
  return p2p_traffic_;
}

std::vector<CollRecord> CommStats::Trace(size_t max) const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = std::min(max, trace_.size());
  return std::vector<CollRecord>(trace_.end() - static_cast<std::ptrdiff_t>(n), trace_.end());
}

void CommStats::RestoreTrace(std::vector<CollRecord> records) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = records.rbegin(); it != records.rend() && trace_.size() < kTraceCapacity; ++it) {
    trace_.push_front(std::move(*it));
  }
}

const char* KnownAlgorithmName(const std::string& name) {
  static const char* const kNames[] = {"ring", "chain", "recursive-doubling", "halving-doubling", "local"};
  for (const char* known : kNames) {
    if (name == known) return known;
  }
  return "";
}

CommStats::Totals CommStats::SaveTotals() const {
  Totals t;
  t.ops = ops();
  t.bytes = bytes();
  t.errors = errors();
  t.device_p2p_direct = device_p2p_bytes(true);
  t.device_p2p_through_host = device_p2p_bytes(false);
  for (int k = 0; k < kKinds; ++k) {
    Totals::Kind& out = t.kinds[k];
    out.ops = ops_of(static_cast<uint8_t>(k));
    out.bytes = bytes_of(static_cast<uint8_t>(k));
    const LatencyHistogram::Snapshot latency = latency_[k].Read();
    out.latency = latency.counts;
    out.latency_sum_ns = latency.sum_ns;
    out.traffic = traffic_of(static_cast<uint8_t>(k));
  }
  return t;
}

void CommStats::AddTotals(const Totals& t) {
  ops_.fetch_add(t.ops, std::memory_order_relaxed);
  bytes_.fetch_add(t.bytes, std::memory_order_relaxed);
  errors_.fetch_add(t.errors, std::memory_order_relaxed);
  AddDeviceP2p(true, t.device_p2p_direct);
  AddDeviceP2p(false, t.device_p2p_through_host);
  std::lock_guard<std::mutex> lock(mu_);
  for (int k = 0; k < kKinds; ++k) {
    const Totals::Kind& in = t.kinds[k];
    kind_ops_[k].fetch_add(in.ops, std::memory_order_relaxed);
    kind_bytes_[k].fetch_add(in.bytes, std::memory_order_relaxed);
    latency_[k].Add(in.latency, in.latency_sum_ns);
    kind_traffic_[k] += in.traffic;
  }
}

}  // namespace conduit
