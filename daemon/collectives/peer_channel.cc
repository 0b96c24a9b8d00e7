#include "collectives/peer_channel.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>

#include "collectives/peer_messages.h"
#include "common/busy_poll.h"
#include "common/frame.h"
#include "common/thread_guard.h"
#include "protocol/peer_protocol.h"

namespace conduit {
namespace {

// Bounds one point-to-point message from a peer daemon. A message is read in pieces of
// this size: memory is touched as the bytes arrive, and a receive posted while it comes
// takes over the rest at the next piece.
constexpr uint64_t kMaxP2pBytes = 64ull << 30;
constexpr size_t kP2pPieceBytes = 1u << 20;
// How long an abort notice, or a goodbye, may take to leave for each peer.
constexpr int kAbortNoticeMs = 200;
constexpr int kGoodbyeMs = 1000;

}  // namespace

PeerChannel::PeerChannel(Handler* handler, int timeout_ms)
    : handler_(handler), timeout_ms_(timeout_ms), pause_wake_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

PeerChannel::~PeerChannel() { Close(); }

void PeerChannel::Init(std::vector<int> host_of_rank, int my_host, int nhosts) {
  // Under mu_: an abort on another thread may look at the channel while it is set up. The
  // rest of the channel reads these only after finding a link, which Attach adds later.
  std::lock_guard<std::mutex> lock(mu_);
  host_of_rank_ = std::move(host_of_rank);
  my_host_ = my_host;
  nhosts_ = nhosts;
  send_mu_ = std::vector<std::mutex>(static_cast<size_t>(nhosts));
  links_.resize(static_cast<size_t>(nhosts));
}

int PeerChannel::nhosts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return nhosts_;
}

PeerChannel::Attached PeerChannel::Attach(int host, std::unique_ptr<Link> link) {
  std::lock_guard<std::mutex> lock(mu_);
  if (host < 0 || host >= nhosts_ || links_[host] != nullptr) return Attached::kDuplicate;
  if (closed_) link->Shutdown();  // its reader returns at once
  Link* raw = link.get();
  links_[host] = std::move(link);
  try {
    readers_.emplace_back([this, host, raw] { ReaderLoop(host, raw); });
  } catch (const std::exception& e) {
    // pthread_create failed (RLIMIT_NPROC, memory): the link stays, shut, and never read.
    CLOG_WARN("cannot start a thread to read the link from host %d: %s", host, e.what());
    raw->Shutdown();
    return Attached::kNoReader;
  }
  ++live_readers_;  // under mu_, which the reader takes before it counts itself out
  return Attached::kOk;
}

Link* PeerChannel::LinkOf(int host) const {
  std::lock_guard<std::mutex> lock(mu_);
  return host >= 0 && host < nhosts_ ? links_[host].get() : nullptr;
}

Status PeerChannel::SendMessage(int host, int src, int dst, const void* data, size_t bytes, Deadline deadline) {
  Link* link = LinkOf(host);
  if (link == nullptr) return SystemError("no point-to-point link to host %d", host);
  peerproto::P2pData head{src, dst, bytes};
  FrameHeader h{peerproto::kMagic, peerproto::kVersion, peerproto::kP2pData, sizeof(head), 0};
  std::lock_guard<std::mutex> lock(send_mu_[host]);
  return link->Send({{&h, sizeof(h)}, {&head, sizeof(head)}, {data, bytes}}, deadline);
}

Status PeerChannel::SendControl(int host, uint16_t type, const std::vector<uint8_t>& payload, Deadline deadline) {
  Link* link = LinkOf(host);
  if (link == nullptr) return SystemError("no point-to-point link to host %d", host);
  FrameHeader h{peerproto::kMagic, peerproto::kVersion, type, static_cast<uint32_t>(payload.size()), 0};
  std::lock_guard<std::mutex> lock(send_mu_[host]);
  return link->Send({{&h, sizeof(h)}, {payload.data(), payload.size()}}, deadline);
}

void PeerChannel::TellAborted(const Status& why) {
  WireStatus wire = ToWire(why);
  FrameHeader h{peerproto::kMagic, peerproto::kVersion, peerproto::kAbort, sizeof(wire), 0};
  const int n = nhosts();
  for (int host = 0; host < n; ++host) {
    Link* link = LinkOf(host);
    if (link == nullptr || !send_mu_[host].try_lock()) continue;
    (void)link->Send({{&h, sizeof(h)}, {&wire, sizeof(wire)}}, Deadline::AfterMs(kAbortNoticeMs));
    send_mu_[host].unlock();
  }
}

