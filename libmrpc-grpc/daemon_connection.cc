#include "daemon_connection.h"

#include <errno.h>
#include <string.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>

#include "byte_buffers.h"
#include "common/detached_thread.h"
#include "common/exe_name.h"
#include "common/fd_io.h"
#include "common/log.h"
#include "common/release_ring.h"
#include "common/rpc_hello_reply.h"
#include "completion.h"
#include "protocol/shim_protocol.h"
#include "real_grpc.h"
#include "receive_segments.h"

namespace conduit::grpcshim {
namespace {

constexpr uint64_t kFirstSendSegment = 8ull << 20;
constexpr uint64_t kMaxSendBytes = 1ull << 30;
constexpr int kHelloTimeoutMs = 10000;

// Set while this thread reads and handles frames (TryDrain).
thread_local bool t_draining = false;

bool IsReply(uint16_t type) {
  switch (type) {
    case rpcproto::kHelloReply:
    case rpcproto::kAttachSegmentReply:
    case rpcproto::kOpenChannelReply:
    case rpcproto::kServeReply:
    case rpcproto::kUnserveReply:
      return true;
    default:
      return false;
  }
}

}  // namespace

std::string DaemonConnection::SocketPath() {
  const char* env = getenv(shimproto::kSocketEnv);
  return env != nullptr && *env != '\0' ? env : shimproto::kDefaultSocketPath;
}

std::shared_ptr<DaemonConnection> DaemonConnection::Connect(std::string* why) {
  const std::string path = SocketPath();
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) {
    *why = "socket path too long: " + path;
    return nullptr;
  }
  addr.sun_family = AF_UNIX;
  memcpy(addr.sun_path, path.c_str(), path.size());
  std::shared_ptr<DaemonConnection> conn(new DaemonConnection());
  conn->fd_.reset(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!conn->fd_.valid() || connect(conn->fd_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    *why = "no conduitd at " + path + " (" + strerror(errno) + ")";
    return nullptr;
  }
  Status st = conn->Hello();
  if (!st.ok()) {
    *why = "conduitd at " + path + ": " + st.message();
    return nullptr;
  }
  conn->alive_.store(true, std::memory_order_release);
  conn->PollWithGrpc();
  // The reader thread keeps the connection alive until the connection dies.
  SpawnDetached("the conduitd connection reader", [self = conn] { self->ReadLoop(); });
  return conn;
}

DaemonConnection::~DaemonConnection() {
  if (receive_) receive_->Detach();
}

Status DaemonConnection::Hello() {
  reader_ = std::make_unique<FrameReader>(fd_.get(), shimproto::kMagic, shimproto::kVersion, rpcproto::kMaxFrame,
                                          /*accept_fds=*/true);
  writer_ = std::make_unique<FrameWriter>(fd_.get(), kHelloTimeoutMs);
  auto control = std::make_unique<ShmSegment>();
  UniqueFd control_fd;
  CONDUIT_RETURN_IF_ERROR(control->Create("conduit-rpc-control", rpcproto::kControlRegionBytes, &control_fd));
  std::weak_ptr<DaemonConnection> weak = weak_from_this();
  receive_ = std::make_shared<ReceiveSegments>(std::move(control), [weak](const rpcproto::FreeEntry& e) {
    if (auto self = weak.lock()) self->SendFree(e);
  });

  rpcproto::HelloRequest hello{};
  hello.pid = static_cast<uint32_t>(getpid());
  hello.version = rpcproto::kRpcVersion;
  CopyCString(hello.exe, ExeName().c_str());
  OutFrame f;
  f.head.assign(reinterpret_cast<const char*>(&hello), sizeof(hello));
  PutFrameHeader(&f, shimproto::kMagic, shimproto::kVersion, rpcproto::kHello, 0, sizeof(hello));
  f.fd = std::move(control_fd);
  CONDUIT_RETURN_IF_ERROR(writer_->Send(std::move(f)));

  FrameHeader h;
  Deadline deadline = Deadline::AfterMs(kHelloTimeoutMs);
  CONDUIT_RETURN_IF_ERROR(reader_->NextHeader(&h, deadline));
  std::string payload;
  CONDUIT_RETURN_IF_ERROR(reader_->ReadString(h.length, &payload, deadline));
  HelloAnswer answer;
  CONDUIT_RETURN_IF_ERROR(DecodeHelloReply(h.type, payload, &answer));
  timeout_ms_ = answer.timeout_ms;
  inline_max_ = answer.inline_max;
  native_listeners_ = answer.native_listeners;
  tls_ = answer.tls;
  writer_ = std::make_unique<FrameWriter>(fd_.get(), static_cast<int>(timeout_ms_));
  return Status::Ok();
}

std::string DaemonConnection::failure() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failure_;
}

