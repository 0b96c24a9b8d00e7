// A communicator handed to the process that replaces this daemon in a live upgrade
// (handed_comm.h, docs/upgrade.md): quiesced between two collectives, exported with its
// links' sockets, and rebuilt on the other side exactly where it stopped, so that the
// other daemons of the communicator never notice.
#include <sys/stat.h>

#include <algorithm>
#include <set>

#include "collectives/communicator.h"
#include "common/log.h"
#include "security/comm_secret.h"
#include "transport/tcp.h"

namespace conduit {
namespace {

// Bounds on what a handed-over state may hold (it is checked as any input).
constexpr size_t kMaxHandedMessages = 1 << 16;
// How long a quiesce waits for GPU work this daemon queued for a communicator.
constexpr int kDeviceDrainMs = 2000;

bool IsSocket(int fd) {
  struct stat st {};
  return fd >= 0 && fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode);
}

Status Busy(uint64_t key, const char* what) {
  return Status(StatusCode::kAborted, "communicator " + CommKeyShort(key) + ": " + what);
}

// The structural checks of a handed-over communicator; *membership is its membership, with
// this daemon's index.
Status CheckHanded(const HandedComm& in, const std::string& my_addr, Membership* membership) {
  if (in.nranks < 1 || in.nranks > peerproto::kMaxRanks) return InvalidArgument("%d ranks", in.nranks);
  if (CommKeyOf(in.secret) != in.key) return InvalidArgument("its key is not its secret's");
  membership->host_addrs = in.host_addrs;
  membership->host_of_rank = in.host_of_rank;
  membership->initial_ring = in.initial_ring;
  CONDUIT_RETURN_IF_ERROR(CheckMembership(membership, in.nranks, my_addr));
  const int nhosts = static_cast<int>(in.host_addrs.size());
  const int me = membership->my_host;
  ReconfigPlan ring;
  ring.set_ring = true;
  ring.ring = in.config.ring;
  CONDUIT_RETURN_IF_ERROR(ValidatePlan(ring, nhosts));
  if (!IsAllReduceAlgorithm(in.config.allreduce_algo)) {
    return InvalidArgument("all-reduce algorithm \"%s\"", in.config.allreduce_algo.c_str());
  }
  for (int r : in.left_ranks) {
    if (r < 0 || r >= in.nranks || in.host_of_rank[r] != me) return InvalidArgument("left rank %d is not local", r);
  }
  if (!in.failed.ok()) return Status::Ok();  // a failed communicator moves without links or messages
  std::vector<bool> linked(nhosts, false);
  for (const HandedLinks& l : in.links) {
    if (l.host < 0 || l.host >= nhosts || l.host == me || linked[l.host]) {
      return InvalidArgument("links with host %d (of %d, this one %d) unexpected or twice", l.host, nhosts, me);
    }
    linked[l.host] = true;
    if (!IsSocket(l.collective.get()) || !IsSocket(l.p2p.get())) {
      return InvalidArgument("the links with host %d are not sockets", l.host);
    }
  }
  if (static_cast<int>(in.links.size()) != nhosts - 1) {
    return InvalidArgument("%zu hosts linked, of %d other hosts", in.links.size(), nhosts - 1);
  }
  if (in.messages.size() > kMaxHandedMessages) return InvalidArgument("%zu waiting messages", in.messages.size());
  for (const ArrivedMessage& m : in.messages) {
    if (m.src < 0 || m.src >= in.nranks || m.dst < 0 || m.dst >= in.nranks || in.host_of_rank[m.src] == me ||
        in.host_of_rank[m.dst] != me) {
      return InvalidArgument("a waiting message from rank %d to rank %d", m.src, m.dst);
    }
  }
  return Status::Ok();
}

}  // namespace

bool Communicator::ReconfigUnderWay() const {
  return !barrier_.idle() || !renewed_.empty();
}

Status Communicator::QuiesceForHandover(Deadline deadline) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!setup_done_) return Busy(key_, "still being set up");
    if (!failed_.ok() || !setup_status_.ok()) return Status::Ok();  // nothing runs; it moves failed
    if (!queue_.idle()) {
      return Busy(key_, "a collective is running");
    }
    if (ReconfigUnderWay()) return Busy(key_, "a reconfiguration is under way");
  }
  // Collectives on GPU buffers: what they queued on this daemon's stream runs to its end
  // here (the new process makes a stream of its own at its first device collective, and
  // maps the programs' buffers again). A program's stream that has not reached a
  // collective holds it back: refused, as a collective that is running.
  const int left = deadline.PollTimeoutMs();
  if (Status st = DrainDevice(Deadline::AfterMs(left < 0 ? kDeviceDrainMs : std::min(left, kDeviceDrainMs)));
      !st.ok()) {
    return Busy(key_, ("its GPU work has not run: " + st.message()).c_str());
  }
  ReleaseFinishedDeviceWork();
  CONDUIT_RETURN_IF_ERROR(p2p_.Pause(deadline));
  // A reader may have handed over a reconfiguration message before it stopped.
  std::lock_guard<std::mutex> lock(mu_);
  if (failed_.ok() && ReconfigUnderWay()) {
    p2p_.Resume();
    return Busy(key_, "a reconfiguration is under way");
  }
  return Status::Ok();
}

void Communicator::ResumeAfterHandover() { p2p_.Resume(); }

