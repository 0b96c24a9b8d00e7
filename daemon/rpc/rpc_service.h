// RpcService: the RPC part of conduitd (libmrpc-grpc's programs, RPC links between
// daemons) as a Service of the daemon's router, owning the RpcContext they share.
#ifndef CONDUIT_DAEMON_RPC_RPC_SERVICE_H_
#define CONDUIT_DAEMON_RPC_RPC_SERVICE_H_

#include <mutex>
#include <set>
#include <utility>

#include "rpc/rpc_context.h"
#include "server/service.h"

namespace conduit::rpc {

class ProgramSession;

// The RPC part of conduitd as a Service of the daemon's router: each program connection
// becomes a ProgramSession, each connection from another daemon a PeerLink, both over this
// service's RpcContext.
class RpcService : public Service, public RpcContext {
 public:
  RpcService(RpcOptions options, const ProgramPolicy* admission) : RpcContext(std::move(options), admission) {}

  const char* name() const override { return "rpc"; }
  void ServeProgram(UniqueFd fd, const ProgramCredentials& creds) override;
  void ServePeer(Conn conn, const PeerIdentity& peer) override;
  // Ends every program's calls with `reason` (UNAVAILABLE at clients, cancelled at servers,
  // here and on other hosts) and refuses new ones with it.
  void Stop(const Status& reason) override;

 private:
  std::mutex sessions_mu_;
  std::set<ProgramSession*> sessions_;  // served now (ServeProgram adds and removes)
};

}  // namespace conduit::rpc

#endif  // CONDUIT_DAEMON_RPC_RPC_SERVICE_H_
