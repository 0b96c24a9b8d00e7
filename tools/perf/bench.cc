#include "bench.h"

#include <string>

#include "bootstrap.h"
#include "host_memory.h"
#include "runner.h"

namespace conduit::perf {
namespace {

size_t NextSize(const Options& o, size_t size) {
  size_t next = o.step_factor > 1 ? size * o.step_factor : size + o.step_bytes;
  if (size == 0 && o.step_factor > 1) next = 1;  // 0 * factor would never grow
  return next > size ? next : o.max_bytes + 1;   // stop on overflow
}

std::vector<int> Roots(const Options& o, int nranks) {
  if (!o.coll->uses_root) return {0};
  if (o.root >= 0) return {o.root};
  std::vector<int> all;
  for (int r = 0; r < nranks; ++r) all.push_back(r);
  return all;
}

// Operators only matter to reductions; the others run once and print "none".
std::vector<const RedOpInfo*> Ops(const Options& o) {
  if (o.coll->uses_redop) return o.ops;
  return {FindRedOp("sum")};
}

// Returns the number of measurements with wrong elements.
int Sweep(const Options& o, Runner& runner, Report* report, const Case& c, int nranks, int local0_rank) {
  int failed = 0;
  for (size_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes = NextSize(o, bytes)) {
    const Shape shape = ShapeFor(o.coll->coll, bytes, c.dtype->size, nranks, local0_rank);
    const Measurement out_of_place = runner.Measure(bytes, false);
    const Measurement in_place = runner.Measure(bytes, true);
    if (report != nullptr) report->Row(shape, c, out_of_place, in_place);
    failed += (out_of_place.wrong > 0) + (in_place.wrong > 0);
  }
  return failed;
}

}  // namespace

void RunThread(ProcessState& p, int thread) {
  const Options& o = *p.options;
  const int g = o.ranks_per_thread;
  const std::span<ncclComm_t> mine(p.comms.data() + static_cast<size_t>(thread * g), static_cast<size_t>(g));
  if (o.parallel_init) InitComms(o, p.id, thread * g, mine);
  p.sync->arrive_and_wait();  // every communicator of this process exists
  if (thread == 0) {
    ForgetUniqueId(o);
    if (p.measure_memory) p.memory.init_bytes = ResidentBytes() - p.memory.init_bytes;
  }
  std::vector<int> ranks;
  for (int i = 0; i < g; ++i) ranks.push_back(o.first_rank() + thread * g + i);
  const int nranks = o.total_ranks();
  Report* report = thread == 0 ? p.report : nullptr;  // thread 0 of the printing process holds rank 0
  {
    Runner runner(o, mine, ranks, nranks, p.watchdog, thread);
    p.buffer_bytes[static_cast<size_t>(thread)] = runner.buffer_bytes();
    p.sync->arrive_and_wait();
    if (thread == 0 && p.measure_memory) {
      // What the runners allocated (and touched), rather than a resident-set delta
      // other threads' allocations race with.
      p.memory.buffer_bytes = 0;
      for (size_t b : p.buffer_bytes) p.memory.buffer_bytes += static_cast<int64_t>(b);
      p.memory.collective_bytes = ResidentBytes();
    }
    if (report != nullptr) report->TableHeader();

    const bool hypercube_ok = o.coll->coll != Coll::kHyperCube || (nranks & (nranks - 1)) == 0;
    if (!hypercube_ok && report != nullptr) {
      // As nccl-tests: the algorithm needs a power of two.
      report->Note("nRanks " + std::to_string(nranks) + " is not a power of 2, skipping");
    }
    for (const DtypeInfo* dtype : o.dtypes) {
      for (const RedOpInfo* op : Ops(o)) {
        for (int root : Roots(o, nranks)) {
          if (!hypercube_ok) break;
          const Case c{dtype, op, root};
          runner.BeginCase(c);  // warms up once; -N repeats only the sweep, as nccl-tests does
          for (long cycle = 0; o.run_cycles == 0 || cycle < o.run_cycles; ++cycle) {
            const int failed = Sweep(o, runner, report, c, nranks, ranks[0]);
            if (thread == 0) p.failed += failed;
          }
          runner.EndCase();
        }
      }
    }
    if (thread == 0 && p.measure_memory) {
      p.memory.collective_bytes = ResidentBytes() - p.memory.collective_bytes;
    }
  }
}

}  // namespace conduit::perf
