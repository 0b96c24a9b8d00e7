// ManagedChannel: a grpc_channel whose calls conduitd carries.
//
// The program still holds the real grpc_channel (created by gRPC, never connected unless
// it asks for connectivity) so every channel function we do not interpose keeps working;
// calls created on it become ManagedCalls. Whether a channel is managed is decided once,
// when it is created: the daemon must answer and the target's host must run a daemon
// with a managed server on that port. Otherwise the channel is native, with one log line.
#ifndef CONDUIT_LIBMRPC_GRPC_CHANNEL_H_
#define CONDUIT_LIBMRPC_GRPC_CHANNEL_H_

#include <grpc/grpc.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "compression.h"
#include "credentials_registry.h"
#include "daemon_connection.h"
#include "message_limits.h"

namespace conduit::grpcshim {

// Message size limits from channel or server args (gRPC's defaults otherwise).
MessageLimits LimitsFromArgs(const grpc_channel_args* args);

class ManagedChannel {
 public:
  // Lets the daemon forget the channel (once no call holds it either).
  ~ManagedChannel();
  // Decides for a channel gRPC just created, insecure or with SSL credentials `tls`;
  // nullptr when it stays native (logged).
  static std::shared_ptr<ManagedChannel> Open(grpc_channel* real, const char* target, const grpc_channel_args* args,
                                              std::shared_ptr<const TlsChannelCreds> tls);
  static std::shared_ptr<ManagedChannel> Find(grpc_channel* real);
  static void Forget(grpc_channel* real);
  // Whether `handle` came from RegisterMethod of some managed channel.
  struct Registered {
    std::string method;
    std::string host;
  };

  uint64_t id() const { return id_; }
  const std::string& target() const { return target_; }
  const std::string& authority() const { return authority_; }
  bool tls() const { return tls_ != nullptr; }
  MessageLimits limits() const { return limits_; }
  const CompressionOptions& compression() const { return compression_; }
  // The user-agent gRPC would send on this channel (its primary and secondary strings
  // around gRPC's own).
  const std::string& user_agent() const { return user_agent_; }
  // The connection this channel is open on, reopened after the daemon restarted; a dead
  // one (calls on it fail with UNAVAILABLE) when the daemon is not back.
  std::shared_ptr<DaemonConnection> Connection(std::string* why);
  void* RegisterMethod(const char* method, const char* host);

 private:
  ManagedChannel() = default;
  // Asks the daemon to carry this channel (OpenChannel, or OpenTlsChannel with tls_).
  Status OpenOn(const std::shared_ptr<DaemonConnection>& conn) const;

  grpc_channel* real_ = nullptr;
  uint64_t id_ = 0;
  std::string target_;
  std::string authority_;
  std::shared_ptr<const TlsChannelCreds> tls_;
  std::string tls_name_;  // the name the server's certificate must match
  MessageLimits limits_;
  CompressionOptions compression_;
  std::string user_agent_;
  std::mutex mu_;
  std::shared_ptr<DaemonConnection> conn_;
  std::vector<std::unique_ptr<Registered>> registered_;
};

}  // namespace conduit::grpcshim

#endif  // CONDUIT_LIBMRPC_GRPC_CHANNEL_H_
