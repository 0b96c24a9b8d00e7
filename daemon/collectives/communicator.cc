#include "collectives/communicator.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>

#include "collectives/peer_messages.h"
#include "common/busy_poll.h"
#include "common/frame.h"
#include "common/log.h"
#include "common/thread_guard.h"
#include "gpu/comm_stream.h"
#include "policy/tenant_pacer.h"
#include "protocol/peer_protocol.h"
#include "reduce/reduce.h"

namespace conduit {
namespace {

// A collective that failed on a link waits this long for a peer's abort notice, so its
// ranks get the reason (a disagreement, a dead rank) rather than "connection closed".
constexpr int kAbortReasonWaitMs = 300;
// Collectives up to this size spin for their local ranks' news (RunCollective), as
// transfers up to it spin for a peer's bytes (transport/tcp.cc).
constexpr size_t kLocalSpinMaxBytes = 256u << 10;

// An op in host regions has the buffers its kind uses for `rank`, and no others (the
// session resolved them): a Send its input alone, a Reduce's non-root its input alone.
bool RegionBuffersFit(const shimproto::OpDesc& op, int rank, const HostOpBuffers& b) {
  return (b.send != nullptr) == shimproto::OpNeedsSend(op, rank) && (b.recv != nullptr) == shimproto::OpNeedsRecv(op, rank);
}

}  // namespace

size_t OpPayloadBytes(const shimproto::OpDesc& op) {
  return op.count * DataTypeSize(static_cast<ncclDataType_t>(op.dtype));
}

Communicator::Communicator(uint64_t key, int nranks, std::string my_addr, CommOptions options, Fabric* fabric,
                           std::string exe, CommSecret secret)
    : key_(key),
      secret_(secret),
      nranks_(nranks),
      my_addr_(std::move(my_addr)),
      options_(std::move(options)),
      fabric_(fabric),
      exe_(std::move(exe)),
      p2p_(this, options_.timeout_ms) {
  auto config = std::make_shared<CommConfig>();
  config->allreduce_algo = options_.allreduce_algo;
  config_ = std::move(config);
}

Communicator::~Communicator() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closing_ = true;
    cv_.notify_all();  // a reader thread applying a reconfiguration stops waiting
  }
  // A reader waiting for room for a message no receive will take now (Mailbox::ReserveRemote)
  // stops waiting, so Close below joins it at once.
  mailbox_.Fail(Status(StatusCode::kAborted, "the communicator is being destroyed"));
  // Tell peers this is a clean exit so they do not abort communicators that are done.
  p2p_.SayGoodbye();
  {
    // Under mu_: a reader thread applying a reconfiguration swaps links under it.
    std::lock_guard<std::mutex> lock(mu_);
    if (!handover_pending_) {
      for (auto& l : coll_links_) if (l.link) l.link->Shutdown();
    }
  }
  p2p_.Close();  // its readers call into this communicator: joined before anything goes
  CLOG_DEBUG("communicator %016llx destroyed", static_cast<unsigned long long>(key_));
}

Status Communicator::Setup(const std::vector<std::string>& rank_addrs, const std::vector<int>& ring,
                           uint32_t protocol_version, const std::function<Status(Communicator&)>& connect_links) {
  std::unique_lock<std::mutex> lock(mu_);
  if (setup_started_) {
    Deadline deadline = OpDeadline();
    while (!setup_done_) {
      if (cv_.wait_until(lock, deadline.when()) == std::cv_status::timeout && !setup_done_) {
        return SystemError("timed out waiting for communicator setup");
      }
    }
    return setup_status_;
  }
  setup_started_ = true;
  setup_status_ = BuildMembership(rank_addrs, ring, nranks_, my_addr_, &membership_);
  membership_.protocol_version = protocol_version;
  if (setup_status_.ok()) {
    auto config = std::make_shared<CommConfig>(*config_);
    config->ring = membership_.initial_ring;
    config_ = std::move(config);
    InitMembership();
    links_missing_ = 2 * static_cast<int>(membership_.host_addrs.size() - 1);
  }
  if (setup_status_.ok()) {
    lock.unlock();
    Status st = connect_links(*this);
    if (st.ok()) st = WaitLinks();
    lock.lock();
    setup_status_ = st;
  }
  setup_done_ = true;
  cv_.notify_all();
  if (setup_status_.ok()) {
    CLOG_INFO("communicator %016llx: %d ranks on %zu hosts, collective protocol %u",
              static_cast<unsigned long long>(key_), nranks_, membership_.host_addrs.size(),
              membership_.protocol_version);
  }
  // A peer that finished first may already have proposed a reconfiguration.
  if (setup_status_.ok() && barrier_.pending()) AdvanceReconfig(lock);
  return setup_status_;
}

