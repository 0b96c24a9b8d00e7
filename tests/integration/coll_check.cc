// coll_check: runs NCCL collectives through whatever libnccl.so.2 it is linked with and
// checks every element of every result. One process runs ranks R..R+T-1 (one thread each);
// see coll_options.cc for the command line and coll_cases.h for what is checked.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "coll_cases.h"
#include "coll_expect_error.h"
#include "coll_id_file.h"
#include "coll_nccl_util.h"
#include "coll_options.h"
#include "linger.h"
#include "nccl.h"

namespace conduit::it {
namespace {

constexpr int kIdWaitSeconds = 60;

ncclResult_t InitRank(const Options& opt, int rank, const ncclUniqueId& id, ncclComm_t* comm) {
  if (!opt.nonblocking) return ncclCommInitRank(comm, opt.nranks, id, rank);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclResult_t r = ncclCommInitRankConfig(comm, opt.nranks, id, rank, &config);
  if (r != ncclInProgress && r != ncclSuccess) return r;
  return Settle(*comm, ncclInProgress);  // the handle exists; ask it until init is done
}

// Returns the rank's exit status: 0 ok, 1 failures, 3 --expect-error saw no error.
int RunRank(const Options& opt, int rank, const ncclUniqueId& id, ncclComm_t comm) {
  if (comm == nullptr) {
    ncclResult_t r = InitRank(opt, rank, id, &comm);
    if (r != ncclSuccess) {
      std::printf("FAIL rank %d: communicator init returned %s (%s): last error: %s\n", rank, ResultName(r),
                  ncclGetErrorString(r), ncclGetLastError(comm));
      std::printf("coll_check rank %d: 0 passed, 1 failed\n", rank);
      return 1;
    }
  }
  if (opt.expect_error) {
    ErrorWait w = LoopUntilError(comm, rank, opt.nranks, opt);
    // The communicator is broken now; abort must tear it down without waiting on peers.
    ncclResult_t a = ncclCommAbort(comm);
    std::printf("coll_check rank %d: ncclCommAbort returned %s\n", rank, ResultName(a));
    return w == ErrorWait::kGotError ? 0 : (w == ErrorWait::kNoError ? 3 : 1);
  }
  CaseRunner runner(comm, rank, opt.nranks, opt);
  runner.RunAll();
  RankResult res = runner.result();
  if (opt.linger_ms > 0 && !res.aborted) {
    std::printf("coll_check rank %d: lingering\n", rank);
    LingerUntilReleased(opt.linger_ms, opt.release_file);
  }
  if (!res.aborted) {
    ncclResult_t fin = Settle(comm, ncclCommFinalize(comm));
    if (fin != ncclSuccess) {
      std::printf("FAIL rank %d: ncclCommFinalize returned %s: %s\n", rank, ResultName(fin), ncclGetLastError(comm));
      ++res.failed;
    }
    ncclResult_t des = ncclCommDestroy(comm);
    if (des != ncclSuccess) {
      std::printf("FAIL rank %d: ncclCommDestroy returned %s\n", rank, ResultName(des));
      ++res.failed;
    }
  } else {
    ncclCommAbort(comm);
  }
  std::printf("coll_check rank %d: %d passed, %d failed%s\n", rank, res.passed, res.failed,
              res.aborted ? " (stopped at the first failed call)" : "");
  return res.failed > 0 ? 1 : 0;
}

int Main(int argc, char** argv) {
  // Line-buffered even into a file: the harness reads progress while we run, and a
  // SIGKILL must not swallow what was already printed.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  Options opt;
  if (!ParseOptions(argc, argv, &opt)) return 2;
  const int t = opt.threads;
  std::vector<ncclComm_t> comms(t, nullptr);
  ncclUniqueId id{};
  // With NCCL_COMM_ID every process computes the id itself, as launchers that set it expect.
  const bool id_from_address = std::getenv("NCCL_COMM_ID") != nullptr;
  if (t == opt.nranks && !opt.nonblocking) {
    // Every rank lives here: the single-process API creates them all at once.
    std::vector<int> devs(t);
    for (int i = 0; i < t; ++i) devs[i] = i;
    ncclResult_t r = ncclCommInitAll(comms.data(), t, devs.data());
    if (r != ncclSuccess) {
      std::printf("FAIL: ncclCommInitAll returned %s (%s): last error: %s\n", ResultName(r), ncclGetErrorString(r),
                  ncclGetLastError(nullptr));
      return 1;
    }
  } else if (opt.rank == 0 || id_from_address) {
    ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess) {
      std::printf("FAIL: ncclGetUniqueId returned %s: %s\n", ResultName(r), ncclGetLastError(nullptr));
      return 1;
    }
    if (t != opt.nranks && !id_from_address && !WriteIdFile(opt.id_file, id)) {
      std::printf("FAIL: cannot write %s\n", opt.id_file.c_str());
      return 1;
    }
  } else if (!ReadIdFile(opt.id_file, kIdWaitSeconds, &id)) {
    std::printf("FAIL: no unique id in %s after %d s\n", opt.id_file.c_str(), kIdWaitSeconds);
    return 1;
  }
  std::vector<int> status(t, 0);
  std::vector<std::thread> threads;
  for (int k = 0; k < t; ++k) {
    threads.emplace_back([&, k] { status[k] = RunRank(opt, opt.rank + k, id, comms[k]); });
  }
  for (std::thread& th : threads) th.join();
  int worst = 0;
  for (int s : status) worst = s > worst ? s : worst;
  return worst;
}

}  // namespace
}  // namespace conduit::it

int main(int argc, char** argv) { return conduit::it::Main(argc, argv); }
