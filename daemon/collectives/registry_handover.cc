// The registry's part of a live upgrade (docs/upgrade.md): every communicator quiesced and
// exported by the old process, adopted by the new one and taken by the sessions of its
// local ranks as they are adopted in turn.
#include "collectives/registry.h"

#include "common/log.h"

namespace conduit {

Status CommRegistry::ExportForHandover(Deadline deadline, std::vector<HandedComm>* out) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (parked_count_ > 0) {
      return Status(StatusCode::kAborted, std::to_string(parked_count_) +
                                              " link(s) from other daemons wait for a communicator being formed here");
    }
  }
  if (const size_t open = rendezvous_.open(); open > 0) {
    return Status(StatusCode::kAborted, "this daemon is the root of " + std::to_string(open) +
                                            " communicator rendezvous under way");
  }
  std::vector<std::shared_ptr<Communicator>> comms = List();
  std::vector<std::shared_ptr<Communicator>> quiesced;
  Status st;
  for (const auto& comm : comms) {
    st = comm->QuiesceForHandover(deadline);
    if (!st.ok()) break;
    quiesced.push_back(comm);
  }
  for (size_t i = 0; st.ok() && i < quiesced.size(); ++i) {
    HandedComm handed;
    st = quiesced[i]->ExportHandover(&handed);
    if (st.ok()) out->push_back(std::move(handed));
  }
  if (!st.ok()) {
    for (const auto& comm : quiesced) comm->ResumeAfterHandover();
    out->clear();
    return st;
  }
  std::lock_guard<std::mutex> lock(mu_);
  quiesced_ = std::move(quiesced);
  return Status::Ok();
}

void CommRegistry::ResumeHandover() {
  std::vector<std::shared_ptr<Communicator>> quiesced;
  {
    std::lock_guard<std::mutex> lock(mu_);
    quiesced.swap(quiesced_);
  }
  for (const auto& comm : quiesced) comm->ResumeAfterHandover();
}

Status CommRegistry::AdoptHandedOver(std::vector<HandedComm> comms) {
  std::map<uint64_t, Handed> adopted;
  for (HandedComm& in : comms) {
    const uint64_t key = in.key;
    if (adopted.count(key)) return InvalidArgument("communicator %s handed over twice", CommKeyShort(key).c_str());
    Handed h;
    // Ranks that destroyed their communicator have no session to take it again.
    const std::set<int> left(in.left_ranks.begin(), in.left_ranks.end());
    CONDUIT_RETURN_IF_ERROR(Communicator::FromHandover(std::move(in), my_addr_, options_, fabric_, &h.comm));
    for (int r : h.comm->local_ranks()) {
      if (left.count(r) == 0) h.waiting.insert(r);
    }
    if (h.waiting.empty()) continue;  // no session holds it: it ends here, as it would have there
    h.expires = Deadline::AfterMs(kHandedWaitMs);
    adopted.emplace(key, std::move(h));
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [key, h] : adopted) {
    comms_[key] = h.comm;
    accepting_.insert(key);
  }
  handed_ = std::move(adopted);
  return Status::Ok();
}

void CommRegistry::StartHandedOver() {
  std::vector<std::shared_ptr<Communicator>> comms;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [key, h] : handed_) comms.push_back(h.comm);
  }
  for (const auto& comm : comms) comm->StartHandedOver();
}

std::shared_ptr<Communicator> CommRegistry::TakeHandedOver(uint64_t key, int rank) {
  std::shared_ptr<Communicator> comm;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = handed_.find(key);
    if (it == handed_.end() || it->second.waiting.erase(rank) == 0) return nullptr;
    comm = it->second.comm;
    if (it->second.waiting.empty()) handed_.erase(it);  // the sessions hold it from now on
  }
  // Held by this session in the new process too, so that no Join takes it.
  if (!comm->ClaimRank(rank).ok()) return nullptr;
  return comm;
}

std::vector<std::pair<std::shared_ptr<Communicator>, Status>> CommRegistry::ExpireHanded() {
  std::vector<std::pair<std::shared_ptr<Communicator>, Status>> lost;
  for (auto it = handed_.begin(); it != handed_.end();) {
    if (!it->second.expires.expired()) {
      ++it;
      continue;
    }
    std::string missing;
    for (int r : it->second.waiting) {
      if (!missing.empty()) missing += ',';
      missing += std::to_string(r);
    }
    CLOG_WARN("upgrade: communicator %s: the session(s) of local rank(s) %s were not handed over; it fails",
              CommKeyShort(it->first).c_str(), missing.c_str());
    lost.emplace_back(it->second.comm, RemoteError("local rank(s) %s of daemon %s were lost in a live upgrade",
                                                   missing.c_str(), my_addr_.c_str()));
    it = handed_.erase(it);
  }
  return lost;
}

}  // namespace conduit