void Communicator::InitMembership() {
  locals_ = LocalRanks(membership_);
  const size_t nhosts = membership_.host_addrs.size();
  queue_.Init(locals_.size());
  coll_links_.resize(nhosts);
  p2p_.Init(membership_.host_of_rank, membership_.my_host, static_cast<int>(nhosts));
  barrier_.Init(static_cast<int>(nhosts), membership_.my_host);
}

void Communicator::AttachLink(int host, uint32_t channel, std::unique_ptr<Link> link, uint32_t epoch, int path,
                              std::string local_ip, std::unique_ptr<PathLease> lease) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!failed_.ok()) link->Shutdown();
  if (channel == peerproto::kCollective) {
    CollLink l{std::move(link), path, std::move(local_ip), epoch, std::move(lease)};
    if (epoch > 0) {
      // A replacement for a reconfiguration; ApplyProposal picks it up.
      if (epoch <= config_->epoch || renewed_.count({host, epoch})) {
        CLOG_WARN("communicator %016llx: stale or duplicate link from host %d for epoch %u ignored",
                  static_cast<unsigned long long>(key_), host, epoch);
        return;
      }
      renewed_[{host, epoch}] = std::move(l);
      cv_.notify_all();
      return;
    }
    if (coll_links_[host].link) {
      CLOG_WARN("communicator %016llx: duplicate link from host %d ignored", static_cast<unsigned long long>(key_), host);
      return;
    }
    coll_links_[host] = std::move(l);
  } else {
    const PeerChannel::Attached attached = epoch > 0 ? PeerChannel::Attached::kDuplicate : p2p_.Attach(host, std::move(link));
    if (attached == PeerChannel::Attached::kDuplicate) {
      CLOG_WARN("communicator %016llx: duplicate link from host %d ignored", static_cast<unsigned long long>(key_), host);
      return;
    }
    if (attached == PeerChannel::Attached::kNoReader) {
      lock.unlock();  // Abort takes mu_
      Abort(SystemError("daemon %s cannot start a thread to read the link from host %d", my_addr_.c_str(), host));
      return;
    }
  }
  --links_missing_;
  cv_.notify_all();
}

Status Communicator::WaitLinks() {
  std::unique_lock<std::mutex> lock(mu_);
  Deadline deadline = OpDeadline();
  while (links_missing_ > 0 && failed_.ok()) {
    if (cv_.wait_until(lock, deadline.when()) == std::cv_status::timeout && links_missing_ > 0) {
      return SystemError("timed out: %d links from peer daemons never arrived", links_missing_);
    }
  }
  return failed_;
}

void Communicator::TellPeersAborted(const Status& reason) {
  p2p_.TellAborted(Status(reason.code(), "communicator aborted by daemon " + my_addr_ + ": " + reason.message()));
}

Status Communicator::ClaimRank(int rank) {
  std::lock_guard<std::mutex> lock(mu_);
  switch (locals_.TryClaim(rank)) {
    case LocalRanks::Claim::kClaimed:
      return Status::Ok();
    case LocalRanks::Claim::kNotHere:
      return InvalidUsage("communicator %016llx was formed without rank %d on this host (daemon %s)",
                          static_cast<unsigned long long>(key_), rank, my_addr_.c_str());
    case LocalRanks::Claim::kHeld:
      break;
  }
  return InvalidUsage("rank %d of communicator %016llx is held by another connection to daemon %s", rank,
                      static_cast<unsigned long long>(key_), my_addr_.c_str());
}

