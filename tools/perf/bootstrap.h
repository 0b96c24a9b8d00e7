// Creating the communicators conduit-perf drives. A process holds -t x -g ranks
// (global ranks from Options::first_rank()); a multi-process run meets through an
// id file that process 0 publishes.
#ifndef CONDUIT_TOOLS_PERF_BOOTSTRAP_H_
#define CONDUIT_TOOLS_PERF_BOOTSTRAP_H_

#include <span>

#include "nccl.h"
#include "options.h"

namespace conduit::perf {

// The communicator's unique id: created (and, multi-process, published) by process
// 0, read from the id file by the others. Exits with a message on failure.
ncclUniqueId ShareUniqueId(const Options& o);

// Creates the communicators of local ranks [first_local, first_local + out.size())
// in one group, as nccl-tests does (ncclCommInitRankConfig, with -x's CTA policy).
// Exits with a message on failure (there is nothing to measure without them).
void InitComms(const Options& o, const ncclUniqueId& id, int first_local, std::span<ncclComm_t> out);

// Once every local communicator exists, every process has read the id (creation
// needs all ranks), so process 0 removes the file: a rerun with the same path
// cannot pick up a stale id.
void ForgetUniqueId(const Options& o);

void DestroyComms(std::span<ncclComm_t> comms);

}  // namespace conduit::perf

#endif  // CONDUIT_TOOLS_PERF_BOOTSTRAP_H_
