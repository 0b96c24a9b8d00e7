#include "objects/spare_memory.h"

#include <fcntl.h>
#include <sys/mman.h>

namespace conduit::objects {

SpareMemory::~SpareMemory() { Clear(); }

namespace {

bool SameOwner(const objproto::Owner& a, const objproto::Owner& b) {
  return a.uid == b.uid && a.gid == b.gid && a.access == b.access;
}

}  // namespace

bool SpareMemory::Take(uint64_t size, const objproto::Owner* exposed_owner, Block* out) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = blocks_.begin(); it != blocks_.end(); ++it) {
    if (it->size != size || it->exposed != (exposed_owner != nullptr)) continue;
    if (exposed_owner != nullptr && !SameOwner(it->owner, *exposed_owner)) continue;
    *out = std::move(*it);
    blocks_.erase(it);
    bytes_ -= size;
    ++reused_;
    return true;
  }
  return false;
}

void SpareMemory::Give(Block block) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (block.size > 0 && bytes_ + block.size <= cap_) {
      bytes_ += block.size;
      blocks_.push_back(std::move(block));
      return;
    }
  }
  Release(block);
}

void SpareMemory::Clear() {
  std::vector<Block> blocks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    blocks.swap(blocks_);
    bytes_ = 0;
  }
  for (Block& b : blocks) Release(b);
}

uint64_t SpareMemory::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

uint64_t SpareMemory::reused() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reused_;
}

void SpareMemory::Release(Block& block) {
  if (block.data != nullptr) munmap(block.data, block.size);
  block.data = nullptr;
  block.fd.reset();
}

bool OnlyOpenFile(int probe) {
  // The lease check allows for the requester's own (read-only) open file.
  if (fcntl(probe, F_SETLEASE, F_WRLCK) != 0) return false;  // EAGAIN: held elsewhere
  (void)fcntl(probe, F_SETLEASE, F_UNLCK);
  return true;
}

}  // namespace conduit::objects
