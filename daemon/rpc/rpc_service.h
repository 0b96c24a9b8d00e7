// RpcService: the RPC part of conduitd (libmrpc-grpc's programs, RPC links between
// daemons) as a Service of the daemon's router, owning the RpcContext they share.
#ifndef CONDUIT_DAEMON_RPC_RPC_SERVICE_H_
#define CONDUIT_DAEMON_RPC_RPC_SERVICE_H_

#include <condition_variable>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "rpc/rpc_context.h"
#include "server/service.h"

namespace conduit::rpc {

class PeerLink;
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

  // Live upgrade (docs/upgrade.md, "RPC programs", "RPC calls in flight"): sessions stop
  // between two requests once every link is parked, and move with their calls in flight;
  // the shared state carries the links (connections, what was read of them, their calls)
  // and the number of sessions, so that the new process serves none of them (and accepts
  // no connection, and reads no link) before every one has taken its state back and every
  // call has both its ends: a held call from one program reaches the port another serves.
  ProgramPark* program_park() override { return &park(); }
  std::string ParkBlockers() override { return RpcContext::ParkBlockers(); }
  Status ExportShared(HandedShared* out) override;
  Status AdoptShared(HandedShared in) override;
  void AdoptProgram(UniqueFd fd, const ProgramCredentials& creds, const std::string& state,
                    std::vector<UniqueFd> fds) override;
  void AwaitAdopted(Deadline deadline) override;

 private:
  void Serve(const std::shared_ptr<ProgramSession>& session, const std::function<void()>& run);

  std::mutex sessions_mu_;
  std::set<ProgramSession*> sessions_;  // served now (ServeProgram adds and removes)
  std::mutex adopt_mu_;
  std::condition_variable adopt_cv_;
  int to_restore_ = 0;  // handed-over sessions that have not taken their state yet
  bool adopted_ = false;  // AwaitAdopted has joined the calls and started the links
  std::vector<std::shared_ptr<PeerLink>> adopted_links_;  // until AwaitAdopted starts them
  // Links other daemons opened that this process took over: no router thread serves them,
  // so Stop closes them.
  std::vector<std::weak_ptr<PeerLink>> adopted_accepted_;
};

}  // namespace conduit::rpc

#endif  // CONDUIT_DAEMON_RPC_RPC_SERVICE_H_
