// nccl-tests' output: the preamble, the table (one row per size with its
// out-of-place and in-place halves), the footer; with -J the same in nccl-tests'
// JSON layout. Only the thread holding rank 0 has a Report.
#ifndef CONDUIT_TOOLS_PERF_REPORT_H_
#define CONDUIT_TOOLS_PERF_REPORT_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>

#include "json_writer.h"
#include "options.h"
#include "runner.h"

namespace conduit::perf {

// -M, in host memory (resident set) where nccl-tests reports GPU memory.
struct MemoryUsage {
  int64_t init_bytes = 0;        // creating the communicators
  int64_t buffer_bytes = 0;      // the test buffers
  int64_t collective_bytes = 0;  // growth while the tests ran
};

class Report {
 public:
  // `json` may be null (no -J); the Report writes and closes it.
  Report(const Options& o, int nranks, std::FILE* json, int argc, char** argv);
  ~Report();
  Report(const Report&) = delete;
  Report& operator=(const Report&) = delete;

  // The run's parameters and the ranks of this process.
  void Preamble(int library_version, std::span<const int> local_ranks);
  void TableHeader();
  // A line of its own between rows (nccl-tests' "... skipping" notes).
  void Note(const std::string& line);
  void Row(const Shape& shape, const Case& c, const Measurement& out_of_place, const Measurement& in_place);
  // Returns false when the run failed: wrong elements, or NCCL_TESTS_MIN_BW not met.
  bool Footer(const MemoryUsage* memory);

 private:
  void Half(size_t bytes, const Measurement& m, bool out_of_place);

  const Options& o_;
  int nranks_;
  std::FILE* json_file_;
  std::unique_ptr<JsonWriter> json_;
  double busbw_sum_ = 0;
  int busbw_n_ = 0;
  int failed_ = 0;  // measurements with wrong elements
};

}  // namespace conduit::perf

#endif  // CONDUIT_TOOLS_PERF_REPORT_H_