Status DaemonConnection::Request(uint16_t type, const void* payload, size_t len, uint16_t reply_type,
                                 std::string* reply, int pass_fd) {
  Pending pending;
  pending.reply_type = reply_type;
  uint32_t tag;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!alive()) return SystemError("lost contact with conduitd: %s", failure_.c_str());
    tag = next_tag_++;
    pending_[tag] = &pending;
  }
  OutFrame f;
  f.head.assign(static_cast<const char*>(payload), len);
  PutFrameHeader(&f, shimproto::kMagic, shimproto::kVersion, type, tag, len);
  if (pass_fd >= 0) f.fd.reset(dup(pass_fd));
  Status st = writer_->Send(std::move(f));
  std::unique_lock<std::mutex> lock(mu_);
  if (st.ok()) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms_ + 5000);
    while (!pending.done && alive() && std::chrono::steady_clock::now() < deadline) {
      if (!polled_by_grpc_) {
        pending_cv_.wait_until(lock, deadline, [&] { return pending.done || !alive(); });
        break;
      }
      // Nobody may be polling gRPC right now: read the answer ourselves (unless this thread
      // is already handling frames).
      lock.unlock();
      pollfd p{fd_.get(), POLLIN, 0};
      poll(&p, 1, 1);
      if (!t_draining) TryDrain();
      lock.lock();
    }
    if (!pending.done) {
      st = SystemError("conduitd did not answer request 0x%04x: %s", type,
                       alive() ? "timed out" : failure_.c_str());
    }
  }
  pending_.erase(tag);
  if (!st.ok()) return st;
  if (!pending.error.empty()) return SystemError("%s", pending.error.c_str());
  *reply = std::move(pending.reply);
  if (reply->size() < sizeof(WireStatus)) return SystemError("conduitd sent a truncated reply to 0x%04x", type);
  WireStatus ws;
  memcpy(&ws, reply->data(), sizeof(ws));
  return FromWire(ws);
}

bool DaemonConnection::Register(uint64_t id, CallSink* call) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!alive()) return false;
  call->Ref();
  calls_[id] = call;
  return true;
}

void DaemonConnection::Unregister(uint64_t id) {
  CallSink* call = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = calls_.find(id);
    if (it == calls_.end()) return;
    call = it->second;
    calls_.erase(it);
  }
  call->Unref();
}

void DaemonConnection::RegisterServer(uint64_t server_id, std::shared_ptr<IncomingCallHandler> server) {
  std::lock_guard<std::mutex> lock(mu_);
  servers_[server_id] = std::move(server);
}

void DaemonConnection::UnregisterServer(uint64_t server_id) {
  std::shared_ptr<IncomingCallHandler> server;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = servers_.find(server_id);
    if (it == servers_.end()) return;
    server = std::move(it->second);
    servers_.erase(it);
  }
}

// ---------------------------------------------------------------- sending

void DaemonConnection::DrainReleasedSends() {
  rpcproto::ControlRegion* region = receive_->control();
  if (!rpcproto::DrainReleases(region->to_shim_head, region->to_shim_tail, region->to_shim, &to_shim_tail_,
                               [&](const rpcproto::FreeEntry& e) { FreeSend(e.segment, e.offset); })) {
    CLOG_WARN("conduitd's release ring makes no sense; ignoring it");
  }
  std::vector<rpcproto::FreeEntry> released;
  {
    std::lock_guard<std::mutex> lock(free_mu_);
    released.swap(released_);
  }
  for (const auto& e : released) FreeSend(e.segment, e.offset);
}

