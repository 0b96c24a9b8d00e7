// RpcService: the RPC part of conduitd (libmrpc-grpc's programs, RPC links between
// daemons) as a Service of the daemon's router, owning the RpcContext they share.
#ifndef CONDUIT_DAEMON_RPC_RPC_SERVICE_H_
#define CONDUIT_DAEMON_RPC_RPC_SERVICE_H_

#include <utility>

#include "rpc/rpc_context.h"
#include "server/service.h"

namespace conduit::rpc {

// The RPC part of conduitd as a Service of the daemon's router: each program connection
// becomes a ProgramSession, each connection from another daemon a PeerLink, both over this
// service's RpcContext.
class RpcService : public Service, public RpcContext {
 public:
  RpcService(RpcOptions options, const ProgramPolicy* admission) : RpcContext(std::move(options), admission) {}

  const char* name() const override { return "rpc"; }
  void ServeProgram(UniqueFd fd, const ProgramCredentials& creds) override;
  void ServePeer(Conn conn, const PeerIdentity& peer) override;
};

}  // namespace conduit::rpc

#endif  // CONDUIT_DAEMON_RPC_RPC_SERVICE_H_
