#include "rpc/policy/scope.h"

namespace conduit::rpc {

Status Scope::Make(const std::string& service, const std::string& method, const std::string& side, Scope* out) {
  *out = Scope();
  if (service.empty()) {
    return InvalidArgument("a policy needs \"service\": the full name of a gRPC service, e.g. \"pkg.Greeter\"");
  }
  out->service = service;
  out->method = method;
  if (side.empty() || side == "client") out->sides = Sides::kClient;
  else if (side == "server") out->sides = Sides::kServer;
  else if (side == "both") out->sides = Sides::kBoth;
  else return InvalidArgument("\"side\" must be \"client\", \"server\" or \"both\", not '%s'", side.c_str());
  return Status::Ok();
}

bool Scope::Matches(const RpcInfo& info) const {
  if (sides == Sides::kClient && info.side != Side::kClient) return false;
  if (sides == Sides::kServer && info.side != Side::kServer) return false;
  if (info.service() != service) return false;
  return method.empty() || info.method_name() == method;
}

void Scope::ToJson(Json* spec) const {
  (*spec)["service"] = service;
  (*spec)["method"] = method.empty() ? Json() : Json(method);
  (*spec)["side"] = sides == Sides::kClient ? "client" : sides == Sides::kServer ? "server" : "both";
}

}  // namespace conduit::rpc
