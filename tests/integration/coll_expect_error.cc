#include "coll_expect_error.h"

#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "coll_dtype.h"
#include "coll_nccl_util.h"
#include "coll_reference.h"

namespace conduit::it {

ErrorWait LoopUntilError(ncclComm_t comm, int rank, int nranks, const Options& opt) {
  using Clock = std::chrono::steady_clock;
  const size_t n = opt.error_count;
  auto start = Clock::now();
  auto last_ok = start;
  bool announced = false;
  for (uint64_t it = 0; Clock::now() - start < std::chrono::seconds(opt.max_seconds); ++it) {
    Pattern p(GetTypeInfo(ncclFloat32), Op::kSum, Mix(opt.seed, it), nranks);
    std::vector<float> send(n), recv(n);
    p.Fill(send.data(), rank, 0, n);
    ncclResult_t r = Settle(comm, ncclAllReduce(send.data(), recv.data(), n, ncclFloat32, ncclSum, comm, NoStream()));
    if (r != ncclSuccess) {
      auto since = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - last_ok).count();
      std::printf(
          "coll_check rank %d: got %s (%d) from ncclAllReduce at iteration %llu, %lld ms after the last "
          "success: last error: %s\n",
          rank, ResultName(r), static_cast<int>(r), static_cast<unsigned long long>(it), static_cast<long long>(since),
          ncclGetLastError(comm));
      return ErrorWait::kGotError;
    }
    for (size_t i = 0; i < n; ++i) {
      if (!p.Matches(&recv[i], p.Reduce(i))) {
        std::printf("FAIL rank %d: allreduce iteration %llu element %zu: got %s want %s\n", rank,
                    static_cast<unsigned long long>(it), i, p.Got(&recv[i]).c_str(), p.Want(p.Reduce(i)).c_str());
        return ErrorWait::kWrongResult;
      }
    }
    last_ok = Clock::now();
    if (!announced) {
      std::printf("coll_check rank %d: looping\n", rank);
      std::fflush(stdout);
      announced = true;
    }
    if (opt.hold_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(opt.hold_ms));
  }
  std::printf("coll_check rank %d: no error within %d s\n", rank, opt.max_seconds);
  return ErrorWait::kNoError;
}

}  // namespace conduit::it
