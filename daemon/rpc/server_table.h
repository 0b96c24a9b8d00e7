// ServerTable: which program session serves which TCP port on this host, and on which
// address (BindAddress), as the programs announced with Serve. Calls for a port (from
// another daemon, or from a program on this host) go to the session whose address the
// call reached; like native sockets, two programs may serve one port on disjoint
// addresses (127.0.0.1 and 10.0.0.2), never on overlapping ones (0.0.0.0 overlaps all).
#ifndef CONDUIT_DAEMON_RPC_SERVER_TABLE_H_
#define CONDUIT_DAEMON_RPC_SERVER_TABLE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"
#include "rpc/bind_address.h"

namespace conduit::rpc {

class ServedProgram;

class ServerTable {
 public:
  // Addresses one program may serve one port on (separate AddListeningPort calls).
  static constexpr size_t kMaxBindsPerPort = 16;

  // Fails when another live program serves the port on an overlapping address.
  Status Add(uint32_t port, const BindAddress& bind, const std::shared_ptr<ServedProgram>& session);
  // Removes every address `session` serves `port` on.
  void Remove(uint32_t port, const ServedProgram* session);
  // The program serving `port` for a call that reached this host at `target_ip`, from a
  // program of this host (from_link false) or over a link from another daemon. nullptr
  // when none: *why is then empty when no program serves the port at all, else it says
  // which address the port is bound to.
  std::shared_ptr<ServedProgram> Find(uint32_t port, const std::string& target_ip, bool from_link,
                                       std::string* why) const;
  std::vector<uint32_t> Ports() const;
  struct Served {
    uint32_t port;
    std::string bind;
    std::string program;
  };
  std::vector<Served> List() const;

 private:
  struct Entry {
    BindAddress bind;
    std::weak_ptr<ServedProgram> session;
  };
  mutable std::mutex mu_;
  std::map<uint32_t, std::vector<Entry>> ports_;
};

}  // namespace conduit::rpc

#endif  // CONDUIT_DAEMON_RPC_SERVER_TABLE_H_
