#include "objects/transfer.h"

#include <sys/socket.h>

#include <algorithm>
#include <chrono>

#include "common/frame.h"
#include "common/log.h"
#include "objects/messages.h"
#include "protocol/peer_protocol.h"
#include "security/peer_security.h"
#include "transport/tcp.h"

namespace conduit::objects {
namespace {

constexpr int kConnectTimeoutMs = 2000;
constexpr int kIdleConnectionMs = 600 * 1000;
constexpr size_t kMaxIdlePerPeer = 8;
constexpr int kInternalWaitMs = 5000;
constexpr int kCopyWaitMs = 1000;

}  // namespace

Status DataPool::Take(const std::string& addr, Deadline connect_by, Conn* out) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto& v = idle_[addr];
    if (!v.empty()) {
      *out = std::move(v.back());
      v.pop_back();
      return Status::Ok();
    }
  }
  PeerIdentity peer;
  Status st = security_->DialOnce(addr, connect_by, /*sealable=*/true, out, &peer);
  if (st.ok() && peer.authenticated() && peer.daemon != addr) {
    st = RemoteError("the daemon answering at %s is %s", addr.c_str(), peer.daemon.c_str());
  }
  if (!st.ok()) return FromConduit(st, objproto::kUnavailable);
  TuneTcpSocket(out->fd(), 0);
  return Status::Ok();
}

void DataPool::Return(const std::string& addr, Conn conn) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& v = idle_[addr];
  if (v.size() < kMaxIdlePerPeer) v.push_back(std::move(conn));
}

FetchStream::~FetchStream() = default;

Status FetchStream::Open(const std::string& sender, const std::string& id, uint64_t offset, int timeout_ms,
                         Deadline stop_by) {
  sender_ = sender;
  timeout_ms_ = timeout_ms;
  // A pooled connection may have been closed by the sender meanwhile: one retry on a new one.
  for (int attempt = 0; attempt < 2; ++attempt) {
    Conn taken;
    CONDUIT_RETURN_IF_ERROR(pool_->Take(sender, Deadline::AfterMs(kConnectTimeoutMs), &taken));
    {
      std::lock_guard<std::mutex> lock(fd_mu_);
      if (aborted_) return Err(objproto::kUnavailable, "fetch of %s aborted", Printable(id).c_str());
      conn_ = std::move(taken);
    }
    objproto::Fetch f{};
    f.id = IdToWire(id);
    f.offset = offset;
    f.timeout_ms = static_cast<uint32_t>(timeout_ms);
    const Deadline by = Deadline::Earlier(Deadline::AfterMs(timeout_ms), stop_by);
    Status st = WriteFrame(conn_, peerproto::kMagic, peerproto::kVersion, objproto::kFetch, 0, &f, sizeof(f), by);
    Frame reply;
    if (st.ok()) st = ReadFrame(conn_, peerproto::kMagic, peerproto::kVersion, objproto::kMaxPayload, &reply, by);
    if (!st.ok()) {
      {
        std::lock_guard<std::mutex> lock(fd_mu_);
        conn_ = Conn();
      }
      if (attempt == 0 && !stop_by.expired()) continue;
      return Err(objproto::kUnavailable, "fetch of %s from %s: %s", Printable(id).c_str(), sender.c_str(),
                 st.message().c_str());
    }
    objproto::FetchReply r{};
    if (reply.header.type != objproto::kFetchReply || !Decode(reply.payload, &r)) {
      std::lock_guard<std::mutex> lock(fd_mu_);
      conn_ = Conn();
      return Err(objproto::kInternal, "malformed Fetch reply from %s", sender.c_str());
    }
    Status ost = FromObjectWire(r.status);
    if (!ost.ok()) {
      std::lock_guard<std::mutex> lock(fd_mu_);
      pool_->Return(sender, std::move(conn_));
      return ost;
    }
    size_ = r.size;
    left_ = r.size >= offset ? r.size - offset : 0;
    return Status::Ok();
  }
  return Err(objproto::kUnavailable, "fetch of %s from %s failed", Printable(id).c_str(), sender.c_str());
}

Status FetchStream::Read(uint8_t* dst, size_t len, Deadline stop_by) {
  if (!conn_.valid() || broken_) return Err(objproto::kUnavailable, "fetch stream from %s is closed", sender_.c_str());
  Status st = conn_.ReadFull(dst, len, Deadline::Earlier(Deadline::AfterMs(timeout_ms_), stop_by));
  if (!st.ok()) {
    broken_ = true;  // the descriptor stays owned until Finish or destruction (Abort may race)
    return Err(objproto::kUnavailable, "transfer from daemon %s broke: %s", sender_.c_str(), st.message().c_str());
  }
  left_ -= std::min<uint64_t>(left_, len);
  return Status::Ok();
}

void FetchStream::Abort() {
  std::lock_guard<std::mutex> lock(fd_mu_);
  aborted_ = true;
  conn_.Shutdown();
}

void FetchStream::Finish() {
  std::lock_guard<std::mutex> lock(fd_mu_);
  if (conn_.valid() && left_ == 0 && !broken_ && !aborted_) pool_->Return(sender_, std::move(conn_));
  conn_ = Conn();
}

void TransferStats::NoteTransfer(uint64_t bytes, double secs) {
  if (bytes < (1u << 20) || secs <= 0) return;
  std::lock_guard<std::mutex> lock(bw_mu_);
  double bw = bytes / secs;
  bandwidth_Bps_ = bandwidth_Bps_ == 0 ? bw : 0.7 * bandwidth_Bps_ + 0.3 * bw;
}

