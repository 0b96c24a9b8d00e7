// Creating the communicators conduit-perf drives: either all ranks as threads of
// this process, or one rank of a multi-process job that meets through an id file.
#ifndef CONDUIT_TOOLS_PERF_BOOTSTRAP_H_
#define CONDUIT_TOOLS_PERF_BOOTSTRAP_H_

#include <vector>

#include "nccl.h"
#include "options.h"

namespace conduit::perf {

struct LocalRanks {
  int nranks = 0;               // ranks in the whole communicator
  std::vector<int> ranks;       // global rank of each communicator held here
  std::vector<ncclComm_t> comms;
};

// Exits with a message on failure (there is nothing useful to measure without them).
LocalRanks InitComms(const Options& o);
void DestroyComms(LocalRanks& l);

}  // namespace conduit::perf

#endif  // CONDUIT_TOOLS_PERF_BOOTSTRAP_H_
