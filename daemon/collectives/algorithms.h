// Inter-host collective algorithms, run by the daemons of one communicator after each
// daemon has combined its own ranks' buffers (see hierarchical.cc).
//
// Every algorithm works on this daemon's buffer in place and talks to the other daemons
// only through Link, so any transport serves. Host h of `group` owns links[h] to host h
// (links[me] is unused).
#ifndef CONDUIT_DAEMON_COLLECTIVES_ALGORITHMS_H_
#define CONDUIT_DAEMON_COLLECTIVES_ALGORITHMS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "collectives/memory_traffic.h"
#include "common/deadline.h"
#include "common/status.h"
#include "nccl.h"
#include "transport/link.h"

namespace conduit {

// Receive staging that outlives one collective (the chunk slots of the ring and of
// recursive doubling's and halving's exchanges, a folded host's whole buffer, the chain's
// two chunks). Fresh memory costs a page fault and a kernel zeroing per page on first
// touch, on the receiving thread: CPU taken from the network on a host whose cores the
// programs share. Buffers up to kKeepBytes are kept
// for the next call (freed with the communicator); larger ones are freed after use.
class Scratch {
 public:
  static constexpr size_t kKeepBytes = 256u << 20;

  // `bytes` of scratch (at least 1), valid until the next Get. `transient` holds a buffer
  // too large to keep; the caller owns it for the call.
  uint8_t* Get(size_t bytes, std::unique_ptr<uint8_t[]>* transient);

