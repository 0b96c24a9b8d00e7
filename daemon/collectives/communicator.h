// Communicator: one NCCL communicator as seen by one daemon.
//
// It knows every rank's host, holds the links to the other daemons of the communicator,
// and runs collectives once all of this host's ranks have submitted the same one: the
// host's buffers are combined here first, then only one stream per host crosses the
// network (hierarchical), then results are handed back to every local rank.
//
// How collectives cross hosts (ring order, all-reduce algorithm, the path of each
// collective link) is a CommConfig that the operator can change between collectives;
// epoch_barrier.h is the agreement that makes every daemon switch after the same one;
// reconfig.cc carries out its steps.
#ifndef CONDUIT_DAEMON_COLLECTIVES_COMMUNICATOR_H_
#define CONDUIT_DAEMON_COLLECTIVES_COMMUNICATOR_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "collectives/algorithms.h"
#include "collectives/comm_config.h"
#include "collectives/comm_stats.h"
#include "collectives/epoch_barrier.h"
#include "collectives/handed_comm.h"
#include "collectives/launch_queue.h"
#include "collectives/mailbox.h"
#include "collectives/membership.h"
#include "collectives/peer_channel.h"
#include "collectives/result_area.h"
#include "collectives/work_pool.h"
#include "common/status.h"
#include "common/unique_id.h"
#include "common/version_range.h"
#include "cuda/cuda_abi.h"
#include "policy/fabric.h"
#include "protocol/peer_protocol.h"
#include "protocol/shim_protocol.h"
#include "protocol/staging_control.h"
#include "transport/link.h"

namespace conduit {

namespace gpu {
class CommStream;
}

class PeerSecurity;

// The bytes of one rank's buffer an op names: its count of its data type.
size_t OpPayloadBytes(const shimproto::OpDesc& op);

struct CommOptions {
  // Authenticates every connection to other daemons (rendezvous, links); must be set for
  // a communicator that spans hosts. Not owned.
  const PeerSecurity* security = nullptr;
  int timeout_ms = 300000;
  size_t chunk_bytes = 512 * 1024;
  // Allreduce algorithm: "auto" picks recursive doubling up to rd_max_bytes (unset: what
  // the communicator's hosts and protocol version say, RecursiveDoublingMaxBytes) where the
  // cost model (RecursiveDoublingIsFaster with rd_latency_bytes) prefers it, then, on 4
  // hosts and more, recursive halving and doubling up to rh_max_bytes (unset: what the
  // communicator's protocol version says, HalvingDoublingMaxBytes), the ring above.
  std::string allreduce_algo = "auto";
  std::optional<size_t> rd_max_bytes;
  size_t rd_latency_bytes = 4096;
  std::optional<size_t> rh_max_bytes;
  // Point-to-point on device buffers between ranks of this daemon: the receiver's GPU
  // copies from the sender's buffer (false: both through pinned host memory).
  bool device_p2p_direct = true;
  // The bytes of point-to-point messages from other hosts that may wait here for receives
  // not yet posted (Mailbox): over it, the links they come on wait.
  uint64_t p2p_queue_bytes = uint64_t{1} << 30;
  // The collective message versions this daemon speaks (protocol/peer_protocol.h): a root
  // chooses a communicator's version from its members' and its own.
  VersionRange protocol_versions{peerproto::kCollectiveVersionBeforeNegotiation,
                                 peerproto::kCollectiveVersionBeforeNegotiation};
};

// Where a local rank's op data lives: its shared segment as mapped in the daemon.
struct RankBuffer {
  uint8_t* base = nullptr;
  size_t size = 0;
};

// Where a device op's data lives (shim protocol, "Device buffers"): program allocations
// mapped into the daemon (gpu/ipc_memory.h). An address is 0 when this rank has no such
// buffer in the op (a broadcast's non-root input, a reduce's non-root output).
struct DeviceOpBuffers {
  uint64_t send = 0;  // device address (in the daemon) of the op's input
  int send_device = -1;
  uint64_t recv = 0;  // of its output
  int recv_device = -1;
  int stream_device = -1;  // the GPU of the program's stream
  uint64_t scalar = 0;  // PreMulSum: device address of the factor (kOpScalarWord), else 0
  std::vector<std::shared_ptr<const void>> keep;  // the mappings, held while the op runs
};

// Where an op in host regions (shim protocol, "Host regions") reads and writes: the
// program's own buffers as mapped here. `send` is null where the rank has no input (a
// broadcast's non-root).
struct HostOpBuffers {
  const uint8_t* send = nullptr;
  uint8_t* recv = nullptr;
};

// How one group request's data reaches the daemon.
struct GroupContext {
  // The shim is still copying the inputs and copies outputs out as they become final
  // (StagingControl at the start of the segment). Only for a group of one collective.
  bool streamed = false;
  int session_fd = -1;  // the program's connection, to notice it dying mid-copy
  // A device group: per op its device buffers (used by ops flagged kOpDevice), the event
  // the program recorded on its stream, and where to put the event its stream waits on.
  const std::vector<DeviceOpBuffers>* device_ops = nullptr;
  cuda::CUevent ready_event = nullptr;
  // An asynchronous device group orders by words instead (shimproto::DeviceAsyncHeader):
  // the daemon's stream waits until the word at ready_word (mapped here) reaches ready_value.
  uint64_t ready_word = 0;
  uint32_t ready_value = 0;
  cuda::IpcEventHandle* done_event = nullptr;
  // An asynchronous device group's point-to-point ops on device buffers go through pinned
  // memory on this stream, the connection's own (device_p2p.cc); null elsewhere, where
  // the shim stages them.
  gpu::CommStream* p2p_stream = nullptr;
  // A group with host regions: per op its buffers (used by ops flagged kOpRegion).
  const std::vector<HostOpBuffers>* host_ops = nullptr;
  // The number of the communicator's result area this connection attached (0: none),
  // which a streamed collective's result may then be left in (collectives/result_area.h).
  uint64_t result_area = 0;
};

// One link of this daemon, for the operator.
struct LinkReport {
  int host = 0;
  const char* channel = "";
  int path = -1;  // -1: the primary address
  std::string local_ip;  // bound address ("" when the kernel chose)
  std::string remote;    // where it was dialed / accepted from
  uint64_t epoch = 0;    // the configuration epoch that created it
};

// The outcome of a reconfiguration request on this daemon.
struct ReconfigResult {
  uint64_t epoch = 0;     // the epoch it was sequenced as (0: not sequenced in time)
  bool applied = false;   // this daemon switched to it
};

class Communicator final : private PeerChannel::Handler {
 public:
  // `fabric` (may be null) supplies paths and tenant policies; `exe` names the programs of
  // the ranks that created it here, for tenant matching.
  // `secret`: the communicator's (security/comm_secret.h), from which split and shrink
  // derive their children's.
  Communicator(uint64_t key, int nranks, std::string my_addr, CommOptions options, Fabric* fabric = nullptr,
               std::string exe = "", CommSecret secret = {});
  ~Communicator();