void PeerChannel::SayGoodbye() {
  peerproto::P2pData bye{-1, -1, 0};
  FrameHeader h{peerproto::kMagic, peerproto::kVersion, peerproto::kP2pData, sizeof(bye), 0};
  const int n = nhosts();
  for (int host = 0; host < n; ++host) {
    Link* link = LinkOf(host);
    if (link == nullptr) continue;
    std::lock_guard<std::mutex> lock(send_mu_[host]);
    (void)link->Send({{&h, sizeof(h)}, {&bye, sizeof(bye)}}, Deadline::AfterMs(kGoodbyeMs));
  }
}

void PeerChannel::Shutdown() {
  std::lock_guard<std::mutex> lock(mu_);
  closed_ = true;
  for (auto& link : links_) {
    if (link) link->Shutdown();
  }
  pause_cv_.notify_all();  // paused readers go on to find their links shut
}

Status PeerChannel::Pause(Deadline deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  for (const auto& link : links_) {
    if (link && link->socket_fd() < 0) return InternalError("a point-to-point link without a socket cannot be handed over");
  }
  if (!pause_wake_.valid()) return SystemError("no eventfd to pause the point-to-point readers");
  pausing_ = true;
  const uint64_t one = 1;
  (void)!write(pause_wake_.get(), &one, sizeof(one));
  pause_cv_.notify_all();
  const bool stopped = pause_cv_.wait_until(lock, deadline.when(), [this] { return paused_readers_ >= live_readers_; });
  if (stopped) return Status::Ok();
  const int busy = live_readers_ - paused_readers_;
  lock.unlock();
  Resume();
  return Status(StatusCode::kAborted, std::to_string(busy) + " point-to-point link(s) are in the middle of a message");
}

void PeerChannel::Resume() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!pausing_) return;
  pausing_ = false;
  uint64_t value;
  (void)!read(pause_wake_.get(), &value, sizeof(value));
  pause_cv_.notify_all();
}

Status PeerChannel::DupSockets(std::vector<UniqueFd>* per_host) const {
  std::lock_guard<std::mutex> lock(mu_);
  per_host->clear();
  per_host->resize(links_.size());
  for (size_t h = 0; h < links_.size(); ++h) {
    if (!links_[h]) continue;
    CONDUIT_RETURN_IF_ERROR(DupFd(links_[h]->socket_fd(), "a point-to-point link", &(*per_host)[h]));
  }
  return Status::Ok();
}

void PeerChannel::Close() {
  Shutdown();
  std::vector<std::thread> readers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    readers.swap(readers_);
  }
  for (auto& t : readers) t.join();
}

std::vector<std::pair<int, std::string>> PeerChannel::Peers() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::pair<int, std::string>> out;
  for (size_t h = 0; h < links_.size(); ++h) {
    if (links_[h]) out.emplace_back(static_cast<int>(h), links_[h]->peer_name());
  }
  return out;
}

void PeerChannel::ReaderLoop(int host, Link* link) {
  Status st = SystemError("point-to-point link from daemon %s failed", link->peer_name().c_str());
  // std::bad_alloc when memory runs out for a large message: this communicator fails, the
  // daemon and every other communicator go on.
  RunGuarded("point-to-point reader", [&] { st = Read(host, link); });
  {
    std::lock_guard<std::mutex> lock(mu_);
    --live_readers_;
    pause_cv_.notify_all();
  }
  if (!st.ok()) handler_->OnLinkFailed(host, st);
}

Status PeerChannel::AwaitFrame(Link* link) {
  const int fd = link->socket_fd();
  if (fd < 0) return Status::Ok();  // the first Recv waits (a link that cannot pause)
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (pausing_ && !closed_) {
        ++paused_readers_;
        pause_cv_.notify_all();
        pause_cv_.wait(lock, [this] { return !pausing_ || closed_; });
        --paused_readers_;
        continue;
      }
      if (closed_) return Status::Ok();  // the Recv fails on the shut link
    }
    // Spinning first, within the busy-poll budget (common/busy_poll.h): messages come in
    // bursts (a group's sends), and a reader that blocks is woken by the kernel for each
    // one, a wake-up on the small-call path. At most one budget per frame, and none on an
    // idle link after that.
    pollfd fds[2] = {{fd, POLLIN, 0}, {pause_wake_.get(), POLLIN, 0}};
    int n = SpinPoll(fds, 2);
    if (n == 0) n = poll(fds, 2, -1);
    if (n < 0 && errno != EINTR) return SystemError("poll of a point-to-point link: %s", strerror(errno));
    if (n <= 0 || fds[1].revents != 0) continue;  // a pause began: stop before reading
    if (fds[0].revents != 0) return Status::Ok();
  }
}

