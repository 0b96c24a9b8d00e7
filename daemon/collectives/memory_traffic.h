// MemoryTraffic: the bytes one collective writes to memory on this host, by who writes them
// (host memory; for device buffers also what the GPU writes, device_collective.cc). It is
// what "copies per payload byte" in docs/design.md is measured with: each site that moves
// data adds what it moved, so a change that adds a copy shows in the admin API's trace and
// fails memory_traffic_test (device_double_test for device buffers), instead of hiding in a
// benchmark's noise.
//
// Collectives of one communicator run one at a time, but within one the algorithms'
// sending and receiving sides may run on different threads: counters are atomic.
#ifndef CONDUIT_DAEMON_COLLECTIVES_MEMORY_TRAFFIC_H_
#define CONDUIT_DAEMON_COLLECTIVES_MEMORY_TRAFFIC_H_

#include <atomic>
#include <cstdint>

namespace conduit {

// One collective's totals, as recorded (CollRecord) and shown.
struct TrafficCounts {
  uint64_t program_copies = 0;   // the shims' copies of input into staging and output out of it
  uint64_t local_copies = 0;     // the daemon's memcpy between its ranks' staging on this host
  uint64_t reduce_writes = 0;    // bytes written by reductions and PreMulSum scaling
  uint64_t socket_sends = 0;     // payload bytes copied into the kernel by send
  uint64_t socket_receives = 0;  // payload bytes copied out of the kernel by receive
  // Device buffers (the daemon's kernels and copies on the communicator's stream):
  uint64_t device_writes = 0;    // written to device memory from device memory (one host)
  uint64_t device_to_host = 0;   // written by the GPU into pinned host memory (staging out)
  uint64_t host_to_device = 0;   // written to device memory from pinned host memory (staging in)

  uint64_t total() const {
    return program_copies + local_copies + reduce_writes + socket_sends + socket_receives + device_writes +
           device_to_host + host_to_device;
  }
  TrafficCounts& operator+=(const TrafficCounts& o) {
    program_copies += o.program_copies;
    local_copies += o.local_copies;
    reduce_writes += o.reduce_writes;
    socket_sends += o.socket_sends;
    socket_receives += o.socket_receives;
    device_writes += o.device_writes;
    device_to_host += o.device_to_host;
    host_to_device += o.host_to_device;
    return *this;
  }
};

class MemoryTraffic {
 public:
  void Reset() {
    for (auto* c : {&program_copies_, &local_copies_, &reduce_writes_, &socket_sends_, &socket_receives_,
                    &device_writes_, &device_to_host_, &host_to_device_}) {
      c->store(0, std::memory_order_relaxed);
    }
  }
  void AddProgramCopy(uint64_t n) { program_copies_.fetch_add(n, std::memory_order_relaxed); }
  void AddLocalCopy(uint64_t n) { local_copies_.fetch_add(n, std::memory_order_relaxed); }
  void AddReduceWrite(uint64_t n) { reduce_writes_.fetch_add(n, std::memory_order_relaxed); }
  void AddSend(uint64_t n) { socket_sends_.fetch_add(n, std::memory_order_relaxed); }
  void AddReceive(uint64_t n) { socket_receives_.fetch_add(n, std::memory_order_relaxed); }
  // A kernel or copy on the GPU that wrote `n` bytes, by where its source and its output are.
  void AddDeviceWrite(bool from_host, bool to_host, uint64_t n) {
    std::atomic<uint64_t>& c = to_host ? device_to_host_ : from_host ? host_to_device_ : device_writes_;
    c.fetch_add(n, std::memory_order_relaxed);
  }

  TrafficCounts Snapshot() const {
    TrafficCounts c;
    c.program_copies = program_copies_.load(std::memory_order_relaxed);
    c.local_copies = local_copies_.load(std::memory_order_relaxed);
    c.reduce_writes = reduce_writes_.load(std::memory_order_relaxed);
    c.socket_sends = socket_sends_.load(std::memory_order_relaxed);
    c.socket_receives = socket_receives_.load(std::memory_order_relaxed);
    c.device_writes = device_writes_.load(std::memory_order_relaxed);
    c.device_to_host = device_to_host_.load(std::memory_order_relaxed);
    c.host_to_device = host_to_device_.load(std::memory_order_relaxed);
    return c;
  }

 private:
  std::atomic<uint64_t> program_copies_{0};
  std::atomic<uint64_t> local_copies_{0};
  std::atomic<uint64_t> reduce_writes_{0};
  std::atomic<uint64_t> socket_sends_{0};
  std::atomic<uint64_t> socket_receives_{0};
  std::atomic<uint64_t> device_writes_{0};
  std::atomic<uint64_t> device_to_host_{0};
  std::atomic<uint64_t> host_to_device_{0};
};

// Adds to `traffic` when it is not null (the algorithms also run without a meter).
inline void CountReduce(MemoryTraffic* traffic, uint64_t n) {
  if (traffic != nullptr) traffic->AddReduceWrite(n);
}

}  // namespace conduit

#endif  // CONDUIT_DAEMON_COLLECTIVES_MEMORY_TRAFFIC_H_
