#include "objects/spare_memory.h"

#include <sys/mman.h>

namespace conduit::objects {

SpareMemory::~SpareMemory() { Clear(); }

bool SpareMemory::Take(uint64_t size, Block* out) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = blocks_.begin(); it != blocks_.end(); ++it) {
    if (it->size != size) continue;
    *out = std::move(*it);
    blocks_.erase(it);
    bytes_ -= size;
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

void SpareMemory::Release(Block& block) {
  if (block.data != nullptr) munmap(block.data, block.size);
  block.data = nullptr;
  block.fd.reset();
}

}  // namespace conduit::objects
