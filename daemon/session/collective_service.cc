#include "session/collective_service.h"

#include "session/client_session.h"

namespace conduit {

void CollectiveService::ServeProgram(UniqueFd fd, const ProgramCredentials&) {
  ClientSession session(std::move(fd), registry_, policy_);
  session.Run();
}

void CollectiveService::ServePeer(UniqueFd fd, const std::string& peer) {
  registry_->ServePeerConnection(std::move(fd), peer);
}

}  // namespace conduit
