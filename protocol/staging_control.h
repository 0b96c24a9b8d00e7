// StagingControl: the first page of every staging segment, through which a shim and its
// daemon overlap their copies with the network (shim protocol v3, "streamed" groups).
//
// Without it a collective costs copy-in + network + copy-out. With it:
//  * the shim sends the Group request first and then copies the input into the segment a
//    chunk at a time, setting one input bit per chunk; the daemon starts sending as soon
//    as the chunks it needs are there;
//  * the shim copies on demand: the first window at once, then the window the daemon names
//    in input_wanted (the first chunk it lacks within a read-ahead of where it reads). Each
//    host's algorithm reads the buffer in its own order (in a ring each host starts on a
//    different segment), and copies spread over the collective do not compete, in one
//    burst, with the daemons' network threads for the CPU;
//  * the daemon marks each chunk of the output as final the moment it is (done bits); the
//    shim copies those chunks out while the rest is still on the wire.
// Both sides sleep on futexes in this shared page rather than spinning: the machine's cores
// are the programs'.
//
// Ownership: between requests everything here belongs to the shim, which resets it before
// each streamed Group request; while the request is outstanding the shim writes only the
// input_seq/input_complete words and the input bits, the daemon only input_wanted,
// output_seq, result_area and the done bits.
#ifndef CONDUIT_PROTOCOL_STAGING_CONTROL_H_
#define CONDUIT_PROTOCOL_STAGING_CONTROL_H_

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

struct StagingControl {
  std::atomic<uint32_t> input_seq;       // futex word: bumped after input bits are set
  uint32_t reserved0;
  std::atomic<uint64_t> input_complete;  // 1: every byte of the group's input is in place
  std::atomic<uint32_t> output_seq;      // futex word: bumped after done bits are set
  uint32_t reserved1;
  std::atomic<uint64_t> input_wanted;    // daemon's request: 1 + segment offset it waits for; 0: none
  // Where this rank's output is read from (set by the daemon before the first done bit):
  // 0, the segment; otherwise the number of the communicator's result area
  // (shimproto::AttachResultReply::area), where output byte x of the op (counted from its
  // OpDesc::offset in the segment) lies at byte x of the area.
  std::atomic<uint64_t> result_area;
  uint64_t reserved2[3];
  // Bit c of input_done: the input bytes within segment bytes [c*chunk, (c+1)*chunk) are in
  // place. Bit c of done: this rank's output bytes in that chunk are final.
  // (chunk = StagingChunkBytes(segment size), the same for both.)
  std::atomic<uint64_t> input_done[(kStagingControlBytes - 64) / 16];
  std::atomic<uint64_t> done[(kStagingControlBytes - 64) / 16];
};
static_assert(sizeof(StagingControl) == kStagingControlBytes);
static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<uint32_t>::is_always_lock_free);

inline constexpr size_t kStagingDoneBits = sizeof(StagingControl::done) * 8;

// Bytes per input/done bit for a segment of `segment_bytes`: a power of two, at least
// 256 KiB, large enough that a bitmap covers the whole segment.
inline size_t StagingChunkBytes(size_t segment_bytes) {
  size_t chunk = 256 * 1024;
  while (chunk * kStagingDoneBits < segment_bytes) chunk *= 2;
  return chunk;
}

inline bool TestChunkBit(const std::atomic<uint64_t>* bits, size_t c) {
  return (bits[c / 64].load(std::memory_order_acquire) >> (c % 64)) & 1;
}

inline void SetChunkBit(std::atomic<uint64_t>* bits, size_t c) {
  bits[c / 64].fetch_or(1ull << (c % 64), std::memory_order_release);
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

inline void WakeInputWaiters(StagingControl* c) {
  c->input_seq.fetch_add(1, std::memory_order_release);
  FutexWakeAll(&c->input_seq);
}

// Shim side: the input bytes of chunk `chunk_index` are in place.
inline void PublishInputChunk(StagingControl* c, size_t chunk_index) {
  SetChunkBit(c->input_done, chunk_index);
  WakeInputWaiters(c);
}

// Shim side: all of the input is in place (also covers chunks whose bits were never set).
inline void PublishInputComplete(StagingControl* c) {
  c->input_complete.store(1, std::memory_order_release);
  WakeInputWaiters(c);
}

}  // namespace conduit

#endif  // CONDUIT_PROTOCOL_STAGING_CONTROL_H_
