// "ip:port" parsing and formatting, and the host's own address.
#ifndef CONDUIT_DAEMON_COMMON_NET_ADDR_H_
#define CONDUIT_DAEMON_COMMON_NET_ADDR_H_

#include <sys/socket.h>

#include <string>

#include "common/status.h"

namespace conduit {

struct SockAddr {
  sockaddr_storage storage{};
  socklen_t len = 0;
  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
};

// Accepts "1.2.3.4:7650", "[::1]:7650" and "host" (with default_port).
Status ParseHostPort(const std::string& text, int default_port, SockAddr* out);
// An address to listen on: as above, but the port must be given, and may be 0 (any free one).
Status ParseListenAddr(const std::string& text, SockAddr* out);
std::string FormatSockAddr(const SockAddr& addr);
// The host part of "ip:port" / "[v6]:port" (brackets removed); the text itself when it has
// no port.
std::string HostOfAddr(const std::string& addr);
// True for a numeric IPv4 or IPv6 address (no port).
bool IsNumericIp(const std::string& ip);

// First IPv4 address of an interface that is up and not loopback; "127.0.0.1" if none.
std::string PrimaryIpv4Address();

}  // namespace conduit

#endif  // CONDUIT_DAEMON_COMMON_NET_ADDR_H_
