#include "rpc/peer_link.h"

#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "common/auth_protocol.h"
#include "common/log.h"
#include "common/peer_protocol.h"
#include "common/rpc_protocol.h"
#include "common/thread_guard.h"
#include "rpc/program_session.h"
#include "rpc/rpc_service.h"
#include "security/peer_security.h"
#include "transport/tcp.h"

namespace conduit::rpc {
namespace {

constexpr int32_t kUnavailable = 14;
constexpr int kConnectTimeoutMs = 1000;
constexpr int kHelloTimeoutMs = 5000;
// Sections that go with the first fragment of a message, and with the last.
constexpr uint32_t kLeading = kStart | kHeaders;
constexpr uint32_t kTrailing = kHalfClose | kStatus | kCancel | kWindow;

template <typename T>
OutFrame SmallFrame(uint16_t type, uint32_t tag, const T& body) {
  OutFrame f;
  f.head.assign(reinterpret_cast<const char*>(&body), sizeof(body));
  PutFrameHeader(&f, peerproto::kMagic, peerproto::kVersion, type, tag, sizeof(body));
  return f;
}

// Adds the sections of `from` (without its message) to `into`.
void Merge(Event& into, Event&& from) {
  if (from.has(kStart)) {
    into.target = from.target;
    into.timeout_us = from.timeout_us;
    into.method = std::move(from.method);
    into.authority = std::move(from.authority);
    into.peer = std::move(from.peer);
    into.initial_md = std::move(from.initial_md);
  }
  if (from.has(kHeaders)) into.headers = std::move(from.headers);
  if (from.has(kStatus)) {
    into.status_code = from.status_code;
    into.status_details = std::move(from.status_details);
    into.trailers = std::move(from.trailers);
  }
  if (from.has(kCancel)) {
    into.cancel_code = from.cancel_code;
    into.cancel_details = std::move(from.cancel_details);
  }
  if (from.has(kWindow)) into.window += from.window;
  into.sections |= from.sections;
}

}  // namespace

PeerLink::PeerLink(RpcService* service, Conn conn, std::string peer, bool accepted)
    : service_(service),
      conn_(std::move(conn)),
      peer_(std::move(peer)),
      accepted_(accepted),
      reader_(&conn_, peerproto::kMagic, peerproto::kVersion, rpcproto::kMaxFrame),
      writer_(&conn_, service->options().timeout_ms) {
  // Blocking reads (FrameReader); writes never block (FrameWriter uses MSG_DONTWAIT).
  int flags = fcntl(conn_.fd(), F_GETFL);
  if (flags >= 0) fcntl(conn_.fd(), F_SETFL, flags & ~O_NONBLOCK);
  writer_.CountUrgentAheadOfBulk(&service->small_first_frames());
}

PeerLink::~PeerLink() = default;

Status PeerLink::Connect(RpcService* service, const std::string& addr, std::shared_ptr<PeerLink>* out) {
  Conn conn;
  PeerIdentity peer;
  Status st = service->options().security->Dial(addr, Deadline::AfterMs(kConnectTimeoutMs + authproto::kHandshakeTimeoutMs),
                                                /*sealable=*/true, &conn, &peer);
  if (!st.ok()) return SystemError("no conduitd at %s: %s", addr.c_str(), st.message().c_str());
  TuneTcpSocket(conn.fd(), service->options().timeout_ms);
  std::shared_ptr<PeerLink> link(new PeerLink(service, std::move(conn), addr, /*accepted=*/false));
  rpcproto::PeerHello hello{};
  hello.rpc_version = rpcproto::kRpcVersion;
  CopyCString(hello.daemon, service->options().my_addr.c_str());
  CONDUIT_RETURN_IF_ERROR(link->writer_.Send(SmallFrame(rpcproto::kPeerHello, 0, hello)));
  FrameHeader h;
  Deadline deadline = Deadline::AfterMs(kHelloTimeoutMs);
  CONDUIT_RETURN_IF_ERROR(link->reader_.NextHeader(&h, deadline));
  std::string payload;
  CONDUIT_RETURN_IF_ERROR(link->reader_.ReadString(h.length, &payload, deadline));
  rpcproto::StatusReply reply;
  if (h.type != rpcproto::kPeerHelloReply || payload.size() != sizeof(reply)) {
    return SystemError("daemon %s answered the RPC hello with message 0x%04x", addr.c_str(), h.type);
  }
  memcpy(&reply, payload.data(), sizeof(reply));
  CONDUIT_RETURN_IF_ERROR(FromWire(reply.status));
  std::thread([link] { RunGuarded("RPC link reader", [&] { link->ReadLoop(); }); }).detach();
  CLOG_INFO("RPC link to daemon %s is up", addr.c_str());
  *out = std::move(link);
  return Status::Ok();
}

void PeerLink::Accept(RpcService* service, Conn conn, const PeerIdentity& identity) {
  TuneTcpSocket(conn.fd(), service->options().timeout_ms);
  const std::string peer = identity.remote;
  std::shared_ptr<PeerLink> link(new PeerLink(service, std::move(conn), peer, /*accepted=*/true));
  FrameHeader h;
  std::string payload;
  Deadline deadline = Deadline::AfterMs(kHelloTimeoutMs);
  Status st = link->reader_.NextHeader(&h, deadline);
  if (st.ok()) st = link->reader_.ReadString(h.length, &payload, deadline);
  rpcproto::PeerHello hello;
  if (st.ok() && (h.type != rpcproto::kPeerHello || payload.size() != sizeof(hello))) {
    st = InvalidArgument("expected an RPC PeerHello, got message 0x%04x of %zu bytes", h.type, payload.size());
  }
  if (st.ok()) {
    memcpy(&hello, payload.data(), sizeof(hello));
    if (hello.rpc_version != rpcproto::kRpcVersion) {
      st = InvalidUsage("RPC protocol version %u is not supported (this daemon speaks %u)", hello.rpc_version,
                        rpcproto::kRpcVersion);
    }
  }
  (void)link->writer_.Send(SmallFrame(rpcproto::kPeerHelloReply, h.tag, rpcproto::StatusReply{ToWire(st)}));
  if (!st.ok()) {
    CLOG_WARN("RPC link from %s refused: %s", peer.c_str(), st.message().c_str());
    return;
  }
  CLOG_INFO("RPC link from daemon %s (%s%s) is up",
            identity.authenticated() ? identity.daemon.c_str() : FromCString(hello.daemon).c_str(), peer.c_str(),
            link->conn_.sealed() ? ", sealed" : "");
  link->ReadLoop();
}

void PeerLink::ReadLoop() {
  std::shared_ptr<PeerLink> self = shared_from_this();
  for (;;) {
    FrameHeader h;
    Status st = reader_.NextHeader(&h, Deadline::Never());
    if (st.ok()) st = HandleFrame(h);
    if (!st.ok()) {
      if (!alive()) return;
      if (reader_.closed()) {
        Fail("daemon " + peer_ + " closed the connection");
      } else {
        CLOG_WARN("malformed or failed RPC frame from daemon %s: %s; closing the link", peer_.c_str(),
                  st.message().c_str());
        Fail("link to daemon " + peer_ + " failed: " + st.message());
      }
      return;
    }
  }
}

Status PeerLink::HandleFrame(const FrameHeader& h) {
  Deadline deadline = Deadline::AfterMs(service_->options().timeout_ms);
  if (h.type == rpcproto::kCall) return HandleCall(h);
  std::string payload;
  CONDUIT_RETURN_IF_ERROR(reader_.ReadString(h.length, &payload, deadline));
  if (h.type == rpcproto::kProbe && accepted_) {
    rpcproto::ProbeRequest req;
    if (payload.size() != sizeof(req)) return InvalidArgument("malformed Probe (%zu bytes)", payload.size());
    memcpy(&req, payload.data(), sizeof(req));
    rpcproto::ProbeReply reply{};
    reply.status = ToWire(Status::Ok());
    reply.served = service_->servers().Find(req.port) != nullptr ? 1 : 0;
    return writer_.Send(SmallFrame(rpcproto::kProbeReply, h.tag, reply));
  }
  if (h.type == rpcproto::kProbeReply && !accepted_) {
    rpcproto::ProbeReply reply;
    if (payload.size() != sizeof(reply)) return InvalidArgument("malformed ProbeReply (%zu bytes)", payload.size());
    memcpy(&reply, payload.data(), sizeof(reply));
    std::lock_guard<std::mutex> lock(mu_);
    auto it = probes_.find(h.tag);
    if (it != probes_.end()) it->second = {true, reply.served != 0 && FromWire(reply.status).ok()};
    probe_cv_.notify_all();
    return Status::Ok();
  }
  return InvalidArgument("unexpected message type 0x%04x on an RPC link", h.type);
}

Status PeerLink::Skip(size_t n) {
  char scratch[64 << 10];
  while (n > 0) {
    size_t take = std::min(n, sizeof(scratch));
    CONDUIT_RETURN_IF_ERROR(reader_.Read(scratch, take, Deadline::AfterMs(service_->options().timeout_ms)));
    n -= take;
  }
  return Status::Ok();
}

Status PeerLink::HandleCall(const FrameHeader& h) {
  Deadline deadline = Deadline::AfterMs(service_->options().timeout_ms);
  if (h.length < sizeof(CallHead)) return InvalidArgument("Call frame of %u bytes has no head", h.length);
  CallHead head;
  CONDUIT_RETURN_IF_ERROR(reader_.Read(&head, sizeof(head), deadline));
  if (head.inline_bytes > h.length - sizeof(head)) return InvalidArgument("Call frame shorter than its inline bytes");
  std::string sections(h.length - head.inline_bytes, '\0');
  memcpy(sections.data(), &head, sizeof(head));
  CONDUIT_RETURN_IF_ERROR(reader_.Read(sections.data() + sizeof(head), sections.size() - sizeof(head), deadline));
  CallEvent view;
  CONDUIT_RETURN_IF_ERROR(DecodeCallEvent(sections, &view));
  if (view.has(kMessage) && view.message.segment != kInlineSegment) {
    return InvalidArgument("a message between daemons must travel inline");
  }
  if (view.has(kStart) && !accepted_) return InvalidArgument("a daemon tried to start a call on a link we opened");

  std::shared_ptr<LinkCall> lc;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = calls_.find(view.call);
    if (it != calls_.end()) lc = it->second;
  }
  if (lc == nullptr && view.has(kStart)) CONDUIT_RETURN_IF_ERROR(StartIncoming(view, &lc));
  if (lc == nullptr) return Skip(head.inline_bytes);  // a call that already ended, or was refused