Status Communicator::failure() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failed_;
}

void Communicator::Abort(const Status& reason) { Abort(reason, /*tell_peers=*/true); }

void Communicator::Abort(const Status& reason, bool tell_peers) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failed_.ok()) return;
    failed_ = reason;
    CLOG_WARN("communicator %016llx aborted: %s: %s", static_cast<unsigned long long>(key_), ResultName(reason.code()),
              reason.message().c_str());
    cv_.notify_all();
  }
  if (tell_peers) TellPeersAborted(reason);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!handover_pending_) {
      for (auto& l : coll_links_) if (l.link) l.link->Shutdown();
      for (auto& [key, l] : renewed_) l.link->Shutdown();
    }
    p2p_.Shutdown();
    cv_.notify_all();
  }
  mailbox_.Fail(reason);
}

Status Communicator::AbortWithFirstReason(const Status& st, std::unique_lock<std::mutex>& lock) {
  // A peer that found the failure (a host calling a different collective, a rank that
  // died, a receiver out of room) says why in an abort notice, which may trail the closed
  // link we saw.
  if (st.code() != ncclInvalidUsage) {
    cv_.wait_for(lock, std::chrono::milliseconds(kAbortReasonWaitMs), [this] { return !failed_.ok(); });
  }
  lock.unlock();
  Abort(st);
  lock.lock();
  return failed_;  // the first reason, ours or a peer's
}

