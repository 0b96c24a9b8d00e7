// DialLink: opens one link connection to another daemon (collective or p2p channel),
// optionally bound to a path's local address, and does the LinkHello exchange.
#ifndef CONDUIT_DAEMON_COLLECTIVES_LINK_DIAL_H_
#define CONDUIT_DAEMON_COLLECTIVES_LINK_DIAL_H_

#include <string>

#include "common/fd_io.h"
#include "common/peer_protocol.h"
#include "common/status.h"

namespace conduit {

Status DialLink(const std::string& connect_addr, const std::string& local_ip, const peerproto::LinkHello& hello,
                int timeout_ms, UniqueFd* out);

}  // namespace conduit

#endif  // CONDUIT_DAEMON_COLLECTIVES_LINK_DIAL_H_
