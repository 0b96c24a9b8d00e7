#include "rpc/program_session.h"

#include <poll.h>
#include <string.h>
#include <sys/socket.h>

#include <chrono>
#include <thread>

#include "common/log.h"
#include "protocol/rpc_protocol.h"
#include "protocol/shim_protocol.h"
#include "protocol/upgrade_state.pb.h"
#include "rpc/auth_properties.h"
#include "rpc/call_handover.h"
#include "rpc/frame_input.h"
#include "rpc/peer_link.h"
#include "rpc/program_requests.h"
#include "rpc/rpc_context.h"
#include "rpc/session_handover.h"
#include "security/tls_session.h"
#include "server/service_router.h"

namespace conduit::rpc {
namespace {

constexpr int kHelloTimeoutMs = 10000;
// Ids this daemon gives calls to a program's servers; the program's own ids are small.
constexpr uint64_t kIncomingBit = 1ull << 63;
// Requests a session holds during a park (its program waits for their replies, so few).
constexpr size_t kMaxHeld = 4096;
// Bytes a session may have read ahead of its requests (its FrameReader's buffer holds less).
constexpr size_t kMaxReadAhead = 1 << 20;

template <typename T>
bool ParseExact(const std::string& payload, T* out) {
  if (payload.size() != sizeof(T)) return false;
  memcpy(out, payload.data(), sizeof(T));
  return true;
}

}  // namespace

ProgramSession::ProgramSession(RpcContext* service, UniqueFd fd, const ProgramCredentials& creds)
    : service_(service),
      fd_(std::move(fd)),
      creds_(creds),
      who_("pid " + std::to_string(creds.pid)),
      reader_(fd_.get(), shimproto::kMagic, shimproto::kVersion, rpcproto::kMaxFrame, /*accept_fds=*/true),
      writer_(std::make_unique<FrameWriter>(fd_.get(), service->options().timeout_ms)) {}

ProgramSession::~ProgramSession() = default;

void ProgramSession::Send(OutFrame frame) {
  Status st = writer_->Send(std::move(frame));
  if (!st.ok()) {
    // The program does not read: drop it; its reader notices and cleans up.
    CLOG_WARN("%s: cannot write to the program (%s); dropping it", who_.c_str(), st.message().c_str());
    shutdown(fd_.get(), SHUT_RDWR);
  }
}

Status ProgramSession::Reply(uint16_t type, uint32_t tag, const void* payload, size_t len) {
  OutFrame f;
  f.head.assign(static_cast<const char*>(payload), len);
  PutFrameHeader(&f, shimproto::kMagic, shimproto::kVersion, type, tag, len);
  return writer_->Send(std::move(f));
}

Status ProgramSession::ReplyStatus(uint16_t type, uint32_t tag, const Status& status) {
  rpcproto::StatusReply r{ToWire(status)};
  return Reply(type, tag, &r, sizeof(r));
}

void ProgramSession::MakeMemory() {
  std::weak_ptr<ProgramSession> weak = weak_from_this();
  memory_ = std::make_shared<ProgramMemory>(
      [weak](const rpcproto::FreeEntry& e) {
        if (auto self = weak.lock()) {
          OutFrame f;
          f.head.assign(reinterpret_cast<const char*>(&e), sizeof(e));
          PutFrameHeader(&f, shimproto::kMagic, shimproto::kVersion, rpcproto::kFree, 0, sizeof(e));
          self->Send(std::move(f));
        }
      },
      service_->options().max_receive_bytes, service_->admission().max_shm_bytes());
}

void ProgramSession::Run() {
  MakeMemory();
  FrameHeader h;
  Status st = reader_.NextHeader(&h, Deadline::AfterMs(kHelloTimeoutMs));
  if (st.ok()) st = Hello(h);
  if (st.ok()) st = ServeConnection();
  Finish(st);
}

void ProgramSession::RunAdopted(const std::string& state, std::vector<UniqueFd> fds,
                                const std::function<void()>& restored) {
  MakeMemory();
  Status st = Restore(state, std::move(fds));
  restored();
  if (st.ok()) {
    CLOG_DEBUG("%s: session handed over (%zu channel(s), %zu port(s), %zu request(s) held)", who_.c_str(),
               channels_.size(), ports_.size(), held_.size());
    st = ServeConnection();
  } else {
    CLOG_WARN("%s: the handed-over session is refused: %s", who_.c_str(), st.message().c_str());
  }
  Finish(st);
}

void ProgramSession::Finish(const Status& st) {
  if (!reader_.closed()) {
    CLOG_WARN("%s: dropping the connection: %s", who_.c_str(), st.message().c_str());
    (void)ReplyStatus(0, 0, st);
  } else {
    CLOG_DEBUG("%s disconnected", who_.c_str());
  }
  EndAll(who_ + " went away");
}

Status ProgramSession::ServeConnection() {
  ProgramPark::Member member(&service_->park(), fd_.get(),
                             [this](std::string* state, std::vector<UniqueFd>* fds) { return SavedState(state, fds); });
  member.SetIdle([this] { return Idle(); });
  for (;;) {
    CONDUIT_RETURN_IF_ERROR(member.AwaitRequest({reader_.buffered() > 0, !held_.empty(), false}));
    if (!held_.empty() && !service_->parking()) {
      CONDUIT_RETURN_IF_ERROR(ServeHeld());
      continue;
    }
    if (held_.size() >= kMaxHeld) {
      // As many requests held as a session may: what the program sends next stays in the
      // kernel until the park ends (or the session, idle, stops with it there).
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    if (reader_.buffered() == 0) {
      // Woken for held requests just as another park began: read only what has arrived.
      pollfd p = {fd_.get(), POLLIN, 0};
      if (poll(&p, 1, 0) <= 0) continue;
    }
    CONDUIT_RETURN_IF_ERROR(ReadRequest());
  }
}

Status ProgramSession::ReadRequest() {
  FrameHeader h;
  // Idle between frames as long as it likes; a frame it started must follow promptly.
  CONDUIT_RETURN_IF_ERROR(reader_.NextHeader(&h, Deadline::Never(), service_->frame_timeout_ms()));
  ProgramFrame f;
  f.type = h.type;
  f.tag = h.tag;
  CONDUIT_RETURN_IF_ERROR(ReadArriving(reader_, h.length, &f.payload, Deadline::AfterMs(service_->frame_timeout_ms())));
  if (f.type == rpcproto::kAttachSegment) f.fd = reader_.TakeFd();
  return Admit(std::move(f));
}

Status ProgramSession::ServeCounted(ProgramFrame& f, bool* served) {
  // Counted from before the park is looked at until the frame is served, so that no session
  // stops in between (a call this frame starts may be for its port).
  std::atomic<int>& starts = service_->starts_under_way();
  starts.fetch_add(1);
  *served = !service_->parking();
  Status st = *served ? HandleFrame(f) : Status::Ok();
  starts.fetch_sub(1);
  return st;
}

Status ProgramSession::Admit(ProgramFrame f) {
  if (held_.empty()) {
    bool served;
    Status st = ServeCounted(f, &served);
    if (served) return st;
  }
  // A park is on: every request is held, the events of calls in flight too (those calls
  // move with the session, and their next events are served where they go on). Blocks the
  // program released are taken back at once.
  if (f.type == rpcproto::kFree) return HandleFrame(f);
  held_.push_back(std::move(f));
  return Status::Ok();
}

Status ProgramSession::ServeHeld() {
  while (!held_.empty()) {
    bool served;
    CONDUIT_RETURN_IF_ERROR(ServeCounted(held_.front(), &served));
    if (!served) return Status::Ok();  // another park began
    held_.pop_front();
  }
  return Status::Ok();
}

bool ProgramSession::Idle() {
  if (service_->starts_under_way().load() != 0) return false;
  if (memory_->sends_in_flight() != 0 || !writer_->drained()) return false;
  // Events of this session's calls stop arriving once every link is parked (the other ends
  // on this host hold their programs' requests too).
  if (!service_->LinksParked()) return false;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [id, call] : calls_) {
    std::lock_guard<std::mutex> call_lock(call->mu);
    if (call->held) return false;  // a rate limit's delay: its events go out first
  }
  return true;
}

Status ProgramSession::SavedState(std::string* state, std::vector<UniqueFd>* fds) {
  HandedSession h;
  CONDUIT_RETURN_IF_ERROR(memory_->Export(&h.memory));
  {
    if (!service_->LinksParked()) {
      return Status(StatusCode::kAborted, "an RPC link to another daemon came up during the park");
    }
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, call] : calls_) {
      CONDUIT_RETURN_IF_ERROR(ExportCall(*call, id, call->client_end.get() == this && call->client_id == id,
                                         &h.calls.emplace_back()));
    }
    for (const auto& [id, ch] : channels_) {
      h.channels.push_back({id, ch.text, ch.tls ? std::optional(ch.tls->config()) : std::nullopt});
    }
    for (const auto& [port, p] : ports_) {
      h.ports.push_back({port, p.server, p.host, p.tls ? std::optional(p.tls->config()) : std::nullopt});
    }
  }
  h.next_incoming = next_incoming_.load();
  // Copies: the session keeps its own, in case the upgrade is called off.
  for (const ProgramFrame& f : held_) {
    ProgramFrame copy{f.type, f.tag, f.payload, UniqueFd()};
    if (f.fd.valid()) CONDUIT_RETURN_IF_ERROR(DupFd(f.fd.get(), "a held request's descriptor", &copy.fd));
    h.held.push_back(std::move(copy));
  }
  h.read_ahead = reader_.ReadAhead();
  CONDUIT_RETURN_IF_ERROR(reader_.DupFds(&h.read_ahead_fds));
  CONDUIT_RETURN_IF_ERROR(EncodeHandedSession(std::move(h), state, fds));
  service_->SessionExported();
  return Status::Ok();
}

