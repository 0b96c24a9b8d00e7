#include "options.h"

#include "cli/size_arg.h"

#include <getopt.h>
#include <strings.h>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>

namespace conduit::perf {
namespace {

enum LongOnly { kColl = 1000, kTimeBudget, kRank, kNranks, kIdFile, kHoldMs, kReadResult };

// nccl-tests' letters and long names, in its order; every one takes a value.
const option kLongOptions[] = {
    {"nthreads", required_argument, nullptr, 't'},
    {"ngpus", required_argument, nullptr, 'g'},
    {"minbytes", required_argument, nullptr, 'b'},
    {"maxbytes", required_argument, nullptr, 'e'},
    {"stepbytes", required_argument, nullptr, 'i'},
    {"stepfactor", required_argument, nullptr, 'f'},
    {"iters", required_argument, nullptr, 'n'},
    {"agg_iters", required_argument, nullptr, 'm'},
    {"warmup_iters", required_argument, nullptr, 'w'},
    {"run_cycles", required_argument, nullptr, 'N'},
    {"parallel_init", required_argument, nullptr, 'p'},
    {"check", required_argument, nullptr, 'c'},
    {"op", required_argument, nullptr, 'o'},
    {"datatype", required_argument, nullptr, 'd'},
    {"root", required_argument, nullptr, 'r'},
    {"blocking", required_argument, nullptr, 'z'},
    {"stream_null", required_argument, nullptr, 'y'},
    {"timeout", required_argument, nullptr, 'T'},
    {"cudagraph", required_argument, nullptr, 'G'},
    {"report_cputime", required_argument, nullptr, 'C'},
    {"report_timestamps", required_argument, nullptr, 'S'},
    {"output_file", required_argument, nullptr, 'J'},
    {"average", required_argument, nullptr, 'a'},
    {"local_register", required_argument, nullptr, 'R'},
    {"cta_policy", required_argument, nullptr, 'x'},
    {"device_implementation", required_argument, nullptr, 'D'},
    {"device_cta_count", required_argument, nullptr, 'V'},
    {"memory", required_argument, nullptr, 'M'},
    {"unalign", required_argument, nullptr, 'u'},
    {"per_iter_timing", required_argument, nullptr, 'I'},
    {"per_iter_skip", required_argument, nullptr, 'K'},
    {"help", no_argument, nullptr, 'h'},
    {"coll", required_argument, nullptr, kColl},
    {"time-budget", required_argument, nullptr, kTimeBudget},
    {"rank", required_argument, nullptr, kRank},
    {"nranks", required_argument, nullptr, kNranks},
    {"id-file", required_argument, nullptr, kIdFile},
    {"hold-ms", required_argument, nullptr, kHoldMs},
    {"read-result", required_argument, nullptr, kReadResult},
    {nullptr, 0, nullptr, 0},
};
// Leading ':' makes getopt report a missing value as ':' rather than '?'.
constexpr char kShortOptions[] = ":t:g:b:e:i:f:n:m:w:N:p:I:K:c:o:d:r:z:y:T:hG:C:a:R:x:D:V:J:S:M:u:";

std::string FlagName(int c) {
  for (const option& o : kLongOptions) {
    if (o.name != nullptr && o.val == c) {
      // Appends, not `"-" + std::string(...)`: GCC 12 at -O3 reports a false -Wrestrict there.
      std::string name;
      if (c < 256) name.append("-").append(1, static_cast<char>(c)).append("/");
      return name.append("--").append(o.name);
    }
  }
  return std::string(1, static_cast<char>(c));
}

// Collects the first error; every parse step returns false once there is one.
class Parser {
 public:
  bool Fail(std::string message) {
    if (error_.empty()) error_ = std::move(message);
    return false;
  }
  const std::string& error() const { return error_; }

