// struct ncclComm as the managed shim defines it: one rank's handle on a communicator
// that lives in conduitd.
#ifndef CONDUIT_LIBMCCS_NCCL_COMM_H_
#define CONDUIT_LIBMCCS_NCCL_COMM_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/unique_id.h"
#include "daemon_connection.h"
#include "device_path.h"
#include "nccl.h"
#include "protocol/shim_protocol.h"
#include "result_area.h"
#include "staging_buffer.h"

namespace conduit {

inline constexpr uint32_t kCommMagic = 0x434d4d43;  // "CMMC": catches stale or garbage handles

// A PreMulSum op made by ncclRedOpCreatePreMulSum; its handle is ncclNumOps + index.
struct PreMulSumOp {
  bool live = false;
  ncclDataType_t type = ncclFloat32;
  ncclScalarResidence_t residence = ncclScalarHostImmediate;
  uint8_t scalar[8] = {};     // host-immediate value, captured at creation
  const void* pointer = nullptr;  // read at each use when the scalar lives in memory
};

}  // namespace conduit

struct ncclComm {
  std::atomic<uint32_t> magic{conduit::kCommMagic};  // 0 once destroyed or aborted
  int rank = -1;
  int nranks = 0;
  int device = 0;
  bool blocking = true;
  std::atomic<uint64_t> op_count{0};  // calls submitted, as NCCL's opCount in its COLL lines

  // Filled by a successful init (possibly on the non-blocking init thread).
  std::unique_ptr<conduit::DaemonConnection> conn;
  conduit::StagingBuffer staging;
  uint64_t key = 0;
  int host_index = 0;
  std::vector<std::string> host_addrs;
  std::vector<int> host_of_rank;

  // ncclSuccess, ncclInProgress during a non-blocking init, or the error that broke it.
  std::atomic<int> async_error{ncclSuccess};
  std::mutex init_mu;
  std::condition_variable init_cv;
  bool init_done = true;
  std::thread init_thread;

  std::mutex op_mu;  // one request at a time on this rank's connection
  // ncclCommRevoke: operations are refused; split, shrink, destroy and abort still work.
  std::atomic<bool> revoked{false};

  // ncclCommAbort from any thread: the connection the communicator is using (its init's,
  // then conn's), shut down to end whatever waits on it. -1 while none is open.
  std::mutex abort_mu;
  int live_fd = -1;      // under abort_mu
  bool aborted = false;  // under abort_mu
  // Under abort_mu: a revoke shut the connection down to end a call another thread waited in.
  bool revoke_shut_connection = false;
  // The id this communicator was made from: split and shrink derive their children's from
  // it on a fresh connection once a revoke has shut this one down.
  conduit::CommIdentity identity;
  conduit::DevicePath device_path;  // device buffers on this connection (under op_mu)
  // Host regions attached on this connection, and those it refused (under op_mu).
  std::set<uint64_t> attached_regions, refused_regions;
  uint64_t region_frees_seen = 0;  // RegionFrees() when freed regions were last released
  // The daemon serves Send and Recv, and Reduce and ReduceScatter, in host regions (its
  // group replies say so; under op_mu).
  bool p2p_in_regions = false;
  bool reduce_in_regions = false;
  bool counts_in_place_root = false;  // kReplyCountsInPlaceRoot: kOpOutputIsInput is understood
  conduit::ResultAreaView result_area;  // the communicator's results on this host (under op_mu)
  uint64_t split_generation = 0;
  uint64_t shrink_generation = 0;
  std::mutex redop_mu;
  std::vector<conduit::PreMulSumOp> redops;
};

namespace conduit {

// Validates a handle passed in by the program; nullptr and non-Conduit pointers fail.
bool ValidComm(const ncclComm* comm);
// Blocks until a non-blocking init finished; returns its result.
ncclResult_t WaitInit(ncclComm* comm);
// `st` as the caller should see it: a failure caused by ncclCommAbort on another thread says
// so (the connection it shut down otherwise reads as a daemon that died).
Status ExplainAbort(ncclComm* comm, Status st);

}  // namespace conduit

#endif  // CONDUIT_LIBMCCS_NCCL_COMM_H_
