// conduit-perf: NVIDIA nccl-tests' benchmarks for the NCCL API, with nccl-tests'
// flags and output, written for Conduit's libnccl.so.2 where every buffer is plain
// host memory.
//
// Invoked as one of nccl-tests' binary names (all_reduce_perf, ... : symlinks next
// to it) it runs that collective; as conduit-perf, the one --coll names. Ranks are
// -t threads of this process driving -g ranks each, times --nranks processes that
// meet through --id-file. Only the thread holding rank 0 prints; the exit status is
// 1 when any element came out wrong, 2 for a bad command line, 3 when NCCL fails.
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench.h"
#include "bootstrap.h"
#include "host_memory.h"
#include "options.h"
#include "report.h"
#include "watchdog.h"

using namespace conduit::perf;

namespace {

// nccl-tests' -J: never overwrites; an existing name gets .0, .1, ... appended.
std::FILE* OpenJson(const std::string& path) {
  std::string name = path;
  for (int n = 0;; ++n) {
    std::FILE* f = std::fopen(name.c_str(), "wx");
    if (f != nullptr) {
      std::printf("# Writing JSON output to %s\n", name.c_str());
      return f;
    }
    if (errno != EEXIST) {
      std::printf("# skipping json output; %s not accessible\n", name.c_str());
      return nullptr;
    }
    name = path + "." + std::to_string(n);
  }
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);  // rows appear as they are measured, even into a pipe
  // getopt_long permutes argv; the JSON output records the command line as given.
  std::vector<char*> original(argv, argv + argc);
  ParseResult parsed = ParseOptions(argc, argv);
  const std::string program = parsed.options.program.empty() ? "conduit-perf" : parsed.options.program;
  if (parsed.outcome == ParseOutcome::kHelp) {
    std::fputs(Usage(program).c_str(), stdout);
    return 0;
  }
  if (parsed.outcome == ParseOutcome::kError) {
    std::fprintf(stderr, "%s: %s\n(%s --help lists the options)\n", program.c_str(), parsed.message.c_str(),
                 program.c_str());
    return 2;
  }
  const Options& o = parsed.options;
  for (const std::string& w : o.warnings) std::fprintf(stderr, "%s\n", w.c_str());

  const bool printer = o.first_rank() == 0;
  std::FILE* json = printer && !o.output_file.empty() ? OpenJson(o.output_file) : nullptr;
  int library_version = 0;
  ncclGetVersion(&library_version);
  ProcessState p;
  p.options = &o;
  p.measure_memory = printer && o.memory_report;
  p.memory.init_bytes = ResidentBytes();
  std::vector<int> local_ranks;
  for (int i = 0; i < o.local_ranks(); ++i) local_ranks.push_back(o.first_rank() + i);
  std::unique_ptr<Report> report;
  if (printer) {
    report = std::make_unique<Report>(o, o.total_ranks(), json, argc, original.data());
    report->Preamble(library_version, local_ranks);
  }
  p.report = report.get();

  Watchdog watchdog(o.timeout_s, o.threads);
  p.watchdog = &watchdog;
  p.id = ShareUniqueId(o);
  p.comms.resize(static_cast<size_t>(o.local_ranks()));
  if (!o.parallel_init) InitComms(o, p.id, 0, p.comms);
  std::barrier<> sync(o.threads);
  p.sync = &sync;
  p.buffer_bytes.assign(static_cast<size_t>(o.threads), 0);

  std::vector<std::thread> threads;
  for (int t = 1; t < o.threads; ++t) threads.emplace_back(RunThread, std::ref(p), t);
  RunThread(p, 0);
  for (std::thread& t : threads) t.join();

  const bool footer_ok = report == nullptr || report->Footer(p.measure_memory ? &p.memory : nullptr);
  const bool ok = footer_ok && p.failed == 0;
  report.reset();  // closes the JSON output
  std::fflush(stdout);
  if (o.hold_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(o.hold_ms));
  DestroyComms(p.comms);
  return ok ? 0 : 1;
}