  // Integers as nccl-tests reads them (strtol base 0: 0x.. hex, 0.. octal), but the
  // whole value must be a number in [lo, hi].
  bool Int(int flag, const char* text, long lo, long hi, long* out) {
    errno = 0;
    char* end = nullptr;
    const long v = std::strtol(text, &end, 0);
    if (errno != 0 || end == text || *end != '\0' || v < lo || v > hi) {
      return Fail("invalid value '" + std::string(text) + "' for " + FlagName(flag) + ": expected an integer in [" +
                  std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
    *out = v;
    return true;
  }
  bool Int(int flag, const char* text, long lo, long hi, int* out) {
    long v = 0;
    if (!Int(flag, text, lo, hi, &v)) return false;
    *out = static_cast<int>(v);
    return true;
  }
  bool Bool(int flag, const char* text, bool* out) {
    int v = 0;
    if (!Int(flag, text, 0, 1, &v)) return false;
    *out = v != 0;
    return true;
  }

  // Sizes as nccl-tests reads them (cli/size_arg.h).
  bool Size(int flag, const char* text, size_t* out) {
    if (!tools::ParseSizeArg(text, out)) {
      return Fail("invalid size '" + std::string(text) + "' for " + FlagName(flag) +
                  ": expected bytes, optionally with a K, M or G suffix");
    }
    return true;
  }

 private:
  std::string error_;
};

bool EndsWithJson(const std::string& path) {
  const size_t slash = path.rfind('/');
  const size_t dot = path.rfind('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return false;
  return strcasecmp(path.c_str() + dot, ".json") == 0;
}

// The checks that need every flag: combinations, and values only a later flag
// makes wrong. Returns false with the parser's error set.
bool Validate(Parser& p, Options& o) {
  if (o.min_bytes > o.max_bytes) {
    return p.Fail("invalid sizes: --minbytes " + std::to_string(o.min_bytes) + " > --maxbytes " +
                  std::to_string(o.max_bytes));
  }
  if (o.step_factor <= 1 && o.step_bytes == 0 && o.min_bytes < o.max_bytes) {
    return p.Fail("-i/--stepbytes 0 with -f/--stepfactor <= 1 would never reach --maxbytes");
  }
  const bool any_mp = o.rank >= 0 || o.nranks > 0 || !o.id_file.empty();
  if (any_mp && (o.rank < 0 || o.nranks <= 0 || o.id_file.empty())) {
    return p.Fail("--rank, --nranks and --id-file go together");
  }
  if (any_mp && o.rank >= o.nranks) {
    return p.Fail("--rank " + std::to_string(o.rank) + " must be < --nranks " + std::to_string(o.nranks));
  }
  if (o.coll->uses_root && o.root >= o.total_ranks()) {
    return p.Fail("-r/--root " + std::to_string(o.root) + " is not a rank: there are " +
                  std::to_string(o.total_ranks()) + " ranks");
  }
  if (o.blocking == Blocking::kBarrier && o.agg_iters > 1) {
    // A barrier is itself an operation; inside the group -m opens it would be
    // batched with the measured ones instead of separating them.
    return p.Fail(
        "-z 1 (barrier after each operation) cannot be combined with -m > 1 (operations batched in one group)");
  }
  if (o.coll->coll == Coll::kHyperCube && o.agg_iters > 1) {
    return p.Fail("hypercube with -m > 1: its rounds depend on each other and cannot share one group");
  }
  // nccl-tests' own adjustments: it says so and runs on.
  if (o.per_iter_skip < 0 || o.per_iter_skip >= o.iters) {
    if (o.per_iter_skip != 0) {
      o.warnings.push_back("per-iteration skip (-K) must be between 0 and " + std::to_string(o.iters - 1) +
                           ". Disabling.");
    }
    o.per_iter_skip = 0;
  }
  if (o.per_iter_skip != 0 && !o.per_iter_timing) {
    o.warnings.push_back("per-iteration skip (-K) requires per-iteration timing (-I 1). Disabling.");
    o.per_iter_skip = 0;
  }
  return true;
}

}  // namespace

ParseResult ParseOptions(int argc, char** argv) {
  ParseResult result;
  Options& o = result.options;
  const std::string_view argv0 = argc > 0 && argv[0] != nullptr ? argv[0] : "conduit-perf";
  const size_t slash = argv0.rfind('/');
  o.program = std::string(slash == std::string_view::npos ? argv0 : argv0.substr(slash + 1));
  o.coll = CollForProgram(argv0);
  if (o.coll == nullptr) o.coll = DefaultColl();
  o.ops = {FindRedOp("sum")};
  o.dtypes = {FindDtype("float")};

  Parser p;
  bool help = false;
  optind = 0;  // GNU: a full reset, so repeated calls (tests) parse from scratch
  opterr = 0;  // errors are reported through the result
  int c;
  while ((c = getopt_long(argc, argv, kShortOptions, kLongOptions, nullptr)) != -1) {
    switch (c) {
      case 't': p.Int(c, optarg, 1, 1024, &o.threads); break;
      case 'g': p.Int(c, optarg, 1, 1024, &o.ranks_per_thread); break;
      case 'b': p.Size(c, optarg, &o.min_bytes); break;
      case 'e': p.Size(c, optarg, &o.max_bytes); break;
      case 'i': p.Size(c, optarg, &o.step_bytes); break;
      case 'f': {
        long v = 0;
        if (p.Int(c, optarg, 0, 1L << 30, &v)) o.step_factor = static_cast<size_t>(v);
        break;
      }
      case 'n': p.Int(c, optarg, 1, 1 << 30, &o.iters); break;
      case 'm': p.Int(c, optarg, 1, 1 << 20, &o.agg_iters); break;
      case 'w': p.Int(c, optarg, 0, 1 << 30, &o.warmup_iters); break;
      case 'N': p.Int(c, optarg, 0, 1 << 30, &o.run_cycles); break;
      case 'p': p.Bool(c, optarg, &o.parallel_init); break;
      case 'c': p.Int(c, optarg, 0, 1 << 20, &o.check_iters); break;
      case 'o':
        if (std::string_view(optarg) == "all") {
          o.ops.clear();
          for (const RedOpInfo& r : AllRedOps()) o.ops.push_back(&r);
        } else if (const RedOpInfo* r = FindRedOp(optarg)) {
          o.ops = {r};
        } else {
          p.Fail("invalid value '" + std::string(optarg) +
                 "' for -o/--op: expected sum, prod, min, max, avg, mulsum or all");
        }
        break;
      case 'd':
        if (std::string_view(optarg) == "all") {
          o.dtypes.clear();
          for (const DtypeInfo& t : AllDtypes()) o.dtypes.push_back(&t);
        } else if (const DtypeInfo* t = FindDtype(optarg)) {
          o.dtypes = {t};
        } else {
          p.Fail("invalid value '" + std::string(optarg) + "' for -d/--datatype: expected one of " + DtypeNames() +
                 " or all");
        }
        break;
      case 'r':
        // nccl-tests runs every root for -1; "all" says the same in words.
        if (std::string_view(optarg) == "all") o.root = -1;
        else p.Int(c, optarg, -1, 1 << 20, &o.root);
        break;
      case 'z': {
        int v = 0;
        if (p.Int(c, optarg, 0, 3, &v)) o.blocking = static_cast<Blocking>(v);
        break;
      }
      case 'y': p.Bool(c, optarg, &o.stream_null); break;
      case 'T': p.Int(c, optarg, 0, 1 << 30, &o.timeout_s); break;
      case 'G': {
        int v = 0;
        if (p.Int(c, optarg, 0, 1 << 30, &v) && v > 0) {
          p.Fail("-G/--cudagraph " + std::string(optarg) +
                 ": CUDA graphs capture device work, and conduit-perf's buffers are host memory (only -G 0 runs)");
        }
        break;
      }
      case 'C': p.Bool(c, optarg, &o.report_cputime); break;
      case 'S': p.Bool(c, optarg, &o.report_timestamps); break;
      case 'J':
        o.output_file = optarg;
        if (!EndsWithJson(o.output_file)) {
          // nccl-tests silently writes nothing for any other suffix.
          p.Fail("-J/--output_file '" + o.output_file + "': only JSON output (a name ending in .json) is supported");
        }
        break;
      case 'a': {
        int v = 0;
        if (p.Int(c, optarg, 0, 3, &v)) o.average = static_cast<Average>(v);
        break;
      }
      case 'R': p.Int(c, optarg, 0, 2, &o.local_register); break;
      case 'x': p.Int(c, optarg, 0, 2, &o.cta_policy); break;
      case 'D': {
        int v = 0;
        if (p.Int(c, optarg, 0, 1 << 20, &v) && v > 0) {
          p.Fail("-D/--device_implementation " + std::string(optarg) +
                 ": device implementations are CUDA kernels on symmetric device memory, and conduit-perf's buffers "
                 "are host memory (only -D 0 runs)");
        }
        break;
      }
      case 'V': {
        long v = 0;
        if (p.Int(c, optarg, std::numeric_limits<int>::min(), std::numeric_limits<int>::max(), &v)) {
          if (v <= 0 || v > 128) {
            o.warnings.push_back("device_cta_count (-V) must be positive and less than 128, got " +
                                 std::to_string(v) + ". Using default value 16.");
            v = 16;
          }
          o.device_cta_count = static_cast<int>(v);
        }
        break;
      }
      case 'M': p.Bool(c, optarg, &o.memory_report); break;
      case 'u': p.Int(c, optarg, 0, 1 << 20, &o.unalign); break;
      case 'I': {
        long v = 0;
        if (p.Int(c, optarg, std::numeric_limits<int>::min(), std::numeric_limits<int>::max(), &v)) {
          if (v != 0 && v != 1) {
            o.warnings.push_back("per-iteration timing (-I) only supports 0=off or 1=on. Disabling.");
            v = 0;
          }
          o.per_iter_timing = v == 1;
        }
        break;
      }
      case 'K':
        p.Int(c, optarg, std::numeric_limits<int>::min(), std::numeric_limits<int>::max(), &o.per_iter_skip);
        break;
      case 'h': help = true; break;
      case kColl:
        o.coll = FindColl(optarg);
        if (o.coll == nullptr) {
          std::string names;
          for (const CollInfo& ci : AllColls()) names += std::string(names.empty() ? "" : ", ") + ci.name;
          p.Fail("invalid value '" + std::string(optarg) + "' for --coll: expected one of " + names);
        }
        break;
      case kTimeBudget: {
        char* end = nullptr;
        errno = 0;
        const double v = std::strtod(optarg, &end);
        if (errno != 0 || end == optarg || *end != '\0' || !(v >= 0) || !std::isfinite(v)) {
          p.Fail("invalid value '" + std::string(optarg) + "' for --time-budget: expected seconds >= 0");
        } else {
          o.time_budget_s = v;
        }
        break;
      }
      case kRank: p.Int(c, optarg, 0, 1 << 20, &o.rank); break;
      case kNranks: p.Int(c, optarg, 1, 1 << 20, &o.nranks); break;
      case kIdFile: o.id_file = optarg; break;
      case kHoldMs: p.Int(c, optarg, 0, 600000, &o.hold_ms); break;
      case kReadResult: p.Int(c, optarg, 0, 1, &o.read_result); break;
      case ':':
        p.Fail(std::string("option ") + (optopt ? FlagName(optopt) : std::string(argv[optind - 1])) + " needs a value");
        break;
      default:
        if (optopt != 0) p.Fail(std::string("unknown option -") + static_cast<char>(optopt));
        else p.Fail("unknown option " + std::string(argv[optind - 1]));
        break;
    }
  }
  if (help) {
    result.outcome = ParseOutcome::kHelp;
    return result;
  }
  if (p.error().empty() && optind < argc) p.Fail("unexpected argument '" + std::string(argv[optind]) + "'");
  if (p.error().empty()) Validate(p, o);
  if (!p.error().empty()) {
    result.outcome = ParseOutcome::kError;
    result.message = p.error();
    return result;
  }
  result.outcome = ParseOutcome::kRun;
  return result;
}

std::string Usage(std::string_view program) {
  std::string u = "usage: " + std::string(program) + " [options]\n";
  u += R"(nccl-tests' flags with nccl-tests' meanings; every flag but -h takes a value.
The collective is the one named by the program's name (all_reduce_perf,
all_gather_perf, broadcast_perf, reduce_perf, reduce_scatter_perf, alltoall_perf,
sendrecv_perf, gather_perf, scatter_perf, hypercube_perf: symlinks to conduit-perf)
or by --coll; all_reduce otherwise.

  -t,--nthreads N          threads in this process (default 1)
  -g,--ngpus N             ranks each thread drives (default 1); buffers are host
                           memory, so these are ranks, not GPUs
  -b,--minbytes SIZE       smallest size (K/M/G: powers of 1024; default 32M)
  -e,--maxbytes SIZE       largest size (default 32M)
  -i,--stepbytes SIZE      size increment when -f is 1 (default 1M)
  -f,--stepfactor N        size multiplier (integer; default 1: add -i instead)
  -n,--iters N             timed iterations per size (default 20)
  -m,--agg_iters N         operations per iteration, issued as one group (default 1)
  -w,--warmup_iters N      warmup iterations per size (default 1)
  -N,--run_cycles N        repeat the sweep N times, printing each (default 1; 0 = forever)
  -p,--parallel_init 0|1   each thread creates its own communicators (default 0)
  -c,--check N             checked runs per measurement, fresh data each (default 1; 0 = none)
  -o,--op OP               sum|prod|min|max|avg|mulsum|all (default sum)
  -d,--datatype TYPE       int8|uint8|int32|uint32|int64|uint64|half|float|double|
                           bfloat16|f8e4m3|f8e5m2|all (default float)
  -r,--root R              root of broadcast/reduce/gather/scatter; -1 or all = every
                           rank in turn (default 0)
  -z,--blocking 0|1|2|3    0 = wait at the end, 1 = wait and barrier after each operation,
                           2 = wait after each operation, 3 = wait and barrier after each
                           iteration, barrier not timed (default 0). Host-memory calls
                           return complete, so 0 and 2 time the same thing
  -y,--stream_null 0|1     default stream (default 0); buffers are host memory and every
                           call gets the null stream, so both values run the same
  -T,--timeout SECONDS     abort when an operation takes longer (default 0 = never)
  -G,--cudagraph N         CUDA graph launches; only 0 (device work only)
  -C,--report_cputime 0|1  label the time column cputime (calls return complete, so it
                           is the same time; default 0)
  -S,--report_timestamps 0|1  a timestamp at the end of each row (default 0)
  -J,--output_file FILE.json  also write the results as JSON (nccl-tests' layout)
  -a,--average 0|1|2|3     time reported: 0 = rank 0's, 1 = mean, 2 = min, 3 = max over
                           ranks (default 1)
  -R,--local_register 0|1|2  register buffers: 1 = ncclMemAlloc + ncclCommRegister, 2 = symmetric
                           windows (need device memory) (default 0)
  -x,--cta_policy 0|1|2    ncclConfig_t CTAPolicy for the communicators (default: unset)
  -D,--device_implementation N  only 0 (device kernels need device memory)
  -V,--device_cta_count N  CTAs of a device implementation (1-128, default 16; unused at -D 0)
  -M,--memory 0|1          memory report: host memory (RSS) in place of GPU memory (default 0)
  -u,--unalign N           shift both buffers by N elements (default 0)
  -I,--per_iter_timing 0|1  per-iteration min/max/p99/cv% columns (default 0)
  -K,--per_iter_skip N     leave the first N iterations out of -I's summary (default 0)
  -h,--help                this text

conduit-perf's own options:
  --coll NAME              the collective when the program name does not say: all_reduce,
                           all_gather, broadcast, reduce, reduce_scatter, alltoall, sendrecv,
                           gather, scatter, hypercube (overrides the program name)
  --time-budget SECONDS    cap one size's timed loop at about this long, from the speed of
                           its untimed run (default 0 = always -n iterations)
  --rank P --nranks N --id-file PATH
                           process P of an N-process run, each process holding -t x -g
                           ranks; process 0 publishes the unique id at PATH, the others
                           wait up to 60 s for it
  --hold-ms N              after the results, keep the communicators N ms before
                           destroying them (a script reads conduitd's trace meanwhile)
  --read-result 0|1        1: after each timed operation every rank reads its whole
                           output, timed with it, as a program that uses its result
                           does (where that result then is in the caches counts)
                           (default 0)
)";
  return u;
}

}  // namespace conduit::perf