Status ProgramSession::Restore(const std::string& bytes, std::vector<UniqueFd> fds) {
  const RpcOptions& o = service_->options();
  HandedSession h;
  CONDUIT_RETURN_IF_ERROR(DecodeHandedSession(
      bytes, std::move(fds), SessionLimits{o.max_program_channels, o.max_program_ports, kMaxHeld, kMaxReadAhead,
                                              o.max_program_calls + o.max_link_calls}, &h));
  // Who the program is: the kernel's word again, and the admission list as it is now.
  const std::string exe = ProgramExe(creds_.pid);
  who_ = exe + "[" + std::to_string(creds_.pid) + "]";
  CONDUIT_RETURN_IF_ERROR(service_->admission().CheckAdmission(exe));
  CONDUIT_RETURN_IF_ERROR(memory_->Import(std::move(h.memory)));
  for (HandedSession::Channel& c : h.channels) {
    Channel ch;
    ch.text = std::move(c.target);
    CONDUIT_RETURN_IF_ERROR(ResolveTarget(ch.text, &ch.target));
    if (c.tls) CONDUIT_RETURN_IF_ERROR(TlsClientContext::Create(*c.tls, &ch.tls));
    // A TLS channel to another host makes its link again at its next call (a new handshake,
    // as after a broken link); a local channel checks its server again at its next call.
    std::lock_guard<std::mutex> lock(mu_);
    if (!channels_.emplace(c.id, std::move(ch)).second) {
      return InvalidArgument("channel %llu twice", static_cast<unsigned long long>(c.id));
    }
  }
  for (HandedSession::Port& p : h.ports) CONDUIT_RETURN_IF_ERROR(AddPort(p.port, p.server, p.host, std::move(p.tls)));
  next_incoming_.store(h.next_incoming);
  for (const upgrade::v1::RpcCallState& c : h.calls) {
    if ((c.id() & kIncomingBit) != 0 ? c.client_end() : !c.client_end()) {
      return InvalidArgument("call %llu is not of this session's %s calls", static_cast<unsigned long long>(c.id()),
                             c.client_end() ? "own" : "incoming");
    }
    std::shared_ptr<RpcCall> call;
    CONDUIT_RETURN_IF_ERROR(service_->adopted_calls().Attach(c, shared_from_this(), &call));
    std::lock_guard<std::mutex> lock(mu_);
    if (!calls_.emplace(c.id(), call).second) {
      return InvalidArgument("call %llu twice", static_cast<unsigned long long>(c.id()));
    }
    if (c.client_end()) ++client_calls_;
  }
  for (ProgramFrame& f : h.held) held_.push_back(std::move(f));
  if (!reader_.Prime(h.read_ahead, std::move(h.read_ahead_fds))) {
    return InvalidArgument("%zu bytes read ahead do not fit the read buffer", h.read_ahead.size());
  }
  return Status::Ok();
}

