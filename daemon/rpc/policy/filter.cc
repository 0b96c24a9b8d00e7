#include "rpc/policy/filter.h"

namespace conduit::rpc {

std::string_view RpcInfo::service() const {
  std::string_view m = method;
  if (!m.empty() && m[0] == '/') m.remove_prefix(1);
  size_t slash = m.find('/');
  return slash == std::string_view::npos ? m : m.substr(0, slash);
}

std::string_view RpcInfo::method_name() const {
  std::string_view m = method;
  size_t slash = m.rfind('/');
  return slash == std::string_view::npos ? m : m.substr(slash + 1);
}

}  // namespace conduit::rpc
