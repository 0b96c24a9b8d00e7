// conduit-series: all-reduce bandwidth over time, for benchmarks where the network changes
// while a job runs (background flows, other tenants, reconfigurations).
//
// Every rank all-reduces `-b` bytes of floats in a loop for `--seconds`, optionally
// sleeping `--gap-ms` between collectives (a training step's compute). Rank 0 prints one
// line per `--interval-ms` with the algorithm bandwidth of the collectives that finished
// in it (bytes / time inside collectives, as nccl-tests defines algbw) and a summary at
// the end. Every result is checked. Ranks agree when to stop (an extra 4-byte all-reduce
// after each step, not timed), so none is left waiting.
//
// usage: conduit-series --rank R --nranks N --id-file PATH [-b BYTES] [--seconds S]
//                       [--interval-ms I] [--gap-ms G] [--label NAME]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap.h"
#include "cli/usage.h"
#include "nccl.h"

namespace conduit::perf {
namespace {

struct SeriesOptions {
  Options boot;
  size_t bytes = 16u << 20;
  double seconds = 10;
  int interval_ms = 1000;
  int gap_ms = 0;
  std::string label = "job";
};

constexpr char kUsage[] =
    "usage: conduit-series --rank R --nranks N --id-file PATH [-b BYTES] [--seconds S]\n"
    "                      [--interval-ms I] [--gap-ms G] [--label NAME]\n"
    "one rank of an all-reduce loop of BYTES that prints its bandwidth every I ms\n"
    "(tools/bench/mccs_bench.sh)\n";

[[noreturn]] void Usage(const char* why) {
  std::fprintf(stderr, "conduit-series: %s\n%s", why, kUsage);
  std::exit(2);
}

SeriesOptions Parse(int argc, char** argv) {
  conduit::tools::ExitWithUsageIfAsked(argc, argv, kUsage);
  SeriesOptions o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) Usage(("missing value for " + a).c_str());
    const char* v = argv[++i];
    char* end = nullptr;
    const double num = std::strtod(v, &end);
    const bool is_num = end != v && *end == '\0' && num >= 0;
    if (a == "--id-file") {
      o.boot.id_file = v;
    } else if (a == "--label") {
      o.label = v;
    } else if (!is_num) {
      Usage(("bad value for " + a).c_str());
    } else if (a == "--rank") {
      o.boot.rank = static_cast<int>(num);
    } else if (a == "--nranks") {
      o.boot.nranks = static_cast<int>(num);
    } else if (a == "-b") {
      o.bytes = static_cast<size_t>(num);
    } else if (a == "--seconds") {
      o.seconds = num;
    } else if (a == "--interval-ms") {
      o.interval_ms = static_cast<int>(num);
    } else if (a == "--gap-ms") {
      o.gap_ms = static_cast<int>(num);
    } else {
      Usage(("unknown option " + a).c_str());
    }
  }
  if (o.boot.rank < 0 || o.boot.nranks <= o.boot.rank || o.boot.id_file.empty()) Usage("need --rank, --nranks, --id-file");
  if (o.bytes < 4 || o.interval_ms <= 0) Usage("-b must be >= 4 and --interval-ms > 0");
  return o;
}

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void Check(ncclResult_t r, const char* what) {
  if (r == ncclSuccess) return;
  std::fprintf(stderr, "conduit-series: %s failed: %s\n", what, ncclGetErrorString(r));
  std::exit(3);
}

int Main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  SeriesOptions o = Parse(argc, argv);
  const ncclUniqueId id = ShareUniqueId(o.boot);
  ncclComm_t comm = nullptr;
  InitComms(o.boot, id, 0, std::span<ncclComm_t>(&comm, 1));
  ForgetUniqueId(o.boot);
  const int rank = o.boot.rank, nranks = o.boot.nranks;
  const size_t count = o.bytes / sizeof(float);
  std::vector<float> send(count, static_cast<float>(rank + 1)), recv(count);
  const float want = static_cast<float>(nranks) * (nranks + 1) / 2;
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto interval_start = start;
  double interval_busy = 0, total_busy = 0;
  long interval_colls = 0, total_colls = 0, wrong = 0;
  for (;;) {
    const auto t0 = Clock::now();
    Check(ncclAllReduce(send.data(), recv.data(), count, ncclFloat32, ncclSum, comm, cudaStream_t{}), "ncclAllReduce");
    const double busy = std::chrono::duration<double>(Clock::now() - t0).count();
    for (size_t i = 0; i < count; ++i) wrong += recv[i] != want;
    interval_busy += busy;
    total_busy += busy;
    ++interval_colls;
    ++total_colls;
    const auto now = Clock::now();
    if (rank == 0 && now - interval_start >= std::chrono::milliseconds(o.interval_ms)) {
      std::printf("series %s t=%.2f unix=%.3f algbw_MBps=%.2f colls=%ld\n", o.label.c_str(),
                  std::chrono::duration<double>(now - start).count(), UnixNow(),
                  interval_colls * o.bytes / interval_busy / 1e6, interval_colls);
      interval_start = now;
      interval_busy = 0;
      interval_colls = 0;
    }
    int32_t up = now - start >= std::chrono::duration<double>(o.seconds) ? 1 : 0, any = 0;
    Check(ncclAllReduce(&up, &any, 1, ncclInt32, ncclMax, comm, cudaStream_t{}), "ncclAllReduce(stop vote)");
    if (any) break;
    if (o.gap_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(o.gap_ms));
  }
  if (rank == 0) {
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    std::printf("total %s colls=%ld algbw_MBps=%.2f busy_s=%.2f elapsed_s=%.2f wrong=%ld\n", o.label.c_str(),
                total_colls, total_colls * o.bytes / total_busy / 1e6, total_busy, elapsed, wrong);
  } else if (wrong > 0) {
    std::printf("rank %d: %ld wrong elements\n", rank, wrong);
  }
  DestroyComms(std::span<ncclComm_t>(&comm, 1));
  return wrong > 0 ? 1 : 0;
}

}  // namespace
}  // namespace conduit::perf

int main(int argc, char** argv) { return conduit::perf::Main(argc, argv); }