void DaemonConnection::FreeSend(uint32_t segment, uint64_t offset) {
  if (segment >= send_segments_.size() || !send_segments_[segment].heap->Free(offset)) {
    CLOG_WARN("conduitd released a send block it does not hold (segment %u offset %llu)", segment,
              static_cast<unsigned long long>(offset));
  }
}

bool DaemonConnection::AllocateSend(size_t len, uint32_t* segment, uint64_t* offset) {
  for (uint32_t i = 0; i < send_segments_.size(); ++i) {
    if (send_segments_[i].heap->Allocate(len, offset)) {
      *segment = i;
      return true;
    }
  }
  return false;
}

Status DaemonConnection::PlaceMessage(const grpc_byte_buffer* bb, PlacedMessage* out) {
  *out = PlacedMessage{};
  if (bb->type != GRPC_BB_RAW || bb->data.raw.compression != GRPC_COMPRESS_NONE) {
    return InvalidArgument("compressed byte buffers are not supported");
  }
  size_t len = ByteBufferLength(bb);
  out->valid = true;
  out->wire.total_length = len;
  out->wire.fragment_length = len;
  if (len > inline_max_) {
    std::lock_guard<std::mutex> lock(send_mu_);
    DrainReleasedSends();
    uint32_t segment;
    uint64_t offset;
    if (AllocateSend(len, &segment, &offset)) {
      CopyByteBuffer(bb, send_segments_[segment].shm->data() + offset);
      out->wire.segment = segment;
      out->wire.segment_offset = offset;
      return Status::Ok();
    }
  }
  // Small, or shared memory is exhausted: the bytes go in the frame.
  out->wire.segment = rpc::kInlineSegment;
  out->inline_bytes.resize(len);
  if (len > 0) CopyByteBuffer(bb, reinterpret_cast<uint8_t*>(out->inline_bytes.data()));
  return Status::Ok();
}

void DaemonConnection::ReserveSendSpace(size_t len) {
  if (len <= inline_max_) return;
  uint32_t id;
  uint64_t size;
  {
    std::lock_guard<std::mutex> lock(send_mu_);
    DrainReleasedSends();
    for (const auto& seg : send_segments_) {
      if (seg.heap->Fits(len)) return;
    }
    if (growing_ || send_segments_.size() >= rpcproto::kMaxSegments) return;
    size = send_segments_.empty() ? kFirstSendSegment : send_segments_.back().shm->size() * 2;
    while (size < len + ShmHeap::kAlign) size *= 2;
    if (send_bytes_ + size > kMaxSendBytes) return;
    growing_ = true;  // only this thread adds a segment now
    id = static_cast<uint32_t>(send_segments_.size());
  }
  // The attach is a round trip to the daemon: no lock held (the reply may be read by this
  // very thread, which then handles other frames too).
  auto shm = std::make_unique<ShmSegment>();
  UniqueFd fd;
  Status st = shm->Create("conduit-rpc-send", size, &fd);
  rpcproto::SegmentInfo info{id, 0, size};
  std::string reply;
  if (st.ok()) st = Request(rpcproto::kAttachSegment, &info, sizeof(info), rpcproto::kAttachSegmentReply, &reply, fd.get());
  std::lock_guard<std::mutex> lock(send_mu_);
  growing_ = false;
  if (!st.ok()) {
    CLOG_DEBUG("cannot add a %llu-byte send segment (%s): messages go inline", static_cast<unsigned long long>(size),
               st.message().c_str());
    return;
  }
  send_bytes_ += size;
  send_segments_.push_back({std::move(shm), std::make_unique<ShmHeap>(0, size)});
}

void DaemonConnection::Unplace(PlacedMessage* msg) {
  if (msg->valid && msg->wire.segment != rpc::kInlineSegment) {
    std::lock_guard<std::mutex> lock(send_mu_);
    FreeSend(msg->wire.segment, msg->wire.segment_offset);
  }
  *msg = PlacedMessage{};
}

