#include "rpc/rpc_service.h"

#include <memory>

#include "rpc/peer_link.h"
#include "rpc/program_session.h"

namespace conduit::rpc {

void RpcService::ServeProgram(UniqueFd fd, const ProgramCredentials& creds) {
  auto session = std::make_shared<ProgramSession>(this, std::move(fd), creds);
  session->Run();
}

void RpcService::ServePeer(Conn conn, const PeerIdentity& peer) { PeerLink::Accept(this, std::move(conn), peer); }

}  // namespace conduit::rpc
