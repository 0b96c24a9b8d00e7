#include "rpc/target.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <string.h>

#include <cstdlib>

namespace conduit::rpc {

std::string NumericIp(const sockaddr* addr) {
  char host[INET6_ADDRSTRLEN] = "";
  if (addr->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(addr)->sin_addr, host, sizeof(host));
  } else if (addr->sa_family == AF_INET6) {
    const in6_addr& a6 = reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED(&a6)) {
      inet_ntop(AF_INET, a6.s6_addr + 12, host, sizeof(host));
    } else {
      inet_ntop(AF_INET6, &a6, host, sizeof(host));
    }
  }
  return host;
}

std::string NormalizeIp(const std::string& ip) {
  sockaddr_storage ss{};
  auto* a4 = reinterpret_cast<sockaddr_in*>(&ss);
  auto* a6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (inet_pton(AF_INET, ip.c_str(), &a4->sin_addr) == 1) {
    a4->sin_family = AF_INET;
  } else if (inet_pton(AF_INET6, ip.c_str(), &a6->sin6_addr) == 1) {
    a6->sin6_family = AF_INET6;
  } else {
    return "";
  }
  return NumericIp(reinterpret_cast<sockaddr*>(&ss));
}

bool IsLoopbackIp(const std::string& ip) {
  std::string n = NormalizeIp(ip);
  return n.rfind("127.", 0) == 0 || n == "::1";
}

bool IsLocalAddress(const std::string& ip) {
  std::string n = NormalizeIp(ip);
  if (n.empty()) return false;
  if (IsLoopbackIp(n)) return true;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return false;
  bool found = false;
  for (ifaddrs* it = list; it != nullptr && !found; it = it->ifa_next) {
    if (it->ifa_addr != nullptr) found = n == NumericIp(it->ifa_addr);
  }
  freeifaddrs(list);
  return found;
}

std::string JoinHostPort(const std::string& ip, uint32_t port) {
  return (ip.find(':') != std::string::npos ? "[" + ip + "]" : ip) + ":" + std::to_string(port);
}

Status ParseTarget(const std::string& text, std::string* host_out, uint32_t* port_out) {
  std::string t = text;
  for (const char* scheme : {"dns:///", "dns:", "ipv4:", "ipv6:"}) {
    if (t.rfind(scheme, 0) == 0) {
      t = t.substr(strlen(scheme));
      break;
    }
  }
  if (t.find("://") != std::string::npos || t.rfind("unix:", 0) == 0 || t.find(',') != std::string::npos) {
    return InvalidArgument("target '%s' is not a single host:port", text.c_str());
  }
  std::string host;
  std::string port_text;
  if (!t.empty() && t[0] == '[') {
    size_t close = t.find(']');
    if (close == std::string::npos || close + 1 >= t.size() || t[close + 1] != ':') {
      return InvalidArgument("bad target '%s'", text.c_str());
    }
    host = t.substr(1, close - 1);
    port_text = t.substr(close + 2);
  } else {
    size_t colon = t.rfind(':');
    if (colon == std::string::npos) return InvalidArgument("target '%s' names no port", text.c_str());
    host = t.substr(0, colon);
    port_text = t.substr(colon + 1);
  }
  char* end = nullptr;
  long port = strtol(port_text.c_str(), &end, 10);
  if (port_text.empty() || *end != '\0' || port <= 0 || port > 65535) {
    return InvalidArgument("bad port in target '%s'", text.c_str());
  }
  *host_out = std::move(host);
  *port_out = static_cast<uint32_t>(port);
  return Status::Ok();
}

Status ResolveTarget(const std::string& text, Target* out) {
  std::string host;
  uint32_t port = 0;
  CONDUIT_RETURN_IF_ERROR(ParseTarget(text, &host, &port));
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.empty() ? "localhost" : host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr) {
    return InvalidArgument("cannot resolve '%s': %s", host.c_str(), gai_strerror(rc));
  }
  std::string ip = NumericIp(res->ai_addr);
  freeaddrinfo(res);
  out->ip = ip;
  out->port = port;
  out->local = IsLocalAddress(out->ip);
  return Status::Ok();
}

}  // namespace conduit::rpc
