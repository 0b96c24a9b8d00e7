// Versions: 3, the messages of protocol/peer_protocol.h as daemons spoke them before
// negotiation. A release that changes a collective message adds a version here and keeps
// the older ones for as long as rolling upgrades from them are supported (docs/upgrade.md).
//
// CMake sets CONDUIT_COLLECTIVE_NEWEST_VERSION for conduitd_next_protocol, the same daemon
// claiming a next version with the same messages: the tests check which version mixed
// communicators agree on.
#include "collectives/protocol_versions.h"

#include "protocol/peer_protocol.h"

#ifndef CONDUIT_COLLECTIVE_OLDEST_VERSION
#define CONDUIT_COLLECTIVE_OLDEST_VERSION 3
#endif
#ifndef CONDUIT_COLLECTIVE_NEWEST_VERSION
#define CONDUIT_COLLECTIVE_NEWEST_VERSION 3
#endif

namespace conduit {

static_assert(CONDUIT_COLLECTIVE_OLDEST_VERSION >= peerproto::kCollectiveVersionBeforeNegotiation &&
              CONDUIT_COLLECTIVE_OLDEST_VERSION <= CONDUIT_COLLECTIVE_NEWEST_VERSION);

VersionRange CollectiveProtocolVersions() {
  return VersionRange{CONDUIT_COLLECTIVE_OLDEST_VERSION, CONDUIT_COLLECTIVE_NEWEST_VERSION};
}

}  // namespace conduit
