// Who is at the other end of a daemon-to-daemon connection.
#ifndef CONDUIT_DAEMON_COMMON_PEER_IDENTITY_H_
#define CONDUIT_DAEMON_COMMON_PEER_IDENTITY_H_

#include <string>

namespace conduit {

struct PeerIdentity {
  // The peer daemon's advertised "ip:port" as it proved it in the handshake: the identity
  // every service acts on. Empty on a connection that was not authenticated
  // (--insecure-peers), where services fall back to what the peer claims in its messages.
  std::string daemon;
  // The socket's remote address, for logs (a daemon may dial from any of its addresses).
  std::string remote;
  bool authenticated() const { return !daemon.empty(); }
  // The identity for log lines.
  std::string Describe() const { return authenticated() ? "daemon " + daemon + " (" + remote + ")" : remote; }
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_COMMON_PEER_IDENTITY_H_
