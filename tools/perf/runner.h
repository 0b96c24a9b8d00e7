// Runs measurements on the communicators one thread drives, the way nccl-tests'
// BenchTime does: an untimed run and a barrier, the timed loop (with -m, -z, -I),
// one time agreed over all ranks (-a), then -c checked runs.
//
// Every rank of the communicator runs the same sequence, so the small allreduces
// that agree on times and counts also keep threads and processes in step.
#ifndef CONDUIT_TOOLS_PERF_RUNNER_H_
#define CONDUIT_TOOLS_PERF_RUNNER_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "collective.h"
#include "nccl.h"
#include "options.h"
#include "watchdog.h"

namespace conduit::perf {

// What one table row is measured with.
struct Case {
  const DtypeInfo* dtype;
  const RedOpInfo* op;
  int root;
};

struct IterStats {
  double min_us = 0, max_us = 0, avg_us = 0, p50_us = 0, p95_us = 0, p99_us = 0, stdev_us = 0;
  std::vector<double> times_us;  // every timed iteration (slowest rank), skipped ones included
};

struct Measurement {
  double time_us = 0;  // per operation, combined over ranks as -a says
  int iters = 0;       // timed iterations actually run
  bool checked = false;
  size_t wrong = 0;    // wrong elements summed over all ranks, first failing check run
  IterStats per_iter;  // with -I
};

class Runner {
 public:
  // `comms` and `ranks` (global rank of each) are this thread's; `nranks` is the
  // communicator size. Allocates (and with -R registers) buffers for max_bytes.
  Runner(const Options& o, std::span<const ncclComm_t> comms, std::span<const int> ranks, int nranks,
         Watchdog* watchdog, int watchdog_slot);
  ~Runner();
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;

  // Brackets the rows of one (type, op, root): creates mulsum's per-communicator
  // operators, and warms up every size (doubling, out of place) as nccl-tests does.
  void BeginCase(const Case& c);
  void EndCase();

  Measurement Measure(size_t bytes, bool in_place);

  // Bytes of test buffers this thread allocated (the -M report).
  size_t buffer_bytes() const { return buffer_bytes_; }

 private:
  struct Buffers {
    char* send = nullptr;  // also the single buffer of in-place runs
    char* recv = nullptr;
    void* send_handle = nullptr;  // -R registrations
    void* recv_handle = nullptr;
  };

  Shape ShapeOf(size_t bytes, size_t local) const;
  // One operation on every local communicator (one group when there are several).
  void RunOnce(const std::vector<Shape>& shapes, bool in_place);
  // One timed iteration: -m operations, grouped when more than one.
  void RunIteration(const std::vector<Shape>& shapes, bool in_place);
  // --read-result: reads every byte of each local rank's output.
  void ReadResults(const std::vector<Shape>& shapes, bool in_place);
  void Prepare(const std::vector<Shape>& shapes, bool in_place, bool poison_output, size_t salt);
  size_t CountWrongHere(const std::vector<Shape>& shapes, bool in_place, size_t salt);
  char* SendOf(size_t local, const Shape& s, bool in_place) const;
  char* RecvOf(size_t local, const Shape& s, bool in_place) const;

  // Allreduces one value per local communicator (count values each) over the whole
  // communicator; what is decided from the result is thus the same on every rank.
  std::vector<double> Agree(std::vector<double> values, size_t count, ncclRedOp_t op);
  double AgreeOne(double v, ncclRedOp_t op);
  double CombineTimes(double mine);
  void Barrier();
  IterStats Summarize(std::vector<double> times_s);
  void Check(ncclResult_t r, const char* what);

  const Options& o_;
  std::vector<ncclComm_t> comms_;
  std::vector<int> ranks_;
  int nranks_;
  Watchdog* watchdog_;
  int watchdog_slot_;
  std::vector<Buffers> buffers_;
  volatile uint64_t result_sink_ = 0;  // --read-result's sums
  size_t buffer_bytes_ = 0;
  Case case_{};
  std::vector<ncclRedOp_t> ops_;  // per local communicator: the operator to pass
};

}  // namespace conduit::perf

#endif  // CONDUIT_TOOLS_PERF_RUNNER_H_
