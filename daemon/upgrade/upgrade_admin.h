// POST /v1/upgrade: replaces this conduitd by a new process without closing its sockets
// (`conduitctl upgrade`; docs/upgrade.md). The handover itself is upgrade/handover.h.
#ifndef CONDUIT_DAEMON_UPGRADE_UPGRADE_ADMIN_H_
#define CONDUIT_DAEMON_UPGRADE_UPGRADE_ADMIN_H_

#include <functional>
#include <string>
#include <vector>

#include "admin/admin_api.h"
#include "upgrade/handover.h"

namespace conduit::upgrade {

struct UpgradeSetup {
  std::string default_binary;     // the executable this daemon was started from
  std::vector<std::string> args;  // its command line, without argv[0]
  HandOverHooks hooks;
  // Called once the new daemon serves, before the reply goes out: the daemon must exit
  // (after the reply is written) without touching the sockets.
  std::function<void()> exit;
};

void AddUpgradeAdmin(AdminApi* api, UpgradeSetup setup);

// The new daemon's last step before Ready: replays the operator's run-time changes of the
// old daemon through this daemon's own admin API, each checked as a request would be.
Status ReplayOperatorState(const AdminApi& api, const v1::DaemonState& state);

}  // namespace conduit::upgrade

#endif  // CONDUIT_DAEMON_UPGRADE_UPGRADE_ADMIN_H_
