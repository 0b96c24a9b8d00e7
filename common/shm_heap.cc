#include "common/shm_heap.h"

namespace conduit {

ShmHeap::ShmHeap(uint64_t base, uint64_t size) {
  uint64_t start = (base + kAlign - 1) & ~(kAlign - 1);
  capacity_ = size > start ? (size - start) & ~(kAlign - 1) : 0;
  if (capacity_ > 0) InsertFree(start, capacity_);
}

void ShmHeap::InsertFree(uint64_t offset, uint64_t len) {
  free_by_offset_.emplace(offset, len);
  free_by_length_.emplace(len, offset);
}

void ShmHeap::EraseFree(std::map<uint64_t, uint64_t>::iterator it) {
  auto range = free_by_length_.equal_range(it->second);
  for (auto l = range.first; l != range.second; ++l) {
    if (l->second == it->first) {
      free_by_length_.erase(l);
      break;
    }
  }
  free_by_offset_.erase(it);
}

bool ShmHeap::Fits(uint64_t len) const {
  if (len == 0) len = 1;
  if (len > capacity_) return false;
  len = (len + kAlign - 1) & ~(kAlign - 1);
  return free_by_length_.lower_bound(len) != free_by_length_.end();
}

bool ShmHeap::Allocate(uint64_t len, uint64_t* offset) {
  if (len == 0) len = 1;
  if (len > capacity_) return false;
  len = (len + kAlign - 1) & ~(kAlign - 1);
  auto best = free_by_length_.lower_bound(len);
  if (best == free_by_length_.end()) return false;
  uint64_t at = best->second;
  uint64_t have = best->first;
  EraseFree(free_by_offset_.find(at));
  if (have > len) InsertFree(at + len, have - len);
  live_.emplace(at, len);
  used_ += len;
  *offset = at;
  return true;
}

bool ShmHeap::Free(uint64_t offset) {
  auto live = live_.find(offset);
  if (live == live_.end()) return false;
  uint64_t len = live->second;
  live_.erase(live);
  used_ -= len;
  // Merge with the free neighbours on both sides.
  auto next = free_by_offset_.lower_bound(offset);
  if (next != free_by_offset_.end() && next->first == offset + len) {
    len += next->second;
    EraseFree(next);
  }
  auto prev = free_by_offset_.lower_bound(offset);
  if (prev != free_by_offset_.begin()) {
    --prev;
    if (prev->first + prev->second == offset) {
      offset = prev->first;
      len += prev->second;
      EraseFree(prev);
    }
  }
  InsertFree(offset, len);
  return true;
}

bool ShmHeap::Reserve(uint64_t offset, uint64_t len) {
  if (len == 0 || len % kAlign != 0 || offset % kAlign != 0 || len > capacity_) return false;
  // The free range holding offset: the last one starting at or before it.
  auto it = free_by_offset_.upper_bound(offset);
  if (it == free_by_offset_.begin()) return false;
  --it;
  const uint64_t at = it->first, have = it->second;
  if (offset - at > have || len > have - (offset - at)) return false;
  EraseFree(it);
  if (offset > at) InsertFree(at, offset - at);
  if (at + have > offset + len) InsertFree(offset + len, at + have - offset - len);
  live_.emplace(offset, len);
  used_ += len;
  return true;
}

}  // namespace conduit
