// Busy polling before a blocking wait, for the waits on the small-call path.
//
// A thread that blocks in poll(2) and is woken by another CPU pays for the wake-up: an
// inter-processor interrupt and, on an idle core, the way out of its sleep state. On the
// 2-core VMs our benchmarks run on that costs about 45 us per wake-up (a program and its
// daemon on one core round-trip in 10 us, on two cores in 90-100 us), and a small
// collective crosses several: program -> daemon -> peer daemon -> daemon -> program.
// OpenMPI and NCCL avoid it by spinning. Here the waits that sit on that path (a shim
// waiting for its reply, a daemon session waiting for the next request, a collective
// waiting for a peer daemon's bytes, a point-to-point link's reader waiting for the next
// frame and a receive for its message, an object store's call waiting for its directory
// shard's answer) first poll without blocking for a bounded budget, yielding the CPU
// between tries so that a thread that has work on this core runs instead; only then do
// they block. The budget bounds the CPU a wait can burn (once per wait). It applies
// whatever CPUs the process may use: a process confined to one CPU (a rank bound to its
// core, a host with one CPU) gains the most, since the thread it waits for gets that CPU at
// the first yield, where a sleep would cost a wake-up (1 KiB all-reduce 2.4-3.8x faster with
// a program and its daemon sharing one CPU: docs/benchmarks.md, "Spinning on one CPU").
#ifndef CONDUIT_DAEMON_COMMON_BUSY_POLL_H_
#define CONDUIT_DAEMON_COMMON_BUSY_POLL_H_

#include <poll.h>
#include <sched.h>

#include <chrono>

namespace conduit {

// The process-wide budget of one wait, in microseconds (0: never spin). Set once at start
// (conduitd --busy-poll-us, $CONDUIT_BUSY_POLL_US in programs); kDefaultBusyPollMicros
// unless set.
constexpr int kDefaultBusyPollMicros = 50;
constexpr int kMaxBusyPollMicros = 100000;
void SetBusyPollMicros(int micros);
int BusyPollMicros();
// A second budget for the waits on another daemon's answer: a collective's transfer on 4
// hosts and more waiting for a peer daemon's bytes (conduitd --peer-busy-poll-us; the
// collective sets it on its links, Link::SetSpinMicros), and the object store's directory
// calls waiting for their shard's daemon (objects/directory_client.cc). Why longer: there
// a step waits for the slowest of several daemons, each a process among many on the
// host's CPUs, so the bytes often come after 50 us and before 200 (measured: mostly
// 1.0-1.4x faster all-reduces of 1-64 KiB on 4 hosts; on 2 hosts the A/Bs could not tell
// the two apart, so they keep the first: docs/benchmarks.md). It costs at most one budget per wait of a collective's step or per
// directory call, never per idle program or RPC connection.
constexpr int kDefaultPeerBusyPollMicros = 200;
void SetPeerBusyPollMicros(int micros);
int PeerBusyPollMicros();
// From how many hosts a collective's waits take the peer budget, in the daemon and in the
// program waiting for its reply (the reply follows the same steps).
constexpr int kPeerBusyPollMinHosts = 4;
// For the client libraries: the budget from $CONDUIT_BUSY_POLL_US, when it is set.
void SetBusyPollFromEnv();
// Whether $CONDUIT_BUSY_POLL_US is set: a client library's waits then all take that budget,
// also those that would take the peer budget by default.
bool BusyPollSetByEnv();
// A client library's budget for a wait whose answer comes after other daemons' (a Get's
// or Reduce's reply, a collective's on kPeerBusyPollMinHosts hosts or more): the peer
// budget, unless $CONDUIT_BUSY_POLL_US is set.
int ClientPeerBusyPollMicros();

// poll(fds, n, 0) repeatedly, yielding in between, until some descriptor is ready or the
// budget is spent. Returns what the last poll returned: > 0 ready, 0 nothing within the
// budget (the caller then blocks as it would have), < 0 an error (errno set).
int SpinPoll(pollfd* fds, nfds_t n);
// The same with the budget given (e.g. PeerBusyPollMicros()); <= 0: one poll.
int SpinPollFor(pollfd* fds, nfds_t n, int budget_micros);

// The same for one descriptor: true once it has one of `events` (or an error or hangup),
// spinning for `budget_micros` (< 0: BusyPollMicros()).
bool SpinUntilReady(int fd, short events, int budget_micros = -1);

// The loop under all of these: calls ready() repeatedly, yielding in between, until it is
// true (returns true) or `until` has passed (returns false). ready() is called at least once.
template <typename Ready>
bool SpinUntilTrue(std::chrono::steady_clock::time_point until, Ready ready) {
  while (!ready()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    sched_yield();
  }
  return true;
}

}  // namespace conduit

#endif  // CONDUIT_DAEMON_COMMON_BUSY_POLL_H_
