#include "rpc/link_pool.h"

#include "rpc/peer_link.h"

namespace conduit::rpc {

Status LinkPool::Get(const std::string& addr, std::shared_ptr<PeerLink>* out) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = links_.find(addr);
  // A link whose daemon said GoAway (it is being replaced) closes after its last call; new
  // calls go on a new connection, which its successor serves.
  if (it != links_.end() && it->second->accepting_calls()) {
    *out = it->second;
    return Status::Ok();
  }
  std::shared_ptr<PeerLink> link;
  CONDUIT_RETURN_IF_ERROR(PeerLink::Connect(service_, addr, &link));
  links_[addr] = link;
  *out = std::move(link);
  return Status::Ok();
}

std::vector<std::string> LinkPool::Live() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> live;
  for (const auto& [addr, link] : links_) {
    if (link->alive()) live.push_back(addr);
  }
  return live;
}

}  // namespace conduit::rpc