void Communicator::Leave(int rank, bool graceful) {
  if (!graceful) {
    Abort(RemoteError("rank %d exited or disconnected from daemon %s without destroying the communicator", rank,
                      my_addr_.c_str()));
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  locals_.MarkLeft(rank);
}

Status Communicator::ValidateOp(int rank, const RankBuffer& buffer, const shimproto::OpDesc& op) const {
  if (op.kind < shimproto::kAllReduce || op.kind > shimproto::kRecv) return InvalidArgument("unknown op kind %u", op.kind);
  if ((op.flags & ~(shimproto::kOpDevice | shimproto::kOpRegion | shimproto::kOpScalarWord |
                    shimproto::kOpOutputIsInput)) != 0 ||
      (op.flags & (shimproto::kOpDevice | shimproto::kOpRegion)) == (shimproto::kOpDevice | shimproto::kOpRegion)) {
    return InvalidArgument("unknown op flags 0x%x", op.flags);
  }
  if ((op.flags & shimproto::kOpScalarWord) &&
      (!(op.flags & shimproto::kOpDevice) || op.redop != shimproto::kRedOpPreMulSum)) {
    return InvalidArgument("kOpScalarWord needs a device PreMulSum op (flags 0x%x, redop %u)", op.flags, op.redop);
  }
  if ((op.flags & shimproto::kOpOutputIsInput) &&
      (op.kind != shimproto::kBroadcast || op.peer != rank || (op.flags & ~shimproto::kOpOutputIsInput) != 0)) {
    return InvalidArgument("kOpOutputIsInput needs a staged broadcast's root (flags 0x%x, kind %u, root %d, rank %d)",
                           op.flags, op.kind, op.peer, rank);
  }
  const bool device = (op.flags & shimproto::kOpDevice) != 0;
  // An op in host regions was checked against its regions by the session (HostRegions).
  const bool in_regions = (op.flags & shimproto::kOpRegion) != 0;
  // (Point-to-point ops on device buffers need an asynchronous group: RunGroup checks.)
  if (!IsValidDataType(op.dtype)) return InvalidArgument("invalid ncclDataType_t %u", op.dtype);
  if (op.redop > shimproto::kRedOpPreMulSum) return InvalidArgument("invalid reduction op %u", op.redop);
  const bool rooted = op.kind == shimproto::kBroadcast || op.kind == shimproto::kReduce ||
                      op.kind == shimproto::kSend || op.kind == shimproto::kRecv;
  if (rooted && (op.peer < 0 || op.peer >= nranks_)) {
    return InvalidArgument("root/peer %d out of range [0, %d)", op.peer, nranks_);
  }
  const size_t elem = DataTypeSize(static_cast<ncclDataType_t>(op.dtype));
  uint64_t elems = op.count;
  if (op.kind == shimproto::kAllGather || op.kind == shimproto::kReduceScatter) {
    if (__builtin_mul_overflow(elems, static_cast<uint64_t>(nranks_), &elems)) return InvalidArgument("count overflows");
  }
  uint64_t bytes, end;
  if (__builtin_mul_overflow(elems, static_cast<uint64_t>(elem), &bytes) ||
      __builtin_add_overflow(bytes, op.offset, &end)) {
    return InvalidArgument("op size overflows (count %llu)", static_cast<unsigned long long>(op.count));
  }
  // A device op's buffers were checked against their registered sizes by the session.
  if (!device && !in_regions && bytes > 0 && end > buffer.size) {
    return InvalidArgument("op needs bytes [%llu, %llu) of the shared segment but rank %d attached %zu bytes",
                           static_cast<unsigned long long>(op.offset), static_cast<unsigned long long>(end), rank,
                           buffer.size);
  }
  return Status::Ok();
}

Status Communicator::RunGroup(int rank, const RankBuffer& buffer, const std::vector<shimproto::OpDesc>& ops,
                              int* failed_op, const GroupContext& context) {
  *failed_op = -1;
  if (context.streamed) {
    // The control page must be there and untouched by op data (shim protocol, streamed groups).
    if (ops.size() != 1 || !shimproto::IsCollectiveKind(ops[0].kind)) {
      return InvalidArgument("a streamed group must hold exactly one collective (got %zu ops)", ops.size());
    }
    if (buffer.size < kStagingControlBytes || ops[0].offset < kStagingControlBytes) {
      *failed_op = 0;
      return InvalidArgument("a streamed op must start after the %zu-byte control page (offset %llu, segment %zu)",
                             kStagingControlBytes, static_cast<unsigned long long>(ops[0].offset), buffer.size);
    }
  }
  for (size_t i = 0; i < ops.size(); ++i) {
    Status st = ValidateOp(rank, buffer, ops[i]);
    if (st.ok() && (ops[i].flags & shimproto::kOpDevice) &&
        (context.device_ops == nullptr || context.device_ops->size() != ops.size() || context.streamed)) {
      st = InvalidArgument("a device op outside a (non-streamed) device group");
    }
    if (st.ok() && (ops[i].flags & shimproto::kOpDevice) && !shimproto::IsCollectiveKind(ops[i].kind) &&
        (context.p2p_stream == nullptr || context.ready_word == 0)) {
      st = InvalidArgument("%s on device buffers needs an asynchronous device group", OpKindName(ops[i].kind));
    }
    if (st.ok() && (ops[i].flags & shimproto::kOpRegion) &&
        (context.host_ops == nullptr || context.host_ops->size() != ops.size() || context.streamed ||
         !RegionBuffersFit(ops[i], rank, (*context.host_ops)[i]))) {
      st = InvalidArgument("an op in host regions outside a (non-streamed) group with host regions");
    }
    if (!st.ok()) {
      *failed_op = static_cast<int>(i);
      return st;
    }
  }
  CONDUIT_RETURN_IF_ERROR(failure());
  // Where each point-to-point op's bytes are on the host when not in the segment: the
  // program's own buffer (host regions) or, set up below, pinned memory (device buffers).
  DeviceP2p device_p2p(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    if (!(ops[i].flags & shimproto::kOpRegion) || shimproto::IsCollectiveKind(ops[i].kind)) continue;
    const HostOpBuffers& b = (*context.host_ops)[i];
    // (A send's bytes are only read: SendP2p and the mailbox take them as const.)
    device_p2p.host[i] = ops[i].kind == shimproto::kSend ? const_cast<uint8_t*>(b.send) : b.recv;
  }
  // This group's receives from other hosts, registered before anything runs: their
  // messages come in whatever --p2p-queue-bytes holds already (Mailbox::Expect), so every
  // exchange whose ranks all receive completes, however large. Their messages are read
  // straight into their buffers: the segment, the program's region, or for device
  // receives the pinned memory they are staged in, named once it is set up below.
  auto remote_recv = [&](const shimproto::OpDesc& op) {
    return op.kind == shimproto::kRecv && membership_.host_of_rank[op.peer] != membership_.my_host;
  };
  for (size_t i = 0; i < ops.size(); ++i) {
    if (!remote_recv(ops[i])) continue;
    const bool device = (ops[i].flags & shimproto::kOpDevice) != 0;
    uint8_t* into = device_p2p.host[i] != nullptr ? device_p2p.host[i] : buffer.base + ops[i].offset;
    mailbox_.Expect(ops[i].peer, rank, OpPayloadBytes(ops[i]), device ? nullptr : into);
  }
  struct Forget {
    Mailbox& mailbox;
    int rank;
    ~Forget() { mailbox.ForgetExpected(rank); }
  } forget{mailbox_, rank};
  Status first;
  auto note = [&](size_t i, const Status& st) {
    if (!st.ok() && first.ok()) {
      first = st;
      *failed_op = static_cast<int>(i);
    }
  };
  // Point-to-point ops on device buffers: their bytes in pinned memory, or device to
  // device within this host (device_p2p.cc). A failure here (the GPU's) skips the rest and
  // aborts below, so no peer waits for good.
  first = StageDeviceSends(ops, context, &device_p2p);
  std::map<int, size_t> nth_from;  // per peer: its receives so far, the mailbox's order
  for (size_t i = 0; i < ops.size() && first.ok(); ++i) {
    if (!remote_recv(ops[i])) continue;
    const size_t nth = nth_from[ops[i].peer]++;
    if ((ops[i].flags & shimproto::kOpDevice) && device_p2p.host[i] != nullptr) {
      mailbox_.NameReceiveBuffer(ops[i].peer, rank, nth, device_p2p.host[i]);
    }
  }
  // Host memory the group's host ops write (device ones count in device_p2p): a staged
  // op's shim copy, each message's socket copy, a receive's copy here.
  TrafficCounts p2p;
  auto staged = [](const shimproto::OpDesc& op) { return (op.flags & (shimproto::kOpDevice | shimproto::kOpRegion)) == 0; };
  auto remote = [&](const shimproto::OpDesc& op) { return membership_.host_of_rank[op.peer] != membership_.my_host; };
  // Sends are posted first and receives waited on last, so every grouped pattern of
  // point-to-point ops (including cycles such as all-to-all) completes.
  std::vector<std::shared_ptr<SendTicket>> tickets;
  for (size_t i = 0; i < ops.size() && first.ok(); ++i) {
    if (ops[i].kind != shimproto::kSend) continue;
    std::shared_ptr<SendTicket> ticket;
    if (device_p2p.direct[i]) {
      note(i, SendDeviceDirect(rank, ops[i], (*context.device_ops)[i], &ticket));
    } else {
      const uint8_t* data = device_p2p.host[i] != nullptr ? device_p2p.host[i] : buffer.base + ops[i].offset;
      const Status st = SendP2p(rank, data, ops[i], &ticket);
      note(i, st);
      if (st.ok() && !(ops[i].flags & shimproto::kOpDevice)) {
        if (staged(ops[i])) p2p.program_copies += OpPayloadBytes(ops[i]);
        if (remote(ops[i])) p2p.socket_sends += OpPayloadBytes(ops[i]);
      }
    }
    if (ticket) tickets.push_back(std::move(ticket));
  }
  bool ran_on_device = false;
  for (size_t i = 0; i < ops.size() && first.ok(); ++i) {
    if (!shimproto::IsCollectiveKind(ops[i].kind)) continue;
    const bool device = (ops[i].flags & shimproto::kOpDevice) != 0;
    const bool in_regions = (ops[i].flags & shimproto::kOpRegion) != 0;
    note(i, RunCollective(rank, buffer, ops[i], context, device ? &(*context.device_ops)[i] : nullptr,
                          in_regions ? &(*context.host_ops)[i] : nullptr));
    ran_on_device |= device;
  }
  for (size_t i = 0; i < ops.size() && first.ok(); ++i) {
    const auto& op = ops[i];
    if (op.kind != shimproto::kRecv) continue;
    size_t bytes = OpPayloadBytes(op);
    uint8_t* into = device_p2p.host[i] != nullptr ? device_p2p.host[i] : buffer.base + op.offset;
    bool copied = false;
    const Status st = mailbox_.Take(op.peer, rank, into, bytes, OpDeadline(), &device_p2p.taken[i], &copied);
    note(i, st);
    if (st.ok() && !(op.flags & shimproto::kOpDevice)) {
      if (staged(op)) p2p.program_copies += bytes;
      if (remote(op)) p2p.socket_receives += bytes;
      if (copied) p2p.local_copies += bytes;
    }
  }
  if (p2p.total() > 0) {
    stats_.AddP2pTraffic(p2p);
    stats_.AddP2pGroup();
  }
  // Every taken device send is copied and completed with the copy's outcome before this
  // rank waits for its own sends: their receivers may be waiting in the same place.
  {
    Status st = CopyTakenDeviceSends(ops, context, buffer, &device_p2p);
    if (!st.ok() && first.ok()) first = st;
  }
  for (auto& ticket : tickets) {
    Status st = mailbox_.WaitSent(ticket, OpDeadline());
    if (!st.ok() && first.ok()) first = st;
  }
  if (first.ok()) {
    Status st = FinishDeviceRecvs(ops, context, device_p2p);
    if (!st.ok()) first = st;
  }
  if (!first.ok() && first.code() != ncclInvalidUsage) {
    std::unique_lock<std::mutex> lock(mu_);
    first = AbortWithFirstReason(first, lock);
  }
  if (first.ok() && ran_on_device && context.done_event != nullptr) {
    // device_ exists (the collective that created it ran) and is replaced only by ~Communicator.
    std::lock_guard<std::mutex> lock(mu_);
    *context.done_event = device_->done_handle();
  }
  return first;
}

Status Communicator::SignalDeviceDone(uint64_t word, uint32_t value, int device, std::shared_ptr<const void> mapping) {
  gpu::Runtime& runtime = gpu::Runtime::Get();
  std::lock_guard<std::mutex> lock(mu_);
  // device_ exists once a device collective ran, and is replaced only by ~Communicator. A
  // group of point-to-point ops alone has nothing queued there, nor has any group before
  // it (each earlier done word was written after its work, on device_ if that existed):
  // the word is written now, after the copies it waited for.
  if (!device_) return runtime.WriteWordNow(device, word, value);
  cuda::ScopedContext ctx(runtime.driver(), device_->context());
  CONDUIT_RETURN_IF_ERROR(device_->WriteWord(word, value));
  return device_->Retain({std::move(mapping)});
}

void Communicator::ReleaseFinishedDeviceWork() {
  std::lock_guard<std::mutex> lock(mu_);
  // The stream is used by the thread holding the running token (taken under mu_) and by
  // SignalDeviceDone (under mu_): with mu_ held and no token taken, by nobody else.
  // queue_ first: the token holder may be making device_ (its first device collective).
  if (queue_.running() || !device_) return;
  cuda::ScopedContext ctx(gpu::Runtime::Get().driver(), device_->context());
  device_->ReleaseFinished();
}

Status Communicator::SendP2p(int rank, const uint8_t* data, const shimproto::OpDesc& op,
                             std::shared_ptr<SendTicket>* ticket) {
  size_t bytes = OpPayloadBytes(op);
  int host = membership_.host_of_rank[op.peer];
  if (host == membership_.my_host) {
    *ticket = std::make_shared<SendTicket>();
    mailbox_.PostLocal(rank, op.peer, data, bytes, *ticket);
    return Status::Ok();
  }
  return p2p_.SendMessage(host, rank, op.peer, data, bytes, OpDeadline());
}

Status Communicator::ReserveP2p(int src, int dst, uint64_t bytes, uint8_t** into) {
  // Half the timeout: a sender blocked behind this wait times out after the whole of it,
  // so the abort that says why (sent to every peer) comes from here first.
  return mailbox_.ReserveRemote(src, dst, bytes, Deadline::AfterMs(options_.timeout_ms / 2), into);
}

void Communicator::OnP2pMessage(int src, int dst, std::vector<uint8_t> bytes) {
  mailbox_.PostRemote(src, dst, std::move(bytes));
}

uint8_t* Communicator::RetargetP2p(int src, int dst, uint64_t arrived) {
  uint8_t* into = mailbox_.RetargetRemote(src, dst);
  if (into != nullptr) {  // the reader copies what arrived so far there
    TrafficCounts t;
    t.local_copies = arrived;
    stats_.AddP2pTraffic(t);
  }
  return into;
}

void Communicator::OnP2pFilled(int src, int dst, bool whole) { mailbox_.FilledRemote(src, dst, whole); }

void Communicator::OnPeerAborted(const Status& why) { Abort(why, /*tell_peers=*/false); }

void Communicator::OnLinkFailed(int /*host*/, const Status& why) {
  if (closing_) return;
  // This link may have closed because its daemon learned of an abort from a third one,
  // whose notice to us is still on its way: give it a moment to say why.
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::milliseconds(kAbortReasonWaitMs), [this] { return !failed_.ok() || closing_; });
  }
  Abort(why);
}

