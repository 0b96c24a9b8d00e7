// The TCP congestion control of the daemon's connections to other daemons.
//
// Why the daemon chooses one instead of taking the host's default: collective and object
// traffic between daemons is a burst per step (tens of KiB to MiBs), then silence while
// the step's data is reduced or the program's next call comes. BBR, which some kernels
// and cloud images make the default, paces every burst at its estimate of the path's
// rate; without the fq qdisc that pacing runs on per-socket timers, and on the hosts we
// measured a 128 KiB exchange then waited 3-16 ms for its last segments where the link
// carries it in 0.1 ms (docs/benchmarks.md, "Congestion control of the links between
// daemons"). CUBIC, Linux's own default, sends a burst at once within its window. Only
// the sockets between daemons are changed; programs' and other services' connections keep
// the host's choice.
//
// It is set when a socket is made (the peer listener, whose accepted connections inherit
// it, and each connecting socket), not on a connection already open: a socket that
// started under BBR keeps the kernel's pacing after a switch to another algorithm.
#ifndef CONDUIT_DAEMON_TRANSPORT_CONGESTION_H_
#define CONDUIT_DAEMON_TRANSPORT_CONGESTION_H_

#include <string>

#include "common/status.h"

namespace conduit {

// The setting's default, and the word that keeps the host's own default.
inline constexpr const char kDefaultPeerCongestion[] = "cubic";
inline constexpr const char kHostCongestion[] = "host";

// Checks a name for --peer-congestion: "host", or a kernel congestion control's name
// (1-15 characters of [a-z0-9_]).
Status CheckCongestionName(const std::string& name);

// Chooses the congestion control for connections to other daemons, once at start. The
// kernel is asked on a probe socket; if it refuses (not built in, not loadable, or not
// permitted to this process) the host's default stays and the returned status says why,
// for the caller to log. "host": the host's default, nothing is set.
Status SetPeerCongestion(const std::string& name);

// What connections to other daemons use: the chosen name, or "" for the host's default.
const std::string& PeerCongestion();

// Applies the choice to a new socket before it connects, or to a listener (no-op for the
// host's default). A refusal here, after the probe succeeded, is logged once and leaves the
// socket as it is.
void ApplyPeerCongestion(int fd);

}  // namespace conduit

#endif  // CONDUIT_DAEMON_TRANSPORT_CONGESTION_H_
