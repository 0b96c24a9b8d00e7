// The collective message versions this build speaks (protocol/peer_protocol.h: negotiated
// per communicator at its rendezvous). Defined in protocol_versions.cc, which is compiled
// into each executable rather than into the collectives library, so that a test build can
// speak another range (conduitd_next_protocol, as conduitd_next_state does for the state).
#ifndef CONDUIT_DAEMON_COLLECTIVES_PROTOCOL_VERSIONS_H_
#define CONDUIT_DAEMON_COLLECTIVES_PROTOCOL_VERSIONS_H_

#include "common/version_range.h"

namespace conduit {

VersionRange CollectiveProtocolVersions();

}  // namespace conduit

#endif  // CONDUIT_DAEMON_COLLECTIVES_PROTOCOL_VERSIONS_H_