 private:
  std::unique_ptr<uint8_t[]> kept_;
  size_t kept_bytes_ = 0;
};

struct HostGroup {
  int nhosts = 1;
  int me = 0;
  std::vector<Link*> links;
  size_t chunk_bytes = 512 * 1024;  // pipelining grain for chained and reducing transfers
  Deadline deadline = Deadline::Never();
  // Hooks into this host's ranks (LocalStage), so local copies overlap the network. An
  // algorithm calls `ensure` before it first reads bytes of buf it has not written itself
  // (to send them or reduce into them), and `finalize` once bytes of buf hold their final
  // result. Both may be called more than once for the same bytes. Empty: buf is ready and
  // nobody waits for partial results.
  SendGate ensure;
  std::function<void(const uint8_t* data, size_t len)> finalize;
  // Where the algorithms stage received data; nullptr: a fresh buffer per call.
  Scratch* scratch = nullptr;
  // Counts the bytes reductions write (the links count what they move); may be null.
  MemoryTraffic* traffic = nullptr;
  // This host's contribution to a reduction when it lives apart from buf (one rank's
  // out-of-place all-reduce, reduce or reduce-scatter in its own ncclMemAlloc buffers).
  // The reducing algorithms then send it from here and fold it in as they reduce (buf =
  // input op received), and on 2 hosts or more they write every byte of buf that they
  // send from buf or finalize (an all-reduce: all of buf; a reduce-scatter: this host's
  // segments; a reduce: the root's result), so nobody copies the input into buf first: one
  // memory write per payload byte fewer (docs/design.md, "Copies per payload byte").
  // nullptr: buf holds the contribution (after `ensure`).
  const uint8_t* input = nullptr;
  // Where a reduce-scatter's final results for buf's bytes [offset, offset + len) go when
  // not into buf (one rank's reduce-scatter in its own buffers: its output), or nullptr.
  // The ring then reduces its last step straight there and finalizes buf's range as
  // usual, though buf's bytes were not written: the hook's owner knows.
  std::function<uint8_t*(size_t offset, size_t len)> final_place;
};

// A byte range [offset, offset + len) of the working buffer.
struct ByteRange {
  size_t offset;
  size_t len;
};
// segments[h]: the part of the buffer host h ends up owning (reduce-scatter) or
// contributes (all-gather); may be several ranges when its ranks are not contiguous.
using HostSegments = std::vector<std::vector<ByteRange>>;

// Splits `count` elements of `elem` bytes into `parts` near-equal contiguous segments.
HostSegments EvenSegments(size_t count, size_t elem, int parts);

// After the call, host h's segments hold the reduction over all hosts.
Status RingReduceScatter(const HostGroup& group, uint8_t* buf, const HostSegments& segments,
                         ncclDataType_t type, ncclRedOp_t op);
// After the call, every host holds every host's segments.
Status RingAllGather(const HostGroup& group, uint8_t* buf, const HostSegments& segments);

// Bandwidth-optimal all-reduce: reduce-scatter then all-gather around the ring.
Status RingAllReduce(const HostGroup& group, uint8_t* buf, size_t count, ncclDataType_t type, ncclRedOp_t op);
// Latency-optimal all-reduce for small buffers: log2(hosts) full exchanges (hosts beyond
// the largest power of two fold into a partner first and get the result back last).
Status RecursiveDoublingAllReduce(const HostGroup& group, uint8_t* buf, size_t count, ncclDataType_t type,
                                  ncclRedOp_t op);
// Rabenseifner's all-reduce: reduce-scatter by recursive halving, then all-gather by
// recursive doubling (hosts beyond a power of two fold in as for recursive doubling). The
// ring's bytes in 2 log2(hosts) steps instead of 2 (hosts - 1).
Status HalvingDoublingAllReduce(const HostGroup& group, uint8_t* buf, size_t count, ncclDataType_t type,
                                ncclRedOp_t op);

// The largest all-reduce `auto` considers recursive doubling for: the operator's
// --rd-max-bytes when given (every daemon must be given the same), else, on 2 hosts where
// the communicator's collective protocol is 6 or later, kTwoHostRecursiveDoublingMaxBytes,
// and kDefaultRecursiveDoublingMaxBytes otherwise (what daemons of an earlier release
// choose, so that a communicator of mixed releases agrees). On 2 hosts recursive doubling is
// one exchange of the whole buffer: the ring's bytes each way in one step instead of two,
// measured faster up to 1 MiB (docs/benchmarks.md, "Recursive doubling up to 1 MiB on 2
// hosts"). On more hosts RecursiveDoublingIsFaster limits it well below 64 KiB.
inline constexpr size_t kDefaultRecursiveDoublingMaxBytes = 64 << 10;
inline constexpr size_t kTwoHostRecursiveDoublingMaxBytes = 1 << 20;
size_t RecursiveDoublingMaxBytes(const std::optional<size_t>& configured, int nhosts, uint32_t protocol_version);

// Whether recursive doubling should beat the ring for an all-reduce of `bytes` over
// `nhosts` hosts: it takes fewer steps (2(H-1) for the ring, log2 H, plus 2 when hosts fold
// into partners) but each step moves the whole buffer. `latency_bytes` is what a link
// carries in one step's latency (latency x bandwidth), the exchange rate between the two.
bool RecursiveDoublingIsFaster(size_t bytes, int nhosts, size_t latency_bytes);

// The largest all-reduce `auto` runs by recursive halving and doubling (on 4 hosts and
// more, above recursive doubling's range): the operator's --rh-max-bytes when given (every
// daemon must be given the same), else what the communicator's collective protocol says,
// which every one of its daemons chooses alike: kDefaultHalvingDoublingMaxBytes from
// version 5, kHalvingDoublingMaxBytesAt4 at 4, and 0 at 3, where a daemon of an earlier
// release would run the ring (docs/daemon-protocol.md, "Collective message versions").
inline constexpr size_t kDefaultHalvingDoublingMaxBytes = 2 << 20;
inline constexpr size_t kHalvingDoublingMaxBytesAt4 = 1 << 20;
size_t HalvingDoublingMaxBytes(const std::optional<size_t>& configured, uint32_t protocol_version);

// Pipelined chain from `root` through the other hosts in ring order.
Status ChainBroadcast(const HostGroup& group, int root, uint8_t* buf, size_t bytes);
// Pipelined chain toward `root`; only root's buffer holds the full reduction afterwards.
Status ChainReduce(const HostGroup& group, int root, uint8_t* buf, size_t count, ncclDataType_t type,
                   ncclRedOp_t op);

}  // namespace conduit

#endif  // CONDUIT_DAEMON_COLLECTIVES_ALGORITHMS_H_