  uint64_t key() const { return key_; }
  const CommSecret& secret() const { return secret_; }
  int nranks() const { return nranks_; }
  const Membership& membership() const { return membership_; }
  const std::vector<int>& local_ranks() const { return locals_.ranks(); }

  // Called by every local rank after the rendezvous with the same rank->daemon list, ring
  // order and collective message version. The first caller builds the membership and
  // connects links; all wait until it is ready.
  Status Setup(const std::vector<std::string>& rank_addrs, const std::vector<int>& ring, uint32_t protocol_version,
               const std::function<Status(Communicator&)>& connect_links);
  // Installs the link to `host` for `channel` (0 collective, 1 p2p); the communicator owns
  // it. A link with epoch > 0 replaces a collective link when that epoch is applied.
  void AttachLink(int host, uint32_t channel, std::unique_ptr<Link> link, uint32_t epoch = 0, int path = -1,
                  std::string local_ip = "", std::unique_ptr<PathLease> lease = nullptr);
  // Waits until links to every other host exist on both channels.
  Status WaitLinks();

  // Waits (until `deadline`, ended early by its failure) until the GPU work this daemon
  // queued for it has run; OK at once when it never ran on GPU buffers.
  Status DrainDevice(Deadline deadline);

  // Runs one group of ops for local rank `rank`; returns when all are done.
  Status RunGroup(int rank, const RankBuffer& buffer, const std::vector<shimproto::OpDesc>& ops, int* failed_op,
                  const GroupContext& context = {});
  // After an asynchronous device group's last op: writes `value` to the program's done word
  // on the communicator's stream, after the group's GPU work. `mapping` (holding the word)
  // stays open until that write has run.
  // `device`: the GPU of the word, for a group that ran no collective (its point-to-point
  // ops waited for their own copies): the word is then written at once.
  Status SignalDeviceDone(uint64_t word, uint32_t value, int device, std::shared_ptr<const void> mapping);
  // Closes the programs' device mappings that only finished GPU work still held
  // (gpu::CommStream::ReleaseFinished), unless a collective runs now (it does the same).
  void ReleaseFinishedDeviceWork();
  // Validates one op against the communicator and the rank's segment (no side effects).
  Status ValidateOp(int rank, const RankBuffer& buffer, const shimproto::OpDesc& op) const;

