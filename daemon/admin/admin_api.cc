#include "admin/admin_api.h"

namespace conduit {

std::vector<std::string> SplitPath(const std::string& path) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < path.size()) {
    while (i < path.size() && path[i] == '/') ++i;
    size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    if (j > i) out.push_back(path.substr(i, j - i));
    i = j;
  }
  return out;
}

AdminReply AdminReply::Error(int http_status, const std::string& message) {
  Json err = Json::Object();
  err["code"] = http_status;
  err["status"] = HttpStatusName(http_status);
  err["message"] = message;
  Json body = Json::Object();
  body["error"] = std::move(err);
  return AdminReply{http_status, std::move(body), {}, "application/json"};
}

AdminReply AdminReply::FromStatus(const Status& status) {
  if (status.ok()) return Ok(Json::Object());
  int http = 500;
  if (status.code() == ncclInvalidArgument || status.code() == ncclInvalidUsage) http = 400;
  return Error(http, status.message());
}

const char* HttpStatusName(int http_status) {
  switch (http_status) {
    case 400: return "INVALID_ARGUMENT";
    case 403: return "PERMISSION_DENIED";
    case 404: return "NOT_FOUND";
    case 405: return "METHOD_NOT_ALLOWED";
    case 409: return "CONFLICT";
    case 413: return "TOO_LARGE";
    case 503: return "UNAVAILABLE";
    default: return http_status < 400 ? "OK" : "INTERNAL";
  }
}

void AdminApi::Route(std::string method, std::string pattern, AdminAccess access, AdminHandler handler) {
  std::lock_guard<std::mutex> lock(mu_);
  routes_.push_back(RouteEntry{std::move(method), SplitPath(pattern), pattern, access, std::move(handler)});
}

void AdminApi::AddMetrics(MetricsSource source) {
  std::lock_guard<std::mutex> lock(mu_);
  metrics_.push_back(std::move(source));
}

bool AdminApi::Match(const std::vector<std::string>& pattern, const std::vector<std::string>& segments,
                     std::map<std::string, std::string>* params) {
  if (pattern.size() != segments.size()) return false;
  std::map<std::string, std::string> bound;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const std::string& p = pattern[i];
    if (p.size() >= 2 && p.front() == '{' && p.back() == '}') {
      bound[p.substr(1, p.size() - 2)] = segments[i];
    } else if (p != segments[i]) {
      return false;
    }
  }
  *params = std::move(bound);
  return true;
}

AdminReply AdminApi::Dispatch(AdminRequest request, bool caller_is_operator) const {
  const std::vector<std::string> segments = SplitPath(request.path);
  AdminHandler handler;
  AdminAccess access = AdminAccess::kRead;
  bool path_known = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const RouteEntry& r : routes_) {
      std::map<std::string, std::string> params;
      if (!Match(r.pattern, segments, &params)) continue;
      path_known = true;
      if (r.method != request.method) continue;
      handler = r.handler;  // a copy: handlers run outside the lock
      access = r.access;
      request.params = std::move(params);
      break;
    }
  }
  if (!handler) {
    if (path_known) return AdminReply::Error(405, request.method + " is not allowed on " + request.path);
    return AdminReply::Error(404, "no such admin endpoint: " + request.path + " (GET /v1 lists them)");
  }
  if (access == AdminAccess::kOperator && !caller_is_operator) {
    return AdminReply::Error(403, "only the operator may " + request.method + " " + request.path + " (caller uid " +
                                      std::to_string(request.caller.uid) + ")");
  }
  return handler(request);
}

std::string AdminApi::RenderMetrics() const {
  std::vector<MetricsSource> sources;
  {
    std::lock_guard<std::mutex> lock(mu_);
    sources = metrics_;
  }
  MetricsWriter writer;
  for (const auto& source : sources) source(writer);
  return writer.text();
}

Json AdminApi::DescribeRoutes() const {
  std::lock_guard<std::mutex> lock(mu_);
  Json list = Json::Array();
  for (const RouteEntry& r : routes_) {
    Json e = Json::Object();
    e["method"] = r.method;
    e["path"] = r.text;
    e["access"] = r.access == AdminAccess::kOperator ? "operator" : "read";
    list.push_back(std::move(e));
  }
  return list;
}

}  // namespace conduit