void DaemonConnection::QueueCall(rpc::CallEvent ev, PlacedMessage* msg) {
  OutFrame f;
  if (msg != nullptr && msg->valid) {
    ev.sections |= rpc::kMessage;
    ev.message = msg->wire;
    if (msg->wire.segment == rpc::kInlineSegment) {
      f.owned = std::move(msg->inline_bytes);
      ev.data = f.owned;
    }
    msg->valid = false;
  }
  rpc::EncodeCallEvent(ev, &f.head);
  size_t payload = f.head.size() + f.owned.size();
  PutFrameHeader(&f, shimproto::kMagic, shimproto::kVersion, rpcproto::kCall, 0, payload);
  writer_->Enqueue(std::move(f));
}

void DaemonConnection::Flush() {
  Status st = writer_->Flush();
  if (!st.ok()) Die("cannot write to conduitd: " + st.message());
}

void DaemonConnection::QueueCloseChannel(uint64_t channel) {
  rpcproto::CloseChannelRequest req{channel};
  OutFrame f;
  f.head.assign(reinterpret_cast<const char*>(&req), sizeof(req));
  PutFrameHeader(&f, shimproto::kMagic, shimproto::kVersion, rpcproto::kCloseChannel, 0, sizeof(req));
  (void)writer_->Enqueue(std::move(f));
}

void DaemonConnection::SendFree(const rpcproto::FreeEntry& entry) {
  OutFrame f;
  f.head.assign(reinterpret_cast<const char*>(&entry), sizeof(entry));
  PutFrameHeader(&f, shimproto::kMagic, shimproto::kVersion, rpcproto::kFree, 0, sizeof(entry));
  (void)writer_->Send(std::move(f));
}

// ---------------------------------------------------------------- receiving

