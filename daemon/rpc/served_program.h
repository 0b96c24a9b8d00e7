// ServedProgram: a program serving gRPC ports through this daemon, as the rest of the RPC
// service sees it: the server table lists it, and calls for its ports (from a daemon link
// or from a program on this host) are handed to it. ProgramSession implements it; daemon
// links (peer_link.cc) reach programs only through it and through Endpoint, so they do
// not include program_session.h, which drives them.
#ifndef CONDUIT_DAEMON_RPC_SERVED_PROGRAM_H_
#define CONDUIT_DAEMON_RPC_SERVED_PROGRAM_H_

#include <cstdint>
#include <memory>
#include <string>

#include "rpc/call.h"
#include "security/tls_session.h"

namespace conduit::rpc {

class ServedProgram : public Endpoint {
 public:
  // A call for `port`, one of this program's ports: the program becomes its server end.
  // False, with nothing changed, when the program no longer serves `port` (it stopped
  // serving it, or its session ended, after the server table was read): the caller then
  // refuses the call, which would otherwise wait for an answer nobody gives.
  [[nodiscard]] virtual bool AddIncoming(const std::shared_ptr<RpcCall>& call, uint32_t port) = 0;
  // The TLS credentials the program serves `port` with; nullptr for an insecure port.
  virtual std::shared_ptr<const TlsServerContext> TlsFor(uint32_t port) const = 0;
};

}  // namespace conduit::rpc

#endif  // CONDUIT_DAEMON_RPC_SERVED_PROGRAM_H_
