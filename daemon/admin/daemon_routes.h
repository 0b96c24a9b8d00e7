// The daemon-wide part of the admin API: discovery, status, connected programs, the
// admission policy, and daemon-level metrics.
#ifndef CONDUIT_DAEMON_ADMIN_DAEMON_ROUTES_H_
#define CONDUIT_DAEMON_ADMIN_DAEMON_ROUTES_H_

#include <string>

#include "admin/admin_api.h"
#include "server/program_policy.h"
#include "server/service_router.h"

namespace conduit {

struct DaemonInfo {
  std::string version;
  std::string peer_addr;       // as other daemons reach this one
  std::string program_socket;
  std::string admin_socket;
};

// GET /v1, /metrics (Prometheus text), /v1/status, /v1/programs, /v1/policies/admission; PUT /v1/policies/admission;
// conduit_up / conduit_uptime_seconds / conduit_programs metrics.
void AddDaemonRoutes(AdminApi* api, DaemonInfo info, const ServiceRouter* router, ProgramPolicy* policy);

}  // namespace conduit

#endif  // CONDUIT_DAEMON_ADMIN_DAEMON_ROUTES_H_
