#include "admin/daemon_routes.h"

#include <unistd.h>

#include <chrono>
#include <map>

#include "config/json_message.h"
#include "config/placement.pb.h"

namespace conduit {
namespace {

constexpr int kApiVersion = 1;

int64_t UnixSeconds(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}

// "0.1.0" of "conduitd 0.1.0": the build_info convention's version label is the release.
std::string ReleaseOf(const std::string& version) {
  size_t space = version.rfind(' ');
  return space == std::string::npos ? version : version.substr(space + 1);
}

Json AdmissionJson(const ProgramPolicy& policy) {
  Json deny = Json::Array();
  for (const auto& exe : policy.denied()) deny.push_back(exe);
  Json body = Json::Object();
  body["deny_exe"] = std::move(deny);
  body["max_shm_bytes"] = policy.max_shm_bytes();
  return body;
}

}  // namespace

void AddDaemonRoutes(AdminApi* api, DaemonInfo info, const ServiceRouter* router, ProgramPolicy* policy) {
  const auto started = std::chrono::steady_clock::now();
  auto uptime = [started] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(); };

  api->Route("GET", "/v1", AdminAccess::kRead, [api](const AdminRequest&) {
    Json body = Json::Object();
    body["api_version"] = kApiVersion;
    body["routes"] = api->DescribeRoutes();
    return AdminReply::Ok(std::move(body));
  });
  api->Route("GET", "/metrics", AdminAccess::kRead, [api](const AdminRequest&) {
    AdminReply reply;
    reply.raw = api->RenderMetrics();
    reply.content_type = "text/plain; version=0.0.4";
    return reply;
  });
  api->Route("GET", "/v1/status", AdminAccess::kRead, [info, router, uptime](const AdminRequest&) {
    Json body = Json::Object();
    body["api_version"] = kApiVersion;
    body["daemon_version"] = info.version;
    body["pid"] = static_cast<int>(getpid());
    body["uptime_s"] = uptime();
    body["peer_addr"] = info.peer_addr;
    body["program_socket"] = info.program_socket;
    body["admin_socket"] = info.admin_socket;
    body["reduce_loops"] = info.reduce_loops;
    std::map<std::string, int> per_service;
    for (const auto& p : router->Programs()) ++per_service[p.service];
    Json programs = Json::Object();
    for (const auto& [service, n] : per_service) programs[service] = n;
    body["program_connections"] = std::move(programs);
    // Counts a connection from its accept on, before it names a service (which the map
    // above waits for): what an upgrade must stop.
    body["program_connections_accepted"] = static_cast<int64_t>(router->ProgramConnections());
    return AdminReply::Ok(std::move(body));
  });
  api->Route("GET", "/v1/programs", AdminAccess::kRead, [router](const AdminRequest&) {
    Json list = Json::Array();
    for (const auto& p : router->Programs()) {
      Json e = Json::Object();
      e["connection"] = p.id;
      e["pid"] = p.creds.pid;
      e["uid"] = p.creds.uid;
      e["exe"] = p.exe;
      e["service"] = p.service;
      e["since_unix_s"] = UnixSeconds(p.since);
      list.push_back(std::move(e));
    }
    Json body = Json::Object();
    body["programs"] = std::move(list);
    return AdminReply::Ok(std::move(body));
  });
  api->Route("GET", "/v1/policies/admission", AdminAccess::kRead,
             [policy](const AdminRequest&) { return AdminReply::Ok(AdmissionJson(*policy)); });
  api->Route("PUT", "/v1/policies/admission", AdminAccess::kOperator, [policy](const AdminRequest& req) {
    config::v1::AdmissionPolicy doc;
    Status st = config::MessageFromJson(req.body, "admission policy", &doc);
    if (!st.ok()) return AdminReply::Error(400, st.message() + "; expected {\"deny_exe\": [\"program\", ...]}");
    if (!doc.has_deny_exe()) return AdminReply::Error(400, "expected {\"deny_exe\": [\"program\", ...]}");
    std::vector<std::string> names;
    for (const auto& n : doc.deny_exe().values()) {
      if (!config::IsString(n) || n.string_value().empty()) {
        return AdminReply::Error(400, "deny_exe entries must be non-empty strings");
      }
      names.push_back(n.string_value());
    }
    policy->set_denied(std::move(names), /*from_admin_api=*/true);
    return AdminReply::Ok(AdmissionJson(*policy));
  });
  api->AddStateSource([policy](std::vector<OperatorDocument>* out) {
    if (!policy->denied_from_api()) return;
    Json deny = Json::Array();
    for (const auto& exe : policy->denied()) deny.push_back(exe);
    Json body = Json::Object();
    body["deny_exe"] = std::move(deny);
    out->push_back(OperatorDocument{"PUT", "/v1/policies/admission", std::move(body)});
  });
  const double start_time_s = std::chrono::duration<double>(info.started.time_since_epoch()).count();
  api->AddMetrics([router, uptime, release = ReleaseOf(info.version), start_time_s](MetricsWriter& w) {
    w.Family("conduit_up", "gauge", "1 while conduitd serves.");
    w.Sample("conduit_up", {}, 1);
    w.Family("conduit_build_info", "gauge", "Always 1; the version label is conduitd's release.");
    w.Sample("conduit_build_info", {{"version", release}}, 1);
    w.Family("process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.");
    w.Sample("process_start_time_seconds", {}, start_time_s);
    w.Family("conduit_uptime_seconds", "gauge", "Seconds since conduitd started.");
    w.Sample("conduit_uptime_seconds", {}, uptime());
    std::map<std::string, int> per_service;
    for (const auto& p : router->Programs()) ++per_service[p.service];
    w.Family("conduit_program_connections", "gauge", "Program connections being served, per service.");
    for (const auto& [service, n] : per_service) w.Sample("conduit_program_connections", {{"service", service}}, n);
  });
}

}  // namespace conduit