  // A session's claim on `rank` (CommRegistry::Join, TakeHandedOver): InvalidUsage when
  // this communicator does not place that rank on this host or another connection holds
  // it. A program holding a communicator's id can ask to join it again with any rank; only
  // a claimed local rank ever reaches the per-rank state (queue_, left_).
  Status ClaimRank(int rank);
  // A local rank leaves: gracefully (destroy) or not (its program died).
  void Leave(int rank, bool graceful);
  // Fails all current and future ops and drops the links (peers notice promptly; they are
  // told the reason first).
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
  // Point-to-point bytes from other hosts waiting here for their receives (Mailbox): now,
  // and the most at once.
  uint64_t p2p_waiting_bytes() const { return mailbox_.remote_bytes(); }
  uint64_t p2p_waiting_peak_bytes() const { return mailbox_.remote_peak_bytes(); }
  // Collectives launched so far (the next one's sequence number).
  uint64_t collective_seq() const {
    std::lock_guard<std::mutex> lock(mu_);
    return coll_seq_;
  }
  const std::string& exe() const { return exe_; }
  Fabric* fabric() const { return fabric_; }
  // Where streamed collectives leave results that all local ranks read (result_area.h).
  ResultArea& result_area() { return result_area_; }

  // The configuration collectives run with now.
  std::shared_ptr<const CommConfig> config() const;
  std::vector<LinkReport> Links() const;
  uint64_t reconfigurations() const;
  // Asks every daemon of the communicator to switch to `plan` after the same collective
  // (sequenced by host 0). Waits up to wait_ms for this daemon to switch.
  Status Reconfigure(const ReconfigPlan& plan, int wait_ms, ReconfigResult* result);

  // Live upgrade (comm_handover.cc, docs/upgrade.md). The caller has stopped every local
  // rank's session between two requests. Stops the point-to-point readers before their
  // next frame and checks that nothing runs or waits here: no collective running or queued,
  // no local send, no reconfiguration under way, no GPU state. An error names what is busy,
  // and the communicator goes on.
  Status QuiesceForHandover(Deadline deadline);
  // The upgrade was called off: the readers go on.
  void ResumeAfterHandover();
  // While quiesced: what the next process needs, with duplicates of the links' sockets.
  Status ExportHandover(HandedComm* out);
  // In the next process: the communicator `in` describes, checked as any input. Its
  // collective links are installed; its point-to-point links wait for StartHandedOver
  // (called once the old process has stopped for good), which starts their readers.
  static Status FromHandover(HandedComm in, std::string my_addr, CommOptions options, Fabric* fabric,
                             std::shared_ptr<Communicator>* out);
  void StartHandedOver();

 private:
  struct CollRequest {
    int rank;
    RankBuffer buffer;
    shimproto::OpDesc op;
    StagingControl* control = nullptr;  // set for streamed groups
    int session_fd = -1;
    const DeviceOpBuffers* device = nullptr;  // set for device ops
    cuda::CUevent ready = nullptr;            // device ops: the program's ready event
    uint64_t ready_word = 0;                  // ... or its ready word and value (async groups)
    uint32_t ready_value = 0;
    const HostOpBuffers* host = nullptr;      // set for ops in host regions
    uint64_t result_area = 0;                 // GroupContext::result_area
    bool done = false;
    Status status;
  };

  // A collective link and what the operator sees of it.
  struct CollLink {
    std::unique_ptr<Link> link;
    int path = -1;
    std::string local_ip;
    uint64_t epoch = 0;
    std::unique_ptr<PathLease> lease;  // set on the side that dialed it
  };

