// The collectives service's part of the admin API: communicators, their recent collectives
// (trace) and their metrics.
#ifndef CONDUIT_DAEMON_SESSION_COLLECTIVE_ADMIN_H_
#define CONDUIT_DAEMON_SESSION_COLLECTIVE_ADMIN_H_

#include "admin/admin_api.h"
#include "collectives/registry.h"
#include "common/unique_id.h"

namespace conduit {

// GET /v1/communicators, /v1/communicators/{key}, /v1/communicators/{key}/trace,
// POST /v1/communicators/{key}/reconfigure, and conduit_collective_* / conduit_comm_*
// metrics.
void AddCollectiveAdmin(AdminApi* api, CommRegistry* registry);

}  // namespace conduit

#endif  // CONDUIT_DAEMON_SESSION_COLLECTIVE_ADMIN_H_
