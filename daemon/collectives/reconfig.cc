// Live reconfiguration of a communicator: the communicator's side of the EpochBarrier
// (epoch_barrier.h says how the daemons agree on the switch point). Here the barrier's
// steps become messages to the other daemons, and an agreed epoch becomes new links and a
// new CommConfig. With nothing pending the launch path checks one empty map, so an
// unchanged communicator pays nothing.
#include <algorithm>
#include <cstring>

#include "collectives/communicator.h"
#include "collectives/link_dial.h"
#include "common/frame.h"
#include "common/log.h"
#include "transport/tcp.h"

namespace conduit {

namespace {

Status TooManyPending() {
  return Status(StatusCode::kAborted, "host 0 already holds " + std::to_string(EpochBarrier::kMaxPendingEpochs) +
                                          " reconfigurations that are not applied yet; ask again once collectives ran");
}

}  // namespace

std::shared_ptr<const CommConfig> Communicator::config() const {
  std::lock_guard<std::mutex> lock(mu_);
  return config_;
}

uint64_t Communicator::reconfigurations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return barrier_.applied();
}

std::vector<LinkReport> Communicator::Links() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<LinkReport> out;
  for (size_t h = 0; h < coll_links_.size(); ++h) {
    const CollLink& l = coll_links_[h];
    if (l.link) out.push_back({static_cast<int>(h), "collective", l.path, l.local_ip, l.link->peer_name(), l.epoch});
  }
  for (auto& [host, peer] : p2p_.Peers()) out.push_back({host, "p2p", -1, "", std::move(peer), 0});
  return out;
}

bool Communicator::MayLaunch() const { return barrier_.MayLaunch(config_->epoch, coll_seq_); }

Status Communicator::SendControl(int host, uint16_t type, const std::vector<uint8_t>& payload) {
  return p2p_.SendControl(host, type, payload, OpDeadline());
}

void Communicator::SendControlToAll(uint16_t type, const std::vector<uint8_t>& payload) {
  for (int h = 0; h < p2p_.nhosts(); ++h) {
    if (h == membership_.my_host) continue;
    Status st = SendControl(h, type, payload);
    if (!st.ok()) {
      Abort(RemoteError("could not send a reconfiguration message to daemon %s: %s",
                        membership_.host_addrs[h].c_str(), st.message().c_str()));
      return;
    }
  }
}

void Communicator::AddProposal(std::unique_lock<std::mutex>& lock, Proposal proposal) {
  const uint64_t e = proposal.epoch;
  if (!barrier_.Add(config_->epoch, std::move(proposal))) {
    CLOG_WARN("communicator %016llx: ignoring a duplicate, stale or far-ahead proposal for epoch %llu (now at %llu)",
              static_cast<unsigned long long>(key_), static_cast<unsigned long long>(e),
              static_cast<unsigned long long>(config_->epoch));
    return;
  }
  cv_.notify_all();
  AdvanceReconfig(lock);
}

void Communicator::AdvanceReconfig(std::unique_lock<std::mutex>& lock) {
  for (;;) {
    // Before setup finished, not every link to the other daemons exists yet.
    if (!failed_.ok() || closing_ || !setup_done_ || !setup_status_.ok()) return;
    const EpochBarrier::Step step = barrier_.Next(config_->epoch, coll_seq_, queue_.running());
    switch (step.kind) {
      case EpochBarrier::Step::kWait:
        return;
      case EpochBarrier::Step::kPublish: {
        // Launches stop here until the switch point is known; the others learn how far we got.
        peerproto::ReconfigSeq msg{step.epoch, step.count};
        std::vector<uint8_t> bytes(sizeof(msg));
        memcpy(bytes.data(), &msg, sizeof(msg));
        lock.unlock();
        SendControlToAll(peerproto::kReconfigSeq, bytes);
        lock.lock();
        continue;
      }
      case EpochBarrier::Step::kAgreed:
        cv_.notify_all();  // held ranks may run the collectives before the switch point
        CLOG_INFO("communicator %016llx: epoch %llu agreed, switching after collective %llu",
                  static_cast<unsigned long long>(key_), static_cast<unsigned long long>(step.epoch),
                  static_cast<unsigned long long>(step.count));
        continue;
      case EpochBarrier::Step::kBroken:
        lock.unlock();
        Abort(InternalError("reconfiguration agreement broken: launched %llu collectives, switch point %llu",
                            static_cast<unsigned long long>(coll_seq_), static_cast<unsigned long long>(step.count)));
        lock.lock();
        return;
      case EpochBarrier::Step::kApply:
        break;
    }
    // Every collective before the switch point has run here: apply, holding the running
    // token so no collective starts meanwhile.
    queue_.Hold();
    const Proposal proposal = *step.proposal;
    lock.unlock();
    Status st = ApplyProposal(proposal);
    lock.lock();
    queue_.Release();
    if (!st.ok()) {
      if (closing_) return;  // destroyed meanwhile: nothing left to fail
      lock.unlock();
      Abort(st);
      lock.lock();
      cv_.notify_all();
      return;
    }
    cv_.notify_all();  // applied (ApplyProposal counted it with the switch)
  }
}

