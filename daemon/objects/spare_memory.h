// SpareMemory: the memfds of a reduce's partial results, kept after their copy is gone so
// that the next partial result of the same size reuses them instead of new pages.
//
// Why only those: a fresh memfd's pages are allocated and zeroed as they are first written,
// which on fast links costs the daemon more CPU than the copies themselves
// (docs/benchmarks.md, "Object memory on fast links"). A partial result never leaves the
// daemon: no program gets its descriptor (Get refuses internal ids) and a live upgrade
// does not hand it over. So nobody can still read a reused memfd's old bytes, and a new
// partial result's readers see only what its writer marked ready. Memfds that programs or
// the next daemon may hold are never reused.
#ifndef CONDUIT_DAEMON_OBJECTS_SPARE_MEMORY_H_
#define CONDUIT_DAEMON_OBJECTS_SPARE_MEMORY_H_

#include <cstdint>
#include <mutex>
#include <vector>

#include "common/fd_io.h"

namespace conduit::objects {

class SpareMemory {
 public:
  // A memfd of `size` bytes and the daemon's writable mapping of all of it.
  struct Block {
    UniqueFd fd;
    uint8_t* data = nullptr;
    uint64_t size = 0;
  };

  // Keeps at most `cap_bytes` in spare blocks.
  explicit SpareMemory(uint64_t cap_bytes) : cap_(cap_bytes) {}
  ~SpareMemory();
  SpareMemory(const SpareMemory&) = delete;
  SpareMemory& operator=(const SpareMemory&) = delete;

  // A spare block of exactly `size` bytes, if there is one.
  bool Take(uint64_t size, Block* out);
  // Keeps `block` for reuse, or unmaps and closes it when that would pass the cap.
  void Give(Block block);
  // Unmaps and closes every spare block (the store needs the memory).
  void Clear();
  uint64_t bytes() const;

 private:
  static void Release(Block& block);

  const uint64_t cap_;
  mutable std::mutex mu_;
  std::vector<Block> blocks_;
  uint64_t bytes_ = 0;
};

}  // namespace conduit::objects

#endif  // CONDUIT_DAEMON_OBJECTS_SPARE_MEMORY_H_
