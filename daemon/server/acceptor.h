// The daemon's accept loops (program socket, peer port, admin socket, metrics port),
// written once, and the gate that parks them.
//
// A live upgrade (docs/upgrade.md) hands the listening sockets to a new conduitd. Until the
// new process has taken over, the old one must stop accepting without closing or shutting
// down the sockets (they are the same sockets the new process will serve, and a shutdown
// would end them for both): ListenerGate parks every loop between two accepts, so that
// connections wait in the kernel's backlog instead of being refused, and lets them go on if
// the upgrade is called off.
#ifndef CONDUIT_DAEMON_SERVER_ACCEPTOR_H_
#define CONDUIT_DAEMON_SERVER_ACCEPTOR_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>

#include "common/deadline.h"
#include "common/fd_io.h"
#include "common/net_addr.h"

namespace conduit {

class ListenerGate {
 public:
  ListenerGate();
  ListenerGate(const ListenerGate&) = delete;
  ListenerGate& operator=(const ListenerGate&) = delete;

  // Parks every accept loop on this gate and returns true once none of them is accepting
  // or handing over a connection (a loop that is handing one over parks when it is done);
  // false, with the gate open again, when some loop has not parked by the deadline.
  bool Park(Deadline deadline);
  // Lets parked loops accept again.
  void Resume();
  // Ends every loop for good (they return).
  void Stop();

  // For the loops: waits while parked; false once stopped.
  bool MayAccept();
  void Enter();
  void Leave();
  int wake_fd() const { return wake_.get(); }

 private:
  enum class State { kOpen, kParked, kStopped };

  UniqueFd wake_;  // an eventfd, readable while the gate is parked or stopped
  std::mutex mu_;
  std::condition_variable cv_;
  State state_ = State::kOpen;
  int loops_ = 0;   // loops running on this gate
  int parked_ = 0;  // of which parked
};

// Accepts connections on `listener` and gives each to `handle`, on the loop's own thread
// (which should start a thread for anything longer than a refusal), until `gate` is
// stopped or the listener is shut down. When the process is out of descriptors the
// connection is accepted and closed at once (counted in *refused), so the caller hears a
// refusal instead of waiting in the backlog. `what` names the socket in log lines.
void AcceptLoop(int listener, const char* what, ListenerGate* gate, std::atomic<uint64_t>* refused,
                const std::function<void(UniqueFd fd, const SockAddr& peer)>& handle);

}  // namespace conduit

#endif  // CONDUIT_DAEMON_SERVER_ACCEPTOR_H_
