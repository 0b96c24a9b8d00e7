#include "policy/tenant_policy.h"

#include <cctype>

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
  if (!json.is_object()) return InvalidArgument("a tenant policy is a JSON object");
  TenantPolicy p;
  p.name = name;
  for (const auto& [key, v] : json.members()) {
    if (key == "match") {
      if (!v.is_object()) return InvalidArgument("\"match\" must be an object like {\"exe\": \"trainer\"}");
      for (const auto& [mk, mv] : v.members()) {
        if (!mv.is_string() || mv.as_string().empty()) return InvalidArgument("match.%s must be a non-empty string", mk.c_str());
        if (mk == "exe") {
          p.match_exe = mv.as_string();
        } else if (mk == "comm") {
          if (!IsCommKey(mv.as_string())) {
            return InvalidArgument("match.comm must be a communicator key or its start (8 to 16 lowercase hex digits, "
                                   "as `conduitctl comms` shows)");
          }
          p.match_comm = mv.as_string();
        } else {
          return InvalidArgument("unknown match field \"%s\" (exe, comm)", mk.c_str());
        }
      }
    } else if (key == "priority") {
      if (!v.is_int() || v.as_int() < 0 || v.as_int() > kMaxPriority) {
        return InvalidArgument("\"priority\" must be an integer 0..%d", kMaxPriority);
      }
      p.priority = static_cast<int>(v.as_int());
    } else if (key == "max_mbit_per_s") {
      if (!v.is_number() || v.as_number() < 0 || v.as_number() > 1e7) {
        return InvalidArgument("\"max_mbit_per_s\" must be a number >= 0 (0 = no cap)");
      }
      p.max_mbit_per_s = v.as_number();
    } else if (key == "yield") {
      if (!v.is_bool()) return InvalidArgument("\"yield\" must be true or false");
      p.yield = v.as_bool();
    } else if (key == "yield_max_ms") {
      if (!v.is_int() || v.as_int() < 1 || v.as_int() > 60000) return InvalidArgument("\"yield_max_ms\" must be 1..60000");
      p.yield_max_ms = static_cast<int>(v.as_int());
    } else {
      return InvalidArgument("unknown tenant policy field \"%s\" (match, priority, max_mbit_per_s, yield, yield_max_ms)",
                             key.c_str());
    }
  }
  if (p.match_exe.empty() && p.match_comm.empty()) {
    return InvalidArgument("a tenant policy needs \"match\": {\"exe\": NAME} and/or {\"comm\": KEY}");
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
