// CollectiveService: the NCCL part of conduitd as a Service. Program connections become
// ClientSessions; peer connections (rendezvous and links) go to the CommRegistry.
#ifndef CONDUIT_DAEMON_SESSION_COLLECTIVE_SERVICE_H_
#define CONDUIT_DAEMON_SESSION_COLLECTIVE_SERVICE_H_

#include "collectives/registry.h"
#include "server/program_policy.h"
#include "server/service.h"

namespace conduit {

class CollectiveService : public Service {
 public:
  CollectiveService(CommRegistry* registry, const ProgramPolicy* policy) : registry_(registry), policy_(policy) {}

  const char* name() const override { return "collectives"; }
  void ServeProgram(UniqueFd fd, const ProgramCredentials& creds) override;
  void ServePeer(Conn conn, const PeerIdentity& peer) override;
  // Aborts every communicator: its ranks' calls here and on other hosts fail with `reason`.
  void Stop(const Status& reason) override;

 private:
  CommRegistry* registry_;
  const ProgramPolicy* policy_;
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_SESSION_COLLECTIVE_SERVICE_H_