Status Communicator::ApplyProposal(const Proposal& proposal) {
  const int nhosts = static_cast<int>(membership_.host_addrs.size());
  const int me = membership_.my_host;
  const ReconfigPlan& plan = proposal.plan;
  std::shared_ptr<CommConfig> next = std::make_shared<CommConfig>(*config());
  next->epoch = proposal.epoch;
  if (plan.set_ring) next->ring = plan.ring;
  if (plan.set_algorithm) next->allreduce_algo = plan.algorithm;

  // New collective links: this daemon dials the hosts below it (as at setup) and takes
  // the ones the hosts above it dial.
  std::vector<std::pair<int, CollLink>> fresh;
  const std::shared_ptr<TenantState> tenant = CurrentTenant();  // we hold the running token
  const int priority = tenant ? tenant->policy().priority : 0;
  for (int h = 0; h < me; ++h) {
    int pin;
    if (!plan.Renews(me, h, &pin)) continue;
    {
      std::lock_guard<std::mutex> lock(mu_);
      coll_links_[h].lease.reset();  // its old path's load must not steer the new choice
    }
    LinkPath lp;
    if (fabric_ != nullptr) {
      lp = fabric_->ChooseLinkPath(my_addr_, membership_.host_addrs[h], priority, key_,
                                   RingNeighbours(next->ring, me, h), pin);
    } else {
      lp.connect_addr = membership_.host_addrs[h];
    }
    peerproto::LinkHello hello{key_, me, peerproto::kCollective, static_cast<uint32_t>(proposal.epoch), lp.path};
    UniqueFd fd;
    Status st = DialLink(*options_.security, membership_.host_addrs[h], lp.connect_addr, lp.local_ip, hello,
                         options_.timeout_ms, &fd);
    if (!st.ok()) {
      return RemoteError("reconfiguration to epoch %llu: cannot open the new link to daemon %s on path %d: %s",
                         static_cast<unsigned long long>(proposal.epoch), membership_.host_addrs[h].c_str(), lp.path,
                         st.message().c_str());
    }
    fresh.emplace_back(h, CollLink{std::make_unique<TcpLink>(std::move(fd), membership_.host_addrs[h]), lp.path,
                                   lp.local_ip, proposal.epoch, std::move(lp.lease)});
  }
  {
    std::unique_lock<std::mutex> lock(mu_);
    Deadline deadline = OpDeadline();
    for (int h = me + 1; h < nhosts; ++h) {
      int pin;
      if (!plan.Renews(me, h, &pin)) continue;
      const auto key = std::make_pair(h, proposal.epoch);
      while (renewed_.count(key) == 0 && failed_.ok() && !closing_) {
        if (cv_.wait_until(lock, deadline.when()) == std::cv_status::timeout && renewed_.count(key) == 0) {
          return RemoteError("reconfiguration to epoch %llu: daemon %s never opened its new link",
                             static_cast<unsigned long long>(proposal.epoch), membership_.host_addrs[h].c_str());
        }
      }
      if (!failed_.ok()) return failed_;
      if (closing_) return InvalidUsage("communicator destroyed during a reconfiguration");
      fresh.emplace_back(h, std::move(renewed_[key]));
      renewed_.erase(key);
    }
  }
  // Switch. The old links carried only collectives that finished here; closing them sends
  // a FIN after anything still queued, so a slower peer still reads all of it.
  std::vector<CollLink> retired;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Destroyed meanwhile: ~Communicator shuts the links it holds, so none is swapped out
    // from under it (the fresh ones close here).
    if (closing_) return InvalidUsage("communicator destroyed during a reconfiguration");
    for (auto& [h, link] : fresh) {
      retired.push_back(std::move(coll_links_[h]));
      coll_links_[h] = std::move(link);
    }
    config_ = next;
    // Counted with the switch, under the same lock: a report (the admin API) that shows
    // the new epoch shows it applied.
    barrier_.Applied(proposal.epoch);
  }
  CLOG_INFO("communicator %016llx: now at epoch %llu (ring %s, all-reduce %s, %zu links replaced)",
            static_cast<unsigned long long>(key_), static_cast<unsigned long long>(next->epoch),
            RingText(next->ring).c_str(), next->allreduce_algo.c_str(), fresh.size());
  return Status::Ok();
}

