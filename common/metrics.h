// Metrics primitives shared by every daemon service: a lock-free latency histogram with
// percentiles, and a writer for the Prometheus text exposition format (served by the admin
// API at /metrics).
#ifndef CONDUIT_DAEMON_COMMON_METRICS_H_
#define CONDUIT_DAEMON_COMMON_METRICS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace conduit {

// Durations in microseconds, in buckets a quarter of an octave wide (each bound is 2^(1/4)
// times the previous: percentiles within ~19%) from 1 us to ~18 minutes. Observe is
// wait-free so hot paths can record every operation.
class LatencyHistogram {
 public:
  static constexpr int kBuckets = 120;  // plus one overflow bucket

  struct Snapshot {
    std::array<uint64_t, kBuckets + 1> counts{};
    uint64_t count = 0;
    uint64_t sum_ns = 0;  // exact, as kept: what a live upgrade carries
    double sum_us = 0;
    // Estimated q-quantile (0 < q <= 1) in microseconds; 0 when empty.
    double Percentile(double q) const;
  };

  void Observe(double us);
  Snapshot Read() const;
  // Adds what another histogram observed (a live upgrade's carried counts, sum in ns).
  void Add(const std::array<uint64_t, kBuckets + 1>& counts, uint64_t sum_ns);
  // Upper bound of bucket i in microseconds (i < kBuckets).
  static double UpperBoundUs(int i);

 private:
  std::array<std::atomic<uint64_t>, kBuckets + 1> counts_{};
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> sum_ns_{0};
};

using MetricLabels = std::vector<std::pair<std::string, std::string>>;

// Builds Prometheus text. Write each family's header once, then all of its samples.
class MetricsWriter {
 public:
  void Family(std::string_view name, std::string_view type, std::string_view help);
  void Sample(std::string_view name, const MetricLabels& labels, double value);
  // A histogram family's samples (_bucket at power-of-two bounds, _sum, _count) in seconds.
  void Histogram(std::string_view name, const MetricLabels& labels, const LatencyHistogram::Snapshot& snap);

  const std::string& text() const { return text_; }

 private:
  void AppendLabels(const MetricLabels& labels, const char* extra_name = nullptr, const char* extra_value = nullptr);
  std::string text_;
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_COMMON_METRICS_H_
