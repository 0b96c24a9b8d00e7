#include "rpc/policy/scope.h"

namespace conduit::rpc {

Status Scope::FromJson(const Json& spec, Scope* out) {
  *out = Scope();
  const Json* service = spec.find("service");
  if (service == nullptr || !service->is_string() || service->as_string().empty()) {
    return InvalidArgument("a policy needs \"service\": the full name of a gRPC service, e.g. \"pkg.Greeter\"");
  }
  out->service = service->as_string();
  if (const Json* method = spec.find("method"); method != nullptr && !method->is_null()) {
    if (!method->is_string()) return InvalidArgument("\"method\" must be a method name");
    out->method = method->as_string();
  }
  if (const Json* side = spec.find("side"); side != nullptr && !side->is_null()) {
    const std::string s = side->is_string() ? side->as_string() : "";
    if (s == "client") out->sides = Sides::kClient;
    else if (s == "server") out->sides = Sides::kServer;
    else if (s == "both") out->sides = Sides::kBoth;
    else return InvalidArgument("\"side\" must be \"client\", \"server\" or \"both\"");
  }
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

bool OptionalNumber(const Json& spec, const char* key, double* value, std::string* error) {
  const Json* v = spec.find(key);
  if (v == nullptr || v->is_null()) return true;
  if (!v->is_number()) {
    *error = std::string("\"") + key + "\" must be a number";
    return false;
  }
  *value = v->as_number();
  return true;
}

}  // namespace conduit::rpc
