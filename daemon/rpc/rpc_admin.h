// The RPC service's part of the admin API (docs/admin-api.md): its policies, per-method
// metrics and what it is serving.
#ifndef CONDUIT_DAEMON_RPC_RPC_ADMIN_H_
#define CONDUIT_DAEMON_RPC_RPC_ADMIN_H_

#include "admin/admin_api.h"
#include "rpc/rpc_service.h"

namespace conduit::rpc {

// /v1/policies/rpc-acl[/{name}], /v1/policies/rpc-ratelimit[/{name}], /v1/policies/rpc-qos,
// /v1/policies/rpc-metrics, /v1/rpc, /v1/rpc/methods, and conduit_rpc_* metrics.
void AddRpcAdmin(AdminApi* api, RpcService* service);

}  // namespace conduit::rpc

#endif  // CONDUIT_DAEMON_RPC_RPC_ADMIN_H_
