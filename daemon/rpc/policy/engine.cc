#include "rpc/policy/engine.h"

namespace conduit::rpc {

FilterChain PolicyEngine::FiltersFor(const RpcInfo& info) const {
  std::shared_ptr<const Snapshot> snap;
  {
    std::lock_guard<std::mutex> lock(mu_);
    snap = snapshot_;
  }
  FilterChain chain;
  for (const auto& [name, filter] : *snap) {
    if (filter->Applies(info)) chain.push_back(filter);
  }
  return chain;
}

void PolicyEngine::Install(const std::string& name, std::shared_ptr<Filter> filter) {
  std::lock_guard<std::mutex> lock(mu_);
  auto next = std::make_shared<Snapshot>(*snapshot_);
  for (auto& [existing, f] : *next) {
    if (existing == name) {
      f = std::move(filter);
      snapshot_ = std::move(next);
      return;
    }
  }
  next->emplace_back(name, std::move(filter));
  snapshot_ = std::move(next);
}

bool PolicyEngine::Remove(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto next = std::make_shared<Snapshot>(*snapshot_);
  for (auto it = next->begin(); it != next->end(); ++it) {
    if (it->first == name) {
      next->erase(it);
      snapshot_ = std::move(next);
      return true;
    }
  }
  return false;
}

}  // namespace conduit::rpc
