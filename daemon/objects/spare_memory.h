// SpareMemory: the memfds of copies the daemon wrote itself (fetched copies, reduce
// results, partial results), kept after their copy is gone so that the next copy of the
// same size reuses them instead of new pages.
//
// Why: a fresh memfd's pages are allocated and zeroed as they are first written, which on
// fast links costs the daemon more CPU than the copies themselves (docs/benchmarks.md,
// "Object memory on fast links").
//
// Who may see a reused memfd's old bytes decides what it may be reused for:
//  * A reduce's partial result never leaves the daemon: no program gets its descriptor
//    (Get refuses internal ids) and a live upgrade does not hand it over. Its memfd is
//    reused for partial results only.
//  * A copy programs could read ("exposed") is given back only when no open file of it is
//    left outside the daemon (OnlyOpenFile: no descriptor, mapping or descriptor in
//    flight), so no program sees an object's bytes change under it. It is reused only for
//    a copy with the same owner and access (objproto::Owner): whoever could read the old
//    bytes can read the new ones, so even pages a program kept without a file (spliced
//    into a pipe, say) show nothing it was not allowed to read. A new copy's readers see
//    what its writer marked ready; before that, a copying Get's mapping may show the old
//    object's bytes instead of zeros.
// Memfds a live upgrade handed to the next daemon, and Puts' memfds (their creator had a
// writable descriptor), are never given back.
#ifndef CONDUIT_DAEMON_OBJECTS_SPARE_MEMORY_H_
#define CONDUIT_DAEMON_OBJECTS_SPARE_MEMORY_H_

#include <cstdint>
#include <mutex>
#include <vector>

#include "common/fd_io.h"
#include "protocol/object_protocol.h"

namespace conduit::objects {

class SpareMemory {
 public:
  // A memfd of `size` bytes and the daemon's writable mapping of all of it.
  struct Block {
    UniqueFd fd;
    uint8_t* data = nullptr;
    uint64_t size = 0;
    bool exposed = false;     // programs could read it: reused only for `owner`'s copies
    objproto::Owner owner{};  // with `exposed`
  };

  // Keeps at most `cap_bytes` in spare blocks.
  explicit SpareMemory(uint64_t cap_bytes) : cap_(cap_bytes) {}
  ~SpareMemory();
  SpareMemory(const SpareMemory&) = delete;
  SpareMemory& operator=(const SpareMemory&) = delete;

  // A spare block of exactly `size` bytes, if there is one: for a partial result
  // (`exposed_owner` null) one that never left the daemon, for a copy programs may read one
  // whose earlier readers were `*exposed_owner`'s.
  bool Take(uint64_t size, const objproto::Owner* exposed_owner, Block* out);
  // Keeps `block` for reuse, or unmaps and closes it when that would pass the cap.
  void Give(Block block);
  // Unmaps and closes every spare block (the store needs the memory).
  void Clear();
  uint64_t bytes() const;
  // Blocks Take handed out, since start.
  uint64_t reused() const;

 private:
  static void Release(Block& block);

  const uint64_t cap_;
  mutable std::mutex mu_;
  std::vector<Block> blocks_;
  uint64_t bytes_ = 0;
  uint64_t reused_ = 0;
};

// `probe` is a read-only descriptor of a memfd that the caller has just reopened through
// /proc (LocalObject::ReadOnlyFd). True when the memfd's file is open nowhere else: no
// other process (nor this one) holds a descriptor opened through /proc, a mapping of one,
// or one in flight over a socket. The kernel answers: a write lease is granted only while
// no open file of the inode but the probe exists (fcntl(2), F_SETLEASE). The memfd's own
// open file is not counted by the lease check (memfd_create makes it without the open
// counts), which is why programs must only ever get descriptors reopened through /proc
// and why a memfd handed over by dup is never given back.
bool OnlyOpenFile(int probe);

}  // namespace conduit::objects

#endif  // CONDUIT_DAEMON_OBJECTS_SPARE_MEMORY_H_
