// Copies of large buffers whose destination is not read again soon by the copying thread:
// a shim's copy of a large output (a collective's, a receive's) out of the staging segment
// into the program's buffer, and conduitd's copies of a large result into other local
// ranks' own buffers (host regions). Non-temporal stores write such a destination without
// first reading each of its cache lines into the cache (a plain memcpy's stores do), so
// the copy moves two bytes of memory traffic per byte instead of three. Not for a
// destination read soon from the cache: a shim's input chunks, which the daemon sends right
// after, got 0.73-0.96x slower with it (docs/benchmarks.md, "Output copies with
// non-temporal stores").
#ifndef CONDUIT_COMMON_STREAM_COPY_H_
#define CONDUIT_COMMON_STREAM_COPY_H_

#include <cstddef>

namespace conduit {

// memcpy(dst, src, n) for non-overlapping buffers, with non-temporal stores where the CPU
// has them (x86-64: SSE2, always) and n is large enough to repay them; plain memcpy
// elsewhere. The stores are fenced before it returns, so a release store after it (a
// done bit) publishes the bytes as after memcpy.
void StreamCopy(void* dst, const void* src, size_t n);

// From this many bytes of one op's output on, copies of it into a program's buffer use
// StreamCopy: the output no longer fits the caches the program would find it in. Measured
// by A/B (docs/benchmarks.md, "Output copies with non-temporal stores"): even or faster
// from 16 MiB, with the programs reading their results, and 0.79-1.07x below. The
// environment's CONDUIT_NT_OUTPUT_MIN_BYTES overrides it (read once).
size_t NonTemporalOutputMinBytes();

// The one rule for a copy into a program's buffer: n bytes of an op's output whose whole
// size is output_bytes (a chunk of it, or all), with StreamCopy from
// NonTemporalOutputMinBytes() on and memcpy below.
void CopyOutput(void* dst, const void* src, size_t n, size_t output_bytes);

}  // namespace conduit

#endif  // CONDUIT_COMMON_STREAM_COPY_H_
