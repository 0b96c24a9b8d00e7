// ServerTable: which program session serves which TCP port on this host, as the programs
// announced with Serve. Calls for a port (from another daemon, or from a program on this
// host) go to that session.
#ifndef CONDUIT_DAEMON_RPC_SERVER_TABLE_H_
#define CONDUIT_DAEMON_RPC_SERVER_TABLE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "common/status.h"

namespace conduit::rpc {

class ProgramSession;

class ServerTable {
 public:
  // Fails when another live program serves the port.
  Status Add(uint32_t port, const std::shared_ptr<ProgramSession>& session);
  void Remove(uint32_t port, const ProgramSession* session);
  std::shared_ptr<ProgramSession> Find(uint32_t port) const;
  std::vector<uint32_t> Ports() const;

 private:
  mutable std::mutex mu_;
  std::map<uint32_t, std::weak_ptr<ProgramSession>> ports_;
};

}  // namespace conduit::rpc

#endif  // CONDUIT_DAEMON_RPC_SERVER_TABLE_H_
