#include "rpc/bind_address.h"

#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>

#include "rpc/target.h"

namespace conduit::rpc {
namespace {

// Two addresses a server could be reached at by one call (loopback counts as one).
bool SameReach(const std::string& a, const std::string& b) {
  return a == b || (IsLoopbackIp(a) && IsLoopbackIp(b));
}

}  // namespace

bool BindAddress::loopback_only() const {
  if (any) return false;
  return std::all_of(ips.begin(), ips.end(), [](const std::string& ip) { return IsLoopbackIp(ip); });
}

bool BindAddress::Admits(const std::string& target_ip, bool from_link) const {
  if (any) return true;
  std::string target = NormalizeIp(target_ip);
  if (target.empty()) return false;
  for (const std::string& ip : ips) {
    // A loopback bind is for this host's programs only: a call from another daemon never
    // reaches it, whichever address its link came in on.
    if (IsLoopbackIp(ip) && from_link) continue;
    if (SameReach(ip, target)) return true;
  }
  return false;
}

bool BindAddress::Overlaps(const BindAddress& other) const {
  if (any || other.any) return true;
  for (const std::string& a : ips) {
    for (const std::string& b : other.ips) {
      if (SameReach(a, b)) return true;
    }
  }
  return false;
}

std::string BindAddress::Describe() const {
  std::string shown = text;
  if (any) return (shown.empty() ? std::string("*") : shown) + " (every address)";
  if (shown.empty() || (ips.size() == 1 && shown != ips[0])) {
    shown.clear();
    for (const std::string& ip : ips) shown += (shown.empty() ? "" : ",") + ip;
  }
  return loopback_only() ? shown + " (loopback: this host only)" : shown;
}

Status ParseBindHost(const std::string& host, BindAddress* out) {
  std::string h = host;
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  *out = BindAddress{};
  out->text = host;
  std::string numeric = NormalizeIp(h);
  if (h.empty() || numeric == "0.0.0.0" || numeric == "::") {
    out->any = true;
    return Status::Ok();
  }
  if (!numeric.empty()) {
    if (!IsLocalAddress(numeric)) return InvalidArgument("%s is not an address of this host", host.c_str());
    out->ips.push_back(numeric);
    return Status::Ok();
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(h.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr) return InvalidArgument("cannot resolve '%s': %s", host.c_str(), gai_strerror(rc));
  for (addrinfo* it = res; it != nullptr && out->ips.size() < BindAddress::kMaxIps; it = it->ai_next) {
    std::string ip = NumericIp(it->ai_addr);
    if (ip == "0.0.0.0" || ip == "::") {
      out->any = true;
      out->ips.clear();
      break;
    }
    if (ip.empty() || !IsLocalAddress(ip)) continue;
    if (std::find(out->ips.begin(), out->ips.end(), ip) == out->ips.end()) out->ips.push_back(ip);
  }
  freeaddrinfo(res);
  if (!out->any && out->ips.empty()) {
    return InvalidArgument("'%s' resolves to no address of this host", host.c_str());
  }
  return Status::Ok();
}

}  // namespace conduit::rpc
