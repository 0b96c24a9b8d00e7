#include "policy/path_table.h"

#include <tuple>
#include <vector>

namespace conduit {

PathLease::~PathLease() { table_->Release(group_, path_, weight_); }

std::unique_ptr<PathLease> PathTable::Choose(const std::string& group, int npaths, const FlowPolicy& policy,
                                             int priority, uint64_t hash, int weight, int pinned) {
  std::lock_guard<std::mutex> lock(mu_);
  int path = -1;
  if (npaths > 0 && pinned >= 0 && pinned < npaths) {
    path = pinned;
  } else if (npaths > 0 && policy.assignment != FlowAssignment::kPrimary) {
    std::vector<int> allowed;
    for (int k = 0; k < npaths; ++k) {
      if (policy.Allows(k, priority)) allowed.push_back(k);
    }
    if (allowed.empty()) {  // every path is reserved above this tenant: better shared than none
      for (int k = 0; k < npaths; ++k) allowed.push_back(k);
    }
    switch (policy.assignment) {
      case FlowAssignment::kSingle:
        path = allowed[0];
        break;
      case FlowAssignment::kHash:
        path = allowed[hash % allowed.size()];
        break;
      default: {
        // Least loaded; among equals a path reserved for this tenant, then the lowest index.
        auto key = [&](int k) {
          auto it = loads_.find({group, k});
          int load = it == loads_.end() ? 0 : it->second.weight;
          return std::make_tuple(load, policy.ReservedFor(k, priority) ? 0 : 1, k);
        };
        path = allowed[0];
        for (int k : allowed) {
          if (key(k) < key(path)) path = k;
        }
      }
    }
  }
  Load& l = loads_[{group, path}];
  ++l.connections;
  l.weight += weight;
  return std::make_unique<PathLease>(this, group, path, weight);
}

void PathTable::Release(const std::string& group, int path, int weight) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = loads_.find({group, path});
  if (it == loads_.end()) return;
  --it->second.connections;
  it->second.weight -= weight;
  if (it->second.connections <= 0) loads_.erase(it);
}

Json PathTable::Describe() const {
  std::lock_guard<std::mutex> lock(mu_);
  Json list = Json::Array();
  for (const auto& [key, load] : loads_) {
    Json e = Json::Object();
    e["group"] = key.first;
    e["path"] = key.second;
    e["connections"] = load.connections;
    e["load"] = load.weight;
    list.push_back(std::move(e));
  }
  Json body = Json::Object();
  body["paths"] = std::move(list);
  return body;
}

void PathTable::WriteMetrics(MetricsWriter& w) const {
  std::lock_guard<std::mutex> lock(mu_);
  w.Family("conduit_path_connections", "gauge",
           "Collective connections opened by this daemon, per destination group and path (-1: primary address).");
  for (const auto& [key, load] : loads_) {
    w.Sample("conduit_path_connections", {{"group", key.first}, {"path", std::to_string(key.second)}}, load.connections);
  }
  w.Family("conduit_path_ring_connections", "gauge", "Of those, the connections carrying ring traffic.");
  for (const auto& [key, load] : loads_) {
    w.Sample("conduit_path_ring_connections", {{"group", key.first}, {"path", std::to_string(key.second)}}, load.weight);
  }
}

}  // namespace conduit
