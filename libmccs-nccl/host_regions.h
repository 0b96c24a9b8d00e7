// Host regions (shim protocol, "Host regions"): on the managed path ncclMemAlloc's host
// memory is a memfd sealed against shrinking, so conduitd can map it and run a collective
// in the program's own buffers: no copy into the staging segment and out again, which
// otherwise costs two of every payload byte's memory writes (docs/design.md, "Copies per
// payload byte"). NCCL users get the same from ncclMemAlloc'd buffers (registered, zero-
// copy); nccl-tests allocates so with -R.
//
// The memory is MAP_SHARED: a child the program forks shares it rather than getting a copy
// (as device memory from NCCL's ncclMemAlloc is not copied either).
//
// This file keeps the process's table of such allocations; ops.cc attaches a region to a
// communicator's connection the first time an op uses it, and releases it there after
// ncclMemFree.
#ifndef CONDUIT_LIBMCCS_NCCL_HOST_REGIONS_H_
#define CONDUIT_LIBMCCS_NCCL_HOST_REGIONS_H_

#include <cstddef>
#include <cstdint>

#include "common/fd_io.h"
#include "common/status.h"

namespace conduit {

// A new region of `bytes` (page-rounded), mapped read-write here.
Status AllocateRegion(size_t bytes, void** out);
// Unmaps the region that starts at `p`; false if no region starts there. A daemon that
// mapped it keeps the memory until the connection releases it (ops.cc, after RegionFrees
// changes).
bool FreeRegion(void* p);

// Where [p, p + bytes) lies: the live region holding all of it, and p's offset in it.
struct RegionSpan {
  uint64_t id = 0;  // nonzero, never reused in this process
  uint64_t offset = 0;
  uint64_t size = 0;  // the region's bytes
};
bool FindRegion(const void* p, size_t bytes, RegionSpan* out);
// A duplicate of live region `id`'s memfd, to pass to the daemon; invalid once freed.
UniqueFd RegionFd(uint64_t id);
// Whether region `id` is still allocated.
bool RegionLive(uint64_t id);
// Counts frees: a connection that saw the same count has no region to release.
uint64_t RegionFrees();

// Whether ops may use regions: $CONDUIT_HOST_REGIONS=0 makes every op stage (an escape
// hatch, and the A side of the benchmark's A/B).
bool RegionsEnabled();

}  // namespace conduit

#endif  // CONDUIT_LIBMCCS_NCCL_HOST_REGIONS_H_
