// CommStats: what one communicator has done on this daemon, for the operator: totals,
// latency histograms per collective kind, and a trace of the most recent collectives
// (sequence number, shape, algorithm, duration, outcome).
#ifndef CONDUIT_DAEMON_COLLECTIVES_COMM_STATS_H_
#define CONDUIT_DAEMON_COLLECTIVES_COMM_STATS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "collectives/comm_config.h"
#include "collectives/memory_traffic.h"
#include "common/metrics.h"
#include "protocol/shim_protocol.h"

namespace conduit {

// "AllReduce", "Broadcast", ... for a shimproto::OpKind.
const char* OpKindName(uint8_t kind);
// The name a collective's record gives its algorithm ("ring", "chain", "recursive-doubling",
// "halving-doubling", "local") as the static string records point to; "" for another text
// (a record read from a live upgrade's state).
const char* KnownAlgorithmName(const std::string& name);

struct CollRecord {
  uint64_t seq = 0;  // collective sequence number within the communicator (0, 1, ...)
  uint8_t kind = 0;
  uint8_t dtype = 0;
  uint8_t redop = 0;
  int32_t root = 0;
  uint64_t count = 0;
  uint64_t bytes = 0;  // bytes of one rank's buffer
  // What the copies are counted against: one rank's whole buffer (an AllGather's output, a
  // ReduceScatter's input: nranks blocks) times this host's ranks in the collective.
  uint64_t payload_bytes = 0;
  const char* algorithm = "";
  bool result_area = false;  // the local ranks read the result from the result area (result_area.h)
  int64_t start_unix_us = 0;
  double duration_us = 0;
  std::string error;  // empty when it succeeded
  std::shared_ptr<const CommConfig> config;  // the configuration it ran under (epoch, ring)
  TrafficCounts traffic;  // host path: bytes written to memory on this host, by who
};

class CommStats {
 public:
  static constexpr size_t kTraceCapacity = 1024;
  static constexpr int kKinds = shimproto::kReduceScatter + 1;

  void Record(CollRecord record);

  uint64_t ops() const { return ops_.load(std::memory_order_relaxed); }
  uint64_t bytes() const { return bytes_.load(std::memory_order_relaxed); }
  uint64_t errors() const { return errors_.load(std::memory_order_relaxed); }
  // Per collective kind (shimproto::OpKind value).
  uint64_t ops_of(uint8_t kind) const;
  uint64_t bytes_of(uint8_t kind) const;
  LatencyHistogram::Snapshot latency_of(uint8_t kind) const;
  // Memory written on this host by the collectives of `kind`, summed (memory_traffic.h).
  TrafficCounts traffic_of(uint8_t kind) const;
  // The newest `max` records, oldest first.
  std::vector<CollRecord> Trace(size_t max) const;

  // Bytes that point-to-point receives here took from or into device buffers, by path:
  // straight from a local sender's GPU buffer by a GPU copy (direct), or through host
  // memory (pinned staging, the network, a segment).
  void AddDeviceP2p(bool direct, uint64_t bytes) {
    (direct ? device_p2p_direct_ : device_p2p_through_host_).fetch_add(bytes, std::memory_order_relaxed);
  }
  uint64_t device_p2p_bytes(bool direct) const {
    return (direct ? device_p2p_direct_ : device_p2p_through_host_).load(std::memory_order_relaxed);
  }

  // Host memory written on this host for point-to-point ops (Send, Recv: so all-to-all,
  // gather, scatter), by writer, summed over the communicator's life: the shims' staging
  // copies the ops imply, the kernel's socket copies, and the daemon's copies into a
  // receive's buffer (from a local sender, or of what arrived before the receive was
  // posted). Not per op: a group's sends and receives interleave. Not carried across a
  // live upgrade (the Prometheus counter restarts).
  void AddP2pTraffic(const TrafficCounts& t);
  TrafficCounts p2p_traffic() const;
  // Groups of this host's ranks that held point-to-point ops on host memory (one per rank
  // per ncclGroupEnd, or per lone Send or Recv): per call, with the traffic above.
  void AddP2pGroup() { p2p_groups_.fetch_add(1, std::memory_order_relaxed); }
  uint64_t p2p_groups() const { return p2p_groups_.load(std::memory_order_relaxed); }

  // A live upgrade: the trace the previous process recorded, older than anything recorded
  // here (at most kTraceCapacity kept, the newest).
  void RestoreTrace(std::vector<CollRecord> records);

  // What a live upgrade carries to the next process: the counters behind the Prometheus
  // totals and histograms (the trace goes as Trace(kTraceCapacity)).
  struct Totals {
    struct Kind {
      uint64_t ops = 0;
      uint64_t bytes = 0;
      std::array<uint64_t, LatencyHistogram::kBuckets + 1> latency{};
      uint64_t latency_sum_ns = 0;
      TrafficCounts traffic;
    };
    uint64_t ops = 0;
    uint64_t bytes = 0;
    uint64_t errors = 0;
    std::array<Kind, kKinds> kinds{};
    uint64_t device_p2p_direct = 0;
    uint64_t device_p2p_through_host = 0;
  };
  Totals SaveTotals() const;
  void AddTotals(const Totals& totals);

 private:
  std::atomic<uint64_t> ops_{0};
  std::atomic<uint64_t> bytes_{0};
  std::atomic<uint64_t> errors_{0};
  std::atomic<uint64_t> device_p2p_direct_{0};
  std::atomic<uint64_t> device_p2p_through_host_{0};
  std::atomic<uint64_t> p2p_groups_{0};
  std::array<std::atomic<uint64_t>, kKinds> kind_ops_{};
  std::array<std::atomic<uint64_t>, kKinds> kind_bytes_{};
  std::array<LatencyHistogram, kKinds> latency_;
  mutable std::mutex mu_;
  std::deque<CollRecord> trace_;
  std::array<TrafficCounts, kKinds> kind_traffic_{};  // under mu_
  TrafficCounts p2p_traffic_;                         // under mu_
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_COLLECTIVES_COMM_STATS_H_