  Event ev = Event::From(view);
  if (!view.has(kMessage)) {
    if (!lc->assembling.empty()) return InvalidArgument("call event in the middle of a fragmented message");
    Forward(lc->call, std::move(ev));
    return Status::Ok();
  }
  const MessageWire& m = view.message;
  if (m.fragment_offset == 0) {
    if (!lc->assembling.empty()) return InvalidArgument("a new message before the previous one was complete");
    // Read the bytes where the message is going: the receiving program's memory, unless a
    // policy there must check them before the program may see them.
    const std::shared_ptr<Endpoint>& dest = accepted_ ? lc->call->server_end : lc->call->client_end;
    auto* program = dynamic_cast<ProgramSession*>(dest.get());
    bool private_first = accepted_ && lc->call->reads_body;
    lc->assembling = program != nullptr && !private_first ? program->ReceiveBuffer(m.total_length)
                                                           : Message::Owned(std::string(m.total_length, '\0'));
    lc->received = 0;
  } else if (lc->assembling.empty() || m.total_length != lc->assembling.size() || m.fragment_offset != lc->received) {
    return InvalidArgument("message fragment at %llu of %llu does not follow the %llu bytes received",
                           static_cast<unsigned long long>(m.fragment_offset),
                           static_cast<unsigned long long>(m.total_length),
                           static_cast<unsigned long long>(lc->received));
  }
  CONDUIT_RETURN_IF_ERROR(reader_.Read(lc->assembling.mutable_data() + m.fragment_offset, m.fragment_length, deadline));
  lc->received += m.fragment_length;
  Merge(lc->pending, std::move(ev));
  if (lc->received < m.total_length) return Status::Ok();
  Event whole = std::move(lc->pending);
  lc->pending = Event{};
  whole.message = std::move(lc->assembling);
  lc->received = 0;
  Forward(lc->call, std::move(whole));
  return Status::Ok();
}

