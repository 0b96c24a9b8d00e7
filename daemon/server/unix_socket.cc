#include "server/unix_socket.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/log.h"

namespace conduit {
namespace {

Status MakeDirs(const std::string& dir) {
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos == dir.size() || dir[pos] == '/') {
      std::string part = dir.substr(0, pos);
      if (mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) {
        return SystemError("cannot create directory %s: %s", part.c_str(), strerror(errno));
      }
    }
  }
  return Status::Ok();
}

}  // namespace

Status ListenUnix(const std::string& path, unsigned mode, UniqueFd* listener) {
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) return InvalidArgument("socket path too long: %s", path.c_str());
  addr.sun_family = AF_UNIX;
  memcpy(addr.sun_path, path.c_str(), path.size());
  size_t slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) CONDUIT_RETURN_IF_ERROR(MakeDirs(path.substr(0, slash)));
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return SystemError("socket: %s", strerror(errno));
  if (access(path.c_str(), F_OK) == 0) {
    UniqueFd probe(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (connect(probe.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
      return SystemError("another daemon already serves %s", path.c_str());
    }
    unlink(path.c_str());  // stale socket of a daemon that died
  }
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return SystemError("cannot bind %s: %s", path.c_str(), strerror(errno));
  }
  chmod(path.c_str(), mode);
  if (listen(fd.get(), 1024) != 0) return SystemError("listen on %s: %s", path.c_str(), strerror(errno));
  *listener = std::move(fd);
  return Status::Ok();
}

}  // namespace conduit
