// RPC calls in flight across a live upgrade (docs/upgrade.md, "RPC calls in flight").
//
// Each end of a call (a program session, a link to another daemon) writes its side of the
// call into its own state: the call's key, shared by both ends, its own id for it, and the
// call's fields. The new process rebuilds each call once and joins the two ends as they
// are restored (AdoptedCalls); a call one of whose ends did not come back ends at the other
// with UNAVAILABLE, as a call on a broken link does.
#ifndef CONDUIT_DAEMON_RPC_CALL_HANDOVER_H_
#define CONDUIT_DAEMON_RPC_CALL_HANDOVER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "common/status.h"
#include "rpc/call.h"

namespace conduit::upgrade::v1 {
class RpcCallState;
}

namespace conduit::rpc {

class PolicyEngine;

// The old process's side: `call` as the end that knows it by `id` sees it. Fails when the
// call cannot move now (it waits on a rate limit's delay).
Status ExportCall(RpcCall& call, uint64_t id, bool client_end, upgrade::v1::RpcCallState* out);

// The new process's side: the calls being rebuilt, by key, until every end is back.
class AdoptedCalls {
 public:
  // Joins `end` (knowing the call as `state.id()`) to the call `state` names, made here
  // when it is the first of its ends: *out is the call. An error for a state that cannot be
  // a call (an empty method, an unknown side) or an end named twice.
  Status Attach(const upgrade::v1::RpcCallState& state, std::shared_ptr<Endpoint> end, std::shared_ptr<RpcCall>* out);
  // Once every end that will come back has: each call takes the policies that apply to it
  // now (the operator's, replayed), and a call missing an end ends at the other. Returns
  // how many calls go on. Attach refuses from then on (an end later than that is refused
  // with its session: its call has ended).
  size_t Finish(PolicyEngine* policies);

 private:
  std::mutex mu_;
  std::map<uint64_t, std::shared_ptr<RpcCall>> calls_;
  bool finished_ = false;
};

}  // namespace conduit::rpc

#endif  // CONDUIT_DAEMON_RPC_CALL_HANDOVER_H_
