// The two ends of a release ring of the RPC control region (rpc_protocol.h): the side that
// is done with a block of the other side's memory pushes it; the owner drains the ring when
// it needs room. Each side keeps its own index and only reads the other's, which it does
// not trust (a program can scribble on the region; that must only hurt the program).
#ifndef CONDUIT_DAEMON_COMMON_RELEASE_RING_H_
#define CONDUIT_DAEMON_COMMON_RELEASE_RING_H_

#include <cstdint>

#include "protocol/rpc_protocol.h"

namespace conduit::rpcproto {

// Appends `e`; false when the ring is full (the caller sends a Free frame instead).
inline bool PushRelease(RingIndex& head, const RingIndex& tail, FreeEntry* entries, uint64_t* my_head,
                        const FreeEntry& e) {
  uint64_t consumed = tail.value.load(std::memory_order_acquire);
  if (*my_head - consumed >= kRingEntries) return false;  // full, or a nonsense index
  entries[*my_head % kRingEntries] = e;
  ++*my_head;
  head.value.store(*my_head, std::memory_order_release);
  return true;
}

// Calls fn(entry) for each entry pushed since the last drain; false (doing nothing) when
// the producer's index makes no sense.
template <typename Fn>
bool DrainReleases(const RingIndex& head, RingIndex& tail, const FreeEntry* entries, uint64_t* my_tail, Fn fn) {
  uint64_t produced = head.value.load(std::memory_order_acquire);
  if (produced - *my_tail > kRingEntries) return false;
  for (; *my_tail != produced; ++*my_tail) {
    // A copy, each field read once: the entry lies in memory the other side can write
    // while fn checks and uses it, and a value checked must be the value used. (Through
    // volatile: a plain copy of memory another process writes may legally be read again
    // where the copy is used.)
    const volatile FreeEntry& shared = entries[*my_tail % kRingEntries];
    FreeEntry e;
    e.segment = shared.segment;
    e.reserved = shared.reserved;
    e.offset = shared.offset;
    fn(e);
  }
  tail.value.store(*my_tail, std::memory_order_release);
  return true;
}

}  // namespace conduit::rpcproto

#endif  // CONDUIT_DAEMON_COMMON_RELEASE_RING_H_