void ProgramSession::AbortCalls(const std::string& why) {
  std::vector<std::shared_ptr<RpcCall>> calls;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, call] : calls_) calls.push_back(call);
  }
  service_->datapath().Abort(calls, why);
}

void ProgramSession::EndAll(const std::string& why) {
  std::vector<std::shared_ptr<RpcCall>> calls;
  std::map<uint32_t, Port> ports;
  std::vector<std::shared_ptr<PeerLink>> links;  // the program's TLS channels' own links
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, call] : calls_) calls.push_back(call);
    calls_.clear();
    client_calls_ = 0;
    ports.swap(ports_);
    for (auto& [id, ch] : channels_) {
      if (ch.link != nullptr) links.push_back(std::move(ch.link));
    }
    channels_.clear();
  }
  for (const auto& [port, p] : ports) service_->servers().Remove(port, this);
  for (const std::shared_ptr<PeerLink>& link : links) link->ReleaseWhenIdle();
  service_->datapath().EndGone(this, calls, "conduit: " + why);
  memory_->Detach();
  writer_->Fail(SystemError("%s", why.c_str()));
}

Status ProgramSession::Hello(const FrameHeader& h) {
  if (h.type != rpcproto::kHello) return InvalidUsage("the first request on an RPC connection must be Hello");
  if (h.length != sizeof(rpcproto::HelloRequest)) {
    return InvalidArgument("malformed Hello (%u bytes, expected %zu)", h.length, sizeof(rpcproto::HelloRequest));
  }
  std::string payload;
  CONDUIT_RETURN_IF_ERROR(reader_.ReadString(h.length, &payload, Deadline::AfterMs(kHelloTimeoutMs)));
  rpcproto::HelloRequest req;
  UniqueFd control = reader_.TakeFd();
  rpcproto::HelloReply reply{};
  reply.timeout_ms = static_cast<uint32_t>(service_->options().timeout_ms);
  reply.inline_max = service_->options().inline_max;
  reply.flags = (service_->options().native_listeners ? rpcproto::kHelloNativeListeners : 0) | rpcproto::kHelloTls;
  // Who the program is comes from the kernel (SO_PEERCRED, /proc/PID/exe), never from the
  // pid and name its Hello claims.
  std::string exe = ProgramExe(creds_.pid);
  who_ = exe + "[" + std::to_string(creds_.pid) + "]";
  Status st;
  std::string claimed;
  if (!DecodeHello(payload, &req, &claimed)) {
    st = InvalidArgument("malformed Hello (%zu bytes)", payload.size());
  } else if (req.version != rpcproto::kRpcVersion) {
    st = InvalidUsage("RPC protocol version %u is not supported (this daemon speaks %u)", req.version,
                      rpcproto::kRpcVersion);
  } else if (!control.valid()) {
    st = InvalidArgument("Hello arrived without its control region");
  } else {
    if (claimed != exe) {
      CLOG_DEBUG("%s calls itself %s; admitted by what the kernel says", who_.c_str(), claimed.c_str());
    }
    st = service_->admission().CheckAdmission(exe);
    if (st.ok()) st = memory_->MapControl(control.get());
  }
  reply.accepted = st.ok() ? 1 : 0;
  reply.status = ToWire(st);
  CONDUIT_RETURN_IF_ERROR(Reply(rpcproto::kHelloReply, h.tag, &reply, sizeof(reply)));
  if (!st.ok()) {
    CLOG_INFO("refused %s: %s", who_.c_str(), st.message().c_str());
    return st;
  }
  CLOG_DEBUG("%s connected to the RPC service", who_.c_str());
  return Status::Ok();
}

