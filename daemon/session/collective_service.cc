#include "session/collective_service.h"

#include "common/log.h"
#include "server/service_router.h"
#include "session/client_session.h"

namespace conduit {

void CollectiveService::ServeProgram(UniqueFd fd, const ProgramCredentials& creds) {
  ClientSession session(std::move(fd), registry_, policy_, ProgramExe(creds.pid), creds, &park_);
  session.Run();
}

void CollectiveService::AdoptProgram(UniqueFd fd, const ProgramCredentials& creds, const std::string& state,
                                     std::vector<UniqueFd> fds) {
  ClientSession session(std::move(fd), registry_, policy_, ProgramExe(creds.pid), creds, &park_);
  Status st = session.Restore(state, std::move(fds));
  if (!st.ok()) {
    CLOG_WARN("a collectives session handed over by the previous daemon is refused: %s", st.message().c_str());
    return;
  }
  session.Run();
}

void CollectiveService::ServePeer(Conn conn, const PeerIdentity& peer) {
  registry_->ServePeerConnection(std::move(conn), peer);
}

void CollectiveService::Stop(const Status& reason) { registry_->Stop(reason); }

}  // namespace conduit
