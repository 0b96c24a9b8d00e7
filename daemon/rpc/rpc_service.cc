#include "rpc/rpc_service.h"

#include <memory>

#include "rpc/peer_link.h"
#include "rpc/program_session.h"

namespace conduit::rpc {

void RpcService::ServeProgram(UniqueFd fd, const ProgramCredentials& creds) {
  auto session = std::make_shared<ProgramSession>(this, std::move(fd), creds);
  {
    std::lock_guard<std::mutex> lock(sessions_mu_);
    sessions_.insert(session.get());
  }
  session->Run();
  std::lock_guard<std::mutex> lock(sessions_mu_);
  sessions_.erase(session.get());
}

void RpcService::Stop(const Status& reason) {
  SetStopping(reason.message());
  std::lock_guard<std::mutex> lock(sessions_mu_);
  for (ProgramSession* session : sessions_) session->AbortCalls("conduit: " + reason.message());
}

void RpcService::ServePeer(Conn conn, const PeerIdentity& peer) { PeerLink::Accept(this, std::move(conn), peer); }

}  // namespace conduit::rpc
