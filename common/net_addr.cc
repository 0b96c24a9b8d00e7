#include "common/net_addr.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <cstdlib>
#include <cstring>

namespace conduit {

namespace {

Status ParseAddr(const std::string& text, int default_port, int min_port, SockAddr* out) {
  std::string host = text;
  int port = default_port;
  if (!text.empty() && text[0] == '[') {
    size_t close = text.find(']');
    if (close == std::string::npos) return InvalidArgument("bad address '%s': missing ']'", text.c_str());
    host = text.substr(1, close - 1);
    if (close + 1 < text.size()) {
      if (text[close + 1] != ':') return InvalidArgument("bad address '%s'", text.c_str());
      port = atoi(text.c_str() + close + 2);
    }
  } else {
    size_t colon = text.rfind(':');
    if (colon != std::string::npos) {
      host = text.substr(0, colon);
      port = atoi(text.c_str() + colon + 1);
    }
  }
  if (port < min_port || port > 65535) return InvalidArgument("bad port in address '%s'", text.c_str());
  *out = SockAddr{};
  auto* v4 = reinterpret_cast<sockaddr_in*>(&out->storage);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&out->storage);
  if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(port));
    out->len = sizeof(sockaddr_in);
    return Status::Ok();
  }
  if (inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(port));
    out->len = sizeof(sockaddr_in6);
    return Status::Ok();
  }
  return InvalidArgument("bad address '%s': expected a numeric IPv4/IPv6 address", text.c_str());
}

}  // namespace

Status ParseHostPort(const std::string& text, int default_port, SockAddr* out) {
  return ParseAddr(text, default_port, 1, out);
}

Status ParseListenAddr(const std::string& text, SockAddr* out) { return ParseAddr(text, -1, 0, out); }

std::string FormatSockAddr(const SockAddr& addr) {
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (addr.storage.ss_family == AF_INET) {
    auto* v4 = reinterpret_cast<const sockaddr_in*>(&addr.storage);
    inet_ntop(AF_INET, &v4->sin_addr, host, sizeof(host));
    port = ntohs(v4->sin_port);
    return std::string(host) + ":" + std::to_string(port);
  }
  auto* v6 = reinterpret_cast<const sockaddr_in6*>(&addr.storage);
  inet_ntop(AF_INET6, &v6->sin6_addr, host, sizeof(host));
  port = ntohs(v6->sin6_port);
  // Appended piece by piece: GCC 12 at -O3 mistakes "[" + string for an overlapping copy.
  std::string text = "[";
  text += host;
  text += "]:";
  text += std::to_string(port);
  return text;
}

std::string HostOfAddr(const std::string& addr) {
  if (!addr.empty() && addr[0] == '[') {
    size_t close = addr.find(']');
    return close == std::string::npos ? addr : addr.substr(1, close - 1);
  }
  size_t colon = addr.find(':');
  if (colon == std::string::npos || addr.find(':', colon + 1) != std::string::npos) return addr;  // bare IPv6
  return addr.substr(0, colon);
}

bool IsNumericIp(const std::string& ip) {
  in6_addr buf;
  return inet_pton(AF_INET, ip.c_str(), &buf) == 1 || inet_pton(AF_INET6, ip.c_str(), &buf) == 1;
}

std::string PrimaryIpv4Address() {
  ifaddrs* list = nullptr;
  std::string result = "127.0.0.1";
  if (getifaddrs(&list) != 0) return result;
  for (ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || it->ifa_addr->sa_family != AF_INET) continue;
    if ((it->ifa_flags & IFF_UP) == 0 || (it->ifa_flags & IFF_LOOPBACK) != 0) continue;
    char host[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(it->ifa_addr)->sin_addr, host, sizeof(host));
    result = host;
    break;
  }
  freeifaddrs(list);
  return result;
}

}  // namespace conduit
