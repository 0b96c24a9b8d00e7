// The version of protocol/upgrade_state.proto's DaemonState this build writes, and the
// oldest it reads. Bump kStateVersion when a change to the state cannot be read by older
// code the way it is meant (a field whose absence would be misread), and keep reading the
// older versions as long as upgrades from them are supported.
//
// Its own file so that a test build can be made with another version (CMake sets
// CONDUIT_UPGRADE_STATE_VERSION for conduitd_next_state, which checks the refusal).
#include "upgrade/handover.h"

// Versions: 1, the sockets and the operator's changes; 2, also the object store's copies
// (DaemonState.objects, which a version 1 reader would drop); 3, also collectives sessions
// and their communicators (DaemonState.shared, ProgramSession.descriptors); 4, gRPC program
// sessions; 5, the host regions of collectives sessions (CollectiveSession.regions, which
// an older reader would drop, leaving the program's next collective on them refused); 6,
// collectives sessions' GPU buffers (CollectiveSession.device_buffers, the same way) and
// communicators' collective message version (Communicator.protocol_version); 7, RPC calls in
// flight (RpcSession.calls, RpcShared.links: an older reader would drop them, and the
// programs' next events on those calls with them); 8, collectives sessions' spans of GPU
// pages (CollectiveSession.device_spans, as 6's buffers); 9, collectives sessions' reply
// pages (CollectiveSession.reply_page: an older reader would drop it, and refuses the
// Group flag that asks for it); 10, collectives sessions' request pages
// (CollectiveSession.request_page: an older reader would drop it, and the program's next
// request there would wait for good).
#ifndef CONDUIT_UPGRADE_STATE_VERSION
#define CONDUIT_UPGRADE_STATE_VERSION 10
#endif
#ifndef CONDUIT_UPGRADE_MIN_STATE_VERSION
#define CONDUIT_UPGRADE_MIN_STATE_VERSION 1
#endif

namespace conduit::upgrade {

uint32_t StateVersion() { return CONDUIT_UPGRADE_STATE_VERSION; }
uint32_t MinReadableStateVersion() { return CONDUIT_UPGRADE_MIN_STATE_VERSION; }

}  // namespace conduit::upgrade
