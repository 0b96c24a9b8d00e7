// Process-wide state of the shim: whether it may manage anything, and the live connection
// to conduitd (made on first need, remade at most once a second after the daemon died).
#ifndef CONDUIT_LIBMRPC_GRPC_PROCESS_H_
#define CONDUIT_LIBMRPC_GRPC_PROCESS_H_

#include <memory>
#include <string>

#include "daemon_connection.h"

namespace conduit::grpcshim {

// nullptr with *why when CONDUIT_DISABLE is set or no daemon accepts this program.
std::shared_ptr<DaemonConnection> LiveConnection(std::string* why);

}  // namespace conduit::grpcshim

#endif  // CONDUIT_LIBMRPC_GRPC_PROCESS_H_