Status PeerLink::StartIncoming(const CallEvent& view, std::shared_ptr<LinkCall>* out) {
  uint32_t port = static_cast<uint32_t>(view.target);
  std::shared_ptr<ProgramSession> session = service_->servers().Find(port);
  if (session == nullptr) {
    SendStatus(view.call, kUnavailable,
               "conduit: no program serves port " + std::to_string(port) + " through the daemon at " +
                   service_->options().my_addr);
    return Status::Ok();
  }
  RpcInfo info;
  info.method = std::string(view.method);
  info.program = session->name();
  info.side = Side::kServer;
  auto lc = std::make_shared<LinkCall>();
  lc->call = service_->datapath().NewCall(std::move(info));
  lc->call->client_end = shared_from_this();
  lc->call->client_id = view.call;
  {
    std::lock_guard<std::mutex> lock(mu_);
    calls_[view.call] = lc;
  }
  session->AddIncoming(lc->call);
  *out = std::move(lc);
  return Status::Ok();
}

void PeerLink::Forward(const std::shared_ptr<RpcCall>& call, Event ev) {
  if (ev.has(kStart)) ev.peer = "ipv4:" + peer_;
  if (accepted_) {
    service_->datapath().FromClient(call, std::move(ev));
  } else {
    service_->datapath().FromServer(call, std::move(ev));
  }
}

