// CommRegistry: this daemon's communicators, by key, and its side of the peer protocol.
#ifndef CONDUIT_DAEMON_COLLECTIVES_REGISTRY_H_
#define CONDUIT_DAEMON_COLLECTIVES_REGISTRY_H_

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "collectives/rendezvous.h"
#include "common/fd_io.h"
#include "common/unique_id.h"

namespace conduit {

class CommRegistry {
 public:
  // `fabric` (may be null) decides ring orders (as rendezvous root) and link paths.
  CommRegistry(std::string my_addr, CommOptions options, Fabric* fabric = nullptr);

  const std::string& my_addr() const { return my_addr_; }
  const CommOptions& options() const { return options_; }
  Fabric* fabric() const { return fabric_; }

  // Joins local rank `rank` (a program named `exe`) to the communicator named by `id`
  // (rendezvous with the root, then links to the other daemons). Blocks until ready or
  // failed.
  Status Join(const CommIdentity& id, int nranks, int rank, std::shared_ptr<Communicator>* out,
              const std::string& exe = "");

  // Serves one incoming TCP connection from another daemon (runs on its own thread).
  void ServePeerConnection(UniqueFd fd, const std::string& peer);

  size_t LiveCommunicators();
  // The communicators alive now (their setup may still be in progress).
  std::vector<std::shared_ptr<Communicator>> List();

 private:
  struct ParkedLink {
    int from_host;
    uint32_t channel;
    int path;
    UniqueFd fd;
    std::string peer;
    Deadline expires;
  };

  Status ConnectLinks(Communicator& comm);

  const std::string my_addr_;
  const CommOptions options_;
  Fabric* const fabric_;
  RendezvousTable rendezvous_;

  std::mutex mu_;
  std::map<uint64_t, std::weak_ptr<Communicator>> comms_;
  std::set<uint64_t> accepting_;  // communicators whose incoming links attach directly
  std::map<uint64_t, std::vector<ParkedLink>> parked_;
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_COLLECTIVES_REGISTRY_H_
