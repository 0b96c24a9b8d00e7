#include "session/collective_service.h"

#include "server/service_router.h"
#include "session/client_session.h"

namespace conduit {

void CollectiveService::ServeProgram(UniqueFd fd, const ProgramCredentials& creds) {
  ClientSession session(std::move(fd), registry_, policy_, ProgramExe(creds.pid), creds.pid);
  session.Run();
}

void CollectiveService::ServePeer(Conn conn, const PeerIdentity& peer) {
  registry_->ServePeerConnection(std::move(conn), peer);
}

void CollectiveService::Stop(const Status& reason) { registry_->Stop(reason); }

}  // namespace conduit
