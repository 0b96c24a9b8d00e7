// The RPC policies an operator installs (PUT /v1/policies/rpc-acl/{name} and
// rpc-ratelimit/{name}, docs/admin-api.md): AclFilter::Create (scope, field path, values,
// the descriptor set in base64, resolved with protobuf) and RateLimitFilter::Create; the
// first byte picks the kind, the rest is the JSON spec. A policy that is accepted then
// meets calls: the rate limit admits a few in a row, the ACL reads a request.
#include <google/protobuf/stubs/logging.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "common/json.h"
#include "fuzz_check.h"
#include "rpc/policy/acl_filter.h"
#include "rpc/policy/rate_limit_filter.h"

using namespace conduit;
using namespace conduit::rpc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet = [] {
    google::protobuf::SetLogHandler(nullptr);  // protobuf logs every malformed descriptor set
    return true;
  }();
  (void)quiet;
  if (size == 0) return 0;
  Json spec;
  if (!Json::Parse(std::string_view(reinterpret_cast<const char*>(data + 1), size - 1), &spec).ok()) return 0;
  if (!spec.is_object()) return 0;  // the admin route refuses other bodies before this
  if (spec.find("descriptor_set_file") != nullptr) return 0;  // reads a file: not bytes from the caller
  std::shared_ptr<Filter> filter;
  const bool acl = (data[0] & 1) != 0;
  Status st = acl ? AclFilter::Create("p", spec, &filter) : RateLimitFilter::Create("p", spec, &filter);
  if (!st.ok()) return 0;
  FUZZ_CHECK(filter != nullptr, "created nothing");
  RpcInfo info;
  const Json* service = spec.find("service");
  const Json* method = spec.find("method");
  info.method = "/" + service->as_string() + "/" +
                (method != nullptr && method->is_string() ? method->as_string() : std::string("M"));
  if (!filter->Applies(info)) return 0;
  for (int i = 0; i < 3; ++i) {
    Verdict v = filter->OnAdmit(info);
    FUZZ_CHECK(v.delay.count() >= 0, "a negative delay");
  }
  const uint8_t request[] = {0x0a, 0x05, 'a', 'l', 'i', 'c', 'e', 0x42, 0x03, 0x0a, 0x01, 'x'};
  (void)filter->OnRequestMessage(info, request, sizeof(request));
  return 0;
}