Status Communicator::ExportHandover(HandedComm* out) {
  std::lock_guard<std::mutex> lock(mu_);
  out->key = key_;
  out->secret = secret_;
  out->nranks = nranks_;
  out->exe = exe_;
  out->host_addrs = membership_.host_addrs;
  out->host_of_rank = membership_.host_of_rank;
  out->initial_ring = membership_.initial_ring;
  out->protocol_version = membership_.protocol_version;
  out->coll_seq = coll_seq_;
  out->config = *config_;
  const EpochBarrier::Counters counters = barrier_.counters();
  out->entered_epoch = counters.entered_epoch;
  out->proposed_epoch = counters.proposed_epoch;
  out->next_request_id = counters.next_request_id;
  out->reconfigurations = counters.applied;
  out->left_ranks = locals_.LeftRanks();
  out->failed = failed_.ok() ? setup_status_ : failed_;
  out->stats = stats_.SaveTotals();
  out->trace = stats_.Trace(CommStats::kTraceCapacity);
  if (!out->failed.ok()) return Status::Ok();
  std::vector<UniqueFd> p2p;
  CONDUIT_RETURN_IF_ERROR(p2p_.DupSockets(&p2p));
  for (size_t h = 0; h < coll_links_.size(); ++h) {
    if (static_cast<int>(h) == membership_.my_host) continue;
    const CollLink& c = coll_links_[h];
    HandedLinks l;
    l.host = static_cast<int>(h);
    if (!c.link || h >= p2p.size() || !p2p[h].valid()) return Busy(key_, "a link is missing");
    if (c.link->socket_fd() < 0) return InternalError("a link without a socket cannot be handed over");
    CONDUIT_RETURN_IF_ERROR(DupFd(c.link->socket_fd(), "a collective link", &l.collective));
    l.path = c.path;
    l.local_ip = c.local_ip;
    l.epoch = c.epoch;
    l.p2p = std::move(p2p[h]);
    out->links.push_back(std::move(l));
  }
  return mailbox_.ExportArrived(&out->messages);
}

Status Communicator::FromHandover(HandedComm in, std::string my_addr, CommOptions options, Fabric* fabric,
                                  std::shared_ptr<Communicator>* out) {
  Membership membership;
  if (Status bad = CheckHanded(in, my_addr, &membership); !bad.ok()) {
    return InvalidArgument("handed-over communicator %s: %s", CommKeyShort(in.key).c_str(), bad.message().c_str());
  }
  membership.protocol_version =
      in.protocol_version == 0 ? peerproto::kCollectiveVersionBeforeNegotiation : in.protocol_version;
  if (membership.protocol_version < options.protocol_versions.oldest ||
      membership.protocol_version > options.protocol_versions.newest) {
    return InvalidArgument("handed-over communicator %s speaks collective protocol %u, and this daemon %s",
                           CommKeyShort(in.key).c_str(), membership.protocol_version,
                           DescribeVersions(options.protocol_versions).c_str());
  }
  auto comm = std::make_shared<Communicator>(in.key, in.nranks, my_addr, std::move(options), fabric, in.exe, in.secret);
  Communicator& c = *comm;
  std::lock_guard<std::mutex> lock(c.mu_);
  c.membership_ = std::move(membership);
  c.InitMembership();
  c.config_ = std::make_shared<CommConfig>(std::move(in.config));
  c.coll_seq_ = in.coll_seq;
  c.barrier_.Restore({in.entered_epoch, in.proposed_epoch, in.next_request_id, in.reconfigurations});
  for (int r : in.left_ranks) c.locals_.MarkLeft(r);
  c.setup_started_ = c.setup_done_ = true;
  c.handover_pending_ = true;
  c.stats_.AddTotals(in.stats);
  c.stats_.RestoreTrace(std::move(in.trace));
  if (!in.failed.ok()) {
    c.failed_ = in.failed;
    c.mailbox_.Fail(in.failed);
  } else {
    c.handed_p2p_.resize(c.membership_.host_addrs.size());
    for (HandedLinks& l : in.links) {
      const std::string& peer = c.membership_.host_addrs[l.host];
      // Its path lease is taken by StartHandedOver, once the tenant policies are replayed.
      c.coll_links_[l.host] =
          CollLink{std::make_unique<TcpLink>(std::move(l.collective), peer), l.path, l.local_ip, l.epoch, nullptr};
      c.handed_p2p_[l.host] = std::make_unique<TcpLink>(std::move(l.p2p), peer);
    }
    for (ArrivedMessage& m : in.messages) c.mailbox_.RestoreArrived(std::move(m));
  }
  *out = std::move(comm);
  return Status::Ok();
}

void Communicator::StartHandedOver() {
  std::vector<std::unique_ptr<Link>> links;
  {
    std::lock_guard<std::mutex> lock(mu_);
    handover_pending_ = false;  // the old daemon has let go: the sockets are ours alone
    links.swap(handed_p2p_);
    // The side that dialed a collective link holds a lease on its path, weighted by the
    // tenant's priority, so that the path's load counts it (as ConnectLinks does).
    if (fabric_ != nullptr) {
      int priority = 0;
      if (auto tenant = fabric_->tenants().Resolve(exe_, CommKeyText(key_))) priority = tenant->policy().priority;
      const int me = membership_.my_host;
      for (int h = 0; h < me; ++h) {
        CollLink& l = coll_links_[h];
        if (!l.link || l.path < 0 || l.lease) continue;
        l.lease = fabric_->ChooseLinkPath(my_addr_, membership_.host_addrs[h], priority, key_,
                                          RingNeighbours(config_->ring, me, h), l.path)
                      .lease;
      }
    }
  }
  for (size_t h = 0; h < links.size(); ++h) {
    if (links[h] && p2p_.Attach(static_cast<int>(h), std::move(links[h])) == PeerChannel::Attached::kNoReader) {
      Abort(SystemError("daemon %s cannot start a thread to read the link from host %zu", my_addr_.c_str(), h));
    }
  }
}

}  // namespace conduit
