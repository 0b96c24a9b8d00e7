// Runs one (size, in-place?) measurement across all communicators held by this
// process: warmup, budgeted timed loop, slowest-rank time, and the result check.
#ifndef CONDUIT_TOOLS_PERF_RUNNER_H_
#define CONDUIT_TOOLS_PERF_RUNNER_H_

#include <cstddef>
#include <vector>

#include "bootstrap.h"
#include "collective.h"
#include "options.h"

namespace conduit::perf {

struct Measurement {
  double time_us = 0;  // average per iteration, slowest rank
  int iters = 0;       // timed iterations actually run
  size_t wrong = 0;    // wrong elements summed over all ranks (0 when not checking)
};

class Runner {
 public:
  Runner(const Options& o, LocalRanks& ranks);
  ~Runner();
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;

  Measurement Measure(size_t bytes, bool in_place);

 private:
  struct Buffers {
    char* send = nullptr;  // also the single buffer of in-place runs
    char* recv = nullptr;
  };

  Shape ShapeOf(size_t bytes, size_t local) const;
  void RunAll(const std::vector<Shape>& shapes, bool in_place);
  void Prepare(const std::vector<Shape>& shapes, bool in_place, bool poison_output);
  // Allreduces one value per local communicator over the whole communicator.
  // Decisions taken from the result (iteration counts) are thus identical on
  // every rank, which keeps all ranks issuing the same number of operations.
  double Agree(const std::vector<double>& per_local, ncclRedOp_t op);
  double AgreeMax(double v);

  const Options& o_;
  LocalRanks& ranks_;
  std::vector<Buffers> buffers_;
  std::vector<double> scratch_;  // one slot per local communicator for Agree
};

}  // namespace conduit::perf

#endif  // CONDUIT_TOOLS_PERF_RUNNER_H_
