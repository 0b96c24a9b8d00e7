#include "rpc/program_memory.h"

#include <algorithm>

#include "common/log.h"
#include "common/release_ring.h"
#include "protocol/shim_protocol.h"

namespace conduit::rpc {
namespace {

constexpr uint64_t kFirstReceiveSegment = 8ull << 20;
constexpr uint64_t kMaxSendSegment = 16ull << 30;

}  // namespace

ProgramMemory::ProgramMemory(std::function<void(const rpcproto::FreeEntry&)> overflow, uint64_t max_receive_bytes,
                             uint64_t max_send_bytes)
    : overflow_(std::move(overflow)), max_receive_bytes_(max_receive_bytes), max_send_bytes_(max_send_bytes) {}

Status ProgramMemory::MapControl(int fd) {
  return control_.Map(fd, rpcproto::kControlRegionBytes, rpcproto::kControlRegionBytes, /*writable=*/true);
}

Status ProgramMemory::AttachSend(const rpcproto::SegmentInfo& info, int fd) {
  std::lock_guard<std::mutex> lock(mu_);
  if (info.segment >= rpcproto::kMaxSegments) return InvalidArgument("send segment id %u out of range", info.segment);
  if (info.segment < send_.size() && send_[info.segment] != nullptr) {
    return InvalidArgument("send segment %u attached twice", info.segment);
  }
  if (info.size > max_send_bytes_ - std::min(send_bytes_, max_send_bytes_)) {
    return InvalidArgument("send segment %u of %llu bytes would take this program past %llu bytes of shared memory",
                           info.segment, static_cast<unsigned long long>(info.size),
                           static_cast<unsigned long long>(max_send_bytes_));
  }
  auto shm = std::make_shared<ShmSegment>();
  CONDUIT_RETURN_IF_ERROR(shm->Map(fd, info.size, kMaxSendSegment, /*writable=*/false));
  if (send_.size() <= info.segment) send_.resize(info.segment + 1);
  send_[info.segment] = std::move(shm);
  send_bytes_ += info.size;
  return Status::Ok();
}

Status ProgramMemory::SendMessage(uint32_t segment, uint64_t offset, uint64_t len, Message* out) {
  std::shared_ptr<ShmSegment> shm;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (segment < send_.size()) shm = send_[segment];
  }
  if (shm == nullptr) return InvalidArgument("message in unknown send segment %u", segment);
  if (offset > shm->size() || len > shm->size() - offset) {
    return InvalidArgument("message [%llu, +%llu) outside send segment %u", static_cast<unsigned long long>(offset),
                           static_cast<unsigned long long>(len), segment);
  }
  // The release keeps the mapping (and this object) alive while links still send from it.
  std::shared_ptr<ProgramMemory> self = shared_from_this();
  *out = Message::Shared(shm->data() + offset, len, [self, shm, segment, offset] { self->ReleaseSend(segment, offset); });
  return Status::Ok();
}

void ProgramMemory::ReleaseSend(uint32_t segment, uint64_t offset) {
  rpcproto::FreeEntry entry{segment, 0, offset};
  std::function<void(const rpcproto::FreeEntry&)> overflow;
  {
    std::lock_guard<std::mutex> lock(mu_);
    rpcproto::ControlRegion* region = control();
    if (rpcproto::PushRelease(region->to_shim_head, region->to_shim_tail, region->to_shim, &to_shim_head_, entry)) return;
    overflow = overflow_;
  }
  if (overflow) overflow(entry);
}

void ProgramMemory::DrainProgramReleases() {
  rpcproto::ControlRegion* region = control();
  bool sane = rpcproto::DrainReleases(region->to_daemon_head, region->to_daemon_tail, region->to_daemon,
                                      &to_daemon_tail_, [&](const rpcproto::FreeEntry& e) { FreeReceiveLocked(e); });
  if (!sane && !warned_) {
    CLOG_WARN("program corrupted its release ring; ignoring it");
    warned_ = true;
  }
}

void ProgramMemory::FreeReceiveLocked(const rpcproto::FreeEntry& e) {
  if (e.segment >= receive_.size() || !receive_[e.segment].heap->Free(e.offset)) {
    if (!warned_) {
      CLOG_WARN("program released a receive block it does not hold (segment %u offset %llu)", e.segment,
                static_cast<unsigned long long>(e.offset));
    }
    warned_ = true;
  }
}

bool ProgramMemory::AllocateReceive(size_t len, uint32_t* segment, uint64_t* offset, uint8_t** data,
                                    std::vector<OutFrame>* announce) {
  std::lock_guard<std::mutex> lock(mu_);
  DrainProgramReleases();
  for (uint32_t i = 0; i < receive_.size(); ++i) {
    if (receive_[i].heap->Allocate(len, offset)) {
      *segment = i;
      *data = receive_[i].shm->data() + *offset;
      return true;
    }
  }
  if (receive_.size() >= rpcproto::kMaxSegments) return false;
  uint64_t size = receive_.empty() ? kFirstReceiveSegment : receive_.back().shm->size() * 2;
  while (size < len + ShmHeap::kAlign) size *= 2;
  if (receive_bytes_ + size > max_receive_bytes_) return false;
  auto shm = std::make_unique<ShmSegment>();
  UniqueFd fd;
  Status st = shm->Create("conduitd-rpc-receive", size, &fd);
  if (!st.ok()) {
    CLOG_WARN("cannot create a receive segment: %s", st.message().c_str());
    return false;
  }
  uint32_t id = static_cast<uint32_t>(receive_.size());
  rpcproto::SegmentInfo info{id, 0, size};
  OutFrame f;
  f.head.assign(reinterpret_cast<const char*>(&info), sizeof(info));
  PutFrameHeader(&f, shimproto::kMagic, shimproto::kVersion, rpcproto::kAddSegment, 0, sizeof(info));
  f.fd = std::move(fd);
  announce->push_back(std::move(f));
  receive_bytes_ += size;
  receive_.push_back({std::move(shm), std::make_unique<ShmHeap>(0, size)});
  if (!receive_.back().heap->Allocate(len, offset)) return false;
  *segment = id;
  *data = receive_.back().shm->data() + *offset;
  return true;
}

void ProgramMemory::FreeReceive(uint32_t segment, uint64_t offset) {
  std::lock_guard<std::mutex> lock(mu_);
  if (segment < receive_.size()) receive_[segment].heap->Free(offset);
}

void ProgramMemory::ProgramReleased(const rpcproto::FreeEntry& e) {
  std::lock_guard<std::mutex> lock(mu_);
  FreeReceiveLocked(e);
}

void ProgramMemory::Detach() {
  std::lock_guard<std::mutex> lock(mu_);
  overflow_ = nullptr;
}

}  // namespace conduit::rpc
