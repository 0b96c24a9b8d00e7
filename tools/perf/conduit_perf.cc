// conduit-perf: nccl-tests style bandwidth/latency benchmark for the NCCL API,
// written for Conduit's libnccl.so.2 where every buffer is plain host memory.
//
// Ranks are either threads of this process (-t T, ncclCommInitAll, all ranks issued
// from one thread inside ncclGroupStart/End) or one process per rank
// (--rank/--nranks/--id-file). Only rank 0 prints; exit status is 1 when any
// element came out wrong.
#include <algorithm>
#include <cstdio>

#include "bootstrap.h"
#include "options.h"
#include "report.h"
#include "runner.h"

using namespace conduit::perf;

namespace {

size_t NextSize(size_t size, double factor) {
  const double next = static_cast<double>(size) * factor;
  return std::max(size + 1, static_cast<size_t>(next));  // always make progress
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = ParseOptions(argc, argv);
  LocalRanks ranks = InitComms(o);
  const bool printer = ranks.ranks.front() == 0;
  Report report(o, ranks.nranks, printer);
  report.Header();
  {
    Runner runner(o, ranks);
    for (size_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes = NextSize(bytes, o.factor)) {
      const Shape shape = ShapeFor(o.coll->coll, bytes, o.dtype->size, ranks.nranks, 0);
      if (shape.count == 0) continue;  // smaller than one element per rank
      const Measurement oop = runner.Measure(bytes, false);
      if (o.in_place && o.coll->supports_in_place) {
        const Measurement ip = runner.Measure(bytes, true);
        report.Row(shape, oop, &ip);
      } else {
        report.Row(shape, oop, nullptr);
      }
      if (o.min_bytes == o.max_bytes) break;
    }
  }
  const size_t wrong = report.Finish();
  DestroyComms(ranks);
  return wrong > 0 ? 1 : 0;
}
