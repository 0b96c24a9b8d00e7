#include "collectives/link_dial.h"

#include <cstring>

#include "common/frame.h"
#include "security/peer_security.h"
#include "transport/tcp.h"

namespace conduit {

Status DialLink(const PeerSecurity& security, const std::string& daemon, const std::string& connect_addr,
                const std::string& local_ip, const peerproto::LinkHello& hello, int timeout_ms, UniqueFd* out) {
  Deadline deadline = Deadline::AfterMs(timeout_ms);
  Conn conn;
  PeerIdentity peer;
  CONDUIT_RETURN_IF_ERROR(security.Dial(connect_addr, deadline, /*sealable=*/false, &conn, &peer, local_ip));
  if (peer.authenticated() && peer.daemon != daemon) {
    return RemoteError("the daemon answering at %s is %s, not communicator member %s", connect_addr.c_str(),
                       peer.daemon.c_str(), daemon.c_str());
  }
  UniqueFd fd = conn.ReleaseFd();
  TuneTcpSocket(fd.get(), timeout_ms);
  CONDUIT_RETURN_IF_ERROR(WriteFrame(fd.get(), peerproto::kMagic, peerproto::kVersion, peerproto::kLinkHello, 0,
                                     &hello, sizeof(hello), deadline));
  Frame frame;
  CONDUIT_RETURN_IF_ERROR(
      ReadFrame(fd.get(), peerproto::kMagic, peerproto::kVersion, sizeof(peerproto::LinkHelloReply), &frame, deadline));
  peerproto::LinkHelloReply reply;
  if (frame.header.type != peerproto::kLinkHelloReply || frame.payload.size() != sizeof(reply)) {
    return SystemError("daemon %s answered a link request with a malformed frame", connect_addr.c_str());
  }
  memcpy(&reply, frame.payload.data(), sizeof(reply));
  CONDUIT_RETURN_IF_ERROR(FromWire(reply.status));
  *out = std::move(fd);
  return Status::Ok();
}

}  // namespace conduit
