// Where the admin socket lives, agreed by conduitd and conduitctl: $CONDUIT_ADMIN_SOCKET,
// else next to the program socket ("conduitd.sock" -> "conduitd-admin.sock").
#ifndef CONDUIT_DAEMON_ADMIN_ADMIN_SOCKET_H_
#define CONDUIT_DAEMON_ADMIN_ADMIN_SOCKET_H_

#include <cstdlib>
#include <string>

#include "protocol/shim_protocol.h"

namespace conduit {

inline constexpr char kAdminSocketEnv[] = "CONDUIT_ADMIN_SOCKET";

inline std::string AdminSocketFor(const std::string& program_socket) {
  const std::string suffix = ".sock";
  if (program_socket.size() > suffix.size() &&
      program_socket.compare(program_socket.size() - suffix.size(), suffix.size(), suffix) == 0) {
    return program_socket.substr(0, program_socket.size() - suffix.size()) + "-admin.sock";
  }
  return program_socket + ".admin";
}

inline std::string DefaultAdminSocket() {
  if (const char* env = std::getenv(kAdminSocketEnv); env != nullptr && *env != '\0') return env;
  const char* program = std::getenv(shimproto::kSocketEnv);
  return AdminSocketFor(program != nullptr && *program != '\0' ? program : shimproto::kDefaultSocketPath);
}

}  // namespace conduit

#endif  // CONDUIT_DAEMON_ADMIN_ADMIN_SOCKET_H_
