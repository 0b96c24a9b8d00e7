#include "options.h"

#include <getopt.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace conduit::perf {
namespace {

[[noreturn]] void Usage(const char* prog, int code) {
  std::fprintf(code ? stderr : stdout,
               "usage: %s [options]\n"
               "  -o OP          %s (default allreduce)\n"
               "  -b BYTES       smallest size (K/M/G suffixes, powers of 1024; default 32M)\n"
               "  -e BYTES       largest size (default 32M)\n"
               "  -f FACTOR      size multiplier between rows (default 2)\n"
               "  -n ITERS       timed iterations per size (default 20)\n"
               "  -w ITERS       warmup iterations per size (default 5)\n"
               "  -T SECONDS     cap the timed loop of one size at about this long, using the\n"
               "                 warmup's speed (default 2, 0 = never cap)\n"
               "  -d TYPE        %s (default float)\n"
               "  -r OP          sum|prod|max|min|avg (default sum)\n"
               "  --root R       root of broadcast/reduce (default 0)\n"
               "  -c 0|1         check results (default 1)\n"
               "  -z 0|1         also run in place (default 0)\n"
               "  -t THREADS     ranks as threads of this process (ncclCommInitAll; default 1)\n"
               "  --rank R --nranks N --id-file PATH\n"
               "                 one rank of a multi-process run; rank 0 publishes the unique id\n"
               "                 at PATH, the others wait up to 60 s for it\n",
               prog, CollNames(), DtypeNames());
  std::exit(code);
}

[[noreturn]] void Fail(const char* prog, const char* what, const char* value) {
  std::fprintf(stderr, "%s: invalid %s '%s'\n", prog, what, value);
  std::exit(2);
}

size_t ParseBytes(const char* prog, const char* s) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(s, &end);
  if (errno != 0 || end == s || v < 0) Fail(prog, "size", s);
  double mult = 1;
  switch (*end) {
    case 'k': case 'K': mult = 1024.0; ++end; break;
    case 'm': case 'M': mult = 1024.0 * 1024; ++end; break;
    case 'g': case 'G': mult = 1024.0 * 1024 * 1024; ++end; break;
    default: break;
  }
  if (*end == 'B' || *end == 'b') ++end;
  if (*end != '\0') Fail(prog, "size", s);
  return static_cast<size_t>(v * mult);
}

long ParseInt(const char* prog, const char* what, const char* s, long lo, long hi) {
  errno = 0;
  char* end = nullptr;
  const long v = std::strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) Fail(prog, what, s);
  return v;
}

double ParseDouble(const char* prog, const char* what, const char* s, double lo) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(s, &end);
  if (errno != 0 || end == s || *end != '\0' || !(v >= lo)) Fail(prog, what, s);
  return v;
}

struct RedOpName {
  const char* name;
  ncclRedOp_t op;
};
constexpr RedOpName kRedOps[] = {
    {"sum", ncclSum}, {"prod", ncclProd}, {"max", ncclMax}, {"min", ncclMin}, {"avg", ncclAvg},
};

enum LongOnly { kRoot = 1000, kRank, kNranks, kIdFile };

}  // namespace

Options ParseOptions(int argc, char** argv) {
  const char* prog = argv[0];
  Options o;
  o.coll = FindColl("allreduce");
  o.dtype = FindDtype("float");
  static const option kLong[] = {
      {"root", required_argument, nullptr, kRoot},     {"rank", required_argument, nullptr, kRank},
      {"nranks", required_argument, nullptr, kNranks}, {"id-file", required_argument, nullptr, kIdFile},
      {"help", no_argument, nullptr, 'h'},             {nullptr, 0, nullptr, 0},
  };
  int c;
  while ((c = getopt_long(argc, argv, "o:b:e:f:n:w:T:d:r:c:z:t:h", kLong, nullptr)) != -1) {
    switch (c) {
      case 'o':
        o.coll = FindColl(optarg);
        if (!o.coll) Fail(prog, "operation", optarg);
        break;
      case 'b': o.min_bytes = ParseBytes(prog, optarg); break;
      case 'e': o.max_bytes = ParseBytes(prog, optarg); break;
      case 'f': o.factor = ParseDouble(prog, "factor", optarg, 1.0); break;
      case 'n': o.iters = static_cast<int>(ParseInt(prog, "iteration count", optarg, 1, 1 << 30)); break;
      case 'w': o.warmup = static_cast<int>(ParseInt(prog, "warmup count", optarg, 0, 1 << 30)); break;
      case 'T': o.budget_s = ParseDouble(prog, "time budget", optarg, 0.0); break;
      case 'd':
        o.dtype = FindDtype(optarg);
        if (!o.dtype) Fail(prog, "type", optarg);
        break;
      case 'r': {
        bool found = false;
        for (const RedOpName& r : kRedOps) {
          if (std::string_view(optarg) == r.name) {
            o.op = r.op;
            o.op_name = r.name;
            found = true;
          }
        }
        if (!found) Fail(prog, "reduction", optarg);
        break;
      }
      case 'c': o.check = ParseInt(prog, "-c value", optarg, 0, 1) != 0; break;
      case 'z': o.in_place = ParseInt(prog, "-z value", optarg, 0, 1) != 0; break;
      case 't': o.threads = static_cast<int>(ParseInt(prog, "thread count", optarg, 1, 1024)); break;
      case kRoot: o.root = static_cast<int>(ParseInt(prog, "root", optarg, 0, 1 << 20)); break;
      case kRank: o.rank = static_cast<int>(ParseInt(prog, "rank", optarg, 0, 1 << 20)); break;
      case kNranks: o.nranks = static_cast<int>(ParseInt(prog, "rank count", optarg, 1, 1 << 20)); break;
      case kIdFile: o.id_file = optarg; break;
      case 'h': Usage(prog, 0);
      default: Usage(prog, 2);
    }
  }
  if (optind != argc) Fail(prog, "argument", argv[optind]);
  if (o.min_bytes > o.max_bytes) Fail(prog, "size range (-b > -e)", argv[0]);
  if (o.factor <= 1.0 && o.min_bytes != o.max_bytes) Fail(prog, "factor (must be > 1 for a size range)", "-f");
  const bool any_mp = o.rank >= 0 || o.nranks > 0 || !o.id_file.empty();
  if (any_mp) {
    if (o.rank < 0 || o.nranks <= 0 || o.id_file.empty()) {
      std::fprintf(stderr, "%s: --rank, --nranks and --id-file go together\n", prog);
      std::exit(2);
    }
    if (o.rank >= o.nranks) Fail(prog, "rank (must be < --nranks)", std::to_string(o.rank).c_str());
    if (o.threads != 1) {
      std::fprintf(stderr, "%s: -t and --rank/--nranks cannot be combined\n", prog);
      std::exit(2);
    }
  }
  const int total = any_mp ? o.nranks : o.threads;
  if (o.root >= total) Fail(prog, "root (must be < number of ranks)", std::to_string(o.root).c_str());
  return o;
}

}  // namespace conduit::perf