void DaemonConnection::ReadLoop() {
  std::shared_ptr<DaemonConnection> self = shared_from_this();
  // With gRPC's pollers reading the socket this thread only steps in for frames nobody read
  // for a while (no program thread was polling gRPC), without waking up for each frame.
  constexpr auto kStale = std::chrono::milliseconds(2);
  while (alive()) {
    if (polled_by_grpc_.load()) {
      std::this_thread::sleep_for(kStale);
      pollfd p{fd_.get(), POLLIN, 0};
      if (poll(&p, 1, 0) <= 0) continue;
      if (std::chrono::steady_clock::now() - last_drain_.load() < kStale) continue;
    } else {
      pollfd p{fd_.get(), POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
    }
    if (!TryDrain()) std::this_thread::yield();
  }
}

bool DaemonConnection::TryDrain() {
  if (!read_mu_.try_lock()) return false;
  t_draining = true;
  last_drain_.store(std::chrono::steady_clock::now());
  Status st;
  for (;;) {
    FrameHeader h;
    bool got = false;
    st = reader_->TryNextHeader(&h, &got);
    if (!st.ok() || !got) break;
    st = HandleFrame(h);
    if (!st.ok()) break;
  }
  bool closed = reader_->closed();
  t_draining = false;
  read_mu_.unlock();
  if (!st.ok()) Die(closed ? "conduitd closed the connection (did the daemon die?)" : st.message());
  return true;
}

void DaemonConnection::OnReadable(void* arg, absl::Status) {
  auto* self = static_cast<DaemonConnection*>(arg);
  self->TryDrain();
  std::lock_guard<std::mutex> lock(self->grpc_mu_);
  // (the program keeps this connection in PolledConnections while gRPC may call back)
  if (self->alive() && self->polled_by_grpc_.load()) {
    Real().grpc_fd_notify_on_read(self->grpc_fd_, reinterpret_cast<grpc_closure*>(self->closure_));
  }
}

std::vector<std::shared_ptr<DaemonConnection>>& DaemonConnection::PolledConnections() {
  static auto* all = new std::vector<std::shared_ptr<DaemonConnection>>();
  return *all;
}

void DaemonConnection::StopPollingWithGrpc() {
  {
    std::lock_guard<std::mutex> lock(grpc_mu_);  // OnReadable re-arms under it
    if (!polled_by_grpc_.exchange(false)) return;
  }
  // gRPC waits at shutdown for every fd it polls; hand ours back (it stays open: release_fd).
  memset(orphan_done_, 0, sizeof(orphan_done_));
  void (*cb)(void*, absl::Status) = [](void*, absl::Status) {};
  memcpy(orphan_done_ + 8, &cb, sizeof(cb));
  RunInGrpcExecCtx(
      [](void* p) {
        auto* self = static_cast<DaemonConnection*>(p);
        Real().grpc_fd_orphan(self->grpc_fd_, reinterpret_cast<grpc_closure*>(self->orphan_done_), &self->released_fd_,
                              "conduit: gRPC shuts down");
      },
      this);
}

void ReleaseGrpcPollers() {
  for (auto& conn : DaemonConnection::PolledConnections()) conn->StopPollingWithGrpc();
}

void DaemonConnection::PollWithGrpc() {
  const char* mode = getenv("CONDUIT_RPC_POLLER");
  if (mode != nullptr && strcmp(mode, "thread") == 0) return;
  const RealGrpc& g = Real();
  if (g.grpc_fd_create == nullptr || g.grpc_fd_notify_on_read == nullptr || g.grpc_fd_orphan == nullptr) return;
  // The socket joins gRPC's own poller: frames are read by the program thread that waits in
  // Next or Pluck, which then finds its completion at once (no hand-off between threads).
  // The connection stays alive as long as gRPC may call back.
  fcntl(fd_.get(), F_SETFL, fcntl(fd_.get(), F_GETFL) | O_NONBLOCK);
  if (!GrpcInitialized()) return;
  Status st = InputOnlyPollFd(fd_.get(), &poll_fd_);
  if (!st.ok()) {
    CLOG_WARN("cannot watch the conduitd socket with gRPC's poller (%s); a reader thread reads it instead",
              st.message().c_str());
    return;
  }
  memset(closure_, 0, sizeof(closure_));
  void (*cb)(void*, absl::Status) = &DaemonConnection::OnReadable;
  void* arg = this;
  memcpy(closure_ + 8, &cb, sizeof(cb));
  memcpy(closure_ + 16, &arg, sizeof(arg));
  polled_by_grpc_ = true;
  PolledConnections().push_back(shared_from_this());
  RunInGrpcExecCtx(
      [](void* p) {
        auto* self = static_cast<DaemonConnection*>(p);
        ::grpc_fd* fd = Real().grpc_fd_create(self->poll_fd_.get(), "conduitd", false);
        {
          // OnReadable reads grpc_fd_ under grpc_mu_ on a gRPC poller thread; gRPC orders
          // that after this, but ThreadSanitizer cannot see gRPC's synchronization.
          std::lock_guard<std::mutex> lock(self->grpc_mu_);
          self->grpc_fd_ = fd;
        }
        Real().grpc_fd_notify_on_read(fd, reinterpret_cast<grpc_closure*>(self->closure_));
      },
      this);
}

Status DaemonConnection::HandleFrame(const FrameHeader& h) {
  Deadline deadline = Deadline::AfterMs(timeout_ms_);
  std::string payload;
  CONDUIT_RETURN_IF_ERROR(reader_->ReadString(h.length, &payload, deadline));
  if (h.type == rpcproto::kCall) return HandleCall(std::move(payload));
  if (IsReply(h.type)) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pending_.find(h.tag);
    if (it == pending_.end()) return Status::Ok();  // its requester gave up
    if (it->second->reply_type != h.type) {
      it->second->error = "conduitd answered with message type " + std::to_string(h.type);
    }
    it->second->reply = std::move(payload);
    it->second->done = true;
    pending_cv_.notify_all();
    return Status::Ok();
  }
  if (h.type == rpcproto::kAddSegment) {
    rpcproto::SegmentInfo info;
    UniqueFd fd = reader_->TakeFd();
    if (payload.size() != sizeof(info) || !fd.valid()) return InvalidArgument("malformed AddSegment from conduitd");
    memcpy(&info, payload.data(), sizeof(info));
    return receive_->Add(info.segment, fd.get(), info.size);
  }
  if (h.type == rpcproto::kFree) {
    if (payload.size() % sizeof(rpcproto::FreeEntry) != 0) return InvalidArgument("malformed Free from conduitd");
    // Not under send_mu_: a sender may hold it while waiting for this thread (AttachSegment).
    std::lock_guard<std::mutex> lock(free_mu_);
    for (size_t at = 0; at < payload.size(); at += sizeof(rpcproto::FreeEntry)) {
      rpcproto::FreeEntry e;
      memcpy(&e, payload.data() + at, sizeof(e));
      released_.push_back(e);
    }
    return Status::Ok();
  }
  if (h.type == 0 && payload.size() >= sizeof(WireStatus)) {
    WireStatus ws;
    memcpy(&ws, payload.data(), sizeof(ws));
    return SystemError("conduitd dropped the connection: %s", FromWire(ws).message().c_str());
  }
  return InvalidArgument("unexpected message type 0x%04x from conduitd", h.type);
}

