// DialLink: opens one link connection to another daemon (collective or p2p channel),
// optionally bound to a path's local address, authenticates it and does the LinkHello
// exchange.
#ifndef CONDUIT_DAEMON_COLLECTIVES_LINK_DIAL_H_
#define CONDUIT_DAEMON_COLLECTIVES_LINK_DIAL_H_

#include <string>

#include "common/fd_io.h"
#include "common/status.h"
#include "protocol/peer_protocol.h"

namespace conduit {

class PeerSecurity;

// `daemon` is the communicator member the link is for (its advertised address):
// whichever address is dialed, the daemon that answers must prove to be that one.
Status DialLink(const PeerSecurity& security, const std::string& daemon, const std::string& connect_addr,
                const std::string& local_ip, const peerproto::LinkHello& hello, int timeout_ms, UniqueFd* out);

}  // namespace conduit

#endif  // CONDUIT_DAEMON_COLLECTIVES_LINK_DIAL_H_
