// nccl-tests style output: a header, one row per size, and the summary lines.
#ifndef CONDUIT_TOOLS_PERF_REPORT_H_
#define CONDUIT_TOOLS_PERF_REPORT_H_

#include <cstddef>

#include "options.h"
#include "runner.h"

namespace conduit::perf {

class Report {
 public:
  Report(const Options& o, int nranks, bool printer);
  void Header() const;
  // One row; `in_place` is null when the row has no in-place half.
  void Row(const Shape& shape, const Measurement& out_of_place, const Measurement* in_place);
  // Prints the summary; returns the total number of wrong elements.
  size_t Finish() const;

 private:
  void Half(size_t bytes, const Measurement& m);

  const Options& o_;
  int nranks_;
  bool printer_;
  double busbw_sum_ = 0;
  int busbw_n_ = 0;
  size_t wrong_ = 0;
};

}  // namespace conduit::perf

#endif  // CONDUIT_TOOLS_PERF_REPORT_H_