Status ProgramSession::HandleFrame(ProgramFrame& f) {
  const std::string& payload = f.payload;
  switch (f.type) {
    case rpcproto::kCall:
      return HandleCall(std::move(f.payload));
    case rpcproto::kAttachSegment:
      return AttachSegment(payload, f.tag, std::move(f.fd));
    case rpcproto::kOpenChannel:
      return OpenChannel(payload, f.tag, /*tls=*/false);
    case rpcproto::kOpenTlsChannel:
      return OpenChannel(payload, f.tag, /*tls=*/true);
    case rpcproto::kCloseChannel:
      return CloseChannel(payload);
    case rpcproto::kServe:
      return Serve(payload, f.tag, /*tls=*/false);
    case rpcproto::kServeTls:
      return Serve(payload, f.tag, /*tls=*/true);
    case rpcproto::kUnserve:
      return Unserve(payload, f.tag);
    case rpcproto::kFree:
      if (payload.size() % sizeof(rpcproto::FreeEntry) != 0) return InvalidArgument("malformed Free");
      for (size_t at = 0; at < payload.size(); at += sizeof(rpcproto::FreeEntry)) {
        rpcproto::FreeEntry e;
        memcpy(&e, payload.data() + at, sizeof(e));
        memory_->ProgramReleased(e);
      }
      return Status::Ok();
    default:
      return InvalidArgument("unknown RPC request type 0x%04x", f.type);
  }
}

Status ProgramSession::AttachSegment(const std::string& payload, uint32_t tag, UniqueFd fd) {
  rpcproto::SegmentInfo info;
  Status st;
  if (!ParseExact(payload, &info)) {
    st = InvalidArgument("malformed AttachSegment (%zu bytes)", payload.size());
  } else if (!fd.valid()) {
    st = InvalidArgument("AttachSegment arrived without a file descriptor");
  } else {
    st = memory_->AttachSend(info, fd.get());
  }
  return ReplyStatus(rpcproto::kAttachSegmentReply, tag, st);
}

