#include "receive_segments.h"

#include "common/release_ring.h"
#include "handoff.h"
#include "real_grpc.h"

namespace conduit::grpcshim {
namespace {

// What a zero-copy slice carries to its destructor.
struct ReleaseCookie {
  std::shared_ptr<ReceiveSegments> owner;
  uint32_t segment;
  uint64_t offset;
};

void ReleaseSlice(void* arg) {
  auto* cookie = static_cast<ReleaseCookie*>(arg);
  TakeOver(cookie);
  cookie->owner->Release(cookie->segment, cookie->offset);
  delete cookie;
}

constexpr uint64_t kMaxReceiveSegment = 16ull << 30;

}  // namespace

ReceiveSegments::ReceiveSegments(std::unique_ptr<ShmSegment> control, Overflow overflow)
    : control_(std::move(control)), overflow_(std::move(overflow)) {}

Status ReceiveSegments::Add(uint32_t segment, int fd, uint64_t size) {
  std::lock_guard<std::mutex> lock(mu_);
  if (segment >= rpcproto::kMaxSegments) return InvalidArgument("receive segment id %u out of range", segment);
  if (segments_.size() <= segment) segments_.resize(segment + 1);
  if (segments_[segment] != nullptr) return InvalidArgument("receive segment %u announced twice", segment);
  auto shm = std::make_unique<ShmSegment>();
  CONDUIT_RETURN_IF_ERROR(shm->Map(fd, size, kMaxReceiveSegment, /*writable=*/false));
  segments_[segment] = std::move(shm);
  return Status::Ok();
}

Status ReceiveSegments::Wrap(uint32_t segment, uint64_t offset, uint64_t len, grpc_byte_buffer** out) {
  const uint8_t* base = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (segment >= segments_.size() || segments_[segment] == nullptr) {
      return InvalidArgument("message in unknown receive segment %u", segment);
    }
    const ShmSegment& shm = *segments_[segment];
    if (offset > shm.size() || len > shm.size() - offset) {
      return InvalidArgument("message [%llu, +%llu) outside receive segment %u", static_cast<unsigned long long>(offset),
                             static_cast<unsigned long long>(len), segment);
    }
    base = shm.data();
  }
  const RealGrpc& g = Real();
  auto* cookie = new ReleaseCookie{shared_from_this(), segment, offset};
  HandOff(cookie);  // gRPC destroys the slice on whichever thread drops it last
  // The program only reads received slices; the mapping is read-only all the same.
  grpc_slice slice = g.grpc_slice_new_with_user_data(const_cast<uint8_t*>(base + offset), len, ReleaseSlice, cookie);
  *out = g.grpc_raw_byte_buffer_create(&slice, 1);
  g.grpc_slice_unref(slice);
  return Status::Ok();
}

void ReceiveSegments::Release(uint32_t segment, uint64_t offset) {
  rpcproto::FreeEntry entry{segment, 0, offset};
  Overflow overflow;
  {
    std::lock_guard<std::mutex> lock(mu_);
    rpcproto::ControlRegion* region = control();
    if (rpcproto::PushRelease(region->to_daemon_head, region->to_daemon_tail, region->to_daemon, &to_daemon_head_, entry)) {
      return;
    }
    overflow = overflow_;
  }
  if (overflow) overflow(entry);
}

void ReceiveSegments::Detach() {
  std::lock_guard<std::mutex> lock(mu_);
  overflow_ = nullptr;
}

}  // namespace conduit::grpcshim
