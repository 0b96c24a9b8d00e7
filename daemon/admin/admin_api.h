// AdminApi: the operator's API of conduitd, versioned under /v1 (docs/admin-api.md).
//
// Services contribute routes and metrics through this narrow interface; the admin server
// (admin_server.h) does HTTP, authentication and dispatch. A route is a method and a path
// pattern whose "{name}" segments bind parameters, e.g. "/v1/communicators/{key}/trace".
// Routes marked kOperator change state and are refused to callers that are not the
// operator; kRead routes answer anyone allowed to connect to the admin socket.
//
// A request is admitted in two steps so that nobody makes the daemon read or parse a body
// it would refuse: Admit decides from the request head alone (route, caller, announced body
// length), and only then does the server read and parse the body and Run the call.
#ifndef CONDUIT_DAEMON_ADMIN_ADMIN_API_H_
#define CONDUIT_DAEMON_ADMIN_ADMIN_API_H_

#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/metrics.h"
#include "common/status.h"
#include "server/service.h"

namespace conduit {

enum class AdminAccess { kRead, kOperator };
// Whether a route takes a request body (JSON). Routes that take none refuse one unread.
enum class AdminBody { kNone, kJson };

struct AdminRequest {
  std::string method;
  std::string path;
  std::map<std::string, std::string> params;  // bound "{name}" segments
  std::map<std::string, std::string> query;
  Json body;  // parsed request body (null when empty)
  ProgramCredentials caller;
};

struct AdminReply {
  int http_status = 200;
  Json body;
  // When set, sent as is instead of body (e.g. Prometheus text).
  std::string raw;
  std::string content_type = "application/json";

  static AdminReply Ok(Json body) { return AdminReply{200, std::move(body), {}, "application/json"}; }
  // {"error": {"code": http_status, "status": "...", "message": "..."}}
  static AdminReply Error(int http_status, const std::string& message);
  // An error reply with the HTTP status of the Status's canonical code (HttpStatusOf).
  static AdminReply FromStatus(const Status& status);
  // An error reply's message ("" for other replies).
  std::string ErrorMessage() const;
};

// The admin edge's mapping of the canonical codes: invalid argument, failed precondition
// -> 400, permission -> 403, not found -> 404, deadline -> 408, conflict -> 409, the rest
// (the daemon's own failures, lost peers) -> 500.
int HttpStatusOf(StatusCode code);

using AdminHandler = std::function<AdminReply(const AdminRequest&)>;
using MetricsSource = std::function<void(MetricsWriter&)>;

// A change the operator made at run time, as the request that makes it again: what a live
// upgrade replays on the new daemon (docs/upgrade.md).
struct OperatorDocument {
  OperatorDocument(std::string method_, std::string path_, Json body_, Json state_ = Json())
      : method(std::move(method_)), path(std::move(path_)), body(std::move(body_)), state(std::move(state_)) {}

  std::string method;  // "PUT"
  std::string path;
  Json body;
  Json state;  // what the object the document makes had gathered at run time (null: nothing)
};
using StateSource = std::function<void(std::vector<OperatorDocument>*)>;
// Gives a replayed document's object its state; false when `doc` is not one of the part's.
using StateRestorer = std::function<bool(const OperatorDocument& doc, Status* result)>;

// A request admitted to its route, its body not read yet.
struct AdminCall {
  AdminBody body = AdminBody::kNone;
  std::map<std::string, std::string> params;  // bound "{name}" segments
  AdminHandler handler;
};

class AdminApi {
 public:
  // PUT and POST routes take a JSON body, the others none; the second form says which.
  void Route(std::string method, std::string pattern, AdminAccess access, AdminHandler handler);
  void Route(std::string method, std::string pattern, AdminAccess access, AdminBody body, AdminHandler handler);
  // Called on every scrape of /metrics, in registration order.
  void AddMetrics(MetricsSource source);
  // A part that keeps operator changes made through its routes says here how to make them
  // again; ExportState asks every source, in registration order.
  void AddStateSource(StateSource source);
  std::vector<OperatorDocument> ExportState() const;
  // After a document with a state was replayed: the part that made it takes the state.
  void AddStateRestorer(StateRestorer restorer);
  Status RestoreState(const OperatorDocument& doc) const;

  // Step 1, from the request head: finds the route of method + path and checks that the
  // caller may call it and that it takes the body announced (body_bytes > 0). False with
  // the answer in *refusal: 404 for an unknown path, 405 for a known path with another
  // method, 403 for a kOperator route when !caller_is_operator, 400 for a body on a route
  // that takes none.
  bool Admit(const std::string& method, const std::string& path, size_t body_bytes, const ProgramCredentials& caller,
             bool caller_is_operator, AdminCall* call, AdminReply* refusal) const;
  // Step 2: runs an admitted call on the request (its body parsed).
  static AdminReply Run(const AdminCall& call, AdminRequest request);
  // Both steps, for a request already in memory; its body counts as announced when not null.
  AdminReply Dispatch(AdminRequest request, bool caller_is_operator) const;
  std::string RenderMetrics() const;
  // Every route, for GET /v1 (discovery).
  Json DescribeRoutes() const;

 private:
  struct RouteEntry {
    std::string method;
    std::vector<std::string> pattern;  // path segments
    std::string text;
    AdminAccess access;
    AdminBody body;
    AdminHandler handler;
  };
  static bool Match(const std::vector<std::string>& pattern, const std::vector<std::string>& segments,
                    std::map<std::string, std::string>* params);

  mutable std::mutex mu_;
  std::vector<RouteEntry> routes_;
  std::vector<MetricsSource> metrics_;
  std::vector<StateSource> state_sources_;
  std::vector<StateRestorer> state_restorers_;
};

// "NOT_FOUND", "PERMISSION_DENIED", ... for an HTTP status (the error body's "status").
const char* HttpStatusName(int http_status);

// Path segments of "/a/b/c" -> {"a", "b", "c"}.
std::vector<std::string> SplitPath(const std::string& path);

}  // namespace conduit

#endif  // CONDUIT_DAEMON_ADMIN_ADMIN_API_H_
