#include "objects/object_admin.h"

namespace conduit::objects {

void AddObjectAdmin(AdminApi* api, ObjectService* service) {
  api->Route("GET", "/v1/objects", AdminAccess::kRead, [service](const AdminRequest&) {
    Json state;
    Status st = Json::Parse(service->StateJson(), &state);
    if (!st.ok()) return AdminReply::Error(500, "object state is not valid JSON: " + st.message());
    return AdminReply::Ok(std::move(state));
  });
  api->AddMetrics([service](MetricsWriter& w) {
    ObjectMetrics m = service->Metrics();
    w.Family("conduit_objects_live_daemons", "gauge", "Object-store daemons this one sees alive (itself included).");
    w.Sample("conduit_objects_live_daemons", {}, static_cast<double>(m.live_daemons));
    w.Family("conduit_objects_local_copies", "gauge", "Object copies (partial or complete) in this daemon's store.");
    w.Sample("conduit_objects_local_copies", {}, static_cast<double>(m.local_copies));
    w.Family("conduit_objects_store_bytes", "gauge", "Bytes of the local store in use.");
    w.Sample("conduit_objects_store_bytes", {}, static_cast<double>(m.store_bytes));
    w.Family("conduit_objects_store_limit_bytes", "gauge", "The local store's limit (--object-memory-bytes).");
    w.Sample("conduit_objects_store_limit_bytes", {}, static_cast<double>(m.store_limit));
    w.Family("conduit_objects_spare_bytes", "gauge",
             "Memory of deleted copies kept for the next copy of the same size (within the store's limit).");
    w.Sample("conduit_objects_spare_bytes", {}, static_cast<double>(m.spare_bytes));
    w.Family("conduit_objects_spare_reused_total", "counter", "Copies made from kept memory instead of new pages.");
    w.Sample("conduit_objects_spare_reused_total", {}, static_cast<double>(m.spare_reused));
    w.Family("conduit_objects_transfers_total", "counter", "Object transfers, by kind.");
    w.Sample("conduit_objects_transfers_total", {{"kind", "served"}}, static_cast<double>(m.served));
    w.Sample("conduit_objects_transfers_total", {{"kind", "resumed"}}, static_cast<double>(m.resumed));
    w.Sample("conduit_objects_transfers_total", {{"kind", "received"}}, static_cast<double>(m.received));
  });
}

}  // namespace conduit::objects