Status Communicator::ExecuteAndRecord(const std::vector<CollRequest*>& batch, uint64_t seq,
                                      std::shared_ptr<const CommConfig> config) {
  const shimproto::OpDesc& op = batch[0]->op;
  CollRecord record;
  record.seq = seq;
  record.kind = op.kind;
  record.dtype = op.dtype;
  record.redop = op.redop;
  record.root = op.peer;
  record.count = op.count;
  record.bytes = OpPayloadBytes(op);
  const bool blocks = op.kind == shimproto::kAllGather || op.kind == shimproto::kReduceScatter;
  record.payload_bytes = record.bytes * (blocks ? static_cast<uint64_t>(nranks_) : 1u) * batch.size();
  record.start_unix_us = std::chrono::duration_cast<std::chrono::microseconds>(
                             std::chrono::system_clock::now().time_since_epoch()).count();
  const auto start = std::chrono::steady_clock::now();
  running_seq_ = seq;
  running_shared_ = false;
  traffic_.Reset();
  Status st = Execute(batch, *config, &record.algorithm);
  record.result_area = running_shared_;
  record.traffic = traffic_.Snapshot();
  record.duration_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
  if (!st.ok()) record.error = st.message();
  record.config = std::move(config);
  stats_.Record(std::move(record));
  return st;
}