Status ProgramSession::OpenChannel(const std::string& payload, uint32_t tag, bool tls) {
  rpcproto::OpenChannelRequest req{};
  rpcproto::OpenChannelReply reply{};
  std::string text;
  Channel ch;
  Status st;
  if (tls) {
    TlsChannelOpen open;
    st = DecodeOpenTlsChannel(payload, &open);
    if (st.ok()) {
      req = open.req;
      text = open.target;
      st = TlsClientContext::Create(TlsClientConfig{open.roots, open.key, open.chain, open.name}, &ch.tls);
    }
  } else if (!DecodeOpenChannel(payload, &req, &text)) {
    st = InvalidArgument("malformed OpenChannel (%zu bytes)", payload.size());
  }
  if (!st.ok()) {
    reply.status = ToWire(st);
    return Reply(rpcproto::kOpenChannelReply, tag, &reply, sizeof(reply));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    size_t cap = service_->options().max_program_channels;
    if (channels_.size() >= cap && channels_.count(req.channel) == 0) {
      st = InvalidUsage("this program has %zu channels open through conduitd, the most one program may", cap);
    }
    size_t links = 0;
    for (const auto& [id, open] : channels_) links += open.link != nullptr;
    if (st.ok() && tls && links >= service_->options().max_program_tls_links) {
      st = InvalidUsage("this program has %zu TLS channels to other hosts open through conduitd, the most one program "
                        "may", links);
    }
  }
  ch.text = text;
  if (st.ok()) st = ResolveTarget(text, &ch.target);
  if (st.ok() && ch.target.local) {
    std::string why;
    std::shared_ptr<ServedProgram> server = service_->servers().Find(ch.target.port, ch.target.ip, false, &why);
    if (server == nullptr) {
      st = why.empty() ? SystemError("no program on this host serves port %u through conduitd", ch.target.port)
                       : SystemError("%s", why.c_str());
    } else {
      st = CheckLocalSecurity(&ch, *server);
    }
  } else if (st.ok() && ch.tls != nullptr) {
    st = ConnectTlsLink(&ch);
  } else if (st.ok()) {
    std::shared_ptr<PeerLink> link;
    std::string daemon = JoinHostPort(ch.target.ip, service_->options().peer_port);
    bool port_tls = false;
    st = service_->links().Get(daemon, &link);
    if (st.ok()) st = link->Probe(ch.target.port, &port_tls);
    if (st.ok() && port_tls) st = SystemError("port %u serves TLS and this channel is insecure", ch.target.port);
  }
  std::shared_ptr<PeerLink> replaced;  // a program that reuses a channel id closes the old one
  if (st.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    Channel& slot = channels_[req.channel];
    replaced = std::move(slot.link);
    slot = ch;
  }
  if (replaced != nullptr) replaced->ReleaseWhenIdle();
  CLOG_DEBUG("%s: %s channel %llu to %s: %s", who_.c_str(), tls ? "TLS" : "insecure",
             static_cast<unsigned long long>(req.channel), text.c_str(), st.ok() ? "managed" : st.message().c_str());
  reply.managed = st.ok() ? 1 : 0;
  reply.status = ToWire(st);
  return Reply(rpcproto::kOpenChannelReply, tag, &reply, sizeof(reply));
}

Status ProgramSession::CheckLocalSecurity(Channel* ch, const ServedProgram& server) {
  std::shared_ptr<const TlsServerContext> server_tls = server.TlsFor(ch->target.port);
  if (ch->tls == nullptr && server_tls != nullptr) {
    return SystemError("port %u serves TLS and this channel is insecure", ch->target.port);
  }
  if (ch->tls != nullptr && server_tls == nullptr) {
    return SystemError("port %u serves without TLS and this channel uses TLS", ch->target.port);
  }
  if (ch->tls == nullptr || ch->checked_against == server_tls) return Status::Ok();
  // Both programs gave this daemon their credentials (each key checked against its
  // certificate): the handshake between the two, in memory, decides as the one between
  // the programs would.
  TlsPeer client_sees, server_sees;
  CONDUIT_RETURN_IF_ERROR(HandshakeInMemory(ch->tls, server_tls, &client_sees, &server_sees));
  ch->checked_against = server_tls;
  ch->auth = AuthProperties(server_sees);
  return Status::Ok();
}

Status ProgramSession::ConnectTlsLink(Channel* ch) {
  std::string daemon = JoinHostPort(ch->target.ip, service_->options().peer_port);
  return PeerLink::ConnectTls(service_, daemon, ch->target.port, ch->tls, &ch->link);
}

std::shared_ptr<const TlsServerContext> ProgramSession::TlsFor(uint32_t port) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = ports_.find(port);
  return it == ports_.end() ? nullptr : it->second.tls;
}

