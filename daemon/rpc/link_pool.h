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
  // Callers for one address wait for one connection; callers for other addresses do not
  // (a daemon being replaced answers a new connection only once its successor runs).
  Status Get(const std::string& addr, std::shared_ptr<PeerLink>* out);
  // Addresses of the links that are up.
  std::vector<std::string> Live();
  // A live upgrade: the link to `addr` the process being replaced had, with its calls.
  void Adopt(const std::string& addr, std::shared_ptr<PeerLink> link);
  // The daemon is shutting down: every link closes (PeerLink::Close), so their readers end.
  void CloseAll(const std::string& why);

 private:
  struct Slot {
    std::mutex dial_mu;              // held while connecting to this address
    std::shared_ptr<PeerLink> link;  // guarded by LinkPool::mu_
  };
  // The slot's link when it takes new calls, else null. Under mu_.
  static std::shared_ptr<PeerLink> Usable(const Slot& slot);

  RpcContext* service_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<Slot>> slots_;
};

}  // namespace conduit::rpc

#endif  // CONDUIT_DAEMON_RPC_LINK_POOL_H_
