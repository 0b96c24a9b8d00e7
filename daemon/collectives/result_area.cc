#include "collectives/result_area.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>

namespace conduit {
namespace {

// Area numbers differ between areas of one process and between processes (a shim may still
// hold an area of the daemon this one replaced in a live upgrade): the pid above a counter.
uint64_t NextAreaNumber() {
  static std::atomic<uint32_t> counter{0};
  return (static_cast<uint64_t>(getpid()) << 32) | (counter.fetch_add(1) + 1);
}

}  // namespace

Status ResultArea::Attach(uint64_t min_bytes, uint64_t max_bytes, UniqueFd* fd, uint64_t* size, uint64_t* number) {
  if (min_bytes == 0) return InvalidArgument("a result area of 0 bytes asked for");
  if (min_bytes > max_bytes) {
    return InvalidArgument("a result area of %llu bytes asked for, above this daemon's segment limit (%llu)",
                           static_cast<unsigned long long>(min_bytes), static_cast<unsigned long long>(max_bytes));
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (current_ == nullptr || current_->segment.size() < min_bytes) {
    // Geometric sizes, as the shims' segments: growing collectives replace it a few times.
    uint64_t bytes = uint64_t{1} << 20;
    while (bytes < min_bytes) bytes *= 2;
    bytes = std::min(bytes, max_bytes);
    auto area = std::make_shared<Area>();
    CONDUIT_RETURN_IF_ERROR(area->segment.Create("conduit-result", bytes, &area->fd));
    // Only the mapping made above may write: the programs get the descriptor, and
    // F_SEAL_FUTURE_WRITE refuses them any writable mapping of it.
    if (fcntl(area->fd.get(), F_ADD_SEALS, F_SEAL_FUTURE_WRITE | F_SEAL_SEAL) != 0) {
      return SystemError("cannot seal a result area against writers: %s", strerror(errno));
    }
    area->number = NextAreaNumber();
    current_ = std::move(area);
  }
  int dup = fcntl(current_->fd.get(), F_DUPFD_CLOEXEC, 0);
  if (dup < 0) return SystemError("cannot duplicate a result area's descriptor: %s", strerror(errno));
  fd->reset(dup);
  *size = current_->segment.size();
  *number = current_->number;
  return Status::Ok();
}

std::shared_ptr<ResultArea::Area> ResultArea::Current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return current_;
}

}  // namespace conduit
