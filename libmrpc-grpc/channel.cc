#include "channel.h"

#include <cstring>
#include <unordered_map>

#include "channel_args.h"
#include "common/log.h"
#include "process.h"
#include "real_grpc.h"

namespace conduit::grpcshim {
namespace {

struct Registry {
  std::mutex mu;
  std::unordered_map<grpc_channel*, std::shared_ptr<ManagedChannel>> channels;
  uint64_t next_id = 1;
};

Registry& Channels() {
  static Registry* r = new Registry();
  return *r;
}

// "dns:///host:port", "dns:host:port", "ipv4:1.2.3.4:port" -> "host:port".
std::string AuthorityOf(const std::string& target) {
  std::string t = target;
  for (const char* scheme : {"dns:///", "dns:", "ipv4:", "ipv6:"}) {
    if (t.rfind(scheme, 0) == 0) {
      t = t.substr(strlen(scheme));
      break;
    }
  }
  return t;
}

// "host:port", "[v6]:port" or "host" -> the host.
std::string HostOfAuthority(const std::string& authority) {
  if (!authority.empty() && authority[0] == '[') {
    size_t close = authority.find(']');
    return close == std::string::npos ? authority : authority.substr(1, close - 1);
  }
  size_t colon = authority.find(':');
  if (colon != std::string::npos && authority.find(':', colon + 1) == std::string::npos) {
    return authority.substr(0, colon);
  }
  return authority;
}

// As gRPC's HTTP client filter builds it: "<primary> grpc-c/<core version> (linux; chttp2)
// <secondary>", empty parts left out.
std::string UserAgentFromArgs(const grpc_channel_args* args) {
  std::string ua;
  auto add = [&ua](const char* part) {
    if (part == nullptr || *part == 0) return;
    if (!ua.empty()) ua.push_back(' ');
    ua.append(part);
  };
  add(StringArg(args, GRPC_ARG_PRIMARY_USER_AGENT_STRING));
  std::string core = std::string("grpc-c/") + Real().grpc_version_string() + " (linux; chttp2)";
  add(core.c_str());
  add(StringArg(args, GRPC_ARG_SECONDARY_USER_AGENT_STRING));
  return ua;
}

}  // namespace

MessageLimits LimitsFromArgs(const grpc_channel_args* args) {
  MessageLimits limits;
  limits.max_send = IntArg(args, GRPC_ARG_MAX_SEND_MESSAGE_LENGTH).value_or(limits.max_send);
  limits.max_receive = IntArg(args, GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH).value_or(limits.max_receive);
  return limits;
}

Status ManagedChannel::OpenOn(const std::shared_ptr<DaemonConnection>& conn) const {
  rpcproto::OpenChannelRequest req{};
  req.channel = id_;
  if (target_.size() >= sizeof(req.target)) return InvalidArgument("target too long");
  CopyCString(req.target, target_.c_str());
  std::string payload(reinterpret_cast<const char*>(&req), sizeof(req));
  if (tls_ != nullptr) {
    if (!conn->tls()) return SystemError("this conduitd does not carry TLS channels");
    if (tls_name_.empty() || tls_name_.size() > rpcproto::kMaxTlsNameBytes) {
      return InvalidArgument("cannot tell the name its server's certificate must match");
    }
    rpcproto::TlsChannelCredentials creds{};
    creds.root_bytes = static_cast<uint32_t>(tls_->roots.size());
    creds.key_bytes = static_cast<uint32_t>(tls_->key.size());
    creds.chain_bytes = static_cast<uint32_t>(tls_->chain.size());
    creds.name_bytes = static_cast<uint32_t>(tls_name_.size());
    payload.append(reinterpret_cast<const char*>(&creds), sizeof(creds));
    payload += tls_->roots + tls_->key + tls_->chain + tls_name_;
  }
  std::string reply;
  CONDUIT_RETURN_IF_ERROR(conn->Request(tls_ != nullptr ? rpcproto::kOpenTlsChannel : rpcproto::kOpenChannel,
                                        payload.data(), payload.size(), rpcproto::kOpenChannelReply, &reply));
  rpcproto::OpenChannelReply r{};
  if (reply.size() != sizeof(r)) return SystemError("malformed OpenChannel reply");
  memcpy(&r, reply.data(), sizeof(r));
  if (r.managed == 0) return SystemError("conduitd does not manage it");
  return Status::Ok();
}

std::shared_ptr<ManagedChannel> ManagedChannel::Open(grpc_channel* real, const char* target,
                                                     const grpc_channel_args* args,
                                                     std::shared_ptr<const TlsChannelCreds> tls) {
  std::string why;
  std::shared_ptr<DaemonConnection> conn = LiveConnection(&why);
  if (conn == nullptr) {
    CLOG_INFO("channel to %s uses native gRPC: %s", target, why.c_str());
    return nullptr;
  }
  std::shared_ptr<ManagedChannel> ch(new ManagedChannel());
  ch->real_ = real;
  ch->target_ = target;
  // As gRPC's channel: the default authority argument, else the SSL target name override
  // (on any channel), else the target's.
  const char* default_authority = StringArg(args, GRPC_ARG_DEFAULT_AUTHORITY);
  const char* ssl_override = StringArg(args, GRPC_SSL_TARGET_NAME_OVERRIDE_ARG);
  ch->authority_ = default_authority != nullptr ? default_authority
                   : ssl_override != nullptr    ? ssl_override
                                                : AuthorityOf(target);
  if (tls != nullptr) {
    // As gRPC checks the server's certificate: against the override when the channel has
    // one, else against the target's host.
    ch->tls_name_ = ssl_override != nullptr ? ssl_override : HostOfAuthority(AuthorityOf(target));
    ch->tls_ = std::move(tls);
  }
  ch->compression_ = CompressionFromArgs(args);
  ch->user_agent_ = UserAgentFromArgs(args);
  ch->limits_ = LimitsFromArgs(args);
  {
    Registry& r = Channels();
    std::lock_guard<std::mutex> lock(r.mu);
    ch->id_ = r.next_id++;
  }
  Status st = ch->OpenOn(conn);
  if (!st.ok()) {
    CLOG_INFO("channel to %s uses native gRPC: %s", target, st.message().c_str());
    return nullptr;
  }
  ch->conn_ = conn;
  Registry& r = Channels();
  std::lock_guard<std::mutex> lock(r.mu);
  r.channels[real] = ch;
  CLOG_INFO("channel to %s is carried by conduitd%s", target, ch->tls_ != nullptr ? " (TLS)" : "");
  return ch;
}

ManagedChannel::~ManagedChannel() {
  if (conn_ != nullptr && conn_->alive()) conn_->QueueCloseChannel(id_);
}

std::shared_ptr<ManagedChannel> ManagedChannel::Find(grpc_channel* real) {
  Registry& r = Channels();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.channels.find(real);
  return it == r.channels.end() ? nullptr : it->second;
}

void ManagedChannel::Forget(grpc_channel* real) {
  std::shared_ptr<ManagedChannel> ch;
  Registry& r = Channels();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.channels.find(real);
  if (it == r.channels.end()) return;
  ch = std::move(it->second);
  r.channels.erase(it);
}

std::shared_ptr<DaemonConnection> ManagedChannel::Connection(std::string* why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (conn_ != nullptr && conn_->alive()) return conn_;
  // After the daemon died: reopen on a new connection, or keep the dead one, on which
  // calls fail at once with UNAVAILABLE.
  std::shared_ptr<DaemonConnection> conn = LiveConnection(why);
  if (conn == nullptr) return conn_;
  Status st = OpenOn(conn);
  if (!st.ok()) {
    *why = st.message();
    return conn_;
  }
  conn_ = conn;
  return conn_;
}

void* ManagedChannel::RegisterMethod(const char* method, const char* host) {
  std::lock_guard<std::mutex> lock(mu_);
  registered_.push_back(std::make_unique<Registered>(Registered{method, host != nullptr ? host : ""}));
  return registered_.back().get();
}

}  // namespace conduit::grpcshim
