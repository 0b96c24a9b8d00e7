// What the admin server does with a request's bytes before a handler sees them: the HTTP
// parser (ParseHttpRequest: the same ParseHttpRequestHead the server's reader runs, then
// the body by Content-Length), admission from the head (AdminApi::Admit: route, caller,
// announced body) and the JSON body; and the metrics port's answer to the same request
// (MetricsServer::Answer: the metrics only for GET or HEAD of /metrics without a body). The
// first byte picks the caller: operator or not.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "admin/admin_api.h"
#include "admin/http.h"
#include "admin/metrics_server.h"
#include "fuzz_check.h"

using namespace conduit;

namespace {

// Routes shaped like the daemon's: parameters, every method, both access levels and a
// route that takes no body although its method usually does.
const AdminApi& Api() {
  static const AdminApi* api = [] {
    auto* a = new AdminApi;
    auto echo = [](const AdminRequest& r) {
      Json b = Json::Object();
      for (const auto& [k, v] : r.params) b[k] = v;
      for (const auto& [k, v] : r.query) b[k] = v;
      b["body"] = r.body;
      return AdminReply::Ok(std::move(b));
    };
    a->Route("GET", "/v1", AdminAccess::kRead, echo);
    a->Route("GET", "/v1/status", AdminAccess::kRead, echo);
    a->Route("GET", "/v1/policies/{kind}/{name}", AdminAccess::kRead, echo);
    a->Route("PUT", "/v1/policies/{kind}/{name}", AdminAccess::kOperator, echo);
    a->Route("DELETE", "/v1/policies/{kind}/{name}", AdminAccess::kOperator, echo);
    a->Route("POST", "/v1/communicators/{key}/reconfigure", AdminAccess::kOperator, echo);
    a->Route("POST", "/v1/topology/reload", AdminAccess::kOperator, AdminBody::kNone, echo);
    return a;
  }();
  return *api;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool is_operator = (data[0] & 1) != 0;
  std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  HttpRequest http;
  if (!ParseHttpRequest(bytes, &http).ok()) return 0;
  FUZZ_CHECK(http.body.size() == http.content_length, "body %zu, Content-Length %zu", http.body.size(),
             http.content_length);
  FUZZ_CHECK(http.content_length <= kMaxHttpBodyBytes, "%zu", http.content_length);
  FUZZ_CHECK(!http.target.empty() && http.target[0] == '/', "target '%s'", http.target.c_str());
  for (const auto& [name, value] : http.headers) {
    FUZZ_CHECK(!name.empty() && name.find_first_of(":\r\n ") == std::string::npos, "header name '%s'", name.c_str());
    FUZZ_CHECK(value.find_first_of("\r\n") == std::string::npos, "header value '%s'", value.c_str());
  }

  const HttpResponse metrics = MetricsServer(&Api()).Answer(http);
  const bool scrape = http.path == MetricsServer::kPath && (http.method == "GET" || http.method == "HEAD") &&
                      http.content_length == 0;
  FUZZ_CHECK((metrics.status == 200) == scrape, "metrics port answered %d to %s %s", metrics.status,
             http.method.c_str(), http.target.c_str());
  FUZZ_CHECK(scrape || metrics.status == 404 || metrics.status == 405 || metrics.status == 400,
             "metrics port answered %d", metrics.status);

  ProgramCredentials caller{1, is_operator ? 0 : 4242, 0};
  AdminCall call;
  AdminReply reply;
  if (Api().Admit(http.method, http.path, http.content_length, caller, is_operator, &call, &reply)) {
    FUZZ_CHECK(call.body == AdminBody::kJson || http.body.empty(), "a body reached a route that takes none");
    AdminRequest req;
    req.method = http.method;
    req.path = http.path;
    for (auto& [k, v] : http.query) req.query[k] = v;
    req.caller = caller;
    Status st = http.body.empty() ? Status::Ok() : Json::Parse(http.body, &req.body);
    reply = st.ok() ? AdminApi::Run(call, std::move(req)) : AdminReply::Error(400, st.message());
  } else {
    FUZZ_CHECK(reply.http_status != 200, "refused with 200");
  }
  HttpResponse out;
  out.status = reply.http_status;
  out.body = reply.body.Dump(2);
  return 0;
}
