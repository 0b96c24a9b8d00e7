// AcceptedLink: a link another daemon opened to this one's RPC service, as a live upgrade's
// park sees it (RpcContext::BeginPark asks every one for no new call). PeerLink implements
// it; RpcContext holds only this, so the context does not depend on the link.
#ifndef CONDUIT_DAEMON_RPC_ACCEPTED_LINK_H_
#define CONDUIT_DAEMON_RPC_ACCEPTED_LINK_H_

#include <cstdint>
#include <string>

namespace conduit::rpc {

class AcceptedLink {
 public:
  virtual ~AcceptedLink() = default;
  // Asks the other daemon to start no new call on this link; it closes the link after its
  // last call. False when the link's version has no GoAway (an older release).
  virtual bool GoAway() = 0;
  virtual uint32_t link_version() const = 0;
  // Names the other daemon, for an operator's message.
  virtual std::string name() const = 0;
};

}  // namespace conduit::rpc

#endif  // CONDUIT_DAEMON_RPC_ACCEPTED_LINK_H_