double TransferStats::bandwidth_Bps() const {
  std::lock_guard<std::mutex> lock(bw_mu_);
  return bandwidth_Bps_;
}

size_t PipelineBlock(size_t block_bytes, uint64_t size) {
  constexpr size_t kMinBlock = 32 << 10;
  constexpr uint64_t kBlocksPerObject = 16;
  return static_cast<size_t>(std::min<uint64_t>(block_bytes, std::max<uint64_t>(kMinBlock, size / kBlocksPerObject)));
}

Status FetchInto(DataPool* pool, const std::string& sender, LocalObject* obj, uint64_t* offset, size_t block,
                    int timeout_ms, Deadline stop_by, bool* stopped) {
  *stopped = false;
  FetchStream stream(pool);
  Status st = stream.Open(sender, obj->id(), *offset, timeout_ms, stop_by);
  if (!st.ok()) {
    *stopped = stop_by.expired();
    return st;
  }
  if (stream.size() != obj->size()) {
    return Err(objproto::kInternal, "daemon %s has %s with %llu bytes, expected %llu", sender.c_str(),
               Printable(obj->id()).c_str(), static_cast<unsigned long long>(stream.size()),
               static_cast<unsigned long long>(obj->size()));
  }
  while (*offset < obj->size()) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(block, obj->size() - *offset));
    obj->PrepareWrite(*offset, n);
    st = stream.Read(obj->data() + *offset, n, stop_by);
    if (!st.ok()) {
      *stopped = stop_by.expired();
      return st;
    }
    *offset += n;
    // The last bytes become readable with MarkComplete (the caller's): a reader that has
    // them all must find the copy complete (eviction, for one, skips incomplete copies).
    if (*offset < obj->size()) obj->SetReady(*offset);
  }
  stream.Finish();
  return Status::Ok();
}

void ServeFetches(Conn conn, LocalStore* store, int timeout_ms, const std::string& remote, TransferStats* stats) {
  // The reply header and the first bytes go out as separate writes: without TCP_NODELAY,
  // Nagle holds the bytes of a small object until the header's delayed ACK (~40 ms).
  TuneTcpSocket(conn.fd(), 0);
  for (;;) {
    Frame frame;
    Status st = ReadFrame(conn, peerproto::kMagic, peerproto::kVersion, objproto::kMaxPayload, &frame,
                          Deadline::AfterMs(kIdleConnectionMs));
    if (!st.ok()) return;
    objproto::Fetch f{};
    std::string id;
    objproto::FetchReply r{};
    ObjectRef obj;
    if (frame.header.type != objproto::kFetch || !Decode(frame.payload, &f) || !IdFromWire(f.id, &id)) {
      r.status = ToObjectWire(Err(objproto::kInvalid, "expected a Fetch on a data connection"));
      (void)WriteFrame(conn, peerproto::kMagic, peerproto::kVersion, objproto::kFetchReply, frame.header.tag, &r,
                       sizeof(r), Deadline::AfterMs(timeout_ms));
      return;
    }
    // The directory hands out a receiver as a sender as soon as it registers, which may be
    // just before that daemon created its copy; a reduce's partial results (ids starting
    // with \x01) may be asked for just before their task starts. Wait a little for both.
    obj = store->FindOrWait(id, Deadline::AfterMs(id[0] == '\x01' ? kInternalWaitMs : kCopyWaitMs));
    Status ost = obj == nullptr ? Err(objproto::kNotFound, "daemon has no copy of %s", Printable(id).c_str())
                                   : obj->failure();
    if (ost.ok() && f.offset > obj->size()) ost = Err(objproto::kInvalid, "fetch offset beyond the object");
    r.status = ToObjectWire(ost);
    r.size = ost.ok() ? obj->size() : 0;
    st = WriteFrame(conn, peerproto::kMagic, peerproto::kVersion, objproto::kFetchReply, frame.header.tag, &r,
                    sizeof(r), Deadline::AfterMs(timeout_ms));
    if (!st.ok()) return;
    if (!ost.ok()) continue;
    obj->AddUser();
    (f.offset == 0 ? stats->served : stats->resumed) += 1;
    const auto started = std::chrono::steady_clock::now();
    uint64_t pos = f.offset;
    const int wait_ms = f.timeout_ms > 0 ? static_cast<int>(std::min<uint32_t>(f.timeout_ms, timeout_ms)) : timeout_ms;
    while (pos < obj->size()) {
      uint64_t ready = 0;
      ost = obj->WaitReady(pos + 1, Deadline::AfterMs(wait_ms), &ready);
      if (!ost.ok()) break;
      st = conn.Write(obj->data() + pos, ready - pos, Deadline::AfterMs(timeout_ms));
      if (!st.ok()) {
        ost = FromConduit(st, objproto::kUnavailable);
        break;
      }
      pos = ready;
    }
    obj->DropUser();
    if (ost.ok() && f.offset == 0) {
      stats->NoteTransfer(obj->size(), std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    }
    if (!ost.ok()) {
      // The receiver sees the stream end early and resumes from another copy.
      CLOG_INFO("objects: sending %s to %s stopped at byte %llu: %s", Printable(id).c_str(), remote.c_str(),
                static_cast<unsigned long long>(pos), ost.message().c_str());
      return;
    }
  }
}

}  // namespace conduit::objects