Status DaemonConnection::HandleCall(std::string payload) {
  rpc::CallHead head;
  CONDUIT_RETURN_IF_ERROR(rpc::PeekCallHead(payload, &head));
  if (head.inline_bytes > payload.size() - sizeof(head)) return InvalidArgument("Call frame shorter than its inline bytes");
  std::string_view all(payload);
  rpc::CallEvent ev;
  CONDUIT_RETURN_IF_ERROR(rpc::DecodeCallEvent(all.substr(0, all.size() - head.inline_bytes), &ev));
  ev.data = all.substr(all.size() - head.inline_bytes);
  grpc_byte_buffer* message = nullptr;
  if (ev.has(rpc::kMessage)) {
    const RealGrpc& g = Real();
    if (ev.message.segment == rpc::kInlineSegment) {
      grpc_slice slice = g.grpc_slice_from_copied_buffer(ev.data.data(), ev.data.size());
      message = g.grpc_raw_byte_buffer_create(&slice, 1);
      g.grpc_slice_unref(slice);
    } else {
      CONDUIT_RETURN_IF_ERROR(
          receive_->Wrap(ev.message.segment, ev.message.segment_offset, ev.message.total_length, &message));
    }
  }
  CallSink* call = nullptr;
  std::shared_ptr<IncomingCallHandler> server;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = calls_.find(ev.call);
    if (it != calls_.end()) {
      call = it->second;
      call->Ref();
    } else if (ev.has(rpc::kStart)) {
      auto s = servers_.find(ev.target);
      if (s != servers_.end()) server = s->second;
    }
  }
  if (call != nullptr) {
    call->OnEvent(ev, message);
    call->Unref();
  } else if (server != nullptr) {
    server->OnIncomingCall(shared_from_this(), ev, message);
  } else {
    if (message != nullptr) Real().grpc_byte_buffer_destroy(message);
    if (ev.has(rpc::kStart)) {
      // A call for a server this program no longer runs: refuse it.
      rpc::CallEvent cancel;
      cancel.call = ev.call;
      cancel.sections = rpc::kCancel;
      cancel.cancel_code = GRPC_STATUS_UNAVAILABLE;
      cancel.cancel_details = "server is shutting down";
      QueueCall(cancel, nullptr);
      Flush();
    }
  }
  return Status::Ok();
}

void DaemonConnection::Die(const std::string& why) {
  std::unordered_map<uint64_t, CallSink*> calls;
  std::unordered_map<uint64_t, std::shared_ptr<IncomingCallHandler>> servers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!alive_.exchange(false)) return;
    failure_ = why;
    calls.swap(calls_);
    servers.swap(servers_);
    pending_cv_.notify_all();
  }
  CLOG_WARN("lost contact with conduitd at %s: %s", SocketPath().c_str(), why.c_str());
  writer_->Fail(SystemError("%s", why.c_str()));
  shutdown(fd_.get(), SHUT_RDWR);
  for (auto& [id, call] : calls) {
    call->OnConnectionLost(why);
    call->Unref();
  }
  for (auto& [id, server] : servers) server->OnConnectionLost(why);
}

}  // namespace conduit::grpcshim
