#include "collectives/epoch_barrier.h"

#include <algorithm>

namespace conduit {

void EpochBarrier::Init(int nhosts, int my_host) {
  nhosts_ = nhosts;
  my_host_ = my_host;
}

bool EpochBarrier::SequenceEpoch(uint64_t current_epoch, uint64_t* epoch) {
  if (proposed_epoch_ >= current_epoch + kMaxPendingEpochs) return false;
  *epoch = ++proposed_epoch_;
  return true;
}

uint32_t EpochBarrier::NextRequestId() {
  const uint32_t id = ++next_request_id_;
  request_epochs_[id] = 0;
  return id;
}

std::vector<int64_t>& EpochBarrier::CountsFor(uint64_t epoch) {
  auto& counts = launched_[epoch];
  if (counts.empty()) counts.assign(nhosts_, -1);
  return counts;
}

bool EpochBarrier::Add(uint64_t current_epoch, Proposal proposal) {
  const uint64_t e = proposal.epoch;
  if (e <= current_epoch || TooFarAhead(current_epoch, e) || proposals_.count(e) != 0) return false;
  if (proposal.origin == my_host_ && proposal.request_id != 0) {
    auto waiting = request_epochs_.find(proposal.request_id);
    if (waiting != request_epochs_.end()) waiting->second = e;
  }
  proposals_.emplace(e, std::move(proposal));
  return true;
}

bool EpochBarrier::RecordCount(uint64_t current_epoch, int host, uint64_t epoch, uint64_t launched) {
  if (host < 0 || host >= nhosts_) return false;
  if (epoch <= current_epoch) return true;  // cannot happen; harmless
  if (TooFarAhead(current_epoch, epoch)) return false;
  CountsFor(epoch)[host] = static_cast<int64_t>(launched);
  return true;
}

bool EpochBarrier::MayLaunch(uint64_t current_epoch, uint64_t launched) const {
  if (proposals_.empty()) return true;
  const uint64_t next = current_epoch + 1;
  if (proposals_.count(next) == 0) return true;  // only later epochs arrived so far
  return entered_epoch_ == next && target_known_ && launched < target_;
}

EpochBarrier::Step EpochBarrier::Next(uint64_t current_epoch, uint64_t launched, bool running) {
  Step step;
  const uint64_t e = current_epoch + 1;
  auto it = proposals_.find(e);
  if (it == proposals_.end()) return step;
  step.epoch = e;
  auto& counts = CountsFor(e);
  if (entered_epoch_ != e) {
    // Stop launching and publish how far this daemon got.
    entered_epoch_ = e;
    target_known_ = false;
    counts[my_host_] = static_cast<int64_t>(launched);
    step.kind = Step::kPublish;
    step.count = launched;
    return step;
  }
  if (!target_known_) {
    if (std::any_of(counts.begin(), counts.end(), [](int64_t c) { return c < 0; })) return step;
    target_ = static_cast<uint64_t>(*std::max_element(counts.begin(), counts.end()));
    target_known_ = true;
    step.kind = Step::kAgreed;
    step.count = target_;
    return step;
  }
  step.count = target_;
  if (launched > target_) {
    step.kind = Step::kBroken;
    return step;
  }
  if (launched != target_ || running) return step;
  step.kind = Step::kApply;
  step.proposal = &it->second;
  return step;
}

void EpochBarrier::Applied(uint64_t epoch) {
  proposals_.erase(epoch);
  launched_.erase(epoch);
  // The switch point belonged to this epoch; the next one publishes and agrees afresh.
  target_known_ = false;
  ++applied_;
}

bool EpochBarrier::TakeRequestEpoch(uint32_t request_id, uint64_t* epoch) {
  auto it = request_epochs_.find(request_id);
  if (it == request_epochs_.end() || it->second == 0) return false;
  *epoch = it->second;
  request_epochs_.erase(it);
  return true;
}

void EpochBarrier::ForgetRequest(uint32_t request_id) { request_epochs_.erase(request_id); }

bool EpochBarrier::idle() const {
  return proposals_.empty() && launched_.empty() && request_epochs_.empty() && !target_known_;
}

EpochBarrier::Counters EpochBarrier::counters() const {
  return Counters{entered_epoch_, proposed_epoch_, next_request_id_, applied_};
}

void EpochBarrier::Restore(const Counters& counters) {
  entered_epoch_ = counters.entered_epoch;
  proposed_epoch_ = counters.proposed_epoch;
  next_request_id_ = counters.next_request_id;
  applied_ = counters.applied;
}

}  // namespace conduit
