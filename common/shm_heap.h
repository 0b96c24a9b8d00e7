// ShmHeap: hands out blocks of one shared segment by offset (best fit, coalescing frees).
//
// The owner of a segment allocates; the other side reads the block and says when it is done
// (a release ring entry). Releases come from the other process, so Free checks that the
// offset names a live block and refuses anything else instead of corrupting the heap.
// Not thread-safe: the owner serialises calls.
#ifndef CONDUIT_DAEMON_COMMON_SHM_HEAP_H_
#define CONDUIT_DAEMON_COMMON_SHM_HEAP_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <unordered_map>

namespace conduit {

class ShmHeap {
 public:
  static constexpr uint64_t kAlign = 64;

  // Manages [base, base + size) of a segment (base leaves room for a header).
  ShmHeap(uint64_t base, uint64_t size);

  // Offset of a block of at least `len` bytes, or false when none is free.
  bool Allocate(uint64_t len, uint64_t* offset);
  // Whether Allocate(len) would succeed now.
  bool Fits(uint64_t len) const;
  // Releases a block from Allocate; false if `offset` is not a live block.
  bool Free(uint64_t offset);
  // A live upgrade: the live blocks (offset -> length), and, in the new process, a block
  // taken again at its place; false (nothing taken) unless [offset, +len) is aligned and
  // free in this heap.
  std::map<uint64_t, uint64_t> LiveBlocks() const { return {live_.begin(), live_.end()}; }
  bool Reserve(uint64_t offset, uint64_t len);

  uint64_t capacity() const { return capacity_; }
  uint64_t used() const { return used_; }
  size_t live_blocks() const { return live_.size(); }

 private:
  void InsertFree(uint64_t offset, uint64_t len);
  void EraseFree(std::map<uint64_t, uint64_t>::iterator it);

  uint64_t capacity_;
  uint64_t used_ = 0;
  std::map<uint64_t, uint64_t> free_by_offset_;          // offset -> length
  std::multimap<uint64_t, uint64_t> free_by_length_;     // length -> offset
  std::unordered_map<uint64_t, uint64_t> live_;          // offset -> length
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_COMMON_SHM_HEAP_H_
