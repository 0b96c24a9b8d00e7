// Versions (protocol/object_protocol.h): 3, objects with owners; 4, DirStoreCopy; 5, a
// Delete's DropCopy acknowledged. A release that changes a message between daemons adds a
// version there and keeps the older ones for as long as rolling upgrades from them are
// supported (docs/upgrade.md).
//
// CMake sets CONDUIT_OBJECT_NEWEST_PEER_VERSION for conduitd_objects_4, this daemon as the
// release before 5 spoke: a test rolls a cluster from it to this release.
#include "objects/peer_versions.h"

#include "protocol/object_protocol.h"

#ifndef CONDUIT_OBJECT_NEWEST_PEER_VERSION
#define CONDUIT_OBJECT_NEWEST_PEER_VERSION 5
#endif

namespace conduit {

static_assert(CONDUIT_OBJECT_NEWEST_PEER_VERSION >= objproto::kOldestPeerVersion &&
              CONDUIT_OBJECT_NEWEST_PEER_VERSION <= objproto::kNewestPeerVersion);

VersionRange ObjectPeerVersions() {
  return VersionRange{objproto::kOldestPeerVersion, CONDUIT_OBJECT_NEWEST_PEER_VERSION};
}

}  // namespace conduit
