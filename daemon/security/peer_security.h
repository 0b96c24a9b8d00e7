// PeerSecurity: how this daemon opens and accepts connections to and from other daemons.
// Every such connection is authenticated (peer_handshake.h) with the cluster key before the
// first frame; services see only a Conn and the PeerIdentity the handshake proved.
//
// Three modes, chosen at start-up and logged:
//  * cluster key (--cluster-key FILE): every connection proves the shared key, both ways;
//    with --encrypt-peers, RPC and object connections are also sealed.
//  * self only (no --cluster-key): a random key that only this process knows, so the peer
//    port answers nobody but this daemon itself (enough for programs on one host).
//  * insecure (--insecure-peers): no handshake, peers are believed; for trusted networks
//    and old daemons only, logged as a warning.
#ifndef CONDUIT_DAEMON_SECURITY_PEER_SECURITY_H_
#define CONDUIT_DAEMON_SECURITY_PEER_SECURITY_H_

#include <memory>
#include <string>

#include "common/conn.h"
#include "common/deadline.h"
#include "common/peer_identity.h"
#include "security/cluster_key.h"

namespace conduit {

struct HandshakeResult;

enum class PeerMode { kClusterKey, kSelfOnly, kInsecure };

struct PeerSecurityOptions {
  PeerMode mode = PeerMode::kSelfOnly;
  ClusterKey key;     // kClusterKey: the operator's; kSelfOnly: made by Create
  std::string self;   // this daemon's advertised "ip:port"
  bool seal = false;  // --encrypt-peers: RPC and object connections are sealed
};

class PeerSecurity {
 public:
  static Status Create(PeerSecurityOptions options, std::unique_ptr<PeerSecurity>* out);

  // Connects to "ip:port" (binding `source_ip` first when given) and authenticates. On
  // failure peer->remote is set when the TCP connection was made (the handshake failed).
  // `sealable`: the caller reads and writes through the Conn (RPC, objects) and takes a
  // sealed connection when the cluster encrypts; collective links pass false.
  Status Dial(const std::string& addr, Deadline deadline, bool sealable, Conn* conn, PeerIdentity* peer,
              const std::string& source_ip = "") const;
  // As Dial, for a loop that dials again on its own: a refused connection is retried only
  // until `connect_by` (so the loop sees its daemon stopping soon), and the handshake then
  // gets its own time (kHandshakeTimeoutMs).
  Status DialOnce(const std::string& addr, Deadline connect_by, bool sealable, Conn* conn, PeerIdentity* peer) const;
  // Authenticates a connection accepted on the peer port (`remote`: its address).
  Status Accept(UniqueFd fd, const std::string& remote, Conn* conn, PeerIdentity* peer) const;

  PeerMode mode() const { return options_.mode; }
  bool seal() const { return options_.seal && options_.mode != PeerMode::kInsecure; }
  const std::string& self() const { return options_.self; }
  // The key communicator secrets that every daemon must compute alike are derived under
  // (comm_secret.h, AddressCommIdentity): the cluster key (under --insecure-peers without
  // one, 32 zero bytes: anyone can compute them there, as anything else).
  const ClusterKey& key() const { return options_.key; }
  // One line for the start-up log: the mode, the key's fingerprint, sealing.
  std::string Describe() const;

 private:
  explicit PeerSecurity(PeerSecurityOptions options) : options_(std::move(options)) {}
  Status Wrap(UniqueFd fd, bool sealed, const HandshakeResult& result, Conn* conn) const;
  Status DialWithin(const std::string& addr, Deadline connect_by, Deadline handshake_by, bool sealable, Conn* conn,
                    PeerIdentity* peer, const std::string& source_ip) const;

  const PeerSecurityOptions options_;
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_SECURITY_PEER_SECURITY_H_
