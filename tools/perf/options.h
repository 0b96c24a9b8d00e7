// Command-line options of conduit-perf (nccl-tests compatible where they overlap).
#ifndef CONDUIT_TOOLS_PERF_OPTIONS_H_
#define CONDUIT_TOOLS_PERF_OPTIONS_H_

#include <cstddef>
#include <string>

#include "collective.h"
#include "dtype.h"

namespace conduit::perf {

struct Options {
  const CollInfo* coll = nullptr;
  size_t min_bytes = 32u << 20;
  size_t max_bytes = 32u << 20;
  double factor = 2;
  int iters = 20;
  int warmup = 5;
  double budget_s = 2.0;  // -T: cap on the timed loop per size (0: no cap)
  const DtypeInfo* dtype = nullptr;
  ncclRedOp_t op = ncclSum;
  const char* op_name = "sum";
  int root = 0;
  bool check = true;
  bool in_place = false;
  // Launch: threads (one process, ncclCommInitAll) or one rank of a multi-process job.
  int threads = 1;
  int rank = -1;
  int nranks = 0;
  std::string id_file;

  bool multi_process() const { return rank >= 0; }
};

// Parses argv; prints a message and exits (2 on error, 0 for -h).
Options ParseOptions(int argc, char** argv);

}  // namespace conduit::perf

#endif  // CONDUIT_TOOLS_PERF_OPTIONS_H_
