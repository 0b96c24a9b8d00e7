// Copies of large buffers whose destination is not read again soon by this thread: a
// shim's copy of a large collective's output out of the staging segment into the program's
// buffer. Non-temporal stores write such a destination without first reading each of its
// cache lines into the cache (a plain memcpy's stores do), so the copy moves two bytes of
// memory traffic per byte instead of three. Not for a destination read soon from the
// cache: a shim's input chunks, which the daemon sends right after, got 0.73-0.96x slower
// with it (docs/benchmarks.md, "Output copies with non-temporal stores").
#ifndef CONDUIT_COMMON_STREAM_COPY_H_
#define CONDUIT_COMMON_STREAM_COPY_H_

#include <cstddef>

namespace conduit {

// memcpy(dst, src, n) for non-overlapping buffers, with non-temporal stores where the CPU
// has them (x86-64: SSE2, always) and n is large enough to repay them; plain memcpy
// elsewhere. The stores are fenced before it returns, so a release store after it (a
// done bit) publishes the bytes as after memcpy.
void StreamCopy(void* dst, const void* src, size_t n);

}  // namespace conduit

#endif  // CONDUIT_COMMON_STREAM_COPY_H_
