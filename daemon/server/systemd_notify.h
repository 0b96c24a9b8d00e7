// Tells systemd (Type=notify units, packaging/conduitd.service) how the daemon is doing:
// "READY=1" once it serves, "STOPPING=1" when it shuts down, and after a live upgrade
// "MAINPID=<new pid>" so that systemd follows the new process instead of stopping the
// service when the old one exits (docs/upgrade.md). A datagram to $NOTIFY_SOCKET, as
// sd_notify(3) sends it; written here because it is one sendto and the daemon does not
// otherwise need libsystemd. Does nothing outside systemd.
#ifndef CONDUIT_DAEMON_SERVER_SYSTEMD_NOTIFY_H_
#define CONDUIT_DAEMON_SERVER_SYSTEMD_NOTIFY_H_

#include <string>

namespace conduit {

void NotifyServiceManager(const std::string& state);

}  // namespace conduit

#endif  // CONDUIT_DAEMON_SERVER_SYSTEMD_NOTIFY_H_