  Deadline OpDeadline() const { return Deadline::AfterMs(options_.timeout_ms); }
  Status RunCollective(int rank, const RankBuffer& buffer, const shimproto::OpDesc& op, const GroupContext& context,
                       const DeviceOpBuffers* device, const HostOpBuffers* host);
  // Runs one collective under `config`; *algorithm names the inter-host algorithm it used.
  Status Execute(const std::vector<CollRequest*>& batch, const CommConfig& config, const char** algorithm);
  // Execute for device buffers (device_collective.cc): combined on this host's GPU, across
  // hosts through pinned host memory.
  Status ExecuteOnDevice(const std::vector<CollRequest*>& batch, const CommConfig& config, const char** algorithm);
  // The inter-host part of a collective on this host's combined data at `work`, with the
  // configuration's ring and the tenant policy's pacing. ensure/finalize/input/final_place:
  // HostGroup's.
  Status CrossHosts(const shimproto::OpDesc& op, const CommConfig& config, uint8_t* work,
                    SendGate ensure,
                    std::function<void(const uint8_t*, size_t)> finalize, const char** algorithm,
                    const uint8_t* input = nullptr,
                    std::function<uint8_t*(size_t, size_t)> final_place = nullptr);
  // The inter-host part of Execute; `position[host]` is the host's ring position.
  // `allreduce`: the all-reduce algorithm ChooseAllReduce picked (for an all-reduce).
  Status RunInterHost(const shimproto::OpDesc& op, const HostGroup& group, const std::vector<int>& position,
                      peerproto::CollectiveAlgorithm allreduce, uint8_t* work, const char** algorithm);
  // How this host runs an all-reduce of `bytes` over `nhosts`, from the configuration's
  // algorithm and this daemon's --rd-max-bytes, --rd-latency-bytes, --rh-max-bytes.
  peerproto::CollectiveAlgorithm ChooseAllReduce(size_t bytes, int nhosts, const std::string& algo) const;
  // Runs Execute and records it in stats_.
  Status ExecuteAndRecord(const std::vector<CollRequest*>& batch, uint64_t seq,
                          std::shared_ptr<const CommConfig> config);
  // Whether a collective may be launched now (a pending reconfiguration holds launches
  // past the agreed sequence number). Needs mu_.
  bool MayLaunch() const;
  // The tenant policy covering this communicator now (cached per policy generation).
  std::shared_ptr<TenantState> CurrentTenant();

  // Reconfiguration (reconfig.cc). All need mu_ held through `lock` and may release it.
  void AdvanceReconfig(std::unique_lock<std::mutex>& lock);
  void AddProposal(std::unique_lock<std::mutex>& lock, Proposal proposal);
  Status ApplyProposal(const Proposal& proposal);
  Status SendControl(int host, uint16_t type, const std::vector<uint8_t>& payload);
  void SendControlToAll(uint16_t type, const std::vector<uint8_t>& payload);
  // A group's point-to-point ops (device buffers: device_p2p.cc), per op: where its bytes
  // are when not in the segment, in pinned memory or the program's host region (null for
  // the others), whether a send goes to its receiver device to device (a rank of this
  // daemon, device_p2p_direct), and a receive's match when that was such a send.
  struct DeviceP2p {
    explicit DeviceP2p(size_t n) : host(n, nullptr), direct(n, false), taken(n) {}
    std::vector<uint8_t*> host;
    std::vector<bool> direct;
    std::vector<TakenMessage> taken;
  };
  // After the program's earlier work on its stream: the sends' bytes copied from the
  // program's buffers to pinned memory, except direct ones. Waits for the GPU.
  Status StageDeviceSends(const std::vector<shimproto::OpDesc>& ops, const GroupContext& context, DeviceP2p* p2p);
  // Copies every receive matched to a local device send (Mailbox::Take) from the sender's
  // buffer: device to device for a device receive, into the segment for another, and
  // completes each sender's ticket, also when it fails. Before this rank waits for its own
  // sends: their receivers may be doing the same.
  Status CopyTakenDeviceSends(const std::vector<shimproto::OpDesc>& ops, const GroupContext& context,
                              const RankBuffer& buffer, DeviceP2p* p2p);
  // The receives' bytes copied from pinned memory to the program's buffers once they have
  // arrived. Waits for the GPU.
  Status FinishDeviceRecvs(const std::vector<shimproto::OpDesc>& ops, const GroupContext& context,
                           const DeviceP2p& p2p);
  // Whether device send `i` goes to its receiver device to device: a rank here, and no
  // receive of the group writes its bytes.
  bool GoesDirect(const std::vector<shimproto::OpDesc>& ops, const std::vector<DeviceOpBuffers>& buffers,
                  size_t i) const;
  // Posts a send device to device to a rank here (DeviceP2p::direct).
  Status SendDeviceDirect(int rank, const shimproto::OpDesc& op, const DeviceOpBuffers& b,
                          std::shared_ptr<SendTicket>* ticket);
  // `data`: the op's bytes (in the segment, or in pinned memory for a device op).
  Status SendP2p(int rank, const uint8_t* data, const shimproto::OpDesc& op, std::shared_ptr<SendTicket>* ticket);
  void Abort(const Status& reason, bool tell_peers);
  // Aborts after `st` failed an operation, but first gives a peer's abort notice a moment
  // to arrive (unless `st` is the caller's misuse); returns the reason that won. `lock`
  // holds mu_, on entry and on return.
  Status AbortWithFirstReason(const Status& st, std::unique_lock<std::mutex>& lock);
  // Sends kAbort with the reason on every p2p link (bounded, best effort).
  void TellPeersAborted(const Status& reason);

