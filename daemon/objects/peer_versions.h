// The object protocol versions this build speaks with other daemons (PeerHello,
// protocol/object_protocol.h). Defined in peer_versions.cc, which is compiled into each
// executable rather than into the objects library, so that a test build can speak the range
// of an earlier release (conduitd_objects_4), as protocol_versions.cc does for collectives.
#ifndef CONDUIT_DAEMON_OBJECTS_PEER_VERSIONS_H_
#define CONDUIT_DAEMON_OBJECTS_PEER_VERSIONS_H_

#include "common/version_range.h"

namespace conduit {

VersionRange ObjectPeerVersions();

}  // namespace conduit

#endif  // CONDUIT_DAEMON_OBJECTS_PEER_VERSIONS_H_
