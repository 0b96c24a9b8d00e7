#include "collectives/work_pool.h"

#include <algorithm>
#include <new>

namespace conduit {

std::atomic<uint64_t> WorkPool::total_{0};
std::atomic<uint64_t> WorkPool::kept_total_{0};

WorkPool::~WorkPool() { Free(); }

void WorkPool::Free() {
  if (bytes_ == 0) return;
  if (kept_) kept_total_.fetch_sub(bytes_, std::memory_order_relaxed);
  kept_ = false;
  buffer_.reset();
  total_.fetch_sub(bytes_, std::memory_order_relaxed);
  bytes_ = 0;
}

Status WorkPool::Acquire(size_t bytes, uint8_t** out) {
  bytes = std::max<size_t>(bytes, 1);
  if (bytes <= bytes_) {
    if (kept_) kept_total_.fetch_sub(bytes_, std::memory_order_relaxed);
    kept_ = false;
    *out = buffer_.get();
    return Status::Ok();
  }
  Free();  // before taking more: never hold both
  uint64_t seen = total_.load(std::memory_order_relaxed);
  do {
    if (bytes > kTotalBytes - std::min<uint64_t>(seen, kTotalBytes)) {
      return Status(StatusCode::kResourceExhausted,
                    "no daemon memory for a reduction in ncclMemAlloc'd buffers: it needs " + std::to_string(bytes) +
                        " bytes and this daemon's reductions in such buffers hold " + std::to_string(seen) + " of " +
                        std::to_string(kTotalBytes) + " at once");
    }
  } while (!total_.compare_exchange_weak(seen, seen + bytes, std::memory_order_relaxed));
  buffer_.reset(new (std::nothrow) uint8_t[bytes]);
  if (buffer_ == nullptr) {
    total_.fetch_sub(bytes, std::memory_order_relaxed);
    return Status(StatusCode::kResourceExhausted, "out of memory for a " + std::to_string(bytes) + "-byte work buffer");
  }
  bytes_ = bytes;
  *out = buffer_.get();
  return Status::Ok();
}

void WorkPool::Release() {
  if (bytes_ == 0 || kept_) return;
  uint64_t seen = kept_total_.load(std::memory_order_relaxed);
  do {
    if (bytes_ > kKeepBytes || seen + bytes_ > kKeepTotalBytes) {
      Free();
      return;
    }
  } while (!kept_total_.compare_exchange_weak(seen, seen + bytes_, std::memory_order_relaxed));
  kept_ = true;
}

}  // namespace conduit
