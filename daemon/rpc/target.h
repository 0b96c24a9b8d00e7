// Where a gRPC channel target points, as conduitd sees it: a host (resolved) and a port,
// and whether that host is this one.
#ifndef CONDUIT_DAEMON_RPC_TARGET_H_
#define CONDUIT_DAEMON_RPC_TARGET_H_

#include <cstdint>
#include <string>

#include <sys/socket.h>

#include "common/status.h"

namespace conduit::rpc {

struct Target {
  std::string ip;    // numeric address of the target host
  uint32_t port = 0;
  bool local = false;  // the host is this one (loopback or one of its addresses)
};

// Accepts "host:port", "dns:///host:port", "dns:host:port", "ipv4:a.b.c.d:port" and
// "ipv6:[::1]:port"; names are resolved. Other schemes (unix:, xds:, ...) are refused.
Status ResolveTarget(const std::string& text, Target* out);
// The parsing part of ResolveTarget, no lookups: the host as written ("" for none) and the
// port (1..65535).
Status ParseTarget(const std::string& text, std::string* host, uint32_t* port);

// "ip:port" of a daemon, with brackets for IPv6.
std::string JoinHostPort(const std::string& ip, uint32_t port);

// A numeric address in 127.0.0.0/8 or ::1 (also as an IPv4-mapped IPv6 address).
bool IsLoopbackIp(const std::string& ip);
// A loopback address, or one of this host's interfaces' addresses.
bool IsLocalAddress(const std::string& ip);
// The numeric form of a socket address, IPv4-mapped IPv6 addresses as IPv4 ("" for other
// families), so one address has one spelling wherever it is compared.
std::string NumericIp(const sockaddr* addr);
// `ip` in that same spelling ("" when it is not a numeric address).
std::string NormalizeIp(const std::string& ip);

}  // namespace conduit::rpc

#endif  // CONDUIT_DAEMON_RPC_TARGET_H_
