// Scope: which calls a policy is about: a service, optionally one of its methods, and the
// side of the call this daemon must be on (next to the caller, the default, or next to
// the server).
#ifndef CONDUIT_DAEMON_RPC_POLICY_SCOPE_H_
#define CONDUIT_DAEMON_RPC_POLICY_SCOPE_H_

#include <string>

#include "common/json.h"
#include "common/status.h"
#include "rpc/policy/filter.h"

namespace conduit::rpc {

struct Scope {
  enum class Sides { kClient, kServer, kBoth };

  std::string service;  // "package.Service"
  std::string method;   // "Method"; empty: every method of the service
  Sides sides = Sides::kClient;

  // From a policy's "service", "method" and "side" ("client", "server", "both"; "" = client).
  static Status Make(const std::string& service, const std::string& method, const std::string& side, Scope* out);
  bool Matches(const RpcInfo& info) const;
  void ToJson(Json* spec) const;
};


}  // namespace conduit::rpc

#endif  // CONDUIT_DAEMON_RPC_POLICY_SCOPE_H_
