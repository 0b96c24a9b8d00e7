// abort_probe: ncclCommAbort from one thread while the communicator is busy elsewhere.
//  1. Rank 0 of two (both in this process, rank 1 never calls) waits inside ncclAllReduce
//     on a second thread; the main thread aborts rank 0. The waiting call must fail and
//     the abort return, both within moments, not at the daemon's timeout.
//  2. A non-blocking init of rank 0 of two (rank 1 never joins) is pending; aborting it
//     must return within moments.
// Prints one line per case with the times; exits 0 when both cases behave.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "nccl.h"

namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

constexpr double kPromptMs = 5000;  // far below any daemon timeout the test gives

bool AbortDuringCall() {
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return false;
  ncclComm_t comms[2] = {nullptr, nullptr};
  ncclGroupStart();
  ncclCommInitRank(&comms[0], 2, id, 0);
  ncclCommInitRank(&comms[1], 2, id, 1);
  if (ncclGroupEnd() != ncclSuccess) {
    std::printf("abort_probe: init of two ranks failed: %s\n", ncclGetLastError(nullptr));
    return false;
  }
  float data[256] = {};
  std::atomic<int> result{-1};
  std::atomic<double> call_ms{-1};
  const Clock::time_point start = Clock::now();
  std::thread caller([&] {
    result = ncclAllReduce(data, data, 256, ncclFloat32, ncclSum, comms[0], nullptr);
    call_ms = MsSince(start);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the call is waiting for rank 1
  const Clock::time_point abort_start = Clock::now();
  ncclResult_t aborted = ncclCommAbort(comms[0]);
  const double abort_ms = MsSince(abort_start);
  caller.join();
  ncclCommAbort(comms[1]);
  std::printf("abort_probe: abort during a call: ncclCommAbort=%d in %.0f ms; the call returned %d after %.0f ms\n",
              static_cast<int>(aborted), abort_ms, result.load(), call_ms.load());
  return aborted == ncclSuccess && abort_ms < kPromptMs && result != ncclSuccess && result != -1 &&
         call_ms < 300 + kPromptMs;
}

bool AbortDuringInit() {
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return false;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  ncclResult_t started = ncclCommInitRankConfig(&comm, 2, id, 0, &config);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // waiting for rank 1
  ncclResult_t state = ncclInProgress;
  ncclCommGetAsyncError(comm, &state);
  const Clock::time_point abort_start = Clock::now();
  ncclResult_t aborted = ncclCommAbort(comm);
  const double abort_ms = MsSince(abort_start);
  std::printf("abort_probe: abort during a non-blocking init: init returned %d, state %d before; ncclCommAbort=%d in "
              "%.0f ms\n",
              static_cast<int>(started), static_cast<int>(state), static_cast<int>(aborted), abort_ms);
  return started == ncclInProgress && state == ncclInProgress && aborted == ncclSuccess && abort_ms < kPromptMs;
}

}  // namespace

int main() {
  const bool call = AbortDuringCall();
  const bool init = AbortDuringInit();
  std::printf("abort_probe: %s\n", call && init ? "ok" : "FAILED");
  return call && init ? 0 : 1;
}
