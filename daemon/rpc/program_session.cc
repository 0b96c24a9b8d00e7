#include "rpc/program_session.h"

#include <string.h>
#include <sys/socket.h>

#include "common/log.h"
#include "protocol/rpc_protocol.h"
#include "protocol/shim_protocol.h"
#include "rpc/auth_properties.h"
#include "rpc/frame_input.h"
#include "rpc/peer_link.h"
#include "rpc/program_requests.h"
#include "rpc/rpc_context.h"
#include "security/tls_session.h"
#include "server/service_router.h"

namespace conduit::rpc {
namespace {

constexpr int kHelloTimeoutMs = 10000;
// Ids this daemon gives calls to a program's servers; the program's own ids are small.
constexpr uint64_t kIncomingBit = 1ull << 63;

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

void ProgramSession::Run() {
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
  FrameHeader h;
  Status st = reader_.NextHeader(&h, Deadline::AfterMs(kHelloTimeoutMs));
  if (st.ok()) st = Hello(h);
  while (st.ok()) {
    // Idle between frames as long as it likes; a frame it started must follow promptly.
    st = reader_.NextHeader(&h, Deadline::Never(), service_->frame_timeout_ms());
    if (st.ok()) st = HandleFrame(h);
  }
  if (!reader_.closed()) {
    CLOG_WARN("%s: dropping the connection: %s", who_.c_str(), st.message().c_str());
    (void)ReplyStatus(0, 0, st);
  } else {
    CLOG_DEBUG("%s disconnected", who_.c_str());
  }
  EndAll(who_ + " went away");
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
  std::map<uint32_t, uint64_t> ports;
  std::vector<std::shared_ptr<PeerLink>> links;  // the program's TLS channels' own links
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, call] : calls_) calls.push_back(call);
    calls_.clear();
    client_calls_ = 0;
    ports.swap(server_of_port_);
    tls_of_port_.clear();
    for (auto& [id, ch] : channels_) {
      if (ch.link != nullptr) links.push_back(std::move(ch.link));
    }
    channels_.clear();
  }
  for (auto& [port, server] : ports) service_->servers().Remove(port, this);
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

Status ProgramSession::HandleFrame(const FrameHeader& h) {
  std::string payload;
  CONDUIT_RETURN_IF_ERROR(ReadArriving(reader_, h.length, &payload, Deadline::AfterMs(service_->frame_timeout_ms())));
  switch (h.type) {
    case rpcproto::kCall:
      return HandleCall(std::move(payload));
    case rpcproto::kAttachSegment:
      return AttachSegment(payload, h.tag);
    case rpcproto::kOpenChannel:
      return OpenChannel(payload, h.tag, /*tls=*/false);
    case rpcproto::kOpenTlsChannel:
      return OpenChannel(payload, h.tag, /*tls=*/true);
    case rpcproto::kCloseChannel:
      return CloseChannel(payload);
    case rpcproto::kServe:
      return Serve(payload, h.tag, /*tls=*/false);
    case rpcproto::kServeTls:
      return Serve(payload, h.tag, /*tls=*/true);
    case rpcproto::kUnserve:
      return Unserve(payload, h.tag);
    case rpcproto::kFree:
      if (payload.size() % sizeof(rpcproto::FreeEntry) != 0) return InvalidArgument("malformed Free");
      for (size_t at = 0; at < payload.size(); at += sizeof(rpcproto::FreeEntry)) {
        rpcproto::FreeEntry e;
        memcpy(&e, payload.data() + at, sizeof(e));
        memory_->ProgramReleased(e);
      }
      return Status::Ok();
    default:
      return InvalidArgument("unknown RPC request type 0x%04x", h.type);
  }
}

