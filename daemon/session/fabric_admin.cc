#include "session/fabric_admin.h"

namespace conduit {
void AddFabricAdmin(AdminApi* api, Fabric* fabric) {
  api->Route("GET", "/v1/topology", AdminAccess::kRead,
             [fabric](const AdminRequest&) { return AdminReply::Ok(fabric->topology().Describe()); });
  api->Route("PUT", "/v1/topology", AdminAccess::kOperator, [fabric](const AdminRequest& req) {
    Status st = fabric->topology().Replace(req.body);
    if (!st.ok()) return AdminReply::FromStatus(st);
    return AdminReply::Ok(fabric->topology().Describe());
  });
  api->Route("POST", "/v1/topology/reload", AdminAccess::kOperator, AdminBody::kNone, [fabric](const AdminRequest&) {
    Status st = fabric->topology().Reload();
    if (!st.ok()) return AdminReply::Error(st.code() == ncclInvalidUsage ? 409 : 400, st.message());
    return AdminReply::Ok(fabric->topology().Describe());
  });

  api->Route("GET", "/v1/policies/ring", AdminAccess::kRead,
             [fabric](const AdminRequest&) { return AdminReply::Ok(fabric->ring_policy().ToJson()); });
  api->Route("PUT", "/v1/policies/ring", AdminAccess::kOperator, [fabric](const AdminRequest& req) {
    RingPolicy p;
    Status st = RingPolicy::FromJson(req.body, &p);
    if (!st.ok()) return AdminReply::FromStatus(st);
    fabric->set_ring_policy(p, /*from_admin_api=*/true);
    return AdminReply::Ok(p.ToJson());
  });
  api->Route("GET", "/v1/policies/flows", AdminAccess::kRead,
             [fabric](const AdminRequest&) { return AdminReply::Ok(fabric->flow_policy().ToJson()); });
  api->Route("PUT", "/v1/policies/flows", AdminAccess::kOperator, [fabric](const AdminRequest& req) {
    FlowPolicy p;
    Status st = FlowPolicy::FromJson(req.body, &p);
    if (!st.ok()) return AdminReply::FromStatus(st);
    fabric->set_flow_policy(p, /*from_admin_api=*/true);
    return AdminReply::Ok(p.ToJson());
  });

  api->Route("GET", "/v1/policies/tenant", AdminAccess::kRead,
             [fabric](const AdminRequest&) { return AdminReply::Ok(fabric->tenants().List()); });
  api->Route("GET", "/v1/policies/tenant/{name}", AdminAccess::kRead, [fabric](const AdminRequest& req) {
    Json body;
    Status st = fabric->tenants().Get(req.params.at("name"), &body);
    return st.ok() ? AdminReply::Ok(std::move(body)) : AdminReply::FromStatus(st);
  });
  api->Route("PUT", "/v1/policies/tenant/{name}", AdminAccess::kOperator, [fabric](const AdminRequest& req) {
    const std::string& name = req.params.at("name");
    Status st = fabric->tenants().Put(name, req.body);
    if (!st.ok()) return AdminReply::FromStatus(st);
    Json body;
    (void)fabric->tenants().Get(name, &body);
    return AdminReply::Ok(std::move(body));
  });
  api->Route("DELETE", "/v1/policies/tenant/{name}", AdminAccess::kOperator, [fabric](const AdminRequest& req) {
    Status st = fabric->tenants().Remove(req.params.at("name"));
    return st.ok() ? AdminReply::Ok(Json::Object()) : AdminReply::FromStatus(st);
  });

  api->Route("GET", "/v1/paths", AdminAccess::kRead,
             [fabric](const AdminRequest&) { return AdminReply::Ok(fabric->paths().Describe()); });

  // What the operator changed here at run time, for a live upgrade: a topology installed
  // over the API, the ring and flow policies when set over the API, every tenant policy.
  api->AddStateSource([fabric](std::vector<OperatorDocument>* out) {
    Json topology = fabric->topology().Describe();
    const Json* source = topology.find("source");
    const Json* doc = topology.find("topology");
    if (source != nullptr && source->is_string() && source->as_string() == "admin" && doc != nullptr) {
      out->push_back(OperatorDocument{"PUT", "/v1/topology", *doc});
    }
    if (fabric->ring_policy_from_api()) {
      out->push_back(OperatorDocument{"PUT", "/v1/policies/ring", fabric->ring_policy().ToJson()});
    }
    if (fabric->flow_policy_from_api()) {
      out->push_back(OperatorDocument{"PUT", "/v1/policies/flows", fabric->flow_policy().ToJson()});
    }
    Json tenants = fabric->tenants().List();
    const Json* list = tenants.find("tenants");
    if (list == nullptr || !list->is_array()) return;
    for (const Json& t : list->items()) {
      const Json* name = t.find("name");
      if (name == nullptr || !name->is_string()) continue;
      Json body = Json::Object();  // the policy without its name, which is in the path
      for (const auto& [key, value] : t.members()) {
        if (key != "name") body[key] = value;
      }
      out->push_back(OperatorDocument{"PUT", "/v1/policies/tenant/" + name->as_string(), std::move(body),
                                      fabric->tenants().SavedCounters(name->as_string())});
    }
  });
  // The new daemon, once a tenant policy's document was replayed: its counters go on.
  api->AddStateRestorer([fabric](const OperatorDocument& doc, Status* result) {
    static const std::string kPrefix = "/v1/policies/tenant/";
    if (doc.path.rfind(kPrefix, 0) != 0) return false;
    *result = fabric->tenants().RestoreCounters(doc.path.substr(kPrefix.size()), doc.state);
    return true;
  });

  api->AddMetrics([fabric](MetricsWriter& w) {
    w.Family("conduit_topology_generation", "gauge", "Topologies installed since start (file, SIGHUP, admin API).");
    w.Sample("conduit_topology_generation", {}, static_cast<double>(fabric->topology().generation()));
    fabric->paths().WriteMetrics(w);
    fabric->tenants().WriteMetrics(w);
  });
}

}  // namespace conduit
