// conduit-reduce-bench: the host reduction loops of every instruction set this CPU runs,
// side by side in one run, per data type: what a chunk received from a peer costs to
// combine (Reduce2: out = a op b, the ring's and halving-doubling's step), in GB/s of
// output. Two buffer sizes: one that stays in the core's cache (a ring chunk) and one
// that does not (each call on buffers not touched since the previous rounds).
//
//   conduit-reduce-bench [--op sum|prod|max|min] [--cache-kib K (256)] [--memory-mib M (16)]
//                        [--seconds S (0.2 per cell)]
//
// The figures behind "Reduction kernels" in docs/design.md and docs/benchmarks.md.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cli/number_arg.h"
#include "cli/usage.h"
#include "reduce/reduce.h"

namespace conduit {
namespace {

using Clock = std::chrono::steady_clock;

// GB/s of output for Reduce2 over `sets` disjoint (out, a, b) triples of `bytes` each,
// cycled, for about `seconds`.
double Measure(ncclDataType_t type, ncclRedOp_t op, size_t bytes, int sets, double seconds) {
  const size_t count = bytes / DataTypeSize(type);
  std::vector<std::vector<unsigned char>> a(sets), b(sets), out(sets);
  for (int s = 0; s < sets; ++s) {
    // Small positive values of every type: 0x01 bytes are finite and normal in every
    // format, so no call takes a path real data would not.
    a[s].assign(bytes, 0x01);
    b[s].assign(bytes, 0x01);
    out[s].assign(bytes, 0);
  }
  for (int s = 0; s < sets; ++s) Reduce2(out[s].data(), a[s].data(), b[s].data(), count, type, op);  // warm
  long calls = 0;
  const Clock::time_point start = Clock::now();
  double elapsed = 0;
  while (elapsed < seconds) {
    for (int s = 0; s < sets; ++s) Reduce2(out[s].data(), a[s].data(), b[s].data(), count, type, op);
    calls += sets;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  }
  return static_cast<double>(bytes) * calls / elapsed / 1e9;
}

int Main(int argc, char** argv) {
  const char* usage =
      "usage: conduit-reduce-bench [--op sum|prod|max|min (sum)] [--cache-kib K (256)] [--memory-mib M (16)]\n"
      "                            [--seconds S (0.2)]\n"
      "the host reduction loops of every instruction set this CPU runs, side by side, per data type\n"
      "(GB/s of output of out = a op b; docs/benchmarks.md)\n";
  tools::ExitWithUsageIfAsked(argc, argv, usage);
  ncclRedOp_t op = ncclSum;
  size_t cache_kib = 256, memory_mib = 16;
  double seconds = 0.2;
  for (int i = 1; i < argc; i += 2) {
    if (i + 1 >= argc) {
      fprintf(stderr, "%s needs a value\n%s", argv[i], usage);
      return 2;
    }
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--op") {
      if (value == "sum") op = ncclSum;
      else if (value == "prod") op = ncclProd;
      else if (value == "max") op = ncclMax;
      else if (value == "min") op = ncclMin;
      else {
        fprintf(stderr, "--op must be sum, prod, max or min\n%s", usage);
        return 2;
      }
    } else if (flag == "--cache-kib" || flag == "--memory-mib") {
      const bool cache = flag == "--cache-kib";
      int64_t n = 0;
      if (!tools::ParseIntArg(value.c_str(), 1, cache ? (1 << 20) : 4096, &n)) {
        fprintf(stderr, "%s: '%s' is not a whole number from 1 to %d\n%s", flag.c_str(), value.c_str(),
                cache ? (1 << 20) : 4096, usage);
        return 2;
      }
      (cache ? cache_kib : memory_mib) = static_cast<size_t>(n);
    } else if (flag == "--seconds") {
      if (!tools::ParseRealArg(value.c_str(), 0, 60, true, &seconds)) {
        fprintf(stderr, "--seconds: '%s' is not a number in (0, 60]\n%s", value.c_str(), usage);
        return 2;
      }
    } else {
      fprintf(stderr, "unknown flag %s\n%s", argv[i], usage);
      return 2;
    }
  }
  std::vector<ReduceIsa> isas;
  for (ReduceIsa isa : {ReduceIsa::kBaseline, ReduceIsa::kAvx2, ReduceIsa::kAvx512}) {
    if (ReduceIsaAvailable(isa)) isas.push_back(isa);
  }
  const ReduceIsa chosen = ActiveReduceIsa();
  printf("# Reduce2 (%s), GB/s of output; this CPU runs:", op == ncclSum ? "sum" : op == ncclProd ? "prod"
                                                           : op == ncclMax ? "max" : "min");
  for (ReduceIsa isa : isas) printf(" %s%s", ReduceIsaName(isa), isa == chosen ? " (chosen)" : "");
  printf("\n# in cache: %zu KiB per buffer; from memory: %zu MiB per buffer, 4 sets cycled\n", cache_kib, memory_mib);
  printf("%-11s", "type");
  for (const char* where : {"cache", "memory"}) {
    for (ReduceIsa isa : isas) printf(" %14s", (std::string(where) + " " + ReduceIsaName(isa)).c_str());
  }
  printf("\n");
  for (int t = 0; t < ncclNumTypes; ++t) {
    const auto type = static_cast<ncclDataType_t>(t);
    printf("%-11s", DataTypeName(type));
    for (size_t bytes : {cache_kib << 10, memory_mib << 20}) {
      const int sets = bytes == (cache_kib << 10) ? 1 : 4;
      for (ReduceIsa isa : isas) {
        SetReduceIsa(isa);
        printf(" %14.2f", Measure(type, op, bytes, sets, seconds));
        fflush(stdout);
      }
    }
    printf("\n");
  }
  SetReduceIsa(chosen);
  return 0;
}

}  // namespace
}  // namespace conduit

int main(int argc, char** argv) { return conduit::Main(argc, argv); }
