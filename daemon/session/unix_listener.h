// The daemon's program-facing Unix socket: accepts connections and serves each one with a
// ClientSession on its own thread.
#ifndef CONDUIT_DAEMON_SESSION_UNIX_LISTENER_H_
#define CONDUIT_DAEMON_SESSION_UNIX_LISTENER_H_

#include <string>

#include "collectives/registry.h"
#include "common/fd_io.h"
#include "session/client_session.h"

namespace conduit {

// Binds `path` (creating its directory; replacing a stale socket but refusing to steal one
// another live daemon answers on). Mode 0666: any local program may use the data path.
Status ListenUnix(const std::string& path, UniqueFd* listener);

// Accept loop; never returns.
void ServeUnix(int listener, CommRegistry* registry, const SessionPolicy* policy);

}  // namespace conduit

#endif  // CONDUIT_DAEMON_SESSION_UNIX_LISTENER_H_
