// TopologyStore: the daemon's current topology, replaced as a whole at run time (admin API,
// SIGHUP) while communicators read it. Readers take a snapshot; a communicator keeps the
// decisions it made from an older one until it is reconfigured.
#ifndef CONDUIT_DAEMON_TOPOLOGY_TOPOLOGY_STORE_H_
#define CONDUIT_DAEMON_TOPOLOGY_TOPOLOGY_STORE_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "topology/topology.h"

namespace conduit {

class TopologyStore {
 public:
  // `path` may be empty: the daemon starts without a topology (every host unknown).
  explicit TopologyStore(std::string path) : path_(std::move(path)) {}

  // Re-reads the file. On error the current topology stays.
  Status Reload();
  // Installs a topology given as JSON (admin API); it does not touch the file.
  Status Replace(const Json& json);

  std::shared_ptr<const Topology> Get() const;
  const std::string& path() const { return path_; }
  // Bumped on every successful change.
  uint64_t generation() const;
  // {file, generation, source, topology}
  Json Describe() const;

 private:
  void Install(Topology topology, std::string source);

  const std::string path_;
  mutable std::mutex mu_;
  std::shared_ptr<const Topology> current_ = std::make_shared<Topology>();
  uint64_t generation_ = 0;
  std::string source_ = "none";
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_TOPOLOGY_TOPOLOGY_STORE_H_