Status ProgramSession::CloseChannel(const std::string& payload) {
  rpcproto::CloseChannelRequest req;
  if (!ParseExact(payload, &req)) return InvalidArgument("malformed CloseChannel (%zu bytes)", payload.size());
  std::shared_ptr<PeerLink> link;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = channels_.find(req.channel);
    if (it == channels_.end()) return Status::Ok();
    link = std::move(it->second.link);
    channels_.erase(it);  // calls already started on it go on
  }
  if (link != nullptr) link->ReleaseWhenIdle();  // its own TLS link: closed after its last call
  return Status::Ok();
}

Status ProgramSession::Serve(const std::string& payload, uint32_t tag, bool tls) {
  rpcproto::ServeRequest req{};
  std::optional<TlsServerConfig> config;
  Status st;
  if (tls) {
    TlsServe serve;
    st = DecodeServeTls(payload, &serve);
    if (st.ok()) {
      req = serve.req;
      config = TlsServerConfig{serve.key, serve.chain, serve.roots, static_cast<ClientCertMode>(serve.client_cert_mode)};
    }
  } else if (!ParseExact(payload, &req)) {
    st = InvalidArgument("malformed Serve (%zu bytes)", payload.size());
  }
  if (st.ok() && (req.port == 0 || req.port > 65535)) st = InvalidArgument("cannot serve port %u", req.port);
  if (st.ok()) st = AddPort(req.port, req.server, FromCString(req.host), std::move(config));
  return ReplyStatus(rpcproto::kServeReply, tag, st);
}

Status ProgramSession::AddPort(uint32_t port, uint64_t server, const std::string& host,
                               std::optional<TlsServerConfig> tls) {
  std::shared_ptr<const TlsServerContext> tls_ctx;
  if (tls) CONDUIT_RETURN_IF_ERROR(TlsServerContext::Create(*tls, &tls_ctx));
  BindAddress bind;
  CONDUIT_RETURN_IF_ERROR(ParseBindHost(host, &bind));
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = ports_.find(port);
    size_t cap = service_->options().max_program_ports;
    if (it != ports_.end() && it->second.server != server) {
      return InvalidUsage("this program already serves port %u with another server", port);
    } else if (it == ports_.end() && ports_.size() >= cap) {
      return InvalidUsage("this program serves %zu ports through conduitd, the most one program may", cap);
    } else if (it != ports_.end() && (it->second.tls != nullptr) != tls.has_value()) {
      return InvalidUsage("this program serves port %u %s TLS already", port, tls ? "without" : "with");
    }
  }
  CONDUIT_RETURN_IF_ERROR(service_->servers().Add(port, bind, shared_from_this()));
  std::lock_guard<std::mutex> lock(mu_);
  ports_[port] = Port{server, host, tls_ctx};
  CLOG_INFO("%s serves port %u on %s through conduitd%s", who_.c_str(), port, bind.Describe().c_str(),
            tls ? ", with TLS" : "");
  return Status::Ok();
}

Status ProgramSession::Unserve(const std::string& payload, uint32_t tag) {
  rpcproto::UnserveRequest req;
  if (!ParseExact(payload, &req)) return ReplyStatus(rpcproto::kUnserveReply, tag, InvalidArgument("malformed Unserve"));
  std::vector<uint32_t> ports;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = ports_.begin(); it != ports_.end();) {
      if (it->second.server == req.server) {
        ports.push_back(it->first);
        it = ports_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (uint32_t port : ports) service_->servers().Remove(port, this);
  return ReplyStatus(rpcproto::kUnserveReply, tag, Status::Ok());
}

Status ProgramSession::HandleCall(std::string payload) {
  CallHead head;
  CONDUIT_RETURN_IF_ERROR(PeekCallHead(payload, &head));
  if (head.inline_bytes > payload.size() - sizeof(head)) return InvalidArgument("Call frame shorter than its inline bytes");
  std::string_view all(payload);
  CallEvent view;
  CONDUIT_RETURN_IF_ERROR(DecodeCallEvent(all.substr(0, all.size() - head.inline_bytes), &view));
  Event ev = Event::From(view);
  ev.auth = Metadata{};  // a program never says who a caller is: daemons do (StartCall, PeerLink)
  if (view.has(kMessage)) {
    const MessageWire& m = view.message;
    if (m.fragment_offset != 0 || m.fragment_length != m.total_length) {
      return InvalidArgument("programs send whole messages, not fragments");
    }
    if (m.segment == kInlineSegment) {
      ev.message = Message::Owned(std::string(all.substr(all.size() - head.inline_bytes)));
    } else {
      CONDUIT_RETURN_IF_ERROR(memory_->SendMessage(m.segment, m.segment_offset, m.total_length, &ev.message));
    }
  }
  std::shared_ptr<RpcCall> call;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = calls_.find(view.call);
    if (it != calls_.end()) call = it->second;
  }
  if (call == nullptr) {
    if (view.has(kStart)) return StartCall(view, std::move(ev));
    return Status::Ok();  // an event for a call that already ended
  }
  if (view.has(kStart)) {
    return InvalidArgument("Start for call %llu, which is already open", static_cast<unsigned long long>(view.call));
  }
  if (call->client_end.get() == this && call->client_id == view.call) {
    service_->datapath().FromClient(call, std::move(ev));
  } else {
    service_->datapath().FromServer(call, std::move(ev));
  }
  return Status::Ok();
}

