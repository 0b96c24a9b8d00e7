// The operator's network part of the admin API: the topology (view, replace, reload from
// its file), placement policies (ring order, flow assignment), tenant policies, path
// loads, and their metrics.
#ifndef CONDUIT_DAEMON_SESSION_FABRIC_ADMIN_H_
#define CONDUIT_DAEMON_SESSION_FABRIC_ADMIN_H_

#include "admin/admin_api.h"
#include "policy/fabric.h"

namespace conduit {

// GET/PUT /v1/topology, POST /v1/topology/reload, GET/PUT /v1/policies/ring,
// GET/PUT /v1/policies/flows, GET /v1/policies/tenant, GET/PUT/DELETE
// /v1/policies/tenant/{name}, GET /v1/paths; conduit_tenant_* and conduit_path_* metrics.
void AddFabricAdmin(AdminApi* api, Fabric* fabric);

}  // namespace conduit

#endif  // CONDUIT_DAEMON_SESSION_FABRIC_ADMIN_H_
