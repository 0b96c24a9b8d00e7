// PathTable: the load this daemon's collective connections put on each path toward each
// destination group (the peer's rack), and the choice of a path for a new connection.
//
// The load of a connection is its weight: 1 when it carries ring traffic (its hosts are
// ring neighbours), 0 when it only serves latency-bound exchanges. A connection holds a
// lease on its path for as long as it lives, so loads follow reconfigurations.
#ifndef CONDUIT_DAEMON_POLICY_PATH_TABLE_H_
#define CONDUIT_DAEMON_POLICY_PATH_TABLE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "common/json.h"
#include "common/metrics.h"
#include "policy/placement_policy.h"

namespace conduit {

class PathTable;

class PathLease {
 public:
  PathLease(PathTable* table, std::string group, int path, int weight)
      : table_(table), group_(std::move(group)), path_(path), weight_(weight) {}
  ~PathLease();
  PathLease(const PathLease&) = delete;
  PathLease& operator=(const PathLease&) = delete;

  int path() const { return path_; }

 private:
  PathTable* table_;
  std::string group_;
  int path_;
  int weight_;
};

class PathTable {
 public:
  // Picks a path in [0, npaths) for a connection toward `group` of a tenant of `priority`
  // and leases it with `weight`: `pinned` when it is a valid index, else by `policy`.
  // `hash` feeds the "hash" assignment. npaths == 0 (no known paths) gives -1: the
  // primary address.
  std::unique_ptr<PathLease> Choose(const std::string& group, int npaths, const FlowPolicy& policy, int priority,
                                    uint64_t hash, int weight, int pinned);

  // {paths: [{group, path, connections, load}]}
  Json Describe() const;
  void WriteMetrics(MetricsWriter& w) const;

 private:
  friend class PathLease;
  struct Load {
    int connections = 0;
    int weight = 0;
  };
  void Release(const std::string& group, int path, int weight);

  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, Load> loads_;
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_POLICY_PATH_TABLE_H_
