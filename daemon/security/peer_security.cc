#include "security/peer_security.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>

#include "protocol/auth_protocol.h"
#include "security/aead_record_cipher.h"
#include "security/peer_handshake.h"
#include "transport/tcp.h"

namespace conduit {
namespace {

// The handshake must finish this soon, whatever the caller's deadline: a peer that
// connects and then says nothing must not hold a thread.
Deadline HandshakeDeadline(Deadline outer) {
  Deadline mine = Deadline::AfterMs(authproto::kHandshakeTimeoutMs);
  return outer.when() < mine.when() ? outer : mine;
}

// The handshake's last message and the caller's first frame go out back to back: without
// TCP_NODELAY, Nagle would hold the frame until the peer's delayed ACK (~40 ms).
void NoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

}  // namespace

Status PeerSecurity::Create(PeerSecurityOptions options, std::unique_ptr<PeerSecurity>* out) {
  if (options.mode == PeerMode::kSelfOnly) CONDUIT_RETURN_IF_ERROR(EphemeralClusterKey(&options.key));
  out->reset(new PeerSecurity(std::move(options)));
  return Status::Ok();
}

std::string PeerSecurity::Describe() const {
  switch (options_.mode) {
    case PeerMode::kClusterKey:
      return "daemon connections authenticated with the cluster key (key id " + options_.key.id + ")" +
             (seal() ? ", RPC and object traffic sealed (AES-256-GCM)" : ", not encrypted");
    case PeerMode::kSelfOnly:
      return "no --cluster-key: the peer port answers only this daemon (single host); give every daemon the same "
             "--cluster-key to span hosts";
    case PeerMode::kInsecure:
      return "--insecure-peers: daemon connections are NOT authenticated; any host that reaches the peer port can "
             "join communicators, read and inject data, and delete objects";
  }
  return "";
}

Status PeerSecurity::Wrap(UniqueFd fd, bool sealed, const HandshakeResult& result, Conn* conn) const {
  if (!sealed) {
    *conn = Conn(std::move(fd));
    return Status::Ok();
  }
  std::unique_ptr<RecordSealer> sealer;
  std::unique_ptr<RecordOpener> opener;
  CONDUIT_RETURN_IF_ERROR(NewAesGcmSealer(result.send, &sealer));
  CONDUIT_RETURN_IF_ERROR(NewAesGcmOpener(result.recv, &opener));
  *conn = Conn(std::move(fd), std::move(sealer), std::move(opener));
  return Status::Ok();
}

Status PeerSecurity::Dial(const std::string& addr, Deadline deadline, bool sealable, Conn* conn, PeerIdentity* peer,
                          const std::string& source_ip) const {
  return DialWithin(addr, deadline, deadline, sealable, conn, peer, source_ip);
}

Status PeerSecurity::DialOnce(const std::string& addr, Deadline connect_by, bool sealable, Conn* conn,
                              PeerIdentity* peer) const {
  return DialWithin(addr, connect_by, Deadline::Never(), sealable, conn, peer, "");
}

Status PeerSecurity::DialWithin(const std::string& addr, Deadline connect_by, Deadline handshake_by, bool sealable,
                                Conn* conn, PeerIdentity* peer, const std::string& source_ip) const {
  UniqueFd fd;
  peer->remote.clear();  // set once connected: a failure with it set is the handshake's
  peer->daemon.clear();
  CONDUIT_RETURN_IF_ERROR(TcpConnect(addr, connect_by, &fd, source_ip));
  NoDelay(fd.get());
  peer->remote = addr;
  if (options_.mode == PeerMode::kInsecure) {
    *conn = Conn(std::move(fd));
    return Status::Ok();
  }
  HandshakeConfig config{&options_.key, options_.self, sealable && seal(), options_.mode == PeerMode::kSelfOnly};
  HandshakeResult result;
  CONDUIT_RETURN_IF_ERROR(DialerHandshake(fd.get(), config, addr, HandshakeDeadline(handshake_by), &result));
  peer->daemon = result.peer_daemon;
  return Wrap(std::move(fd), result.sealed, result, conn);
}

Status PeerSecurity::Accept(UniqueFd fd, const std::string& remote, Conn* conn, PeerIdentity* peer) const {
  peer->remote = remote;
  peer->daemon.clear();
  if (options_.mode == PeerMode::kInsecure) {
    *conn = Conn(std::move(fd));
    return Status::Ok();
  }
  NoDelay(fd.get());
  HandshakeConfig config{&options_.key, options_.self, false, options_.mode == PeerMode::kSelfOnly};
  HandshakeResult result;
  CONDUIT_RETURN_IF_ERROR(AcceptorHandshake(fd.get(), config, remote, Deadline::AfterMs(authproto::kHandshakeTimeoutMs),
                                            &result));
  peer->daemon = result.peer_daemon;
  return Wrap(std::move(fd), result.sealed, result, conn);
}

}  // namespace conduit
