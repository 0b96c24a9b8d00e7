// The object store's part of the admin API: GET /v1/objects (live daemons, transfer
// counters, local copies, this daemon's directory shard, running reduces) and
// conduit_objects_* metrics.
#ifndef CONDUIT_DAEMON_OBJECTS_OBJECT_ADMIN_H_
#define CONDUIT_DAEMON_OBJECTS_OBJECT_ADMIN_H_

#include "admin/admin_api.h"
#include "objects/object_service.h"

namespace conduit::objects {

void AddObjectAdmin(AdminApi* api, ObjectService* service);

}  // namespace conduit::objects

#endif  // CONDUIT_DAEMON_OBJECTS_OBJECT_ADMIN_H_
