// What one benchmark thread does, as nccl-tests' threadRunTests: every (type, op,
// root) the options ask for, each a sweep over the sizes (-N times), a row per size
// with its out-of-place and in-place measurement.
#ifndef CONDUIT_TOOLS_PERF_BENCH_H_
#define CONDUIT_TOOLS_PERF_BENCH_H_

#include <barrier>
#include <cstddef>
#include <span>
#include <vector>

#include "nccl.h"
#include "options.h"
#include "report.h"
#include "watchdog.h"

namespace conduit::perf {

// Shared by the threads of this process.
struct ProcessState {
  const Options* options;
  ncclUniqueId id;
  std::vector<ncclComm_t> comms;  // one per local rank, thread t owns [t*g, (t+1)*g)
  std::barrier<>* sync;           // every thread of this process
  Watchdog* watchdog;
  Report* report;                 // on the process holding rank 0, else null
  bool measure_memory = false;    // -M on the printing process
  MemoryUsage memory;             // filled by thread 0
  std::vector<size_t> buffer_bytes;  // per thread
  int failed = 0;  // measurements with wrong elements (agreed over all ranks; counted by thread 0)
};

void RunThread(ProcessState& p, int thread);

}  // namespace conduit::perf

#endif  // CONDUIT_TOOLS_PERF_BENCH_H_
