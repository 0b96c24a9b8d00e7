// Communicator: one NCCL communicator as seen by one daemon.
//
// It knows every rank's host, holds the links to the other daemons of the communicator,
// and runs collectives once all of this host's ranks have submitted the same one: the
// host's buffers are combined here first, then only one stream per host crosses the
// network (hierarchical), then results are handed back to every local rank.
#ifndef CONDUIT_DAEMON_COLLECTIVES_COMMUNICATOR_H_
#define CONDUIT_DAEMON_COLLECTIVES_COMMUNICATOR_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "collectives/comm_stats.h"
#include "collectives/mailbox.h"
#include "common/shim_protocol.h"
#include "common/staging_control.h"
#include "common/status.h"
#include "transport/link.h"

namespace conduit {

struct CommOptions {
  int timeout_ms = 300000;
  size_t chunk_bytes = 512 * 1024;
  // Allreduce algorithm: "auto" picks recursive doubling up to rd_max_bytes where the
  // cost model (RecursiveDoublingIsFaster with rd_latency_bytes) prefers it, ring above.
  std::string allreduce_algo = "auto";
  size_t rd_max_bytes = 64 * 1024;
  size_t rd_latency_bytes = 4096;
};

// Where a local rank's op data lives: its shared segment as mapped in the daemon.
struct RankBuffer {
  uint8_t* base = nullptr;
  size_t size = 0;
};

// How one group request's data reaches the daemon.
struct GroupContext {
  // The shim is still copying the inputs and copies outputs out as they become final
  // (StagingControl at the start of the segment). Only for a group of one collective.
  bool streamed = false;
  int session_fd = -1;  // the program's connection, to notice it dying mid-copy
};

struct Membership {
  std::vector<std::string> host_addrs;  // communicator hosts, ordered by their lowest rank
  std::vector<int> host_of_rank;
  int my_host = 0;
};

class Communicator {
 public:
  Communicator(uint64_t key, int nranks, std::string my_addr, CommOptions options);
  ~Communicator();

  uint64_t key() const { return key_; }
  int nranks() const { return nranks_; }
  const Membership& membership() const { return membership_; }
  const std::vector<int>& local_ranks() const { return local_ranks_; }

  // Called by every local rank after the rendezvous with the same rank->daemon list. The
  // first caller builds the membership and connects links; all wait until it is ready.
  Status Setup(const std::vector<std::string>& rank_addrs,
               const std::function<Status(Communicator&)>& connect_links);
  // Installs the link to `host` for `channel` (0 collective, 1 p2p); the communicator owns it.
  void AttachLink(int host, uint32_t channel, std::unique_ptr<Link> link);
  // Waits until links to every other host exist on both channels.
  Status WaitLinks();

  // Runs one group of ops for local rank `rank`; returns when all are done.
  Status RunGroup(int rank, const RankBuffer& buffer, const std::vector<shimproto::OpDesc>& ops, int* failed_op,
                  const GroupContext& context = {});
  // Validates one op against the communicator and the rank's segment (no side effects).
  Status ValidateOp(int rank, const RankBuffer& buffer, const shimproto::OpDesc& op) const;

  // A local rank leaves: gracefully (destroy) or not (its program died).
  void Leave(int rank, bool graceful);
  // Fails all current and future ops and drops the links (peers notice promptly).
  void Abort(const Status& reason);
  Status failure() const;

  // True once Setup finished successfully; membership() and local_ranks() may be read by
  // other threads only then.
  bool ready() const {
    std::lock_guard<std::mutex> lock(mu_);
    return setup_done_ && setup_status_.ok();
  }
  const CommOptions& options() const { return options_; }
  const CommStats& stats() const { return stats_; }
  // Collectives executed so far (the next one's sequence number).
  uint64_t collective_seq() const { return coll_seq_.load(std::memory_order_relaxed); }

  // Delivery from a p2p link's reader thread.
  void DeliverP2p(int src, int dst, std::vector<uint8_t> bytes) { mailbox_.PostRemote(src, dst, std::move(bytes)); }

 private:
  struct CollRequest {
    int rank;
    RankBuffer buffer;
    shimproto::OpDesc op;
    StagingControl* control = nullptr;  // set for streamed groups
    int session_fd = -1;
    bool done = false;
    Status status;
  };

  Deadline OpDeadline() const { return Deadline::AfterMs(options_.timeout_ms); }
  Status RunCollective(int rank, const RankBuffer& buffer, const shimproto::OpDesc& op, const GroupContext& context);
  // Runs one collective; *algorithm names the inter-host algorithm it used.
  Status Execute(const std::vector<CollRequest*>& batch, const char** algorithm);
  // Runs Execute and records it in stats_.
  Status ExecuteAndRecord(const std::vector<CollRequest*>& batch);
  Status SendP2p(int rank, const RankBuffer& buffer, const shimproto::OpDesc& op,
                 std::shared_ptr<SendTicket>* ticket);
  void StartP2pReader(int host);
  void P2pReaderLoop(int host);
  size_t LocalIndex(int rank) const;

  const uint64_t key_;
  const int nranks_;
  const std::string my_addr_;
  const CommOptions options_;

  // Set once by Setup, read-only afterwards.
  Membership membership_;
  std::vector<int> local_ranks_;
  std::vector<std::unique_ptr<Link>> coll_links_;
  std::vector<std::unique_ptr<Link>> p2p_links_;
  std::vector<std::mutex> p2p_send_mu_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool setup_started_ = false;
  bool setup_done_ = false;
  Status setup_status_;
  int links_missing_ = 0;
  Status failed_;
  std::vector<std::deque<CollRequest*>> pending_;  // per local rank, in submission order
  bool running_ = false;
  std::vector<bool> left_;
  std::vector<std::thread> readers_;
  std::atomic<bool> closing_{false};

  Mailbox mailbox_;
  CommStats stats_;
  std::atomic<uint64_t> coll_seq_{0};  // only the thread running a batch advances it
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_COLLECTIVES_COMMUNICATOR_H_