  // PeerChannel::Handler: what the p2p channel's readers deliver.
  Status ReserveP2p(int src, int dst, uint64_t bytes, uint8_t** into) override;
  void OnP2pMessage(int src, int dst, std::vector<uint8_t> bytes) override;
  uint8_t* RetargetP2p(int src, int dst, uint64_t arrived) override;
  void OnP2pFilled(int src, int dst, bool whole) override;
  // A reconfiguration message from a peer daemon (reconfig.cc).
  Status OnControl(int host, uint16_t type, const std::vector<uint8_t>& payload) override;
  void OnPeerAborted(const Status& why) override;
  void OnLinkFailed(int host, const Status& why) override;
  size_t LocalIndex(int rank) const { return locals_.IndexOf(rank); }
  // Sizes the per-host and per-rank state by membership_ (needs mu_).
  void InitMembership();
  // A reconfiguration has begun and not ended here (needs mu_).
  bool ReconfigUnderWay() const;

  const uint64_t key_;
  const CommSecret secret_;
  const int nranks_;
  const std::string my_addr_;
  const CommOptions options_;
  Fabric* const fabric_;
  const std::string exe_;

  // Set once by Setup, read-only afterwards (locals_' claims and departures: under mu_).
  Membership membership_;
  LocalRanks locals_;
  // The p2p channel: point-to-point messages, reconfiguration control, abort notices.
  PeerChannel p2p_;

  // Replaced only by ApplyProposal, while it holds the running token (so never under a
  // running collective); read by Execute (holding the token) or under mu_.
  std::vector<CollLink> coll_links_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  // Bumped (under mu_) wherever RunCollective's waiters are notified of an arrival or of a
  // batch's end, so that a small collective's waiting local rank can spin for it without
  // the lock before it sleeps on cv_ (RunCollective).
  std::atomic<uint64_t> local_news_{0};
  bool setup_started_ = false;
  bool setup_done_ = false;
  Status setup_status_;
  int links_missing_ = 0;
  Status failed_;
  // Collectives submitted by local ranks, matched into batches; its running token is held
  // by the thread running a batch or applying a reconfiguration.
  LaunchQueue<CollRequest> queue_;
  // Adopted in a live upgrade and not started yet (FromHandover .. StartHandedOver): its
  // sockets are still the old daemon's too, and shutdown(2) would cut them for both, so a
  // communicator dropped or aborted then only closes its own descriptors.
  bool handover_pending_ = false;
  std::atomic<bool> closing_{false};

  Mailbox mailbox_{options_.p2p_queue_bytes};
  CommStats stats_;
  uint64_t coll_seq_ = 0;  // collectives launched; advanced under mu_ when a batch starts

  // Configuration and its agreement (under mu_).
  std::shared_ptr<const CommConfig> config_;
  EpochBarrier barrier_;
  std::map<std::pair<int, uint64_t>, CollLink> renewed_;  // (host, epoch) -> replacement link
  // A handed-over communicator's point-to-point links until StartHandedOver, per host.
  std::vector<std::unique_ptr<Link>> handed_p2p_;

  // Only the thread holding the running token touches these.
  uint64_t running_seq_ = 0;  // the sequence number of the collective being executed
  bool running_shared_ = false;  // it leaves its result in result_area_ (CollRecord::result_area)
  uint64_t tenant_generation_ = 0;
  std::shared_ptr<TenantState> tenant_;
  std::unique_ptr<gpu::CommStream> device_;  // created by the first device collective
  Scratch scratch_;                           // the inter-host algorithms' receive staging
  // The work buffer of a reduction in host regions whose host holds no output as large as
  // it (ReduceScatter; Reduce away from the root): LocalStage's.
  WorkPool work_pool_;
  ResultArea result_area_;
  MemoryTraffic traffic_;                     // the running collective's copies (memory_traffic.h)
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_COLLECTIVES_COMMUNICATOR_H_
