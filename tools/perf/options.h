// Command-line options of conduit-perf: nccl-tests' flags with nccl-tests' meanings
// and defaults (src/common.cu of nccl-tests 2.19), plus long options of our own
// (--coll, --time-budget, --rank/--nranks/--id-file).
#ifndef CONDUIT_TOOLS_PERF_OPTIONS_H_
#define CONDUIT_TOOLS_PERF_OPTIONS_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "collective.h"
#include "dtype.h"
#include "redop.h"

namespace conduit::perf {

// -z: when an operation must have completed (nccl-tests' blocking modes).
enum class Blocking {
  kNone = 0,        // issue every iteration, wait once at the end
  kBarrier = 1,     // wait after each operation, then a barrier over all ranks
  kWait = 2,        // wait after each operation, no barrier
  kOuterBarrier = 3 // wait and barrier after each outer (-n) iteration; time excludes the barrier
};

// -a: how one time is made of every rank's.
enum class Average { kRank0 = 0, kMean = 1, kMin = 2, kMax = 3 };

struct Options {
  const CollInfo* coll = nullptr;
  std::string program;  // basename of argv[0], for the header and footer lines

  // Ranks of this process: threads (-t), each driving ranks_per_thread (-g) ranks.
  int threads = 1;
  int ranks_per_thread = 1;
  bool parallel_init = false;  // -p: each thread creates its own communicators

  // Sizes: from min to max, times step_factor when it is > 1, else plus step_bytes.
  size_t min_bytes = 32u << 20;
  size_t max_bytes = 32u << 20;
  size_t step_bytes = 1u << 20;
  size_t step_factor = 1;

  int iters = 20;
  int agg_iters = 1;     // -m: operations per iteration, issued as one group
  int warmup_iters = 1;  // per size, before anything is timed
  int run_cycles = 1;    // -N: sweeps over all sizes (0: until killed)
  int check_iters = 1;   // -c: checked runs per measurement (0: no check)

  std::vector<const RedOpInfo*> ops;       // -o: one, or all for "all"
  std::vector<const DtypeInfo*> dtypes;    // -d: one, or all for "all"
  int root = 0;                            // -r: -1 ("all") runs every root in turn
  Blocking blocking = Blocking::kNone;
  bool stream_null = false;  // -y: accepted; host buffers run on the null stream either way
  int timeout_s = 0;         // -T: abort when an operation takes longer (0: never)
  bool report_cputime = false;
  bool report_timestamps = false;
  std::string output_file;   // -J: JSON results
  Average average = Average::kMean;
  int local_register = 0;    // -R: 1 ncclCommRegister, 2 ncclCommWindowRegister
  int cta_policy = -1;       // -x: ncclConfig_t::CTAPolicy (-1: not set)
  int device_cta_count = 16; // -V: only meaningful with -D, which needs GPUs
  bool memory_report = false;
  int unalign = 0;           // -u: elements the buffers are shifted by
  bool per_iter_timing = false;
  int per_iter_skip = 0;

  // Ours (long options only).
  double time_budget_s = 0;  // --time-budget: cap on one size's timed loop (0: exactly -n)
  int rank = -1;             // --rank/--nranks: this process's index and the process count
  int nranks = 0;
  std::string id_file;
  // --hold-ms: after the footer, keep the communicators this long before destroying them,
  // so that a script can read the daemon's trace of the run (tools/bench/lib.sh).
  int hold_ms = 0;
  // --read-result: each timed iteration ends with every rank reading its output.
  int read_result = 0;

  // Notes nccl-tests also prints before running on (a flag it disables, a value it
  // replaces); the caller prints them to stderr.
  std::vector<std::string> warnings;

  bool multi_process() const { return rank >= 0; }
  int local_ranks() const { return threads * ranks_per_thread; }
  int processes() const { return multi_process() ? nranks : 1; }
  int total_ranks() const { return processes() * local_ranks(); }
  int first_rank() const { return (multi_process() ? rank : 0) * local_ranks(); }
};

enum class ParseOutcome { kRun, kHelp, kError };

struct ParseResult {
  ParseOutcome outcome = ParseOutcome::kError;
  Options options;
  std::string message;  // what was wrong, for kError
};

// Parses argv without printing or exiting (getopt's state is reset, so it may be
// called repeatedly). argv may be permuted, as getopt_long does.
ParseResult ParseOptions(int argc, char** argv);

std::string Usage(std::string_view program);

}  // namespace conduit::perf

#endif  // CONDUIT_TOOLS_PERF_OPTIONS_H_
