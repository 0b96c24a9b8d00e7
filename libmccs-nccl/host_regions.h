// Host regions (shim protocol, "Host regions"): on the managed path ncclMemAlloc's host
// memory is a memfd sealed against shrinking, so conduitd can map it and run a collective
// in the program's own buffers: no copy into the staging segment and out again, which
// otherwise costs two of every payload byte's memory writes (docs/design.md, "Copies per
// payload byte"). NCCL users get the same from ncclMemAlloc'd buffers (registered, zero-
// copy); nccl-tests allocates so with -R. On request, a program's own large buffers become
// regions too, by adopting their pages (AdoptRegion, page_adoption.h).
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
  bool adopted = false;  // a program's own buffer (AdoptRegion): its edges are copied
};
// An adopted region whose pages the program no longer has (freed, mapped over, changed in
// part) is dropped here, and counts as freed (RegionFrees); those of its pages still the
// memfd's become private to the program again (UnsharePagesLeft, page_adoption.h).
bool FindRegion(const void* p, size_t bytes, RegionSpan* out);

// A program's own host buffer made a region (page_adoption.h), when
// $CONDUIT_ADOPT_HOST_BUFFERS=1 and the buffer has at least $CONDUIT_ADOPT_MIN_BYTES (256
// KiB), overlaps no region, and keeps the adopted total within $CONDUIT_ADOPT_MAX_BYTES (1
// GiB). Not OK, with the reason, otherwise: NotFound where it was not tried (adoption off,
// a small buffer, one refused before: not tried again until a region goes). A child the
// program forks gets private copies of adopted pages (those still adopted at the fork).
Status AdoptRegion(const void* p, size_t bytes, RegionSpan* out);
// Whether adoption is on: asked first, it registers the fork handlers (pthread_atfork),
// before anything is adopted; without them it is off.
bool AdoptionEnabled();
// Drops the adopted regions whose pages the program no longer has (freed and unmapped),
// so that connections release them (RegionFrees); at most every 100 ms, one system call
// per adopted region, and one per mapping in the pages of each one dropped.
void SweepAdoptedRegions();
// For an op's buffer in an adopted region: its bytes on the pages that stayed the
// program's, copied into the region before the daemon reads them (In) and back after it
// wrote them (Out). At most two pages each; nothing for other regions. For a buffer
// FindRegion or AdoptRegion placed in the same NCCL call: the kernel is not asked again.
void RegionEdgesIn(const void* p, size_t bytes);
void RegionEdgesOut(void* p, size_t bytes);
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
