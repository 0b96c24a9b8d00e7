#include "comm_watch.h"

#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <exception>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "comm.h"
#include "common/detached_thread.h"
#include "common/log.h"
#include "shim_log.h"

namespace conduit {
namespace {

constexpr std::chrono::milliseconds kWatchEvery{200};

struct Watch {
  std::mutex mu;  // held through each sweep: StopWatching waits for one in progress
  std::set<ncclComm*> comms;
  bool started = false;
};

// Never destroyed: the watch thread runs until the process ends.
Watch& TheWatch() {
  static Watch* watch = new Watch;
  return *watch;
}

// Between calls conduitd sends nothing on a connection: anything readable is its end (or
// a reset). A byte that is there anyway is left for the next call to refuse.
bool ConnectionClosed(int fd) {
  char byte;
  const ssize_t n = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0) return true;
  return n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

void Sweep(Watch& w) {
  std::lock_guard<std::mutex> lock(w.mu);
  for (ncclComm* comm : w.comms) {
    // A call in progress does its own checks; an aborted or revoked communicator is left
    // alone (its connection is being shut down).
    std::unique_lock<std::mutex> op(comm->op_mu, std::try_to_lock);
    if (!op.owns_lock() || comm->magic.load() != kCommMagic || comm->revoked.load() || !comm->conn) continue;
    if (CheckDaemonGone(comm)) continue;
    Status st = comm->device_path.ReleaseFreedBuffers(*comm->conn);
    if (!st.ok()) CLOG_DEBUG("rank %d: releasing freed device buffers: %s", comm->rank, st.message().c_str());
  }
}

void Run() {
  Watch& w = TheWatch();
  for (;;) {
    std::this_thread::sleep_for(kWatchEvery);
    try {
      Sweep(w);
    } catch (const std::exception& e) {
      CLOG_WARN("the communicator watch: %s", e.what());  // the next sweep tries again
    }
  }
}

}  // namespace

bool CheckDaemonGone(ncclComm* comm) {
  // A revoke may have shut the connection down itself (to end a waiting call): the daemon
  // then lets this rank's groups go, and a closed connection says nothing of the daemon.
  if (comm->revoked.load() || !comm->conn || !ConnectionClosed(comm->conn->fd())) return false;
  std::string what = "conduitd closed the connection (did the daemon die?)";
  Status st;
  const bool had_waits = comm->device_path.ReleaseStreamsOfLostDaemon(&st);
  if (had_waits) {
    what += st.ok() ? " with asynchronous collectives in flight: their results are undefined, and the streams "
                      "waiting on them were released"
                    : " with asynchronous collectives in flight, and releasing the streams waiting on them failed (" +
                          st.message() + "): they may wait for good";
  }
  // The first time: ncclGetLastError says why ncclCommGetAsyncError now reports it.
  int expected = ncclSuccess;
  if (comm->async_error.compare_exchange_strong(expected, ncclSystemError)) {
    const std::string call = "rank " + std::to_string(comm->rank) + "'s connection";
    Fail(call.c_str(), Status(ncclSystemError, what));
  } else if (had_waits) {
    CLOG_ERROR("rank %d: %s", comm->rank, what.c_str());
  }
  return true;
}

void WatchComm(ncclComm* comm) {
  Watch& w = TheWatch();
  std::lock_guard<std::mutex> lock(w.mu);
  w.comms.insert(comm);
  if (w.started) return;
  try {
    SpawnDetached("the communicator watch", [] { Run(); });
    w.started = true;
  } catch (const std::exception& e) {
    // Calls still release what was freed before them.
    CLOG_WARN("cannot start the communicator watch (%s): freed device buffers are released at the next call, and "
              "streams are not released should conduitd die",
              e.what());
  }
}

void StopWatchingComm(ncclComm* comm) {
  Watch& w = TheWatch();
  std::lock_guard<std::mutex> lock(w.mu);
  w.comms.erase(comm);
}

}  // namespace conduit
