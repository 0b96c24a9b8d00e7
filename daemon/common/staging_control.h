// StagingControl: the first page of every staging segment, through which a shim and its
// daemon overlap their copies with the network (shim protocol v1, "streamed" groups).
//
// Without it a collective costs copy-in + network + copy-out. With it:
//  * the shim sends the Group request first and then copies the input into the segment,
//    publishing how far it got (input_ready); the daemon starts sending as soon as the
//    first bytes it needs are there;
//  * the daemon marks each chunk of the output as final the moment it is (done bits); the
//    shim copies those chunks out while the rest is still on the wire.
// Both sides sleep on futexes in this shared page rather than spinning: the machine's cores
// are the programs'.
//
// Ownership: between requests everything here belongs to the shim, which resets it before
// each streamed Group request; while the request is outstanding the shim writes only
// input_*, the daemon only output_* and the done bits.
#ifndef CONDUIT_DAEMON_COMMON_STAGING_CONTROL_H_
#define CONDUIT_DAEMON_COMMON_STAGING_CONTROL_H_

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace conduit {

// Op data starts after this control page.
inline constexpr size_t kStagingControlBytes = 4096;
inline constexpr uint64_t kInputComplete = ~0ull;

struct StagingControl {
  std::atomic<uint32_t> input_seq;    // futex word: bumped after input_ready grows
  uint32_t reserved0;
  std::atomic<uint64_t> input_ready;  // segment bytes [0, input_ready) hold the group's inputs
  std::atomic<uint32_t> output_seq;   // futex word: bumped after done bits are set
  uint32_t reserved1;
  uint64_t reserved2[5];
  // Bit c: segment bytes [c*chunk, (c+1)*chunk) of this rank's output are final
  // (chunk = StagingChunkBytes(segment size)).
  std::atomic<uint64_t> done[(kStagingControlBytes - 64) / 8];
};
static_assert(sizeof(StagingControl) == kStagingControlBytes);
static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<uint32_t>::is_always_lock_free);

inline constexpr size_t kStagingDoneBits = sizeof(StagingControl::done) * 8;

// Bytes per done bit for a segment of `segment_bytes`: a power of two, at least 256 KiB,
// large enough that the bitmap covers the whole segment.
inline size_t StagingChunkBytes(size_t segment_bytes) {
  size_t chunk = 256 * 1024;
  while (chunk * kStagingDoneBits < segment_bytes) chunk *= 2;
  return chunk;
}

inline StagingControl* ControlOf(uint8_t* segment) { return reinterpret_cast<StagingControl*>(segment); }

// Futex on a word of a MAP_SHARED segment (so not FUTEX_PRIVATE): the two sides are
// different processes. FutexWait returns on a wake, a changed word, or after timeout_ms.
inline void FutexWait(std::atomic<uint32_t>* word, uint32_t seen, int timeout_ms) {
  timespec ts{timeout_ms / 1000, (timeout_ms % 1000) * 1000000L};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, seen, &ts, nullptr, 0);
}

inline void FutexWakeAll(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

inline void PublishInput(StagingControl* c, uint64_t ready) {
  c->input_ready.store(ready, std::memory_order_release);
  c->input_seq.fetch_add(1, std::memory_order_release);
  FutexWakeAll(&c->input_seq);
}

}  // namespace conduit

#endif  // CONDUIT_DAEMON_COMMON_STAGING_CONTROL_H_