Status ProgramSession::AttachSegment(const std::string& payload, uint32_t tag) {
  rpcproto::SegmentInfo info;
  UniqueFd fd = reader_.TakeFd();
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
  auto it = tls_of_port_.find(port);
  return it == tls_of_port_.end() ? nullptr : it->second;
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
  std::shared_ptr<const TlsServerContext> tls_ctx;
  BindAddress bind;
  Status st;
  if (tls) {
    TlsServe serve;
    st = DecodeServeTls(payload, &serve);
    if (st.ok()) {
      req = serve.req;
      st = TlsServerContext::Create(
          TlsServerConfig{serve.key, serve.chain, serve.roots, static_cast<ClientCertMode>(serve.client_cert_mode)},
          &tls_ctx);
    }
  } else if (!ParseExact(payload, &req)) {
    st = InvalidArgument("malformed Serve (%zu bytes)", payload.size());
  }
  if (st.ok() && (req.port == 0 || req.port > 65535)) st = InvalidArgument("cannot serve port %u", req.port);
  if (st.ok()) st = ParseBindHost(FromCString(req.host), &bind);
  if (st.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = server_of_port_.find(req.port);
    size_t cap = service_->options().max_program_ports;
    if (it != server_of_port_.end() && it->second != req.server) {
      st = InvalidUsage("this program already serves port %u with another server", req.port);
    } else if (it == server_of_port_.end() && server_of_port_.size() >= cap) {
      st = InvalidUsage("this program serves %zu ports through conduitd, the most one program may", cap);
    } else if (it != server_of_port_.end() && (tls_of_port_.count(req.port) > 0) != tls) {
      st = InvalidUsage("this program serves port %u %s TLS already", req.port, tls ? "without" : "with");
    }
  }
  if (st.ok()) st = service_->servers().Add(req.port, bind, shared_from_this());
  if (st.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    server_of_port_[req.port] = req.server;
    if (tls_ctx != nullptr) tls_of_port_[req.port] = tls_ctx;
    CLOG_INFO("%s serves port %u on %s through conduitd%s", who_.c_str(), req.port, bind.Describe().c_str(),
              tls ? ", with TLS" : "");
  }
  return ReplyStatus(rpcproto::kServeReply, tag, st);
}

Status ProgramSession::Unserve(const std::string& payload, uint32_t tag) {
  rpcproto::UnserveRequest req;
  if (!ParseExact(payload, &req)) return ReplyStatus(rpcproto::kUnserveReply, tag, InvalidArgument("malformed Unserve"));
  std::vector<uint32_t> ports;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = server_of_port_.begin(); it != server_of_port_.end();) {
      if (it->second == req.server) {
        ports.push_back(it->first);
        tls_of_port_.erase(it->first);
        it = server_of_port_.erase(it);
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
  } else if (ch.tls != nullptr) {
    // The channel's own link; made again (a new handshake) after it broke, as gRPC
    // reconnects a channel.
    if (ch.link == nullptr || !ch.link->alive()) {
      Status st = ConnectTlsLink(&ch);
      if (!st.ok()) {
        Refuse(view.call, GrpcStatusOf(StatusCode::kUnavailable), "conduit: " + st.message());
        return Status::Ok();
      }
      std::lock_guard<std::mutex> lock(mu_);
      auto it = channels_.find(view.target);
      if (it != channels_.end()) it->second.link = ch.link;
    }
    link = ch.link;
  } else {
    std::string daemon = JoinHostPort(target.ip, service_->options().peer_port);
    Status st = service_->links().Get(daemon, &link);
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
  {
    std::lock_guard<std::mutex> lock(mu_);
    calls_[view.call] = call;
    ++client_calls_;
  }
  ev.target = target.port;
  if (local != nullptr) {
    local->AddIncoming(call);
  } else {
    link->AddCall(call);
  }
  service_->datapath().FromClient(call, std::move(ev));
  return Status::Ok();
}

void ProgramSession::AddIncoming(const std::shared_ptr<RpcCall>& call) {
  uint64_t id = next_incoming_.fetch_add(1, std::memory_order_relaxed) | kIncomingBit;
  call->server_end = shared_from_this();
  call->server_id = id;
  std::lock_guard<std::mutex> lock(mu_);
  calls_[id] = call;
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
    auto it = server_of_port_.find(static_cast<uint32_t>(ev.target));
    if (it == server_of_port_.end()) {
      ev.sections = kCancel;
      ev.cancel_code = GrpcStatusOf(StatusCode::kUnavailable);
      ev.cancel_details = "conduit: the server stopped serving this port";
    } else {
      ev.target = it->second;
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
  EncodeCallEvent(view, &f.head);
  PutFrameHeader(&f, shimproto::kMagic, shimproto::kVersion, rpcproto::kCall, 0, f.head.size() + f.owned.size());
  Send(std::move(f));
}

}  // namespace conduit::rpc