void ProgramSession::Refuse(uint64_t id, int32_t code, const std::string& why) {
  Event ev;
  ev.sections = kStatus;
  ev.status_code = code;
  ev.status_details = why;
  CallEvent view = ev.View(id);
  OutFrame f;
  EncodeCallEvent(view, &f.head);
  PutFrameHeader(&f, shimproto::kMagic, shimproto::kVersion, rpcproto::kCall, 0, f.head.size());
  Send(std::move(f));
}

Status ProgramSession::StartCall(const CallEvent& view, Event ev) {
  if ((view.call & kIncomingBit) != 0) return InvalidArgument("client call id %llu uses the daemon's range",
                                                              static_cast<unsigned long long>(view.call));
  Channel ch;
  int32_t refusal = 0;
  std::string why;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = channels_.find(view.target);
    if (std::string stopping = service_->stopping(); !stopping.empty()) {
      refusal = GrpcStatusOf(StatusCode::kUnavailable);
      why = "conduit: " + stopping;
    } else if (it == channels_.end()) {
      refusal = GrpcStatusOf(StatusCode::kUnavailable);
      why = "conduit: this program has no channel " + std::to_string(view.target);
    } else if (client_calls_ >= service_->options().max_program_calls) {
      refusal = GrpcStatusOf(StatusCode::kResourceExhausted);
      why = "conduit: this program has " + std::to_string(client_calls_) +
            " calls open through conduitd, the most one program may";
    } else {
      ch = it->second;
    }
  }
  if (refusal != 0) {
    Refuse(view.call, refusal, why);
    return Status::Ok();
  }
  const Target& target = ch.target;
  std::shared_ptr<ServedProgram> local;
  std::shared_ptr<PeerLink> link;
  if (target.local) {
    local = service_->servers().Find(target.port, target.ip, /*from_link=*/false, &why);
    if (local == nullptr) {
      Refuse(view.call, GrpcStatusOf(StatusCode::kUnavailable),
             "conduit: " + (why.empty() ? "no program on this host serves port " + std::to_string(target.port) : why));
      return Status::Ok();
    }
    std::shared_ptr<const TlsServerContext> checked = ch.checked_against;
    Status st = CheckLocalSecurity(&ch, *local);
    if (!st.ok()) {
      Refuse(view.call, GrpcStatusOf(StatusCode::kUnavailable), "conduit: " + st.message());
      return Status::Ok();
    }
    if (ch.checked_against != checked) {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = channels_.find(view.target);
      if (it != channels_.end()) {
        it->second.checked_against = ch.checked_against;
        it->second.auth = ch.auth;
      }
    }
    ev.peer = "local:" + who_;
    ev.auth = ch.auth;
  } else {
    Status st = LinkFor(view.target, &ch, &link);
    if (!st.ok()) {
      Refuse(view.call, GrpcStatusOf(StatusCode::kUnavailable), "conduit: " + st.message());
      return Status::Ok();
    }
  }
  RpcInfo info;
  info.method = ev.method;
  info.program = who_;
  info.side = Side::kClient;
  std::shared_ptr<RpcCall> call = service_->datapath().NewCall(std::move(info));
  call->client_end = shared_from_this();
  call->client_id = view.call;
  ev.target = target.port;
  if (local != nullptr) {
    if (!local->AddIncoming(call, target.port)) {
      Refuse(view.call, GrpcStatusOf(StatusCode::kUnavailable),
             "conduit: no program on this host serves port " + std::to_string(target.port) + " any more");
      return Status::Ok();
    }
  } else if (!link->AddCall(call)) {
    // The other daemon said GoAway in between (it is being replaced), or its link just
    // failed: a new link, once.
    Status st = LinkFor(view.target, &ch, &link);
    if (!st.ok() || !link->AddCall(call)) {
      Refuse(view.call, GrpcStatusOf(StatusCode::kUnavailable),
             "conduit: " + (st.ok() ? "the daemon at " + target.ip + " is being replaced; try again" : st.message()));
      return Status::Ok();
    }
  }
  // Listed here only once both ends are set, so whoever ends the call from outside (the
  // daemon stopping, a park) reaches both. A call its server end has already finished (that
  // session or link ended in between; the program heard the status) is not kept.
  {
    std::lock_guard<std::mutex> lock(mu_);
    calls_[view.call] = call;
    ++client_calls_;
  }
  if (call->is_finished()) Forget(view.call);
  service_->datapath().FromClient(call, std::move(ev));
  return Status::Ok();
}