Status Communicator::Reconfigure(const ReconfigPlan& plan, int wait_ms, ReconfigResult* result) {
  *result = ReconfigResult{};
  std::unique_lock<std::mutex> lock(mu_);
  if (!setup_done_ || !setup_status_.ok()) return InvalidUsage("the communicator is not set up yet");
  if (!failed_.ok()) return failed_;
  const int nhosts = static_cast<int>(membership_.host_addrs.size());
  const int me = membership_.my_host;
  CONDUIT_RETURN_IF_ERROR(ValidatePlan(plan, nhosts));
  Deadline deadline = Deadline::AfterMs(wait_ms);
  uint64_t epoch = 0;
  if (me == 0) {
    if (!barrier_.SequenceEpoch(config_->epoch, &epoch)) return TooManyPending();
    peerproto::ReconfigHeader head{};
    head.epoch = epoch;
    head.origin_host = me;
    std::vector<uint8_t> bytes = EncodeReconfig(head, plan);
    lock.unlock();
    SendControlToAll(peerproto::kReconfigPropose, bytes);
    lock.lock();
    AddProposal(lock, Proposal{epoch, me, 0, plan});
  } else {
    const uint32_t id = barrier_.NextRequestId();
    peerproto::ReconfigHeader head{};
    head.origin_host = me;
    head.request_id = id;
    std::vector<uint8_t> bytes = EncodeReconfig(head, plan);
    lock.unlock();
    Status st = SendControl(0, peerproto::kReconfigForward, bytes);
    lock.lock();
    if (!st.ok()) {
      barrier_.ForgetRequest(id);
      return st;
    }
    while (!barrier_.TakeRequestEpoch(id, &epoch)) {
      if (!failed_.ok() || cv_.wait_until(lock, deadline.when()) == std::cv_status::timeout) {
        // Not sequenced in time: the change still happens, result->epoch 0 says so.
        if (!barrier_.TakeRequestEpoch(id, &epoch)) {
          barrier_.ForgetRequest(id);
          return failed_;
        }
        break;
      }
    }
  }
  result->epoch = epoch;
  while (config_->epoch < epoch && failed_.ok()) {
    if (cv_.wait_until(lock, deadline.when()) == std::cv_status::timeout) break;
  }
  result->applied = config_->epoch >= epoch;
  return failed_;
}

Status Communicator::OnControl(int host, uint16_t type, const std::vector<uint8_t>& payload) {
  const int nhosts = static_cast<int>(membership_.host_addrs.size());
  const std::string& peer = membership_.host_addrs[host];
  if (type == peerproto::kReconfigSeq) {
    peerproto::ReconfigSeq msg;
    if (payload.size() != sizeof(msg)) return RemoteError("malformed ReconfigSeq from daemon %s", peer.c_str());
    memcpy(&msg, payload.data(), sizeof(msg));
    std::unique_lock<std::mutex> lock(mu_);
    if (!barrier_.RecordCount(config_->epoch, host, msg.epoch, msg.launched)) {
      return RemoteError("daemon %s sent a count for epoch %llu, too far ahead of epoch %llu", peer.c_str(),
                         static_cast<unsigned long long>(msg.epoch), static_cast<unsigned long long>(config_->epoch));
    }
    AdvanceReconfig(lock);
    return Status::Ok();
  }
  peerproto::ReconfigHeader head;
  ReconfigPlan plan;
  CONDUIT_RETURN_IF_ERROR(DecodeReconfig(payload, nhosts, &head, &plan));
  if (head.origin_host < 0 || head.origin_host >= nhosts) {
    return RemoteError("reconfiguration from daemon %s names origin host %d", peer.c_str(), head.origin_host);
  }
  std::unique_lock<std::mutex> lock(mu_);
  if (type == peerproto::kReconfigForward) {
    if (membership_.my_host != 0 || head.origin_host != host) {
      return RemoteError("daemon %s forwarded a reconfiguration to a daemon that does not sequence them", peer.c_str());
    }
    uint64_t epoch = 0;
    if (!barrier_.SequenceEpoch(config_->epoch, &epoch)) {
      // The origin's operator hears "not sequenced in time" when its wait runs out.
      CLOG_WARN("communicator %016llx: %s; the request from daemon %s is dropped", static_cast<unsigned long long>(key_),
                TooManyPending().message().c_str(), peer.c_str());
      return Status::Ok();
    }
    head.epoch = epoch;
    std::vector<uint8_t> bytes = EncodeReconfig(head, plan);
    lock.unlock();
    SendControlToAll(peerproto::kReconfigPropose, bytes);
    lock.lock();
    AddProposal(lock, Proposal{head.epoch, head.origin_host, head.request_id, std::move(plan)});
    return Status::Ok();
  }
  if (host != 0 || head.epoch == 0) {
    return RemoteError("daemon %s proposed a configuration epoch but only host 0 sequences them", peer.c_str());
  }
  if (EpochBarrier::TooFarAhead(config_->epoch, head.epoch)) {
    // Taken by some daemons and not others, it would hold them at its switch point for good.
    return RemoteError("daemon %s proposed epoch %llu, more than %llu ahead of epoch %llu here", peer.c_str(),
                       static_cast<unsigned long long>(head.epoch),
                       static_cast<unsigned long long>(EpochBarrier::kMaxEpochsAhead),
                       static_cast<unsigned long long>(config_->epoch));
  }
  AddProposal(lock, Proposal{head.epoch, head.origin_host, head.request_id, std::move(plan)});
  return Status::Ok();
}

}  // namespace conduit
