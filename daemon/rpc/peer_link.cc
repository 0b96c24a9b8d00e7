#include "rpc/peer_link.h"

#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "common/log.h"
#include "common/thread_guard.h"
#include "protocol/auth_protocol.h"
#include "protocol/peer_protocol.h"
#include "protocol/rpc_protocol.h"
#include "protocol/upgrade_state.pb.h"
#include "rpc/auth_properties.h"
#include "rpc/call_handover.h"
#include "rpc/frame_input.h"
#include "rpc/rpc_context.h"
#include "rpc/served_program.h"
#include "rpc/target.h"
#include "rpc/tls_flights.h"
#include "security/aead_record_cipher.h"
#include "security/peer_security.h"
#include "transport/tcp.h"

namespace conduit::rpc {
namespace {

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

// Adds the sections of `from` (without its message, but with its flags) to `into`.
void Merge(Event& into, Event&& from) {
  into.message_flags |= from.message_flags;
  if (from.has(kStart)) {
    into.target = from.target;
    into.timeout_us = from.timeout_us;
    into.method = std::move(from.method);
    into.authority = std::move(from.authority);
    into.peer = std::move(from.peer);
    into.initial_md = std::move(from.initial_md);
    into.auth = std::move(from.auth);
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

PeerLink::PeerLink(RpcContext* service, Conn conn, std::string peer, bool accepted)
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
  if (accepted_) {
    sockaddr_storage local{};
    socklen_t len = sizeof(local);
    if (getsockname(conn_.fd(), reinterpret_cast<sockaddr*>(&local), &len) == 0) {
      local_ip_ = NumericIp(reinterpret_cast<sockaddr*>(&local));
    }
  }
}

PeerLink::~PeerLink() = default;

PeerLink::LinkCall::~LinkCall() {
  if (budget != nullptr) budget->fetch_sub(charged);
}

Status PeerLink::Connect(RpcContext* service, const std::string& addr, std::shared_ptr<PeerLink>* out) {
  return ConnectWith(service, addr, 0, nullptr, out);
}

Status PeerLink::ConnectTls(RpcContext* service, const std::string& addr, uint32_t port,
                            std::shared_ptr<const TlsClientContext> tls, std::shared_ptr<PeerLink>* out) {
  if (port == 0 || tls == nullptr) return InvalidArgument("a TLS link needs a port and credentials");
  return ConnectWith(service, addr, port, std::move(tls), out);
}

Status PeerLink::ConnectWith(RpcContext* service, const std::string& addr, uint32_t tls_port,
                             std::shared_ptr<const TlsClientContext> tls, std::shared_ptr<PeerLink>* out) {
  bool refused = false;
  const uint32_t newest = service->options().max_link_version;
  Status st = Dial(service, addr, newest, tls_port, tls, out, &refused);
  if (st.ok() || !refused || newest == rpcproto::kMinPeerLinkVersion) return st;
  // A daemon of an older release (a rolling upgrade under way) refuses the newer version:
  // speak its own. Any other refusal is refused again, and that answer is the one returned.
  Status older = Dial(service, addr, rpcproto::kMinPeerLinkVersion, tls_port, tls, out, &refused);
  if (older.ok()) CLOG_INFO("daemon %s speaks RPC link version %u", addr.c_str(), rpcproto::kMinPeerLinkVersion);
  return older;
}

Status PeerLink::Dial(RpcContext* service, const std::string& addr, uint32_t version, uint32_t tls_port,
                      std::shared_ptr<const TlsClientContext> tls, std::shared_ptr<PeerLink>* out, bool* refused) {
  *refused = false;
  Conn conn;
  PeerIdentity peer;
  Status st = service->options().security->Dial(addr, Deadline::AfterMs(kConnectTimeoutMs + authproto::kHandshakeTimeoutMs),
                                                /*sealable=*/true, &conn, &peer);
  if (!st.ok()) return SystemError("no conduitd at %s: %s", addr.c_str(), st.message().c_str());
  TuneTcpSocket(conn.fd(), service->options().timeout_ms);
  std::shared_ptr<PeerLink> link(new PeerLink(service, std::move(conn), addr, /*accepted=*/false));
  link->link_version_ = version;
  rpcproto::PeerHello hello{};
  hello.rpc_version = version;
  hello.tls_port = tls_port;
  CopyCString(hello.daemon, service->options().my_addr.c_str());
  CONDUIT_RETURN_IF_ERROR(link->writer_.Send(SmallFrame(rpcproto::kPeerHello, 0, hello)));
  FrameHeader h;
  Deadline deadline = Deadline::AfterMs(kHelloTimeoutMs);
  CONDUIT_RETURN_IF_ERROR(link->reader_.NextHeader(&h, deadline));
  rpcproto::StatusReply reply;
  std::string payload;
  if (h.length == sizeof(reply)) CONDUIT_RETURN_IF_ERROR(link->reader_.ReadString(h.length, &payload, deadline));
  if (h.type != rpcproto::kPeerHelloReply || payload.size() != sizeof(reply)) {
    return SystemError("daemon %s answered the RPC hello with message 0x%04x", addr.c_str(), h.type);
  }
  memcpy(&reply, payload.data(), sizeof(reply));
  st = FromWire(reply.status);
  *refused = !st.ok();
  CONDUIT_RETURN_IF_ERROR(st);
  if (tls != nullptr) {
    std::unique_ptr<TlsHandshake> hs;
    CONDUIT_RETURN_IF_ERROR(TlsHandshake::NewClient(std::move(tls), &hs));
    Status st = RunTlsFlights(&link->conn_, &link->reader_, &link->writer_, hs.get(), /*client=*/true, deadline);
    if (!st.ok()) return SystemError("TLS with port %u at daemon %s: %s", tls_port, addr.c_str(), st.message().c_str());
    link->tls_port_ = tls_port;
  }
  if (!StartDetached("RPC link reader", [link] { link->ReadLoop(); })) {
    link->conn_.Shutdown();
    return SystemError("daemon %s: no thread can be started for the RPC link's reader now", addr.c_str());
  }
  if (tls_port != 0) {
    CLOG_DEBUG("TLS link to port %u at daemon %s is up", tls_port, addr.c_str());
  } else {
    CLOG_INFO("RPC link to daemon %s is up", addr.c_str());
  }
  *out = std::move(link);
  return Status::Ok();
}

void PeerLink::Accept(RpcContext* service, Conn conn, const PeerIdentity& identity) {
  TuneTcpSocket(conn.fd(), service->options().timeout_ms);
  const std::string peer = identity.remote;
  std::shared_ptr<PeerLink> link(new PeerLink(service, std::move(conn), peer, /*accepted=*/true));
  FrameHeader h;
  std::string payload;
  Deadline deadline = Deadline::AfterMs(kHelloTimeoutMs);
  Status st = link->reader_.NextHeader(&h, deadline);
  if (st.ok() && h.length == sizeof(rpcproto::PeerHello)) st = link->reader_.ReadString(h.length, &payload, deadline);
  rpcproto::PeerHello hello;
  if (st.ok() && (h.type != rpcproto::kPeerHello || payload.size() != sizeof(hello))) {
    st = InvalidArgument("expected an RPC PeerHello, got message 0x%04x of %u bytes", h.type, h.length);
  }
  std::shared_ptr<const TlsServerContext> tls;
  if (st.ok()) {
    memcpy(&hello, payload.data(), sizeof(hello));
    if (hello.rpc_version < rpcproto::kMinPeerLinkVersion || hello.rpc_version > service->options().max_link_version) {
      st = InvalidUsage("RPC link version %u is not supported (this daemon speaks %u to %u)", hello.rpc_version,
                        rpcproto::kMinPeerLinkVersion, service->options().max_link_version);
    } else if (hello.tls_port != 0) {
      st = link->TlsServerFor(hello.tls_port, &tls);
    }
  }
  (void)link->writer_.Send(SmallFrame(rpcproto::kPeerHelloReply, h.tag, rpcproto::StatusReply{ToWire(st)}));
  if (!st.ok()) {
    CLOG_WARN("RPC link from %s refused: %s", peer.c_str(), st.message().c_str());
    return;
  }
  link->link_version_ = hello.rpc_version;
  if (tls != nullptr) {
    std::unique_ptr<TlsHandshake> hs;
    st = TlsHandshake::NewServer(tls, &hs);
    if (st.ok()) st = RunTlsFlights(&link->conn_, &link->reader_, &link->writer_, hs.get(), /*client=*/false, deadline);
    if (!st.ok()) {
      // What a native TLS server would log for a failed handshake, once per connection.
      CLOG_INFO("TLS for port %u from %s failed: %s", hello.tls_port, peer.c_str(), st.message().c_str());
      return;
    }
    link->tls_port_ = hello.tls_port;
    link->tls_server_ = std::move(tls);
    link->tls_client_ = hs->peer();
    link->tls_auth_ = AuthProperties(link->tls_client_);
    CLOG_DEBUG("TLS link for port %u from %s is up (client certificate: %s)", hello.tls_port, peer.c_str(),
               link->tls_client_.has_certificate ? link->tls_client_.subject.c_str() : "none");
  } else {
    CLOG_INFO("RPC link from daemon %s (%s%s) is up",
              identity.authenticated() ? identity.daemon.c_str() : FromCString(hello.daemon).c_str(), peer.c_str(),
              link->conn_.sealed() ? ", sealed" : "");
  }
  // Listed from here on, so that a live upgrade can ask it for no more calls (GoAway).
  service->AddAccepted(link);
  link->ReadLoop();
  service->RemoveAccepted(link.get());
}

void PeerLink::ReadLoop() {
  std::shared_ptr<PeerLink> self = shared_from_this();
  if (accepted_) service_->accepted_reading().fetch_add(1);
  {
    ProgramPark::Member member(&service_->link_park(), conn_.fd(),
                               [this](std::string* state, std::vector<UniqueFd>*) { return SavedState(state); });
    member.SetIdle([this] { return Quiet(); });
    for (;;) {
      FrameHeader h;
      // Stops here, between two frames, while a live upgrade's park is on and the link is
      // quiet; a parked link reads nothing more in this process.
      Status st = member.AwaitRequest({reader_.buffered() > 0 || conn_.received() > 0, false, false});
      // Idle between frames as long as it likes; a frame it started must follow promptly.
      if (st.ok()) st = reader_.NextHeader(&h, Deadline::Never(), service_->frame_timeout_ms());
      if (st.ok()) st = HandleFrame(h);
      if (st.ok()) continue;
      if (!alive()) break;
      if (reader_.closed()) {
        // A TLS link ends when its channel does, and any link once this daemon said GoAway:
        // the other daemon closes it after its last call, no failure.
        Fail("daemon " + peer_ + " closed the connection", /*quiet=*/tls_port_ != 0 || told_to_go_.load());
      } else {
        CLOG_WARN("malformed or failed RPC frame from daemon %s: %s; closing the link", peer_.c_str(),
                  st.message().c_str());
        Fail("link to daemon " + peer_ + " failed: " + st.message());
      }
      break;
    }
  }
  if (accepted_) service_->accepted_reading().fetch_sub(1);
}

bool PeerLink::Quiet() {
  if (!writer_.drained()) return false;
  std::lock_guard<std::mutex> lock(mu_);
  if (!probes_.empty()) return false;
  for (const auto& [id, lc] : calls_) {
    if (lc->assembling || lc->bulk_queued.load() > 0) return false;
  }
  return true;
}

Status PeerLink::SavedState(std::string* state) {
  upgrade::v1::RpcLinkState s;
  if (!writer_.drained()) {
    return Status(StatusCode::kAborted, "the RPC link to daemon " + peer_ + " still has frames to write");
  }
  s.set_peer(peer_);
  s.set_accepted(accepted_);
  s.set_link_version(link_version_);
  s.set_tls_port(tls_port_);
  s.set_tls_auth(tls_auth_.block);
  s.set_tls_auth_count(tls_auth_.count);
  s.set_told_to_go(told_to_go_.load());
  s.set_release_when_idle(release_when_idle_.load());
  Conn::Handed conn;
  conn_.Export(&conn);
  s.set_sealer(std::move(conn.sealer));
  s.set_opener(std::move(conn.opener));
  s.set_opened(std::move(conn.opened));
  s.set_unopened(std::move(conn.unopened));
  s.set_read_ahead(reader_.ReadAhead());
  {
    std::lock_guard<std::mutex> lock(mu_);
    s.set_draining(draining_);
    s.set_next_call(next_call_);
    for (const auto& [id, lc] : calls_) {
      if (lc->assembling) {
        return Status(StatusCode::kAborted, "a message from daemon " + peer_ + " is half-read");
      }
      // This link is the client end of the calls the other daemon started (accepted), the
      // server end of those it carries there.
      CONDUIT_RETURN_IF_ERROR(ExportCall(*lc->call, id, /*client_end=*/accepted_, s.add_calls()));
    }
  }
  if (!s.SerializeToString(state)) return InternalError("an RPC link's state does not serialize");
  return Status::Ok();
}

Status PeerLink::Adopt(RpcContext* service, UniqueFd fd, const upgrade::v1::RpcLinkState& s,
                       std::shared_ptr<PeerLink>* out) {
  const RpcOptions& o = service->options();
  if (s.peer().empty() || s.peer().size() > 256 || s.tls_port() > 65535 ||
      s.tls_auth().size() > rpcproto::kMaxSectionBytes ||
      static_cast<uint64_t>(s.calls_size()) > o.max_link_calls + o.max_program_calls) {
    return InvalidArgument("a handed-over RPC link's state is malformed or over the caps");
  }
  if (s.link_version() < rpcproto::kMinPeerLinkVersion || s.link_version() > o.max_link_version) {
    return InvalidArgument("a handed-over RPC link to %s speaks link version %u, which this daemon does not (%u to %u)",
                           s.peer().c_str(), s.link_version(), rpcproto::kMinPeerLinkVersion, o.max_link_version);
  }
  CONDUIT_RETURN_IF_ERROR(CheckMetadata(s.tls_auth(), s.tls_auth_count()));
  Conn conn;
  if (s.sealer().empty() && s.opener().empty()) {
    conn = Conn(std::move(fd));
  } else {
    std::unique_ptr<RecordSealer> sealer;
    std::unique_ptr<RecordOpener> opener;
    CONDUIT_RETURN_IF_ERROR(ImportAesGcmSealer(s.sealer(), &sealer));
    CONDUIT_RETURN_IF_ERROR(ImportAesGcmOpener(s.opener(), &opener));
    conn = Conn(std::move(fd), std::move(sealer), std::move(opener));
  }
  if (!conn.Prime(s.opened(), s.unopened())) {
    return InvalidArgument("a handed-over RPC link to %s holds received bytes no connection can", s.peer().c_str());
  }
  std::shared_ptr<PeerLink> link(new PeerLink(service, std::move(conn), s.peer(), s.accepted()));
  if (!link->reader_.Prime(s.read_ahead(), {})) {
    return InvalidArgument("%zu bytes read ahead on the RPC link to %s do not fit its read buffer",
                           s.read_ahead().size(), s.peer().c_str());
  }
  link->link_version_ = s.link_version();
  link->tls_port_ = s.tls_port();
  link->tls_auth_ = Metadata{s.tls_auth_count(), s.tls_auth()};
  link->told_to_go_.store(s.told_to_go());
  link->release_when_idle_.store(s.release_when_idle());
  link->draining_ = s.draining();
  link->next_call_ = s.next_call();
  for (const upgrade::v1::RpcCallState& c : s.calls()) {
    if (c.client_end() != s.accepted() || (!s.accepted() && (c.id() == 0 || c.id() >= s.next_call()))) {
      return InvalidArgument("call %llu is not one the RPC link to %s can carry", static_cast<unsigned long long>(c.id()),
                             s.peer().c_str());
    }
    auto lc = std::make_shared<LinkCall>();
    CONDUIT_RETURN_IF_ERROR(service->adopted_calls().Attach(c, link, &lc->call));
    if (!link->calls_.emplace(c.id(), lc).second) {
      return InvalidArgument("call %llu twice on the RPC link to %s", static_cast<unsigned long long>(c.id()),
                             s.peer().c_str());
    }
  }
  *out = std::move(link);
  return Status::Ok();
}

bool PeerLink::StartAdopted() {
  if (accepted_ && tls_port_ != 0) {
    // The credentials the server's session has now (made again from the same files): the
    // ones this link's handshake was with, as far as a new call's check is concerned.
    std::string why;
    std::shared_ptr<ServedProgram> session = service_->servers().Find(tls_port_, local_ip_, /*from_link=*/true, &why);
    if (session != nullptr) tls_server_ = session->TlsFor(tls_port_);
  }
  size_t calls;
  {
    std::lock_guard<std::mutex> lock(mu_);
    calls = calls_.size();
  }
  CLOG_INFO("upgrade: the RPC link %s daemon %s%s goes on with %zu call(s) in flight", accepted_ ? "from" : "to",
            peer_.c_str(), tls_port_ != 0 ? (" (TLS, port " + std::to_string(tls_port_) + ")").c_str() : "", calls);
  std::shared_ptr<PeerLink> link = shared_from_this();
  bool started;
  if (accepted_) {
    RpcContext* service = service_;
    service->accepted_connections().fetch_add(1);
    started = StartDetached("RPC link from another daemon", [link, service] {
      service->AddAccepted(link);
      link->ReadLoop();
      service->RemoveAccepted(link.get());
      service->accepted_connections().fetch_sub(1);
    });
    if (!started) service->accepted_connections().fetch_sub(1);
  } else {
    started = StartDetached("RPC link reader", [link] { link->ReadLoop(); });
  }
  if (!started) {
    Fail("no thread can be started for the RPC link's reader after the upgrade");
    return false;
  }
  if (release_when_idle_.load()) ReleaseWhenIdle();
  return true;
}

Status PeerLink::HandleFrame(const FrameHeader& h) {
  Deadline deadline = Deadline::AfterMs(service_->frame_timeout_ms());
  if (h.type == rpcproto::kCall) return HandleCall(h);
  if (h.type == rpcproto::kProbe && accepted_) {
    rpcproto::ProbeRequest req;
    if (h.length != sizeof(req)) return InvalidArgument("malformed Probe (%u bytes)", h.length);
    CONDUIT_RETURN_IF_ERROR(reader_.Read(&req, sizeof(req), deadline));
    std::string why;
    std::shared_ptr<ServedProgram> session = service_->servers().Find(req.port, local_ip_, /*from_link=*/true, &why);
    const bool served = session != nullptr;
    rpcproto::ProbeReply reply{};
    reply.status = ToWire(served || why.empty() ? Status::Ok() : SystemError("%s", why.c_str()));
    reply.served = served ? 1 : 0;
    reply.flags = served && session->TlsFor(req.port) != nullptr ? rpcproto::kProbeTls : 0;
    return writer_.Send(SmallFrame(rpcproto::kProbeReply, h.tag, reply));
  }
  if (h.type == rpcproto::kGoAway && !accepted_ && link_version_ >= 3) {
    if (h.length != 0) return InvalidArgument("malformed GoAway (%u bytes)", h.length);
    {
      std::lock_guard<std::mutex> lock(mu_);
      draining_ = true;
    }
    CLOG_INFO("daemon %s is being replaced: its RPC link%s takes no new call and closes after its last",
              peer_.c_str(), tls_port_ != 0 ? (" for port " + std::to_string(tls_port_)).c_str() : "");
    ReleaseWhenIdle();
    return Status::Ok();
  }
  if (h.type == rpcproto::kProbeReply && !accepted_) {
    rpcproto::ProbeReply reply;
    if (h.length != sizeof(reply)) return InvalidArgument("malformed ProbeReply (%u bytes)", h.length);
    CONDUIT_RETURN_IF_ERROR(reader_.Read(&reply, sizeof(reply), deadline));
    Status st = FromWire(reply.status);
    std::lock_guard<std::mutex> lock(mu_);
    auto it = probes_.find(h.tag);
    if (it != probes_.end()) {
      it->second = ProbeWait{true, reply.served != 0 && st.ok(), (reply.flags & rpcproto::kProbeTls) != 0,
                             st.ok() ? "" : st.message()};
    }
    probe_cv_.notify_all();
    return Status::Ok();
  }
  return InvalidArgument("unexpected message type 0x%04x on an RPC link", h.type);
}

bool PeerLink::Charge(LinkCall& lc, uint64_t n) {
  uint64_t cap = service_->options().max_link_assembling_bytes;
  uint64_t now = assembling_->load(std::memory_order_relaxed);
  if (n > cap - std::min(now, cap)) return false;
  if (lc.budget == nullptr) lc.budget = assembling_;
  assembling_->fetch_add(n, std::memory_order_relaxed);
  lc.charged += n;
  return true;
}

void PeerLink::Abandon(const std::shared_ptr<LinkCall>& lc, uint64_t id, int32_t code, const std::string& why) {
  // The other daemon hears it on the call (a status to a caller, a cancel to a server),
  // the local end through the datapath, which also ends the call on both ends.
  Event wire = accepted_ ? StatusEvent(code, why) : CancelEvent(code, why);
  OutFrame f;
  EncodeCallEvent(wire.View(id), &f.head);
  PutFrameHeader(&f, peerproto::kMagic, peerproto::kVersion, rpcproto::kCall, 0, f.head.size());
  if (!writer_.Send(std::move(f)).ok()) Fail("cannot write to daemon " + peer_);
  if (accepted_) {
    service_->datapath().FromClient(lc->call, CancelEvent(code, why));
  } else {
    service_->datapath().FromServer(lc->call, StatusEvent(code, why));
  }
  Forget(id);
}

Status PeerLink::HandleCall(const FrameHeader& h) {
  Deadline deadline = Deadline::AfterMs(service_->frame_timeout_ms());
  if (h.length < sizeof(CallHead)) return InvalidArgument("Call frame of %u bytes has no head", h.length);
  CallHead head;
  CONDUIT_RETURN_IF_ERROR(reader_.Read(&head, sizeof(head), deadline));
  if (head.inline_bytes > h.length - sizeof(head)) return InvalidArgument("Call frame shorter than its inline bytes");
  size_t sections_len = h.length - head.inline_bytes;
  if (sections_len > rpcproto::kMaxCallSectionsBytes) {
    return InvalidArgument("Call frame with %zu bytes of sections (at most %u)", sections_len,
                           rpcproto::kMaxCallSectionsBytes);
  }
  std::string sections;
  CONDUIT_RETURN_IF_ERROR(ReadArriving(reader_, sections_len - sizeof(head), &sections, deadline));
  sections.insert(0, reinterpret_cast<const char*>(&head), sizeof(head));
  CallEvent view;
  CONDUIT_RETURN_IF_ERROR(DecodeCallEvent(sections, &view));
  if (view.has(kMessage) && view.message.segment != kInlineSegment) {
    return InvalidArgument("a message between daemons must travel inline");
  }
  if (view.has(kMessage) && view.message.total_length > rpcproto::kMaxMessageBytes) {
    return InvalidArgument("a message of %llu bytes is larger than gRPC can frame",
                           static_cast<unsigned long long>(view.message.total_length));
  }
  if (view.has(kStart) && !accepted_) return InvalidArgument("a daemon tried to start a call on a link we opened");

  std::shared_ptr<LinkCall> lc;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = calls_.find(view.call);
    if (it != calls_.end()) lc = it->second;
  }
  if (lc != nullptr && view.has(kStart)) {
    return InvalidArgument("Start for call %llu, which is already open", static_cast<unsigned long long>(view.call));
  }
  if (lc == nullptr && view.has(kStart)) CONDUIT_RETURN_IF_ERROR(StartIncoming(view, &lc));
  // A call that already ended, or was refused: its bytes are read and dropped.
  if (lc == nullptr) return SkipArriving(reader_, head.inline_bytes, deadline);

  Event ev = Event::From(view);
  if (!view.has(kMessage)) {
    if (lc->assembling) return InvalidArgument("call event in the middle of a fragmented message");
    Forward(lc->call, std::move(ev));
    return Status::Ok();
  }
  const MessageWire& m = view.message;
  if (m.fragment_offset == 0) {
    if (lc->assembling) return InvalidArgument("a new message before the previous one was complete");
    lc->assembling = true;
    lc->total = m.total_length;
    lc->received = 0;
    // Read the bytes where the message is going: the receiving program's memory, unless a
    // policy there must check them before the program may see them. A block there costs
    // memory only as bytes are written into it.
    const std::shared_ptr<Endpoint>& dest = accepted_ ? lc->call->server_end : lc->call->client_end;
    bool private_first = accepted_ && lc->call->reads_body;
    if (dest != nullptr && !private_first) dest->ReceiveBlock(m.total_length, &lc->block);
  } else if (!lc->assembling || m.total_length != lc->total || m.fragment_offset != lc->received) {
    return InvalidArgument("message fragment at %llu of %llu does not follow the %llu bytes received",
                           static_cast<unsigned long long>(m.fragment_offset),
                           static_cast<unsigned long long>(m.total_length),
                           static_cast<unsigned long long>(lc->received));
  }
  if (!lc->block.empty()) {
    CONDUIT_RETURN_IF_ERROR(reader_.Read(lc->block.mutable_data() + m.fragment_offset, m.fragment_length, deadline));
  } else if (Charge(*lc, m.fragment_length)) {
    size_t at = lc->partial.size();
    lc->partial.resize(at + m.fragment_length);
    CONDUIT_RETURN_IF_ERROR(reader_.Read(lc->partial.data() + at, m.fragment_length, deadline));
  } else {
    CLOG_WARN("daemon %s has more than %llu bytes of incomplete messages on its RPC link; failing call %llu",
              peer_.c_str(), static_cast<unsigned long long>(service_->options().max_link_assembling_bytes),
              static_cast<unsigned long long>(view.call));
    Abandon(lc, view.call, GrpcStatusOf(StatusCode::kResourceExhausted),
            "conduit: the link from daemon " + peer_ + " holds too many bytes of incomplete messages");
    return SkipArriving(reader_, m.fragment_length, deadline);
  }
  lc->received += m.fragment_length;
  Merge(lc->pending, std::move(ev));
  if (lc->received < lc->total) return Status::Ok();
  Event whole = std::move(lc->pending);
  lc->pending = Event{};
  whole.message = lc->block.empty() ? Message::Owned(std::move(lc->partial)) : std::move(lc->block);
  lc->partial = std::string();
  if (lc->budget != nullptr) lc->budget->fetch_sub(lc->charged);
  lc->charged = 0;
  lc->assembling = false;
  lc->total = 0;
  lc->received = 0;
  Forward(lc->call, std::move(whole));
  return Status::Ok();
}

Status PeerLink::StartIncoming(const CallEvent& view, std::shared_ptr<LinkCall>* out) {
  uint32_t port = static_cast<uint32_t>(view.target);
  std::string why;
  std::shared_ptr<ServedProgram> session = service_->servers().Find(port, local_ip_, /*from_link=*/true, &why);
  if (session == nullptr) {
    SendStatus(view.call, GrpcStatusOf(StatusCode::kUnavailable),
               why.empty() ? "conduit: no program serves port " + std::to_string(port) + " through the daemon at " +
                                 service_->options().my_addr
                           : "conduit: " + why + " (daemon at " + service_->options().my_addr + ")");
    return Status::Ok();
  }
  bool stale = false;
  std::string refusal = RefusalFor(port, *session, &stale);
  if (!refusal.empty()) {
    SendStatus(view.call, GrpcStatusOf(StatusCode::kUnavailable),
               "conduit: " + refusal + " (daemon at " + service_->options().my_addr + ")");
    // The other daemon makes a new link, with a new handshake, for the channel's next call.
    if (stale) Fail(refusal);
    return Status::Ok();
  }
  size_t open;
  {
    std::lock_guard<std::mutex> lock(mu_);
    open = calls_.size();
  }
  if (open >= service_->options().max_link_calls) {
    SendStatus(view.call, GrpcStatusOf(StatusCode::kResourceExhausted),
               "conduit: daemon " + service_->options().my_addr + " already carries " + std::to_string(open) +
                   " calls from this daemon, the most one link may");
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
  if (!session->AddIncoming(lc->call, port)) {
    SendStatus(view.call, GrpcStatusOf(StatusCode::kUnavailable),
               "conduit: no program serves port " + std::to_string(port) + " through the daemon at " +
                   service_->options().my_addr + " any more");
    return Status::Ok();
  }
  // Listed here once both ends are set; a link that failed meanwhile ended its calls
  // without this one, which ends now.
  bool listed;
  {
    std::lock_guard<std::mutex> lock(mu_);
    listed = alive();
    if (listed) calls_[view.call] = lc;
  }
  if (!listed) {
    service_->datapath().EndGone(this, {lc->call}, "conduit: lost the link to daemon " + peer_);
    return Status::Ok();
  }
  *out = std::move(lc);
  return Status::Ok();
}

void PeerLink::Forward(const std::shared_ptr<RpcCall>& call, Event ev) {
  if (ev.has(kStart)) {
    ev.peer = "ipv4:" + peer_;
    // Who the caller is, as this daemon's own handshake established it; never what the
    // other daemon says.
    ev.auth = accepted_ ? tls_auth_ : Metadata{};
  }
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

Status PeerLink::Probe(uint32_t port, bool* tls) {
  *tls = false;
  uint32_t tag;
  {
    std::lock_guard<std::mutex> lock(mu_);
    tag = next_probe_++;
    probes_[tag] = ProbeWait{};
  }
  Status st = writer_.Send(SmallFrame(rpcproto::kProbe, tag, rpcproto::ProbeRequest{port, 0}));
  std::unique_lock<std::mutex> lock(mu_);
  if (st.ok()) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(service_->options().timeout_ms);
    probe_cv_.wait_until(lock, deadline, [&] { return probes_[tag].answered || !alive(); });
    const ProbeWait& w = probes_[tag];
    if (!w.answered) {
      st = SystemError("daemon %s did not answer a probe", peer_.c_str());
    } else if (!w.served) {
      st = w.why.empty() ? SystemError("no program serves port %u through the daemon at %s", port, peer_.c_str())
                         : SystemError("daemon %s: %s", peer_.c_str(), w.why.c_str());
    } else {
      *tls = w.tls;
    }
  }
  probes_.erase(tag);
  return st;
}

Status PeerLink::TlsServerFor(uint32_t tls_port, std::shared_ptr<const TlsServerContext>* out) {
  std::string why;
  std::shared_ptr<ServedProgram> session = service_->servers().Find(tls_port, local_ip_, /*from_link=*/true, &why);
  if (session != nullptr) *out = session->TlsFor(tls_port);
  if (*out != nullptr) return Status::Ok();
  if (session != nullptr) return SystemError("port %u is served without TLS", tls_port);
  return why.empty() ? SystemError("no program serves port %u through the daemon at %s", tls_port,
                                   service_->options().my_addr.c_str())
                     : SystemError("%s", why.c_str());
}

std::string PeerLink::RefusalFor(uint32_t port, const ServedProgram& session, bool* stale) {
  std::shared_ptr<const TlsServerContext> server_tls = session.TlsFor(port);
  *stale = false;
  if (tls_port_ == 0) {
    return server_tls == nullptr ? "" : "port " + std::to_string(port) + " serves TLS and this call came without it";
  }
  if (port != tls_port_) {
    return "this TLS link carries calls to port " + std::to_string(tls_port_) + ", not " + std::to_string(port);
  }
  if (server_tls != tls_server_) {
    *stale = true;
    return "the server on port " + std::to_string(port) + " has other TLS credentials than at this link's handshake";
  }
  return "";
}

bool PeerLink::accepting_calls() {
  std::lock_guard<std::mutex> lock(mu_);
  return alive() && !draining_;
}

bool PeerLink::GoAway() {
  if (!accepted_ || link_version_ < 3) return false;
  if (told_to_go_.exchange(true)) return true;
  OutFrame f;
  PutFrameHeader(&f, peerproto::kMagic, peerproto::kVersion, rpcproto::kGoAway, 0, 0);
  if (!writer_.Send(std::move(f)).ok()) Fail("cannot write to daemon " + peer_);
  return true;
}

bool PeerLink::AddCall(const std::shared_ptr<RpcCall>& call) {
  auto lc = std::make_shared<LinkCall>();
  lc->call = call;
  std::lock_guard<std::mutex> lock(mu_);
  // A link that failed has ended its calls already (Fail clears calls_ under mu_ after it
  // marks the link dead): a call added now would never hear a status.
  if (draining_ || !alive()) return false;
  uint64_t id = next_call_++;
  calls_[id] = lc;
  call->server_end = shared_from_this();
  call->server_id = id;
  return true;
}

void PeerLink::Forget(uint64_t id) {
  bool idle;
  {
    std::lock_guard<std::mutex> lock(mu_);
    calls_.erase(id);
    idle = calls_.empty();
  }
  if (idle && release_when_idle_.load()) Fail("no call left on it", /*quiet=*/true);
}

void PeerLink::ReleaseWhenIdle() {
  release_when_idle_.store(true);
  bool idle;
  {
    std::lock_guard<std::mutex> lock(mu_);
    idle = calls_.empty();
  }
  if (idle) Fail("no call left on it", /*quiet=*/true);
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
      v.message = MessageWire{total, off, len, kInlineSegment, ev.message_flags, 0};
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

void PeerLink::Fail(const std::string& why, bool quiet) {
  if (!alive_.exchange(false)) return;
  if (quiet) {
    CLOG_DEBUG("RPC link to daemon %s closed: %s", peer_.c_str(), why.c_str());
  } else {
    CLOG_WARN("RPC link to daemon %s is down: %s", peer_.c_str(), why.c_str());
  }
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
