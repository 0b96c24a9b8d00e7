// The collectives' daemon-to-daemon messages as bytes: every check a receiver makes before it
// acts on one, as pure functions (no sockets, no state), so each is tested and fuzzed on its
// own (tests/fuzz) and the services only call them.
#ifndef CONDUIT_DAEMON_COLLECTIVES_PEER_MESSAGES_H_
#define CONDUIT_DAEMON_COLLECTIVES_PEER_MESSAGES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/frame.h"
#include "common/status.h"
#include "common/version_range.h"
#include "protocol/peer_protocol.h"

namespace conduit {

// Whether a Register may be served, before any state is created for it. `proven` is the
// daemon its connection authenticated as ("" under --insecure-peers); the rank's daemon is
// that one, and the Register's own daemon_addr must agree. *daemon is the rank's daemon.
Status ValidateRegister(const peerproto::RegisterRequest& request, const std::string& proven, std::string* daemon);

// A Register's payload: the request, and the collective message versions its daemon speaks
// (3 only when it sent no RegisterVersions, as daemons from before negotiation do).
Status ParseRegister(const std::vector<uint8_t>& payload, peerproto::RegisterRequest* request,
                     VersionRange* versions);

// Whether a LinkHello is well-formed (channel, host index, epoch, path), before the
// communicator it names is looked up.
Status ValidateLinkHello(const peerproto::LinkHello& hello);

// A Membership reply for a rank of an `nranks` communicator: every rank's daemon, the ring
// order (which Communicator::Setup still checks is a permutation of the hosts) and the
// collective message version the root chose (3 from a root from before negotiation).
Status ParseMembership(const std::vector<uint8_t>& payload, int nranks, std::vector<std::string>* rank_addrs,
                       std::vector<int>* ring, uint32_t* version);

// The header of a frame on a point-to-point link: a known type whose length fits it.
Status CheckP2pFrameHeader(const FrameHeader& h);
// A P2pData from host `from` to this host (`me`): src must live on `from`, dst here.
Status CheckP2pData(const peerproto::P2pData& head, const std::vector<int>& host_of_rank, int from, int me,
                    uint64_t max_bytes);

}  // namespace conduit

#endif  // CONDUIT_DAEMON_COLLECTIVES_PEER_MESSAGES_H_
