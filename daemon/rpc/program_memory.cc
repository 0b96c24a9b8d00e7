#include "rpc/program_memory.h"

#include <algorithm>

#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#endif

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
  CONDUIT_RETURN_IF_ERROR(control_.Map(fd, rpcproto::kControlRegionBytes, rpcproto::kControlRegionBytes, /*writable=*/true));
  return DupFd(fd, "the RPC control region", &control_fd_);
}

Status ProgramMemory::AttachSend(const rpcproto::SegmentInfo& info, int fd) {
  std::lock_guard<std::mutex> lock(mu_);
  return AttachSendLocked(info, fd);
}

Status ProgramMemory::AttachSendLocked(const rpcproto::SegmentInfo& info, int fd) {
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
  UniqueFd kept;
  CONDUIT_RETURN_IF_ERROR(DupFd(fd, "a send segment", &kept));
  if (send_.size() <= info.segment) {
    send_.resize(info.segment + 1);
    send_fds_.resize(info.segment + 1);
  }
  send_[info.segment] = std::move(shm);
  send_fds_[info.segment] = std::move(kept);
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
  // gRPC frames a message with a 32-bit length, and so do the links between daemons: a
  // larger one (a send segment may be far larger) would reach another daemon as malformed,
  // which ends the link every program shares, or be copied whole where it is delivered.
  if (len > rpcproto::kMaxMessageBytes) {
    return InvalidArgument("a message of %llu bytes, over the %llu a gRPC message can have",
                           static_cast<unsigned long long>(len),
                           static_cast<unsigned long long>(rpcproto::kMaxMessageBytes));
  }
  if (offset > shm->size() || len > shm->size() - offset) {
    return InvalidArgument("message [%llu, +%llu) outside send segment %u", static_cast<unsigned long long>(offset),
                           static_cast<unsigned long long>(len), segment);
  }
  // The release keeps the mapping (and this object) alive while links still send from it.
  std::shared_ptr<ProgramMemory> self = shared_from_this();
  sends_in_flight_.fetch_add(1);
  *out = Message::Shared(shm->data() + offset, len, [self, shm, segment, offset] { self->ReleaseSend(segment, offset); });
  return Status::Ok();
}

void ProgramMemory::ReleaseSend(uint32_t segment, uint64_t offset) {
  rpcproto::FreeEntry entry{segment, 0, offset};
  std::function<void(const rpcproto::FreeEntry&)> overflow;
  {
    std::lock_guard<std::mutex> lock(mu_);
    rpcproto::ControlRegion* region = control();
    const bool pushed =
        rpcproto::PushRelease(region->to_shim_head, region->to_shim_tail, region->to_shim, &to_shim_head_, entry);
    if (!pushed) overflow = overflow_;
  }
  // After the release reached the ring (or the Free frame was sent): a live upgrade waits
  // for this count to be zero before it takes the ring's index.
  if (overflow) overflow(entry);
  sends_in_flight_.fetch_sub(1);
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

void ProgramMemory::HandToProgram() {
#if defined(__SANITIZE_THREAD__)
  __tsan_release(this);
#endif
}

bool ProgramMemory::AllocateReceive(size_t len, uint32_t* segment, uint64_t* offset, uint8_t** data,
                                    std::vector<OutFrame>* announce) {
  std::lock_guard<std::mutex> lock(mu_);
  DrainProgramReleases();
#if defined(__SANITIZE_THREAD__)
  __tsan_acquire(this);  // blocks the program released were written by other threads before
#endif
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
  UniqueFd kept;
  if (!DupFd(fd.get(), "a receive segment", &kept).ok()) return false;
  f.fd = std::move(fd);
  announce->push_back(std::move(f));
  receive_bytes_ += size;
  receive_.push_back({std::move(shm), std::make_unique<ShmHeap>(0, size), std::move(kept)});
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

Status ProgramMemory::Export(Handed* out) {
  std::lock_guard<std::mutex> lock(mu_);
  if (sends_in_flight_.load() != 0) {
    return Status(StatusCode::kAborted, std::to_string(sends_in_flight_.load()) + " message(s) still being sent");
  }
  if (control_.data() == nullptr) return Status::Ok();  // before Hello: nothing mapped
  CONDUIT_RETURN_IF_ERROR(DupFd(control_fd_.get(), "the RPC control region", &out->control));
  for (uint32_t id = 0; id < send_.size(); ++id) {
    if (send_[id] == nullptr) continue;
    Handed::Send h;
    h.id = id;
    h.size = send_[id]->size();
    CONDUIT_RETURN_IF_ERROR(DupFd(send_fds_[id].get(), "a send segment", &h.fd));
    out->send.push_back(std::move(h));
  }
  for (const ReceiveSegment& r : receive_) {
    Handed::Receive h;
    h.size = r.shm->size();
    CONDUIT_RETURN_IF_ERROR(DupFd(r.fd.get(), "a receive segment", &h.fd));
    h.held = r.heap->LiveBlocks();
    out->receive.push_back(std::move(h));
  }
  out->to_shim_head = to_shim_head_;
  out->to_daemon_tail = to_daemon_tail_;
  return Status::Ok();
}

Status ProgramMemory::Import(Handed in) {
  if (!in.control.valid()) return Status::Ok();
  CONDUIT_RETURN_IF_ERROR(MapControl(in.control.get()));
  std::lock_guard<std::mutex> lock(mu_);
  for (Handed::Send& s : in.send) {
    CONDUIT_RETURN_IF_ERROR(AttachSendLocked(rpcproto::SegmentInfo{s.id, 0, s.size}, s.fd.get()));
  }
  if (in.receive.size() > rpcproto::kMaxSegments) return InvalidArgument("%zu receive segments", in.receive.size());
  for (Handed::Receive& r : in.receive) {
    if (r.size > max_receive_bytes_ - std::min(receive_bytes_, max_receive_bytes_)) {
      return InvalidArgument("receive segments past the program's %llu bytes",
                             static_cast<unsigned long long>(max_receive_bytes_));
    }
    auto shm = std::make_unique<ShmSegment>();
    CONDUIT_RETURN_IF_ERROR(shm->Map(r.fd.get(), r.size, max_receive_bytes_, /*writable=*/true));
    auto heap = std::make_unique<ShmHeap>(0, r.size);
    for (const auto& [offset, len] : r.held) {
      if (!heap->Reserve(offset, len)) {
        return InvalidArgument("a held block [%llu, +%llu) that does not fit its receive segment",
                               static_cast<unsigned long long>(offset), static_cast<unsigned long long>(len));
      }
    }
    receive_bytes_ += r.size;
    receive_.push_back({std::move(shm), std::move(heap), std::move(r.fd)});
  }
  to_shim_head_ = in.to_shim_head;
  to_daemon_tail_ = in.to_daemon_tail;
  return Status::Ok();
}

}  // namespace conduit::rpc
