#include "server/systemd_notify.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/fd_io.h"
#include "common/log.h"

namespace conduit {

void NotifyServiceManager(const std::string& state) {
  const char* path = getenv("NOTIFY_SOCKET");
  if (path == nullptr || path[0] == '\0') return;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const size_t len = strlen(path);
  if (len >= sizeof(addr.sun_path) || (path[0] != '/' && path[0] != '@')) {
    CLOG_WARN("NOTIFY_SOCKET=%s is not a socket path; systemd is not told '%s'", path, state.c_str());
    return;
  }
  memcpy(addr.sun_path, path, len);
  if (path[0] == '@') addr.sun_path[0] = '\0';  // an abstract socket
  UniqueFd fd(socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  const socklen_t addr_len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + len);
  if (!fd.valid() || sendto(fd.get(), state.data(), state.size(), MSG_NOSIGNAL,
                            reinterpret_cast<const sockaddr*>(&addr), addr_len) < 0) {
    CLOG_WARN("cannot tell systemd '%s' (NOTIFY_SOCKET=%s): %s", state.c_str(), path, strerror(errno));
  }
}

}  // namespace conduit
