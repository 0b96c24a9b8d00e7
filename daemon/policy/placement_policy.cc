#include "policy/placement_policy.h"

#include "config/json_message.h"
#include "config/placement.pb.h"
#include "policy/tenant_policy.h"

namespace conduit {

Status RingPolicy::FromJson(const Json& json, RingPolicy* out) {
  config::v1::RingPolicy doc;
  CONDUIT_RETURN_IF_ERROR(config::MessageFromJson(json, "ring policy", &doc));
  RingPolicy p;
  if (doc.order() == "locality") {
    p.order = Order::kLocality;
  } else if (doc.order() == "rank") {
    p.order = Order::kRank;
  } else {
    return InvalidArgument("ring policy: \"order\" must be locality or rank, not '%s'", doc.order().c_str());
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
  config::v1::FlowPolicy doc;
  CONDUIT_RETURN_IF_ERROR(config::MessageFromJson(json, "flow policy", &doc));
  FlowPolicy p;
  if (!doc.assignment().empty() && !ParseFlowAssignment(doc.assignment(), &p.assignment)) {
    return InvalidArgument("flow policy: \"assignment\" must be primary, single, hash or balance, not '%s'",
                           doc.assignment().c_str());
  }
  for (int i = 0; i < doc.reserve_size(); ++i) {
    const config::v1::ReservedPath& r = doc.reserve(i);
    if (!r.has_path() || r.path() < 0 || r.path() > 63 ||
        (r.has_min_priority() && (r.min_priority() < 1 || r.min_priority() > TenantPolicy::kMaxPriority))) {
      return InvalidArgument("flow policy: reserve[%d]: entries are {\"path\": 0..63, \"min_priority\": 1..%d}", i,
                             TenantPolicy::kMaxPriority);
    }
    for (const auto& existing : p.reserved) {
      if (existing.path == r.path()) return InvalidArgument("flow policy: path %d is reserved twice", existing.path);
    }
    p.reserved.push_back(ReservedPath{r.path(), r.has_min_priority() ? r.min_priority() : 1});
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
