// The two halves of the daemon-to-daemon handshake (protocol/auth_protocol.h) on a connected
// socket: each proves that its side holds the cluster key over both sides' fresh nonces,
// names the peer daemon it authenticated and, when the connection is to be sealed, derives
// the per-direction record keys.
#ifndef CONDUIT_DAEMON_SECURITY_PEER_HANDSHAKE_H_
#define CONDUIT_DAEMON_SECURITY_PEER_HANDSHAKE_H_

#include <string>

#include "common/deadline.h"
#include "common/status.h"
#include "protocol/auth_protocol.h"
#include "security/aead_record_cipher.h"
#include "security/cluster_key.h"

namespace conduit {

struct HandshakeConfig {
  const ClusterKey* key = nullptr;
  std::string self;          // this daemon's advertised "ip:port"
  bool want_sealed = false;  // dialer: ask for sealed records
  bool self_only = false;    // the key is ephemeral (no --cluster-key), for clearer errors
};

struct HandshakeResult {
  std::string peer_daemon;  // the peer's advertised "ip:port", proven with the cluster key
  bool sealed = false;
  DirectionKeys send;  // when sealed
  DirectionKeys recv;
};

// The acceptor's checks of a Hello before it answers: magic, version, known flags, a usable
// identity (*daemon). Pure, for tests and the fuzzer; AcceptorHandshake runs it.
Status CheckHello(const authproto::Hello& hello, const std::string& peer, std::string* daemon);

// `peer` names the other end in error messages (the address dialed or accepted from).
Status DialerHandshake(int fd, const HandshakeConfig& config, const std::string& peer, Deadline deadline,
                       HandshakeResult* out);
Status AcceptorHandshake(int fd, const HandshakeConfig& config, const std::string& peer, Deadline deadline,
                         HandshakeResult* out);

}  // namespace conduit

#endif  // CONDUIT_DAEMON_SECURITY_PEER_HANDSHAKE_H_
