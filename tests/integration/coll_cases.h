// Runs every requested collective x type x op x size x placement on one communicator rank
// and checks all elements against the reference. All ranks run the same case sequence in
// the same order (their case seeds match), so a rank never waits for a collective the
// others skip; on the first failing call the rank stops, because the others can no longer
// be assumed to be in step.
#ifndef CONDUIT_TESTS_INTEGRATION_COLL_CASES_H_
#define CONDUIT_TESTS_INTEGRATION_COLL_CASES_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "coll_options.h"
#include "coll_reference.h"
#include "nccl.h"

namespace conduit::it {

struct RankResult {
  int passed = 0;
  int failed = 0;
  bool aborted = false;  // a call failed: later cases were not run
};

class CaseRunner {
 public:
  CaseRunner(ncclComm_t comm, int rank, int nranks, const Options& opt);

  void RunAll();
  // Count/UserRank/CuDevice/GetAsyncError: the communicator knows who it is and is healthy.
  void CheckIdentity(const char* when);
  const RankResult& result() const { return result_; }

 private:
  // A case's buffer: heap memory, or with --mem-alloc ncclMemAlloc's (which Conduit
  // shares with the daemon as a host region: ops on it run without staging copies).
  class Buffer {
   public:
    Buffer(size_t bytes, unsigned char fill, bool nccl_alloc);
    ~Buffer();
    Buffer(Buffer&& other) noexcept : data_(other.data_), nccl_alloc_(other.nccl_alloc_) { other.data_ = nullptr; }
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    unsigned char* data() const { return data_; }

   private:
    unsigned char* data_ = nullptr;
    bool nccl_alloc_ = false;
  };
  using ExpectFn = std::function<Expect(size_t)>;

  void RunColl(const std::string& coll, ncclDataType_t type, Op op, size_t count, bool inplace);
  void AllReduce(const Pattern& p, const std::string& d, ncclRedOp_t op, size_t n, bool inplace);
  void Broadcast(const Pattern& p, const std::string& d, int root, size_t n, bool inplace);
  void Reduce(const Pattern& p, const std::string& d, ncclRedOp_t op, int root, size_t n, bool inplace);
  void AllGather(const Pattern& p, const std::string& d, size_t n, bool inplace);
  void ReduceScatter(const Pattern& p, const std::string& d, ncclRedOp_t op, size_t n, bool inplace);
  void AllToAll(const Pattern& p, const std::string& d, size_t n);
  void SendRecvRing(const Pattern& p, const std::string& d, size_t n, bool one_buffer);
  void SendRecvAllPairs(const Pattern& p, const std::string& d, size_t n);
  void Backlog(const Pattern& p, const std::string& d, size_t n);
  void Gather(const Pattern& p, const std::string& d, int root, size_t n, bool inplace);
  void Scatter(const Pattern& p, const std::string& d, int root, size_t n, bool inplace);
  void Split();

  bool AnotherRound(std::chrono::steady_clock::time_point start);
  // Reports a failed call (and stops the run); returns true on success.
  bool Call(const std::string& what, ncclResult_t r);
  void Check(const std::string& desc, const Pattern& p, const unsigned char* buf, size_t n, const ExpectFn& want);
  Buffer Alloc(const Pattern& p, size_t elems) const;  // filled with a sentinel
  std::vector<int> Roots() const;
  uint64_t NextCaseSeed() { return Mix(opt_.seed, ++case_counter_); }

  ncclComm_t comm_;
  int rank_;
  int nranks_;
  const Options& opt_;
  RankResult result_;
  uint64_t case_counter_ = 0;
  // Every other PreMulSum case passes its factor by pointer (ncclScalarDevice; host memory
  // here) and sets it only after creating the op: the shim must read it when it runs.
  uint64_t premul_cases_ = 0;
  unsigned char premul_factor_[8] = {};
};

}  // namespace conduit::it

#endif  // CONDUIT_TESTS_INTEGRATION_COLL_CASES_H_