Status ProgramSession::LinkFor(uint64_t channel, Channel* ch, std::shared_ptr<PeerLink>* out) {
  if (ch->tls == nullptr) return service_->links().Get(JoinHostPort(ch->target.ip, service_->options().peer_port), out);
  // The channel's own link; made again (a new handshake) after it broke or its daemon said
  // GoAway, as gRPC reconnects a channel.
  if (ch->link == nullptr || !ch->link->accepting_calls()) {
    CONDUIT_RETURN_IF_ERROR(ConnectTlsLink(ch));
    std::lock_guard<std::mutex> lock(mu_);
    auto it = channels_.find(channel);
    if (it != channels_.end()) it->second.link = ch->link;
  }
  *out = ch->link;
  return Status::Ok();
}

bool ProgramSession::AddIncoming(const std::shared_ptr<RpcCall>& call, uint32_t port) {
  std::lock_guard<std::mutex> lock(mu_);
  if (ports_.count(port) == 0) return false;  // EndAll empties ports_ too
  uint64_t id = next_incoming_.fetch_add(1, std::memory_order_relaxed) | kIncomingBit;
  call->server_end = shared_from_this();
  call->server_id = id;
  calls_[id] = call;
  return true;
}

void ProgramSession::Forget(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (calls_.erase(id) > 0 && (id & kIncomingBit) == 0) --client_calls_;
}

bool ProgramSession::ReceiveBlock(size_t len, Message* out) {
  uint32_t segment;
  uint64_t offset;
  uint8_t* data;
  std::vector<OutFrame> announce;
  bool placed = len > service_->options().inline_max && memory_->AllocateReceive(len, &segment, &offset, &data, &announce);
  for (auto& f : announce) writer_->Enqueue(std::move(f));
  if (!placed) return false;
  std::shared_ptr<ProgramMemory> memory = memory_;
  *out = Message::Received(data, len, this, segment, offset,
                           [memory, segment, offset] { memory->FreeReceive(segment, offset); });
  return true;
}

void ProgramSession::Deliver(RpcCall&, uint64_t id, Event ev) {
  if (ev.has(kStart)) {
    // Calls arrive addressed to a port; the program knows its servers by its own ids.
    std::lock_guard<std::mutex> lock(mu_);
    auto it = ports_.find(static_cast<uint32_t>(ev.target));
    if (it == ports_.end()) {
      ev.sections = kCancel;
      ev.cancel_code = GrpcStatusOf(StatusCode::kUnavailable);
      ev.cancel_details = "conduit: the server stopped serving this port";
    } else {
      ev.target = it->second.server;
    }
  }
  CallEvent view = ev.View(id);
  OutFrame f;
  Message& m = ev.message;
  if (!m.empty()) {
    view.sections |= kMessage;
    view.message.total_length = m.size();
    view.message.fragment_length = m.size();
    view.message.flags = ev.message_flags;
    if (m.kind() == Message::Kind::kReceived && m.owner() == this) {
      view.message.segment = m.segment();
      view.message.segment_offset = m.offset();
      m.HandOver();
    } else {
      uint32_t segment;
      uint64_t offset;
      uint8_t* data;
      std::vector<OutFrame> announce;
      if (m.size() > service_->options().inline_max &&
          memory_->AllocateReceive(m.size(), &segment, &offset, &data, &announce)) {
        memcpy(data, m.data(), m.size());
        view.message.segment = segment;
        view.message.segment_offset = offset;
      } else {
        view.message.segment = kInlineSegment;
        f.owned.assign(reinterpret_cast<const char*>(m.data()), m.size());
        view.data = f.owned;
      }
      for (auto& a : announce) writer_->Enqueue(std::move(a));
    }
  }
  if (view.has(kMessage) && view.message.segment != kInlineSegment) memory_->HandToProgram();
  EncodeCallEvent(view, &f.head);
  PutFrameHeader(&f, shimproto::kMagic, shimproto::kVersion, rpcproto::kCall, 0, f.head.size() + f.owned.size());
  Send(std::move(f));
}

}  // namespace conduit::rpc
