#include "rpc/rpc_admin.h"

#include <functional>
#include <memory>

#include "common/log.h"
#include "config/json_message.h"
#include "config/rpc_policy.pb.h"
#include "rpc/policy/acl_filter.h"
#include "rpc/policy/metrics_filter.h"
#include "rpc/policy/rate_limit_filter.h"

namespace conduit::rpc {
namespace {

using Builder = std::function<Status(const std::string& name, const Json& spec, std::shared_ptr<Filter>* out)>;

constexpr char kMetricsKind[] = "rpc-metrics";
constexpr char kQosKind[] = "rpc-qos";

Json Describe(const InstalledPolicy& p) {
  Json j = Json::Object();
  j["name"] = p.name;
  j["kind"] = p.kind;
  j["spec"] = p.spec;
  return j;
}

std::shared_ptr<MetricsFilter> Metrics(RpcService* service) {
  return std::dynamic_pointer_cast<MetricsFilter>(service->policies().Find(kMetricsKind, "metrics"));
}

// GET/PUT/DELETE of the named policies of one kind.
void AddNamedKind(AdminApi* api, RpcService* service, const std::string& kind, Builder build) {
  PolicyEngine* engine = &service->policies();
  const std::string base = "/v1/policies/" + kind;
  api->Route("GET", base, AdminAccess::kRead, [engine, kind](const AdminRequest&) {
    Json list = Json::Array();
    for (const InstalledPolicy& p : engine->List()) {
      if (p.kind == kind) list.push_back(Describe(p));
    }
    Json body = Json::Object();
    body["policies"] = std::move(list);
    return AdminReply::Ok(std::move(body));
  });
  api->Route("GET", base + "/{name}", AdminAccess::kRead, [engine, kind](const AdminRequest& req) {
    for (const InstalledPolicy& p : engine->List()) {
      if (p.kind == kind && p.name == req.params.at("name")) return AdminReply::Ok(Describe(p));
    }
    return AdminReply::Error(404, "no " + kind + " policy named '" + req.params.at("name") + "'");
  });
  api->Route("PUT", base + "/{name}", AdminAccess::kOperator, [engine, kind, build](const AdminRequest& req) {
    const std::string& name = req.params.at("name");
    if (!req.body.is_object()) return AdminReply::Error(400, "expected a JSON object describing the policy");
    std::shared_ptr<Filter> filter;
    Status st = build(name, req.body, &filter);
    if (!st.ok()) return AdminReply::Error(400, "policy " + kind + "/" + name + ": " + st.message());
    engine->Install(InstalledPolicy{kind, name, req.body, filter});
    CLOG_INFO("policy %s/%s installed: %s", kind.c_str(), name.c_str(), req.body.Dump().c_str());
    return AdminReply::Ok(Describe(InstalledPolicy{kind, name, req.body, filter}));
  });
  api->Route("DELETE", base + "/{name}", AdminAccess::kOperator, [engine, kind](const AdminRequest& req) {
    const std::string& name = req.params.at("name");
    if (!engine->Remove(kind, name)) return AdminReply::Error(404, "no " + kind + " policy named '" + name + "'");
    CLOG_INFO("policy %s/%s removed", kind.c_str(), name.c_str());
    Json body = Json::Object();
    body["removed"] = kind + "/" + name;
    return AdminReply::Ok(std::move(body));
  });
}

Json QosJson(const PolicyEngine& engine) {
  Json body = Json::Object();
  body["small_bytes"] = engine.qos_small_bytes();
  body["enabled"] = engine.qos_small_bytes() > 0;
  return body;
}

}  // namespace

void AddRpcAdmin(AdminApi* api, RpcService* service) {
  AddNamedKind(api, service, "rpc-acl", AclFilter::Create);
  AddNamedKind(api, service, "rpc-ratelimit", RateLimitFilter::Create);
  PolicyEngine* engine = &service->policies();

  api->Route("GET", std::string("/v1/policies/") + kQosKind, AdminAccess::kRead,
             [engine](const AdminRequest&) { return AdminReply::Ok(QosJson(*engine)); });
  api->Route("PUT", std::string("/v1/policies/") + kQosKind, AdminAccess::kOperator, [engine](const AdminRequest& req) {
    config::v1::QosPolicy doc;
    Status st = config::MessageFromJson(req.body, "QoS policy", &doc);
    if (!st.ok()) return AdminReply::FromStatus(st);
    if (!doc.has_small_bytes() || doc.small_bytes() <= 0) {
      return AdminReply::Error(400, "expected {\"small_bytes\": N}: messages up to N bytes go first on daemon links");
    }
    engine->SetQos(static_cast<uint64_t>(doc.small_bytes()));
    CLOG_INFO("policy %s: messages up to %lld bytes go first", kQosKind, static_cast<long long>(doc.small_bytes()));
    return AdminReply::Ok(QosJson(*engine));
  });
  api->Route("DELETE", std::string("/v1/policies/") + kQosKind, AdminAccess::kOperator, [engine](const AdminRequest&) {
    engine->SetQos(0);
    CLOG_INFO("policy %s removed", kQosKind);
    return AdminReply::Ok(QosJson(*engine));
  });

  api->Route("GET", std::string("/v1/policies/") + kMetricsKind, AdminAccess::kRead, [service](const AdminRequest&) {
    Json body = Json::Object();
    body["enabled"] = Metrics(service) != nullptr;
    return AdminReply::Ok(std::move(body));
  });
  api->Route("PUT", std::string("/v1/policies/") + kMetricsKind, AdminAccess::kOperator,
             [engine, service](const AdminRequest&) {
               if (Metrics(service) == nullptr) {
                 engine->Install(InstalledPolicy{kMetricsKind, "metrics", Json::Object(), std::make_shared<MetricsFilter>()});
                 CLOG_INFO("policy %s installed", kMetricsKind);
               }
               Json body = Json::Object();
               body["enabled"] = true;
               return AdminReply::Ok(std::move(body));
             });
  api->Route("DELETE", std::string("/v1/policies/") + kMetricsKind, AdminAccess::kOperator,
             [engine](const AdminRequest&) {
               engine->Remove(kMetricsKind, "metrics");
               Json body = Json::Object();
               body["enabled"] = false;
               return AdminReply::Ok(std::move(body));
             });

  api->Route("GET", "/v1/rpc/methods", AdminAccess::kRead, [service](const AdminRequest&) {
    auto metrics = Metrics(service);
    if (metrics == nullptr) {
      return AdminReply::Error(404, "per-method metrics are off; enable them with PUT /v1/policies/rpc-metrics {}");
    }
    return AdminReply::Ok(metrics->Snapshot());
  });
  api->Route("GET", "/v1/rpc", AdminAccess::kRead, [service, engine](const AdminRequest&) {
    Json body = Json::Object();
    Json ports = Json::Array();
    for (uint32_t port : service->servers().Ports()) ports.push_back(port);
    body["served_ports"] = std::move(ports);
    Json servers = Json::Array();
    for (const ServerTable::Served& served : service->servers().List()) {
      Json one = Json::Object();
      one["port"] = served.port;
      one["bind"] = served.bind;
      one["program"] = served.program;
      servers.push_back(std::move(one));
    }
    body["servers"] = std::move(servers);
    Json links = Json::Array();
    for (const std::string& l : service->links().Live()) links.push_back(l);
    body["links"] = std::move(links);
    Json policies = Json::Array();
    for (const InstalledPolicy& p : engine->List()) policies.push_back(Describe(p));
    body["policies"] = std::move(policies);
    Json qos = QosJson(*engine);
    qos["small_first_frames"] = service->small_first_frames().load();
    body["qos"] = std::move(qos);
    return AdminReply::Ok(std::move(body));
  });
  // What the operator installed, for a live upgrade, in installation order (the order the
  // filters run in); QoS last.
  api->AddStateSource([engine](std::vector<OperatorDocument>* out) {
    for (const InstalledPolicy& p : engine->List()) {
      if (p.kind == kMetricsKind) {
        out->push_back(OperatorDocument{"PUT", std::string("/v1/policies/") + kMetricsKind, Json::Object(),
                                        p.filter->SavedState()});
      } else {
        out->push_back(OperatorDocument{"PUT", "/v1/policies/" + p.kind + "/" + p.name, p.spec, p.filter->SavedState()});
      }
    }
    if (engine->qos_small_bytes() > 0) {
      Json qos = Json::Object();
      qos["small_bytes"] = engine->qos_small_bytes();
      out->push_back(OperatorDocument{"PUT", std::string("/v1/policies/") + kQosKind, std::move(qos)});
    }
  });
  // ... and, once the new daemon replayed one, the state its filter had (a rate limiter's
  // bucket, the metrics' counts).
  api->AddStateRestorer([engine](const OperatorDocument& doc, Status* result) {
    std::vector<std::string> path = SplitPath(doc.path);
    if (path.size() == 3 && path[2] == kMetricsKind) path.push_back("metrics");  // one, unnamed
    if (path.size() != 4 || path[0] != "v1" || path[1] != "policies" || path[2].rfind("rpc-", 0) != 0) return false;
    std::shared_ptr<Filter> filter = engine->Find(path[2], path[3]);
    *result = filter == nullptr ? NotFound("no %s policy named '%s' to give its state", path[2].c_str(), path[3].c_str())
                                : filter->RestoreState(doc.state);
    return true;
  });
  api->AddMetrics([service](MetricsWriter& w) {
    if (auto metrics = Metrics(service)) metrics->WriteMetrics(w);
  });
}

}  // namespace conduit::rpc
