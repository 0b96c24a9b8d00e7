// CollectiveService: the NCCL part of conduitd as a Service. Program connections become
// ClientSessions; peer connections (rendezvous and links) go to the CommRegistry.
#ifndef CONDUIT_DAEMON_SESSION_COLLECTIVE_SERVICE_H_
#define CONDUIT_DAEMON_SESSION_COLLECTIVE_SERVICE_H_

#include <vector>

#include "collectives/registry.h"
#include "server/program_park.h"
#include "server/program_policy.h"
#include "server/service.h"

namespace conduit {

class CollectiveService : public Service {
 public:
  CollectiveService(CommRegistry* registry, const ProgramPolicy* policy)
      : registry_(registry), policy_(policy), park_(ServiceId::kCollectives, [registry] { registry->ResumeHandover(); }) {}

  const char* name() const override { return "collectives"; }
  void ServeProgram(UniqueFd fd, const ProgramCredentials& creds) override;
  void ServePeer(Conn conn, const PeerIdentity& peer) override;
  // Aborts every communicator: its ranks' calls here and on other hosts fail with `reason`.
  void Stop(const Status& reason) override;

  // Live upgrade (collective_handover.cc, docs/upgrade.md): the sessions stop between two
  // requests, the local ranks of a communicator together; the communicators are quiesced
  // between two collectives and move with their links' sockets.
  ProgramPark* program_park() override { return &park_; }
  Status ExportShared(HandedShared* out) override;
  Status AdoptShared(HandedShared in) override;
  void StartShared() override;
  void AdoptProgram(UniqueFd fd, const ProgramCredentials& creds, const std::string& state,
                    std::vector<UniqueFd> fds) override;

 private:
  CommRegistry* registry_;
  const ProgramPolicy* policy_;
  ProgramPark park_;
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_SESSION_COLLECTIVE_SERVICE_H_
