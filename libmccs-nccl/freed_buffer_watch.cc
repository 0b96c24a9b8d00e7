#include "freed_buffer_watch.h"

#include <chrono>
#include <exception>
#include <mutex>
#include <set>
#include <thread>

#include "comm.h"
#include "common/detached_thread.h"
#include "common/log.h"

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

void Sweep(Watch& w) {
  std::lock_guard<std::mutex> lock(w.mu);
  for (ncclComm* comm : w.comms) {
    // A call in progress releases what it must itself; an aborted or revoked communicator
    // is left alone (its connection is being shut down).
    std::unique_lock<std::mutex> op(comm->op_mu, std::try_to_lock);
    if (!op.owns_lock() || comm->magic.load() != kCommMagic || comm->revoked.load() || !comm->conn) continue;
    Status st = comm->device_path.ReleaseFreedBuffers(*comm->conn);
    if (!st.ok()) CLOG_DEBUG("rank %d: releasing freed device buffers: %s", comm->rank, st.message().c_str());
  }
}

void Run() {
  Watch& w = TheWatch();
  for (;;) {
    std::this_thread::sleep_for(kWatchEvery);
    Sweep(w);
  }
}

}  // namespace

void WatchForFreedBuffers(ncclComm* comm) {
  Watch& w = TheWatch();
  std::lock_guard<std::mutex> lock(w.mu);
  w.comms.insert(comm);
  if (w.started) return;
  try {
    SpawnDetached("the freed device buffer watch", [] { Run(); });
    w.started = true;
  } catch (const std::exception& e) {
    // Calls still release what was freed before them.
    CLOG_WARN("cannot start the watch for freed device buffers (%s): they are released at the next call", e.what());
  }
}

void StopWatchingForFreedBuffers(ncclComm* comm) {
  Watch& w = TheWatch();
  std::lock_guard<std::mutex> lock(w.mu);
  w.comms.erase(comm);
}

}  // namespace conduit
