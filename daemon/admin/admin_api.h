// AdminApi: the operator's API of conduitd, versioned under /v1 (docs/admin-api.md).
//
// Services contribute routes and metrics through this narrow interface; the admin server
// (admin_server.h) does HTTP, authentication and dispatch. A route is a method and a path
// pattern whose "{name}" segments bind parameters, e.g. "/v1/communicators/{key}/trace".
// Routes marked kOperator change state and are refused to callers that are not the
// operator; kRead routes answer anyone allowed to connect to the admin socket.
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
  // Maps a Status's ncclResult_t to an HTTP status (invalid argument/usage -> 400, the rest -> 500).
  static AdminReply FromStatus(const Status& status);
};

using AdminHandler = std::function<AdminReply(const AdminRequest&)>;
using MetricsSource = std::function<void(MetricsWriter&)>;

class AdminApi {
 public:
  void Route(std::string method, std::string pattern, AdminAccess access, AdminHandler handler);
  // Called on every scrape of /metrics, in registration order.
  void AddMetrics(MetricsSource source);

  // Finds the route and runs it. 404 for an unknown path, 405 for a known path with another
  // method, 403 for a kOperator route when !caller_is_operator.
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
    AdminHandler handler;
  };
  static bool Match(const std::vector<std::string>& pattern, const std::vector<std::string>& segments,
                    std::map<std::string, std::string>* params);

  mutable std::mutex mu_;
  std::vector<RouteEntry> routes_;
  std::vector<MetricsSource> metrics_;
};

// "NOT_FOUND", "PERMISSION_DENIED", ... for an HTTP status (the error body's "status").
const char* HttpStatusName(int http_status);

// Path segments of "/a/b/c" -> {"a", "b", "c"}.
std::vector<std::string> SplitPath(const std::string& path);

}  // namespace conduit

#endif  // CONDUIT_DAEMON_ADMIN_ADMIN_API_H_
