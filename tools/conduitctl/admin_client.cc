#include "admin_client.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "common/fd_io.h"

namespace conduit {

Status AdminClient::Call(const std::string& method, const std::string& target, const std::string& body,
                         HttpResponse* response) const {
  const Deadline deadline = Deadline::AfterMs(timeout_ms_);
  sockaddr_un addr{};
  if (socket_path_.size() >= sizeof(addr.sun_path)) return InvalidArgument("socket path too long: %s", socket_path_.c_str());
  addr.sun_family = AF_UNIX;
  memcpy(addr.sun_path, socket_path_.c_str(), socket_path_.size());
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return SystemError("socket: %s", strerror(errno));
  if (connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return SystemError("cannot reach conduitd's admin socket %s: %s (is conduitd running? --socket or "
                       "$CONDUIT_ADMIN_SOCKET picks another)",
                       socket_path_.c_str(), strerror(errno));
  }
  Status sent = WriteHttpRequest(fd.get(), method, target, body, deadline);
  // The daemon answers some requests (403, 503) from the head alone and closes without
  // reading the body, which can fail the write: its answer is still there to read.
  Status read = ReadHttpResponse(fd.get(), deadline, response);
  return read.ok() || sent.ok() ? read : sent;
}

}  // namespace conduit