Status PeerChannel::Read(int host, Link* link) {
  for (;;) {
    // The link may idle between frames for as long as the communicator lives, but once a
    // frame has begun the rest of it must follow within the timeout.
    FrameHeader h{};
    auto* head_bytes = reinterpret_cast<uint8_t*>(&h);
    CONDUIT_RETURN_IF_ERROR(AwaitFrame(link));
    CONDUIT_RETURN_IF_ERROR(link->Recv({{head_bytes, 1}}, Deadline::Never()));
    CONDUIT_RETURN_IF_ERROR(link->Recv({{head_bytes + 1, sizeof(h) - 1}}, Deadline::AfterMs(timeout_ms_)));
    if (Status bad = CheckP2pFrameHeader(h); !bad.ok()) {
      return RemoteError("daemon %s: %s", link->peer_name().c_str(), bad.message().c_str());
    }
    const Deadline rest = Deadline::AfterMs(timeout_ms_);
    if (h.type == peerproto::kAbort) {
      WireStatus wire{};
      CONDUIT_RETURN_IF_ERROR(link->Recv({{&wire, sizeof(wire)}}, rest));
      Status why = FromWire(wire);
      if (why.ok()) why = RemoteError("daemon %s aborted the communicator", link->peer_name().c_str());
      handler_->OnPeerAborted(why);
      return Status::Ok();
    }
    if (h.type != peerproto::kP2pData) {  // reconfiguration
      std::vector<uint8_t> payload(h.length);
      CONDUIT_RETURN_IF_ERROR(link->Recv({{payload.data(), payload.size()}}, rest));
      CONDUIT_RETURN_IF_ERROR(handler_->OnControl(host, h.type, payload));
      continue;
    }
    peerproto::P2pData head{};
    CONDUIT_RETURN_IF_ERROR(link->Recv({{&head, sizeof(head)}}, rest));
    if (head.src_rank == -1) return Status::Ok();  // the peer destroyed the communicator cleanly
    if (Status bad = CheckP2pData(head, host_of_rank_, host, my_host_, kMaxP2pBytes); !bad.ok()) {
      return RemoteError("daemon %s: %s", link->peer_name().c_str(), bad.message().c_str());
    }
    uint8_t* into = nullptr;
    CONDUIT_RETURN_IF_ERROR(handler_->ReserveP2p(head.src_rank, head.dst_rank, head.bytes, &into));
    // However the message ends, the communicator hears of it before the next one.
    struct Report {
      Handler* handler;
      const peerproto::P2pData& head;
      bool reported = false;
      ~Report() {
        if (!reported) handler->OnP2pFilled(head.src_rank, head.dst_rank, false);
      }
    } report{handler_, head};
    // Its sender waited while we did, so the bytes get a whole timeout from here.
    const Deadline payload = Deadline::AfterMs(timeout_ms_);
    // Into a posted receive's buffer, which stays mapped until we report (the receiving
    // group's end waits for it), or else into memory of ours: the room is counted (under
    // the cap, or a receive of this length is posted), so the address space is taken
    // whole, but pages only piece by piece as the bytes arrive: an announced length costs
    // what arrived. Between pieces, a receive posted since takes over the rest.
    std::vector<uint8_t> bytes;
    if (into == nullptr) bytes.reserve(head.bytes);
    for (uint64_t at = 0; at < head.bytes;) {
      if (into == nullptr && at > 0 && (into = handler_->RetargetP2p(head.src_rank, head.dst_rank, at)) != nullptr) {
        memcpy(into, bytes.data(), at);
        bytes = std::vector<uint8_t>();
      }
      const size_t piece = static_cast<size_t>(std::min<uint64_t>(head.bytes - at, kP2pPieceBytes));
      if (into == nullptr) bytes.resize(at + piece);
      uint8_t* to = into != nullptr ? into + at : bytes.data() + at;
      CONDUIT_RETURN_IF_ERROR(link->Recv({{to, piece}}, payload));
      at += piece;
    }
    if (into != nullptr) {
      handler_->OnP2pFilled(head.src_rank, head.dst_rank, true);
    } else {
      handler_->OnP2pMessage(head.src_rank, head.dst_rank, std::move(bytes));
    }
    report.reported = true;
  }
}

}  // namespace conduit
