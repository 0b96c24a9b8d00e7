#include "rpc/policy/engine.h"

namespace conduit::rpc {

std::shared_ptr<const PolicyEngine::Snapshot> PolicyEngine::Current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return snapshot_;
}

FilterChain PolicyEngine::FiltersFor(const RpcInfo& info) const {
  std::shared_ptr<const Snapshot> snap = Current();
  FilterChain chain;
  for (const InstalledPolicy& p : *snap) {
    if (p.filter->Applies(info)) chain.push_back(p.filter);
  }
  return chain;
}

void PolicyEngine::Install(InstalledPolicy policy) {
  std::lock_guard<std::mutex> lock(mu_);
  auto next = std::make_shared<Snapshot>(*snapshot_);
  for (InstalledPolicy& p : *next) {
    if (p.kind == policy.kind && p.name == policy.name) {
      policy.filter->TakeStateFrom(*p.filter);
      p = std::move(policy);
      snapshot_ = std::move(next);
      return;
    }
  }
  next->push_back(std::move(policy));
  snapshot_ = std::move(next);
}

bool PolicyEngine::Remove(const std::string& kind, const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto next = std::make_shared<Snapshot>(*snapshot_);
  for (auto it = next->begin(); it != next->end(); ++it) {
    if (it->kind == kind && it->name == name) {
      next->erase(it);
      snapshot_ = std::move(next);
      return true;
    }
  }
  return false;
}

std::vector<InstalledPolicy> PolicyEngine::List() const { return *Current(); }

std::shared_ptr<Filter> PolicyEngine::Find(const std::string& kind, const std::string& name) const {
  std::shared_ptr<const Snapshot> snap = Current();
  for (const InstalledPolicy& p : *snap) {
    if (p.kind == kind && p.name == name) return p.filter;
  }
  return nullptr;
}

}  // namespace conduit::rpc
