#include "rpc/session_handover.h"

#include "protocol/rpc_protocol.h"
#include "protocol/upgrade_state.pb.h"

namespace conduit::rpc {

Status EncodeHandedSession(HandedSession in, std::string* state, std::vector<UniqueFd>* fds) {
  upgrade::v1::RpcSession s;
  auto add_fd = [fds](UniqueFd fd) {  // its 1-based position
    fds->push_back(std::move(fd));
    return static_cast<uint32_t>(fds->size());
  };
  if (in.memory.control.valid()) s.set_control(add_fd(std::move(in.memory.control)));
  for (ProgramMemory::Handed::Send& seg : in.memory.send) {
    upgrade::v1::RpcSegment* out = s.add_send();
    out->set_id(seg.id);
    out->set_size(seg.size);
    out->set_fd(add_fd(std::move(seg.fd)));
  }
  for (ProgramMemory::Handed::Receive& seg : in.memory.receive) {
    upgrade::v1::RpcReceiveSegment* out = s.add_receive();
    out->set_size(seg.size);
    out->set_fd(add_fd(std::move(seg.fd)));
    for (const auto& [offset, len] : seg.held) {
      upgrade::v1::RpcBlock* b = out->add_held();
      b->set_offset(offset);
      b->set_length(len);
    }
  }
  s.set_to_shim_head(in.memory.to_shim_head);
  s.set_to_daemon_tail(in.memory.to_daemon_tail);
  for (const HandedSession::Channel& ch : in.channels) {
    upgrade::v1::RpcChannel* out = s.add_channels();
    out->set_id(ch.id);
    out->set_target(ch.target);
    if (ch.tls) {
      out->set_tls(true);
      out->set_root_pem(ch.tls->root_pem);
      out->set_key_pem(ch.tls->key_pem);
      out->set_chain_pem(ch.tls->chain_pem);
      out->set_server_name(ch.tls->server_name);
    }
  }
  for (const HandedSession::Port& p : in.ports) {
    upgrade::v1::RpcServedPort* out = s.add_ports();
    out->set_port(p.port);
    out->set_server(p.server);
    out->set_host(p.host);
    if (p.tls) {
      out->set_tls(true);
      out->set_key_pem(p.tls->key_pem);
      out->set_chain_pem(p.tls->chain_pem);
      out->set_client_root_pem(p.tls->client_root_pem);
      out->set_client_cert_mode(static_cast<uint32_t>(p.tls->mode));
    }
  }
  s.set_next_incoming(in.next_incoming);
  for (ProgramFrame& f : in.held) {
    upgrade::v1::RpcHeldFrame* out = s.add_held();
    out->set_type(f.type);
    out->set_tag(f.tag);
    out->set_payload(std::move(f.payload));
    if (f.fd.valid()) out->set_fd(add_fd(std::move(f.fd)));
  }
  s.set_read_ahead(std::move(in.read_ahead));
  for (UniqueFd& fd : in.read_ahead_fds) s.add_read_ahead_descriptors(add_fd(std::move(fd)));
  for (upgrade::v1::RpcCallState& c : in.calls) *s.add_calls() = std::move(c);
  if (!s.SerializeToString(state)) return InvalidArgument("the RPC session state does not serialize");
  return Status::Ok();
}

Status DecodeHandedSession(const std::string& state, std::vector<UniqueFd> fds, const SessionLimits& limits,
                           HandedSession* out) {
  upgrade::v1::RpcSession s;
  if (!s.ParseFromString(state)) return InvalidArgument("the RPC session state does not parse");
  if (static_cast<size_t>(s.channels_size()) > limits.channels || static_cast<size_t>(s.ports_size()) > limits.ports ||
      static_cast<size_t>(s.held_size()) > limits.held || static_cast<size_t>(s.calls_size()) > limits.calls || s.send_size() > static_cast<int>(rpcproto::kMaxSegments) ||
      s.receive_size() > static_cast<int>(rpcproto::kMaxSegments) || s.read_ahead().size() > limits.read_ahead) {
    return InvalidArgument("the RPC session state holds more channels, ports, segments, requests or bytes than a "
                           "session may");
  }
  ProgramMemory::Handed& memory = out->memory;
  if (s.control() != 0) {
    CONDUIT_RETURN_IF_ERROR(TakeDescriptor(&fds, s.control(), &memory.control));
  } else if (s.send_size() > 0 || s.receive_size() > 0) {
    return InvalidArgument("shared segments without a control region");
  }
  for (const upgrade::v1::RpcSegment& seg : s.send()) {
    ProgramMemory::Handed::Send h;
    h.id = seg.id();
    h.size = seg.size();
    CONDUIT_RETURN_IF_ERROR(TakeDescriptor(&fds, seg.fd(), &h.fd));
    memory.send.push_back(std::move(h));
  }
  for (const upgrade::v1::RpcReceiveSegment& seg : s.receive()) {
    ProgramMemory::Handed::Receive h;
    h.size = seg.size();
    CONDUIT_RETURN_IF_ERROR(TakeDescriptor(&fds, seg.fd(), &h.fd));
    for (const upgrade::v1::RpcBlock& b : seg.held()) {
      if (!h.held.emplace(b.offset(), b.length()).second) return InvalidArgument("a receive block held twice");
    }
    memory.receive.push_back(std::move(h));
  }
  memory.to_shim_head = s.to_shim_head();
  memory.to_daemon_tail = s.to_daemon_tail();
  for (const upgrade::v1::RpcChannel& c : s.channels()) {
    HandedSession::Channel ch;
    ch.id = c.id();
    ch.target = c.target();
    if (c.tls()) ch.tls = TlsClientConfig{c.root_pem(), c.key_pem(), c.chain_pem(), c.server_name()};
    out->channels.push_back(std::move(ch));
  }
  for (const upgrade::v1::RpcServedPort& p : s.ports()) {
    if (p.port() == 0 || p.port() > 65535) return InvalidArgument("cannot serve port %u", p.port());
    HandedSession::Port port;
    port.port = p.port();
    port.server = p.server();
    port.host = p.host();
    if (p.tls()) {
      if (p.client_cert_mode() > static_cast<uint32_t>(ClientCertMode::kRequireAndVerify)) {
        return InvalidArgument("client certificate mode %u", p.client_cert_mode());
      }
      port.tls = TlsServerConfig{p.key_pem(), p.chain_pem(), p.client_root_pem(),
                                 static_cast<ClientCertMode>(p.client_cert_mode())};
    }
    out->ports.push_back(std::move(port));
  }
  out->next_incoming = s.next_incoming();
  for (const upgrade::v1::RpcHeldFrame& h : s.held()) {
    if (h.type() > 0xffff || h.payload().size() > rpcproto::kMaxFrame) {
      return InvalidArgument("a held request of type %u and %zu bytes", h.type(), h.payload().size());
    }
    ProgramFrame f;
    f.type = static_cast<uint16_t>(h.type());
    f.tag = h.tag();
    f.payload = h.payload();
    if (h.fd() != 0) CONDUIT_RETURN_IF_ERROR(TakeDescriptor(&fds, h.fd(), &f.fd));
    out->held.push_back(std::move(f));
  }
  out->read_ahead = s.read_ahead();
  for (uint32_t position : s.read_ahead_descriptors()) {
    UniqueFd fd;
    CONDUIT_RETURN_IF_ERROR(TakeDescriptor(&fds, position, &fd));
    out->read_ahead_fds.push_back(std::move(fd));
  }
  out->calls.assign(s.calls().begin(), s.calls().end());
  return Status::Ok();
}

}  // namespace conduit::rpc
