// Versions: 3, the messages of protocol/peer_protocol.h as daemons spoke them before
// negotiation; 4, the same messages with halving-doubling all-reduces by default on 4 hosts
// and more up to 1 MiB (peerproto::kCollectiveVersionHalvingDoublingByDefault); 5, the same
// up to 2 MiB (kCollectiveVersionHalvingDoublingTo2MiB); 6, recursive doubling on 2 hosts up
// to 1 MiB (kCollectiveVersionTwoHostRecursiveDoublingTo1MiB). A release that changes
// a collective message or a choice all daemons must make alike adds a version here and keeps
// the older ones for as long as rolling upgrades from them are supported (docs/upgrade.md).
//
// CMake sets CONDUIT_COLLECTIVE_NEWEST_VERSION for conduitd_protocol_3, _4 and _5, this
// daemon as the releases before 4, 5 and 6 spoke: the tests roll a cluster from each to this
// release.
#include "collectives/protocol_versions.h"

#include "protocol/peer_protocol.h"

#ifndef CONDUIT_COLLECTIVE_OLDEST_VERSION
#define CONDUIT_COLLECTIVE_OLDEST_VERSION 3
#endif
#ifndef CONDUIT_COLLECTIVE_NEWEST_VERSION
#define CONDUIT_COLLECTIVE_NEWEST_VERSION 6
#endif

namespace conduit {

static_assert(CONDUIT_COLLECTIVE_OLDEST_VERSION >= peerproto::kCollectiveVersionBeforeNegotiation &&
              CONDUIT_COLLECTIVE_OLDEST_VERSION <= CONDUIT_COLLECTIVE_NEWEST_VERSION);

VersionRange CollectiveProtocolVersions() {
  return VersionRange{CONDUIT_COLLECTIVE_OLDEST_VERSION, CONDUIT_COLLECTIVE_NEWEST_VERSION};
}

}  // namespace conduit
