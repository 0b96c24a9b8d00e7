#include "policy/placement_policy.h"

#include "policy/tenant_policy.h"

namespace conduit {

Status RingPolicy::FromJson(const Json& json, RingPolicy* out) {
  const Json* order = json.is_object() ? json.find("order") : nullptr;
  if (order == nullptr || !order->is_string() || json.size() != 1) {
    return InvalidArgument("expected {\"order\": \"locality\" | \"rank\"}");
  }
  RingPolicy p;
  if (order->as_string() == "locality") {
    p.order = Order::kLocality;
  } else if (order->as_string() == "rank") {
    p.order = Order::kRank;
  } else {
    return InvalidArgument("unknown ring order '%s' (locality, rank)", order->as_string().c_str());
  }
  *out = p;
  return Status::Ok();
}

Json RingPolicy::ToJson() const {
  Json body = Json::Object();
  body["order"] = order == Order::kLocality ? "locality" : "rank";
  return body;
}

const char* FlowAssignmentName(FlowAssignment a) {
  switch (a) {
    case FlowAssignment::kPrimary: return "primary";
    case FlowAssignment::kSingle: return "single";
    case FlowAssignment::kHash: return "hash";
    case FlowAssignment::kBalance: return "balance";
  }
  return "?";
}

bool ParseFlowAssignment(const std::string& text, FlowAssignment* out) {
  for (FlowAssignment a : {FlowAssignment::kPrimary, FlowAssignment::kSingle, FlowAssignment::kHash,
                           FlowAssignment::kBalance}) {
    if (text == FlowAssignmentName(a)) {
      *out = a;
      return true;
    }
  }
  return false;
}

Status FlowPolicy::FromJson(const Json& json, FlowPolicy* out) {
  if (!json.is_object()) return InvalidArgument("a flow policy is a JSON object");
  FlowPolicy p;
  for (const auto& [key, v] : json.members()) {
    if (key == "assignment") {
      if (!v.is_string() || !ParseFlowAssignment(v.as_string(), &p.assignment)) {
        return InvalidArgument("\"assignment\" must be primary, single, hash or balance");
      }
    } else if (key == "reserve") {
      if (!v.is_array()) return InvalidArgument("\"reserve\" must be an array of {\"path\": K, \"min_priority\": P}");
      for (const Json& r : v.items()) {
        const Json* path = r.is_object() ? r.find("path") : nullptr;
        const Json* prio = r.is_object() ? r.find("min_priority") : nullptr;
        if (path == nullptr || !path->is_int() || path->as_int() < 0 || path->as_int() > 63 || r.size() > 2 ||
            (prio != nullptr && (!prio->is_int() || prio->as_int() < 1 || prio->as_int() > TenantPolicy::kMaxPriority))) {
          return InvalidArgument("reserve entries are {\"path\": 0..63, \"min_priority\": 1..%d}", TenantPolicy::kMaxPriority);
        }
        for (const auto& existing : p.reserved) {
          if (existing.path == path->as_int()) return InvalidArgument("path %d is reserved twice", existing.path);
        }
        p.reserved.push_back(ReservedPath{static_cast<int>(path->as_int()), prio ? static_cast<int>(prio->as_int()) : 1});
      }
    } else {
      return InvalidArgument("unknown flow policy field \"%s\" (assignment, reserve)", key.c_str());
    }
  }
  *out = std::move(p);
  return Status::Ok();
}

Json FlowPolicy::ToJson() const {
  Json reserve = Json::Array();
  for (const auto& r : reserved) {
    Json e = Json::Object();
    e["path"] = r.path;
    e["min_priority"] = r.min_priority;
    reserve.push_back(std::move(e));
  }
  Json body = Json::Object();
  body["assignment"] = FlowAssignmentName(assignment);
  body["reserve"] = std::move(reserve);
  return body;
}

bool FlowPolicy::Allows(int path, int priority) const {
  for (const auto& r : reserved) {
    if (r.path == path) return priority >= r.min_priority;
  }
  return true;
}

bool FlowPolicy::ReservedFor(int path, int priority) const {
  for (const auto& r : reserved) {
    if (r.path == path) return priority >= r.min_priority;
  }
  return false;
}

}  // namespace conduit
