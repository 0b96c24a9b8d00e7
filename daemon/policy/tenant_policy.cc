#include "policy/tenant_policy.h"

#include <cctype>

#include "config/json_message.h"
#include "config/placement.pb.h"

namespace conduit {
namespace {

// A key or its start, as views show it (8 of its 16 hex digits).
bool IsCommKey(const std::string& s) {
  if (s.size() < 8 || s.size() > 16) return false;
  for (char c : s) {
    if (!isxdigit(static_cast<unsigned char>(c)) || isupper(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

}  // namespace

Status TenantPolicy::FromJson(const std::string& name, const Json& json, TenantPolicy* out) {
  config::v1::TenantPolicy doc;
  CONDUIT_RETURN_IF_ERROR(config::MessageFromJson(json, "tenant policy", &doc));
  TenantPolicy p;
  p.name = name;
  p.match_exe = doc.match().exe();
  p.match_comm = doc.match().comm();
  if (!p.match_comm.empty() && !IsCommKey(p.match_comm)) {
    return InvalidArgument("tenant policy: match.comm must be a communicator key or its start (8 to 16 lowercase hex "
                           "digits, as `conduitctl comms` shows)");
  }
  if (p.match_exe.empty() && p.match_comm.empty()) {
    return InvalidArgument("a tenant policy needs \"match\": {\"exe\": NAME} and/or {\"comm\": KEY}");
  }
  if (doc.has_priority()) {
    if (doc.priority() < 0 || doc.priority() > kMaxPriority) {
      return InvalidArgument("tenant policy: \"priority\" must be an integer 0..%d", kMaxPriority);
    }
    p.priority = doc.priority();
  }
  if (doc.has_max_mbit_per_s()) {
    if (!(doc.max_mbit_per_s() >= 0 && doc.max_mbit_per_s() <= 1e7)) {
      return InvalidArgument("tenant policy: \"max_mbit_per_s\" must be 0..1e7 (0 = no cap)");
    }
    p.max_mbit_per_s = doc.max_mbit_per_s();
  }
  if (doc.has_yield()) p.yield = doc.yield();
  if (doc.has_yield_max_ms()) {
    if (doc.yield_max_ms() < 1 || doc.yield_max_ms() > 60000) {
      return InvalidArgument("tenant policy: \"yield_max_ms\" must be 1..60000");
    }
    p.yield_max_ms = doc.yield_max_ms();
  }
  *out = std::move(p);
  return Status::Ok();
}

Json TenantPolicy::ToJson() const {
  Json match = Json::Object();
  if (!match_exe.empty()) match["exe"] = match_exe;
  if (!match_comm.empty()) match["comm"] = match_comm;
  Json body = Json::Object();
  body["name"] = name;
  body["match"] = std::move(match);
  body["priority"] = priority;
  body["max_mbit_per_s"] = max_mbit_per_s;
  body["yield"] = yield;
  body["yield_max_ms"] = yield_max_ms;
  return body;
}

int TenantPolicy::MatchStrength(const std::string& exe, const std::string& comm_key) const {
  if (!match_comm.empty() && comm_key.rfind(match_comm, 0) != 0) return 0;
  if (!match_exe.empty() && match_exe != exe) return 0;
  return match_comm.empty() ? 1 : 2;
}

}  // namespace conduit
