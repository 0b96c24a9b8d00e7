// The operator's placement and tenant policies from JSON (PUT /v1/policies/ring, flows,
// tenant/{name}): RingPolicy, FlowPolicy and TenantPolicy::FromJson. The first byte picks
// the kind. What a parser accepts it writes back (ToJson) as a policy it accepts again,
// unchanged.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/json.h"
#include "fuzz_check.h"
#include "policy/placement_policy.h"
#include "policy/tenant_policy.h"

using namespace conduit;

namespace {

Status ParseRing(const Json& j, RingPolicy* p) { return RingPolicy::FromJson(j, p); }
Status ParseFlows(const Json& j, FlowPolicy* p) { return FlowPolicy::FromJson(j, p); }
Status ParseTenant(const Json& j, TenantPolicy* p) { return TenantPolicy::FromJson("t", j, p); }

// ToJson of a tenant adds "name", which a PUT body leaves out (the path names the tenant).
Json WithoutName(const Json& j) {
  if (!j.is_object()) return j;
  Json out = Json::Object();
  for (const auto& [k, v] : j.members()) {
    if (k != "name") out[k] = v;
  }
  return out;
}

template <typename Policy>
void RoundTrip(const Json& json, Status (*parse)(const Json&, Policy*)) {
  Policy p;
  if (!parse(json, &p).ok()) return;
  const Json written = WithoutName(p.ToJson());
  Policy again;
  Status st = parse(written, &again);
  FUZZ_CHECK(st.ok(), "ToJson wrote what FromJson refuses: %s\n%s", st.message().c_str(), written.Dump().c_str());
  FUZZ_CHECK(again.ToJson().Dump() == p.ToJson().Dump(), "round trip changed the policy:\n%s\n%s",
             p.ToJson().Dump().c_str(), again.ToJson().Dump().c_str());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  Json json;
  if (!Json::Parse(std::string_view(reinterpret_cast<const char*>(data + 1), size - 1), &json).ok()) return 0;
  switch (data[0] % 3) {
    case 0: RoundTrip(json, ParseRing); break;
    case 1: RoundTrip(json, ParseFlows); break;
    case 2: RoundTrip(json, ParseTenant); break;
  }
  return 0;
}
