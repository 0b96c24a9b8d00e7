// Listening Unix sockets (the program socket, the admin socket).
#ifndef CONDUIT_DAEMON_SERVER_UNIX_SOCKET_H_
#define CONDUIT_DAEMON_SERVER_UNIX_SOCKET_H_

#include <string>

#include "common/fd_io.h"

namespace conduit {

// Binds `path` (creating its directory; replacing a stale socket but refusing to steal one
// another live daemon answers on) with permission bits `mode` (0666 for the program socket:
// any local program may use the data path).
Status ListenUnix(const std::string& path, unsigned mode, UniqueFd* listener);

}  // namespace conduit

#endif  // CONDUIT_DAEMON_SERVER_UNIX_SOCKET_H_
