// The daemon-wide part of the admin API: discovery, status, connected programs, the
// admission policy, and daemon-level metrics.
#ifndef CONDUIT_DAEMON_ADMIN_DAEMON_ROUTES_H_
#define CONDUIT_DAEMON_ADMIN_DAEMON_ROUTES_H_

#include <chrono>
#include <string>

#include "admin/admin_api.h"
#include "server/program_policy.h"
#include "server/service_router.h"

namespace conduit {

struct DaemonInfo {
  std::string version;         // kDaemonVersion: "conduitd X.Y.Z"
  std::string peer_addr;       // as other daemons reach this one
  std::string program_socket;
  std::string admin_socket;
  std::string reduce_loops;    // the host reduction loops in use (reduce/reduce.h: "avx512", ...)
  // When the process started (process_start_time_seconds); conduitd takes it first thing.
  std::chrono::system_clock::time_point started = std::chrono::system_clock::now();
};

// GET /v1, /metrics (Prometheus text), /v1/status, /v1/programs, /v1/policies/admission; PUT /v1/policies/admission;
// the daemon-wide metrics: conduit_up, conduit_build_info, conduit_uptime_seconds,
// process_start_time_seconds, conduit_program_connections.
void AddDaemonRoutes(AdminApi* api, DaemonInfo info, const ServiceRouter* router, ProgramPolicy* policy);

}  // namespace conduit

#endif  // CONDUIT_DAEMON_ADMIN_DAEMON_ROUTES_H_
