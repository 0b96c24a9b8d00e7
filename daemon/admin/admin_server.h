// AdminServer: serves the AdminApi over HTTP/1.1 on a Unix socket. The caller's uid comes
// from SO_PEERCRED, never from anything the caller says: root, the daemon's own uid and
// the uids given with --admin-uid are the operator; anyone else who may connect (the
// socket's mode decides) can only read.
#ifndef CONDUIT_DAEMON_ADMIN_ADMIN_SERVER_H_
#define CONDUIT_DAEMON_ADMIN_ADMIN_SERVER_H_

#include <atomic>
#include <vector>

#include "admin/admin_api.h"
#include "common/fd_io.h"

namespace conduit {

struct AdminServerOptions {
  std::vector<int> operator_uids;  // besides root and the daemon's own uid
  int max_connections = 32;        // concurrent requests; more are answered 503
  int request_timeout_ms = 10000;  // to send a whole request
};

class AdminServer {
 public:
  AdminServer(const AdminApi* api, AdminServerOptions options) : api_(api), options_(std::move(options)) {}

  // Accept loop; never returns.
  void Serve(int listener);
  bool IsOperator(int uid) const;

 private:
  void ServeConnection(UniqueFd fd);

  const AdminApi* api_;
  const AdminServerOptions options_;
  std::atomic<int> active_{0};
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_ADMIN_ADMIN_SERVER_H_
