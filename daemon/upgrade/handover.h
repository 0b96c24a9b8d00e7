// Live upgrade: both ends of the handover of a running conduitd to the new process that
// replaces it (protocol/upgrade_protocol.h; design and limits in docs/upgrade.md).
//
// The old daemon starts the new binary with its own command line and --take-over-fd, parks
// its accept loops, and hands over its listening sockets and its state; the new daemon
// builds its services on them, replays the operator's run-time changes, and says Ready;
// only then does the old one exit. Until Ready nothing has moved: a new daemon that refuses
// the state, fails to start or says nothing in time is killed and the old one accepts
// again, as if nothing had happened.
#ifndef CONDUIT_DAEMON_UPGRADE_HANDOVER_H_
#define CONDUIT_DAEMON_UPGRADE_HANDOVER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/fd_io.h"
#include "common/frame.h"
#include "common/status.h"
#include "protocol/upgrade_protocol.h"
#include "protocol/upgrade_state.pb.h"
#include "server/acceptor.h"

namespace conduit::upgrade {

// The DaemonState versions this build writes and reads (state_version.cc).
uint32_t StateVersion();
uint32_t MinReadableStateVersion();

// ---- The old daemon's side ----

struct HandOverRequest {
  std::string binary;             // the new conduitd
  std::vector<std::string> args;  // its arguments (this daemon's own, without argv[0])
  int timeout_ms = 60000;         // from start to Ready
  int drain_ms = 3000;            // for program sessions to reach a request boundary
};

struct HandOverHooks {
  ListenerGate* gate = nullptr;  // every accept loop of the daemon
  // Called with the gate parked: fails (and nothing is handed over) when the daemon cannot
  // be handed over now; otherwise fills the state and the descriptors it names (objects'
  // memfds, programs' connections; sent as Descriptor messages, index i+1 for [i]).
  // `drain_ms`: how long program sessions get to reach the end of a request.
  std::function<Status(int drain_ms, v1::DaemonState*, std::vector<UniqueFd>* descriptors)> snapshot;
  // Called when the upgrade is called off after a successful snapshot: what it stopped
  // (program sessions parked between two requests) goes on.
  std::function<void()> resume;
  std::vector<std::pair<upgradeproto::ListenerRole, int>> listeners;  // not owned
};

struct HandOverOutcome {
  int new_pid = -1;
  std::string new_release;
  double pause_ms = 0;  // accept loops parked, until the new daemon said Ready
};

// One upgrade. Ok: the new daemon serves, and the caller must exit without closing,
// shutting down or unlinking the sockets. Otherwise this daemon goes on serving (gate
// resumed, the new process killed and reaped) and the status says why.
Status HandOver(const HandOverRequest& request, const HandOverHooks& hooks, HandOverOutcome* outcome);

// What the old daemon reads from the new one, checked (exposed for the fuzzer): its Hello;
// and its answer to the state, Ok for Ready, its reason for Failed, an error otherwise.
Status ParseHello(const Frame& frame, upgradeproto::Hello* hello);
Status ParseAnswer(const Frame& frame);

// ---- The new daemon's side ----

struct TakeOver {
  std::map<upgradeproto::ListenerRole, UniqueFd> listeners;
  std::vector<UniqueFd> descriptors;  // Descriptor index i+1
  v1::DaemonState state;

  // The descriptor the state names by `index` (1-based), taken out; invalid when there is
  // no such descriptor or it was taken already (a state naming one twice).
  UniqueFd Take(uint32_t index) { return TakeDescriptor(&descriptors, index); }
  // Takes every descriptor `indexes` names, in order, into *out; false when one is missing.
  template <typename Indexes>
  bool TakeAll(const Indexes& indexes, std::vector<UniqueFd>* out) {
    bool all = true;
    for (uint32_t index : indexes) {
      out->push_back(Take(index));
      all = all && out->back().valid();
    }
    return all;
  }
};

// Says Hello on `fd` (kTakeOverFd) and receives the listeners and the state, or the old
// daemon's refusal (as the error).
Status ReceiveTakeOver(int fd, const std::string& release, int timeout_ms, TakeOver* out);
// The last words with the old daemon: Ready, then its Go (from then on this daemon serves
// and the old one exits; an error means it gave up on this one, which must exit unserved),
// or why this one cannot take over (the old one goes on).
Status SendReadyAndWaitGo(int fd, int timeout_ms);
void SendFailed(int fd, const Status& why);

}  // namespace conduit::upgrade

#endif  // CONDUIT_DAEMON_UPGRADE_HANDOVER_H_
