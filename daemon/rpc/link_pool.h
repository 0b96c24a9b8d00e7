// LinkPool: this daemon's RPC links to other daemons, one per daemon address, made on
// first use and remade after one broke.
#ifndef CONDUIT_DAEMON_RPC_LINK_POOL_H_
#define CONDUIT_DAEMON_RPC_LINK_POOL_H_

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"

namespace conduit::rpc {

class PeerLink;
class RpcContext;

class LinkPool {
 public:
  explicit LinkPool(RpcContext* service) : service_(service) {}
  // The live link to the daemon at `addr` ("ip:port"), connecting when there is none.
  Status Get(const std::string& addr, std::shared_ptr<PeerLink>* out);
  // Addresses of the links that are up.
  std::vector<std::string> Live();

 private:
  RpcContext* service_;
  std::mutex mu_;  // held while connecting: one connection per address
  std::map<std::string, std::shared_ptr<PeerLink>> links_;
};

}  // namespace conduit::rpc

#endif  // CONDUIT_DAEMON_RPC_LINK_POOL_H_
