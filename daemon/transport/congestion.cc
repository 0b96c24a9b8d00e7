#include "transport/congestion.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>

#include <atomic>

#include "common/fd_io.h"
#include "common/log.h"

namespace conduit {
namespace {

// Set once at start, before any connection to another daemon exists; read afterwards.
std::string& Chosen() {
  static std::string name;
  return name;
}

bool SetOn(int fd, const std::string& name) {
  return setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name.data(), static_cast<socklen_t>(name.size())) == 0;
}

}  // namespace

Status CheckCongestionName(const std::string& name) {
  if (name == kHostCongestion) return Status::Ok();
  // TCP_CA_NAME_MAX is 16 with the terminating NUL.
  if (name.empty() || name.size() > 15 || name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos) {
    return InvalidArgument("'%s' is not a congestion control name (e.g. cubic, bbr, dctcp) or 'host'", name.c_str());
  }
  return Status::Ok();
}

Status SetPeerCongestion(const std::string& name) {
  CONDUIT_RETURN_IF_ERROR(CheckCongestionName(name));
  Chosen().clear();
  if (name == kHostCongestion) return Status::Ok();
  UniqueFd probe(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!probe.valid()) probe = UniqueFd(socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!probe.valid()) return SystemError("socket: %s", strerror(errno));
  if (!SetOn(probe.get(), name)) {
    return SystemError(
        "the kernel refused TCP congestion control '%s' (%s; see /proc/sys/net/ipv4/"
        "tcp_available_congestion_control and tcp_allowed_congestion_control): connections to other daemons keep "
        "the host's default",
        name.c_str(), strerror(errno));
  }
  Chosen() = name;
  return Status::Ok();
}

const std::string& PeerCongestion() { return Chosen(); }

void ApplyPeerCongestion(int fd) {
  const std::string& name = Chosen();
  if (name.empty() || SetOn(fd, name)) return;
  static std::atomic<bool> told{false};
  if (!told.exchange(true)) {
    CLOG_WARN("TCP congestion control '%s' refused on a connection to another daemon (%s); it keeps the host's default",
              name.c_str(), strerror(errno));
  }
}

}  // namespace conduit
