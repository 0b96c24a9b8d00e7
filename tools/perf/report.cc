#include "report.h"

#include <cstdio>

namespace conduit::perf {

Report::Report(const Options& o, int nranks, bool printer) : o_(o), nranks_(nranks), printer_(printer) {}

void Report::Header() const {
  if (!printer_) return;
  std::printf("# conduit-perf: %s, %d ranks (%s), type %s, redop %s, iters %d (budget %.1f s/size), warmup %d, "
              "check %d, in-place %d\n",
              o_.coll->name, nranks_, o_.multi_process() ? "multi-process" : "threads", o_.dtype->name, o_.op_name,
              o_.iters, o_.budget_s, o_.warmup, o_.check ? 1 : 0, o_.in_place ? 1 : 0);
  std::printf("#\n");
  std::printf("# %46s%31s%31s\n", "", "out-of-place", o_.in_place ? "in-place" : "");
  std::printf("# %10s %12s %8s %6s %6s %9s %6s %6s %6s", "size", "count", "type", "redop", "root", "time", "algbw",
              "busbw", "#wrong");
  if (o_.in_place) std::printf(" %9s %6s %6s %6s", "time", "algbw", "busbw", "#wrong");
  std::printf("\n# %10s %12s %8s %6s %6s %9s %6s %6s %6s", "(B)", "(elements)", "", "", "", "(us)", "(GB/s)",
              "(GB/s)", "");
  if (o_.in_place) std::printf(" %9s %6s %6s %6s", "(us)", "(GB/s)", "(GB/s)", "");
  std::printf("\n");
  std::fflush(stdout);
}

void Report::Half(size_t bytes, const Measurement& m) {
  // GB/s are 1e9 bytes per second, as in nccl-tests.
  const double algbw = static_cast<double>(bytes) / (m.time_us * 1e-6) / 1e9;
  const double busbw = algbw * BusBwFactor(o_.coll->coll, nranks_);
  busbw_sum_ += busbw;
  ++busbw_n_;
  wrong_ += m.wrong;
  if (!printer_) return;
  std::printf(" %9.1f %6.2f %6.2f", m.time_us, algbw, busbw);
  if (o_.check) std::printf(" %6zu", m.wrong);
  else std::printf(" %6s", "N/A");
}

void Report::Row(const Shape& shape, const Measurement& out_of_place, const Measurement* in_place) {
  if (printer_) {
    std::printf("  %10zu %12zu %8s %6s %6d", shape.bytes, shape.count, o_.dtype->name,
                o_.coll->uses_redop ? o_.op_name : "none", o_.coll->uses_root ? o_.root : -1);
  }
  Half(shape.bytes, out_of_place);
  if (in_place) {
    Half(shape.bytes, *in_place);
  } else if (o_.in_place && printer_) {
    std::printf(" %9s %6s %6s %6s", "N/A", "N/A", "N/A", "N/A");
  }
  if (printer_) {
    std::printf("\n");
    std::fflush(stdout);
  }
}

size_t Report::Finish() const {
  if (printer_) {
    std::printf("# Wrong elements    : %zu\n", wrong_);
    std::printf("# Avg bus bandwidth : %g\n", busbw_n_ ? busbw_sum_ / busbw_n_ : 0.0);
    std::printf("#\n");
    std::fflush(stdout);
  }
  return wrong_;
}

}  // namespace conduit::perf
