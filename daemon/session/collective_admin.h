// The collectives service's part of the admin API: communicators, their recent collectives
// (trace) and their metrics.
#ifndef CONDUIT_DAEMON_SESSION_COLLECTIVE_ADMIN_H_
#define CONDUIT_DAEMON_SESSION_COLLECTIVE_ADMIN_H_

#include "admin/admin_api.h"
#include "collectives/registry.h"

namespace conduit {

// GET /v1/communicators, /v1/communicators/{key}, /v1/communicators/{key}/trace, and
// conduit_collective_* metrics.
void AddCollectiveAdmin(AdminApi* api, CommRegistry* registry);

// A communicator key as the admin API writes it (16 hex digits).
std::string CommKeyText(uint64_t key);

}  // namespace conduit

#endif  // CONDUIT_DAEMON_SESSION_COLLECTIVE_ADMIN_H_