void PeerLink::SendStatus(uint64_t id, int32_t code, const std::string& why) {
  Event ev;
  ev.sections = kStatus;
  ev.status_code = code;
  ev.status_details = why;
  OutFrame f;
  EncodeCallEvent(ev.View(id), &f.head);
  PutFrameHeader(&f, peerproto::kMagic, peerproto::kVersion, rpcproto::kCall, 0, f.head.size());
  if (!writer_.Send(std::move(f)).ok()) Fail("cannot write to daemon " + peer_);
}

Status PeerLink::Probe(uint32_t port, bool* served) {
  uint32_t tag;
  {
    std::lock_guard<std::mutex> lock(mu_);
    tag = next_probe_++;
    probes_[tag] = {false, false};
  }
  Status st = writer_.Send(SmallFrame(rpcproto::kProbe, tag, rpcproto::ProbeRequest{port, 0}));
  std::unique_lock<std::mutex> lock(mu_);
  if (st.ok()) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(service_->options().timeout_ms);
    probe_cv_.wait_until(lock, deadline, [&] { return probes_[tag].first || !alive(); });
    if (!probes_[tag].first) st = SystemError("daemon %s did not answer a probe", peer_.c_str());
  }
  *served = probes_[tag].second;
  probes_.erase(tag);
  return st;
}

void PeerLink::AddCall(const std::shared_ptr<RpcCall>& call) {
  auto lc = std::make_shared<LinkCall>();
  lc->call = call;
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t id = next_call_++;
  calls_[id] = lc;
  call->server_end = shared_from_this();
  call->server_id = id;
}

void PeerLink::Forget(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  calls_.erase(id);
}

void PeerLink::Deliver(RpcCall&, uint64_t id, Event ev) {
  std::shared_ptr<LinkCall> lc;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = calls_.find(id);
    if (it != calls_.end()) lc = it->second;
  }
  bool after_bulk = lc != nullptr && lc->bulk_queued.load() > 0;
  if (ev.message.empty()) {
    OutFrame f;
    EncodeCallEvent(ev.View(id), &f.head);
    PutFrameHeader(&f, peerproto::kMagic, peerproto::kVersion, rpcproto::kCall, 0, f.head.size());
    f.urgent = !after_bulk;
    if (after_bulk) {
      lc->bulk_queued++;
      f.on_done = [lc](bool) { lc->bulk_queued--; };
    }
    writer_.Enqueue(std::move(f));
  } else {
    auto msg = std::make_shared<Message>(std::move(ev.message));
    size_t total = msg->size();
    uint64_t small = service_->policies().qos_small_bytes();
    bool bulk = after_bulk || (small > 0 && total > small);
    size_t fragments = std::max<size_t>(1, (total + kFragmentBytes - 1) / kFragmentBytes);
    for (size_t i = 0; i < fragments; ++i) {
      size_t off = i * kFragmentBytes;
      size_t len = std::min(kFragmentBytes, total - off);
      CallEvent v = ev.View(id);
      uint32_t keep = (i == 0 ? kLeading : 0) | (i + 1 == fragments ? kTrailing : 0);
      v.sections = (v.sections & keep) | kMessage;
      v.message = MessageWire{total, off, len, kInlineSegment, 0, 0};
      v.data = std::string_view(reinterpret_cast<const char*>(msg->data()) + off, len);
      OutFrame f;
      EncodeCallEvent(v, &f.head);
      PutFrameHeader(&f, peerproto::kMagic, peerproto::kVersion, rpcproto::kCall, 0, f.head.size() + len);
      f.data = msg->data() + off;
      f.data_len = len;
      f.urgent = !bulk;
      if (bulk && lc != nullptr) {
        lc->bulk_queued++;
        f.on_done = [msg, lc](bool) { lc->bulk_queued--; };
      } else {
        f.on_done = [msg](bool) {};
      }
      writer_.Enqueue(std::move(f));
    }
  }
  Status st = writer_.Flush();
  if (!st.ok()) Fail("cannot write to daemon " + peer_ + ": " + st.message());
}

void PeerLink::Fail(const std::string& why) {
  if (!alive_.exchange(false)) return;
  CLOG_WARN("RPC link to daemon %s is down: %s", peer_.c_str(), why.c_str());
  writer_.Fail(SystemError("%s", why.c_str()));
  conn_.Shutdown();
  std::vector<std::shared_ptr<RpcCall>> calls;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, lc] : calls_) calls.push_back(lc->call);
    calls_.clear();
    probe_cv_.notify_all();
  }
  service_->datapath().EndGone(this, calls, "conduit: lost the link to daemon " + peer_ + " (" + why + ")");
}

}  // namespace conduit::rpc
