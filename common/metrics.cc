#include "common/metrics.h"

#include <cmath>
#include <cstdio>

namespace conduit {

double LatencyHistogram::UpperBoundUs(int i) { return std::exp2((i + 1) / 4.0); }

void LatencyHistogram::Observe(double us) {
  int bucket = kBuckets;
  if (us <= UpperBoundUs(0)) {
    bucket = 0;
  } else {
    // Smallest i with 2^((i+1)/4) >= us.
    int i = static_cast<int>(std::ceil(4.0 * std::log2(us))) - 1;
    if (i < 0) i = 0;
    if (i < kBuckets) bucket = i;
  }
  counts_[bucket].fetch_add(1, std::memory_order_relaxed);
  count_.fetch_add(1, std::memory_order_relaxed);
  sum_ns_.fetch_add(static_cast<uint64_t>(us > 0 ? us * 1000.0 : 0), std::memory_order_relaxed);
}

void LatencyHistogram::Add(const std::array<uint64_t, kBuckets + 1>& counts, uint64_t sum_ns) {
  for (int i = 0; i <= kBuckets; ++i) {
    counts_[i].fetch_add(counts[i], std::memory_order_relaxed);
    count_.fetch_add(counts[i], std::memory_order_relaxed);
  }
  sum_ns_.fetch_add(sum_ns, std::memory_order_relaxed);
}

LatencyHistogram::Snapshot LatencyHistogram::Read() const {
  Snapshot s;
  for (int i = 0; i <= kBuckets; ++i) {
    s.counts[i] = counts_[i].load(std::memory_order_relaxed);
    s.count += s.counts[i];  // consistent with the buckets even while others observe
  }
  s.sum_ns = sum_ns_.load(std::memory_order_relaxed);
  s.sum_us = static_cast<double>(s.sum_ns) / 1000.0;
  return s;
}

double LatencyHistogram::Snapshot::Percentile(double q) const {
  if (count == 0) return 0;
  const double rank = q * static_cast<double>(count);
  uint64_t seen = 0;
  for (int i = 0; i <= kBuckets; ++i) {
    if (counts[i] == 0) continue;
    if (static_cast<double>(seen + counts[i]) >= rank) {
      // Interpolate linearly inside the bucket.
      const double lo = i == 0 ? 0.0 : UpperBoundUs(i - 1);
      const double hi = i < kBuckets ? UpperBoundUs(i) : UpperBoundUs(kBuckets - 1) * 2;
      const double frac = (rank - static_cast<double>(seen)) / static_cast<double>(counts[i]);
      return lo + (hi - lo) * frac;
    }
    seen += counts[i];
  }
  return UpperBoundUs(kBuckets - 1);
}

void MetricsWriter::Family(std::string_view name, std::string_view type, std::string_view help) {
  text_.append("# HELP ").append(name).append(" ").append(help).append("\n");
  text_.append("# TYPE ").append(name).append(" ").append(type).append("\n");
}

void MetricsWriter::AppendLabels(const MetricLabels& labels, const char* extra_name, const char* extra_value) {
  if (labels.empty() && extra_name == nullptr) return;
  text_.push_back('{');
  bool first = true;
  auto one = [&](std::string_view k, std::string_view v) {
    if (!first) text_.push_back(',');
    first = false;
    text_.append(k).append("=\"");
    for (char c : v) {
      if (c == '\\' || c == '"') text_.push_back('\\');
      if (c == '\n') {
        text_.append("\\n");
        continue;
      }
      text_.push_back(c);
    }
    text_.push_back('"');
  };
  for (const auto& [k, v] : labels) one(k, v);
  if (extra_name != nullptr) one(extra_name, extra_value);
  text_.push_back('}');
}

void MetricsWriter::Sample(std::string_view name, const MetricLabels& labels, double value) {
  text_.append(name);
  AppendLabels(labels);
  char buf[40];
  snprintf(buf, sizeof(buf), " %.17g\n", value);
  text_.append(buf);
}

void MetricsWriter::Histogram(std::string_view name, const MetricLabels& labels,
                              const LatencyHistogram::Snapshot& snap) {
  const std::string bucket = std::string(name) + "_bucket";
  uint64_t cumulative = 0;
  char le[32];
  // Every 4th bucket bound is a power of two microseconds: exact cumulative counts.
  for (int i = 0; i < LatencyHistogram::kBuckets; ++i) {
    cumulative += snap.counts[i];
    if (i % 4 != 3) continue;
    snprintf(le, sizeof(le), "%.9g", LatencyHistogram::UpperBoundUs(i) / 1e6);
    text_.append(bucket);
    AppendLabels(labels, "le", le);
    text_.append(" ").append(std::to_string(cumulative)).append("\n");
  }
  text_.append(bucket);
  AppendLabels(labels, "le", "+Inf");
  text_.append(" ").append(std::to_string(snap.count)).append("\n");
  Sample(std::string(name) + "_sum", labels, snap.sum_us / 1e6);
  Sample(std::string(name) + "_count", labels, static_cast<double>(snap.count));
}

}  // namespace conduit