Status Communicator::RunCollective(int rank, const RankBuffer& buffer, const shimproto::OpDesc& op,
                                   const GroupContext& context, const DeviceOpBuffers* device,
                                   const HostOpBuffers* host) {
  CollRequest request;
  request.rank = rank;
  request.buffer = buffer;
  request.op = op;
  request.control = context.streamed ? ControlOf(buffer.base) : nullptr;
  request.session_fd = context.session_fd;
  request.device = device;
  request.ready = device != nullptr ? context.ready_event : nullptr;
  request.ready_word = device != nullptr ? context.ready_word : 0;
  request.ready_value = context.ready_value;
  request.host = host;
  request.result_area = context.result_area;
  std::unique_lock<std::mutex> lock(mu_);
  queue_.Push(LocalIndex(rank), &request);
  local_news_.fetch_add(1, std::memory_order_release);
  cv_.notify_all();
  Deadline deadline = OpDeadline();
  // A small collective's local ranks meet within microseconds: one that must wait for the
  // others, or for the batch another's thread runs, spins for that news first, without the
  // lock, so that its reply needs no wake-up of this thread (common/busy_poll.h). Larger
  // ones never spin: their wait is the network's, and the spin would take a CPU from it.
  // One budget for the whole call, however many waits it spans (another rank's arrival,
  // then the batch's end): past it, this thread sleeps as before.
  const int spin_micros = OpPayloadBytes(op) <= kLocalSpinMaxBytes ? BusyPollMicros() : 0;
  const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(spin_micros);
  // Returns whether it let go of the lock: then what the loop waits for may have happened
  // meanwhile, and the loop looks again before it sleeps.
  auto spin_for_news = [&] {
    if (spin_micros <= 0 || std::chrono::steady_clock::now() >= spin_until) return false;
    const uint64_t seen = local_news_.load(std::memory_order_acquire);
    lock.unlock();
    SpinUntilTrue(spin_until, [&] { return local_news_.load(std::memory_order_acquire) != seen; });
    lock.lock();
    return true;
  };
  while (!request.done) {
    if (!failed_.ok() && !queue_.running()) {
      // A running batch may still hold a pointer to `request`; only leave once it is done.
      // Leave our entry out of the queue so later ops do not see it.
      queue_.Remove(LocalIndex(rank), &request);
      return failed_;
    }
    if (queue_.Ready() && MayLaunch()) {
      // The last local rank to arrive runs the collective on its own thread.
      std::vector<CollRequest*> batch = queue_.Start();
      const uint64_t seq = coll_seq_++;
      std::shared_ptr<const CommConfig> config = config_;
      lock.unlock();
      Status st;
      try {
        st = ExecuteAndRecord(batch, seq, std::move(config));
      } catch (const std::exception& e) {
        // Out of memory for a scratch buffer, say: this collective fails, and the running
        // token is given back below, so the other local ranks are not left waiting on it.
        st = SystemError("collective %llu stopped on an unexpected error: %s", static_cast<unsigned long long>(seq),
                         e.what());
      }
      lock.lock();
      if (!st.ok()) st = AbortWithFirstReason(st, lock);
      queue_.Finish();
      for (CollRequest* r : batch) {
        r->done = true;
        r->status = st;
      }
      local_news_.fetch_add(1, std::memory_order_release);
      cv_.notify_all();
      if (barrier_.pending()) AdvanceReconfig(lock);
      continue;
    }
    if (spin_for_news()) continue;
    if (queue_.running()) {
      // A batch runs on another local rank's thread (maybe with ours in it); its end
      // notifies, and its own deadlines bound it. (Waiting until our deadline instead
      // would spin once that has passed.)
      cv_.wait(lock);
      continue;
    }
    if (cv_.wait_until(lock, deadline.when()) == std::cv_status::timeout && !request.done && !queue_.running()) {
      std::string missing;
      for (size_t i : queue_.Missing()) {
        if (!missing.empty()) missing += ',';
        missing += std::to_string(locals_.ranks()[i]);
      }
      Status st = missing.empty()
                      ? RemoteError("timed out after %d ms waiting for the daemons to agree on reconfiguration epoch %llu",
                                    options_.timeout_ms, static_cast<unsigned long long>(config_->epoch + 1))
                      : RemoteError("timed out after %d ms waiting for local rank(s) %s to call the collective",
                                    options_.timeout_ms, missing.c_str());
      lock.unlock();
      Abort(st);
      lock.lock();
    }
  }
  return request.status;
}

}  // namespace conduit
