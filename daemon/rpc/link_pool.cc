#include "rpc/link_pool.h"

#include "rpc/peer_link.h"

namespace conduit::rpc {

std::shared_ptr<PeerLink> LinkPool::Usable(const Slot& slot) {
  // A link whose daemon said GoAway (it is being replaced) closes after its last call; new
  // calls go on a new connection, which its successor serves.
  return slot.link != nullptr && slot.link->accepting_calls() ? slot.link : nullptr;
}

Status LinkPool::Get(const std::string& addr, std::shared_ptr<PeerLink>* out) {
  std::shared_ptr<Slot> slot;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::shared_ptr<Slot>& s = slots_[addr];
    if (s == nullptr) s = std::make_shared<Slot>();
    if ((*out = Usable(*s)) != nullptr) return Status::Ok();
    slot = s;
  }
  // One connection at a time per address; the pool's lock is not held while it is made.
  std::lock_guard<std::mutex> dialing(slot->dial_mu);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if ((*out = Usable(*slot)) != nullptr) return Status::Ok();  // made while this caller waited
  }
  std::shared_ptr<PeerLink> link;
  Status st = PeerLink::Connect(service_, addr, &link);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = slots_.find(addr);
  if (!st.ok()) {
    // Only addresses with a link stay: a program naming ever new hosts that do not answer
    // leaves nothing behind.
    if (it != slots_.end() && it->second == slot && slot->link == nullptr) slots_.erase(it);
    return st;
  }
  slot->link = link;
  if (it == slots_.end()) slots_.emplace(addr, slot);  // dropped by a failed dial meanwhile
  *out = std::move(link);
  return Status::Ok();
}

void LinkPool::Adopt(const std::string& addr, std::shared_ptr<PeerLink> link) {
  std::lock_guard<std::mutex> lock(mu_);
  std::shared_ptr<Slot>& s = slots_[addr];
  if (s == nullptr) s = std::make_shared<Slot>();
  s->link = std::move(link);
}

std::vector<std::string> LinkPool::Live() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> live;
  for (const auto& [addr, slot] : slots_) {
    if (slot->link != nullptr && slot->link->alive()) live.push_back(addr);
  }
  return live;
}

void LinkPool::CloseAll(const std::string& why) {
  std::vector<std::shared_ptr<PeerLink>> links;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [addr, slot] : slots_) {
      if (slot->link != nullptr) links.push_back(slot->link);
    }
  }
  for (const auto& link : links) link->Close(why);
}

}  // namespace conduit::rpc
