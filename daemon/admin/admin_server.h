// AdminServer: serves the AdminApi over HTTP/1.1 on a Unix socket. The caller's uid comes
// from SO_PEERCRED, never from anything the caller says: root, the daemon's own uid and
// the uids given with --admin-uid are the operator; anyone else who may connect (the
// socket's mode decides) can only read.
//
// Nothing a caller sends can lock the operator out or make the daemon work for a request
// it refuses: connections are capped per caller with slots kept for the operator
// (connection_slots.h); the request head must arrive within a short deadline and the body
// within a bounded one; route, access and announced body size are checked from the head
// before the body is read, and the body is parsed (in O(n log n), common/json.h) only
// for a caller allowed to send it.
#ifndef CONDUIT_DAEMON_ADMIN_ADMIN_SERVER_H_
#define CONDUIT_DAEMON_ADMIN_ADMIN_SERVER_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "admin/admin_api.h"
#include "admin/connection_slots.h"
#include "admin/refusal_log.h"
#include "common/deadline.h"
#include "common/fd_io.h"
#include "server/acceptor.h"

namespace conduit {

struct AdminServerOptions {
  std::vector<int> operator_uids;  // besides root and the daemon's own uid
  ConnectionLimits connections;    // more get 503 at once
  int head_timeout_ms = 2000;      // from accept to the end of the request head
  int body_timeout_ms = 10000;     // then to the end of the body
  int reply_timeout_ms = 10000;    // for the caller to take the answer
};

class AdminServer {
 public:
  AdminServer(const AdminApi* api, AdminServerOptions options)
      : api_(api), options_(std::move(options)), slots_(options_.connections) {}

  // Accept loop; returns once `gate` is stopped (server/acceptor.h).
  void Serve(int listener, ListenerGate* gate);
  bool IsOperator(int uid) const;
  // Waits until at most `at_most` connections are being served (a live upgrade waits for
  // the requests in flight besides its own); false at the deadline.
  bool WaitServing(int at_most, Deadline deadline);

  // Answers the one request of an accepted connection from `caller` (the accept loop takes
  // the credentials from SO_PEERCRED).
  void ServeConnection(UniqueFd fd, const ProgramCredentials& caller);

 private:
  // Answers a request refused before its body was read, and logs why.
  void Refuse(int fd, const ProgramCredentials& caller, const std::string& what, const AdminReply& reply,
              Deadline deadline);

  const AdminApi* api_;
  const AdminServerOptions options_;
  ConnectionSlots slots_;
  RefusalLog refusals_;               // refusals are logged at most RefusalLog::kBurst per window
  std::atomic<uint64_t> refused_{0};  // connections refused for want of descriptors
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_ADMIN_ADMIN_SERVER_H_
