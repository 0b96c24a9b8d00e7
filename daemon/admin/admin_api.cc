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

int HttpStatusOf(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return 200;
    case StatusCode::kInvalidArgument:
    case StatusCode::kFailedPrecondition:
    case StatusCode::kOutOfRange: return 400;
    case StatusCode::kPermissionDenied:
    case StatusCode::kUnauthenticated: return 403;
    case StatusCode::kNotFound: return 404;
    case StatusCode::kDeadlineExceeded: return 408;
    case StatusCode::kAlreadyExists:
    case StatusCode::kAborted: return 409;
    default: return 500;  // the daemon's own failures, lost peers
  }
}

std::string AdminReply::ErrorMessage() const {
  const Json* err = body.is_object() ? body.find("error") : nullptr;
  const Json* message = err != nullptr && err->is_object() ? err->find("message") : nullptr;
  return message != nullptr && message->is_string() ? message->as_string() : "";
}

AdminReply AdminReply::FromStatus(const Status& status) {
  if (status.ok()) return Ok(Json::Object());
  return Error(HttpStatusOf(status.canonical()), status.message());
}

const char* HttpStatusName(int http_status) {
  switch (http_status) {
    case 400: return "INVALID_ARGUMENT";
    case 403: return "PERMISSION_DENIED";
    case 404: return "NOT_FOUND";
    case 405: return "METHOD_NOT_ALLOWED";
    case 408: return "DEADLINE_EXCEEDED";
    case 409: return "CONFLICT";
    case 413: return "TOO_LARGE";
    case 503: return "UNAVAILABLE";
    default: return http_status < 400 ? "OK" : "INTERNAL";
  }
}

void AdminApi::Route(std::string method, std::string pattern, AdminAccess access, AdminHandler handler) {
  const AdminBody body = method == "PUT" || method == "POST" ? AdminBody::kJson : AdminBody::kNone;
  Route(std::move(method), std::move(pattern), access, body, std::move(handler));
}

void AdminApi::Route(std::string method, std::string pattern, AdminAccess access, AdminBody body, AdminHandler handler) {
  std::lock_guard<std::mutex> lock(mu_);
  routes_.push_back(RouteEntry{std::move(method), SplitPath(pattern), pattern, access, body, std::move(handler)});
}

void AdminApi::AddMetrics(MetricsSource source) {
  std::lock_guard<std::mutex> lock(mu_);
  metrics_.push_back(std::move(source));
}

void AdminApi::AddStateSource(StateSource source) {
  std::lock_guard<std::mutex> lock(mu_);
  state_sources_.push_back(std::move(source));
}

std::vector<OperatorDocument> AdminApi::ExportState() const {
  std::vector<StateSource> sources;
  {
    std::lock_guard<std::mutex> lock(mu_);
    sources = state_sources_;
  }
  std::vector<OperatorDocument> out;
  for (const StateSource& source : sources) source(&out);
  return out;
}

void AdminApi::AddStateRestorer(StateRestorer restorer) {
  std::lock_guard<std::mutex> lock(mu_);
  state_restorers_.push_back(std::move(restorer));
}

Status AdminApi::RestoreState(const OperatorDocument& doc) const {
  std::vector<StateRestorer> restorers;
  {
    std::lock_guard<std::mutex> lock(mu_);
    restorers = state_restorers_;
  }
  Status result;
  for (const StateRestorer& restore : restorers) {
    if (restore(doc, &result)) return result;
  }
  return InvalidUsage("%s %s comes with a state no part of this daemon keeps", doc.method.c_str(), doc.path.c_str());
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

bool AdminApi::Admit(const std::string& method, const std::string& path, size_t body_bytes,
                     const ProgramCredentials& caller, bool caller_is_operator, AdminCall* call,
                     AdminReply* refusal) const {
  const std::vector<std::string> segments = SplitPath(path);
  const RouteEntry* found = nullptr;
  bool path_known = false;
  std::lock_guard<std::mutex> lock(mu_);
  for (const RouteEntry& r : routes_) {
    std::map<std::string, std::string> params;
    if (!Match(r.pattern, segments, &params)) continue;
    path_known = true;
    if (r.method != method) continue;
    found = &r;
    call->params = std::move(params);
    break;
  }
  if (found == nullptr) {
    *refusal = path_known ? AdminReply::Error(405, method + " is not allowed on " + path)
                          : AdminReply::Error(404, "no such admin endpoint: " + path + " (GET /v1 lists them)");
    return false;
  }
  if (found->access == AdminAccess::kOperator && !caller_is_operator) {
    *refusal = AdminReply::Error(403, "only the operator may " + method + " " + found->text + " (caller uid " +
                                          std::to_string(caller.uid) + ")");
    return false;
  }
  if (found->body == AdminBody::kNone && body_bytes > 0) {
    *refusal = AdminReply::Error(400, method + " " + found->text + " takes no request body");
    return false;
  }
  call->body = found->body;
  call->handler = found->handler;  // a copy: handlers run outside the lock
  return true;
}

AdminReply AdminApi::Run(const AdminCall& call, AdminRequest request) {
  request.params = call.params;
  return call.handler(request);
}

AdminReply AdminApi::Dispatch(AdminRequest request, bool caller_is_operator) const {
  AdminCall call;
  AdminReply refusal;
  if (!Admit(request.method, request.path, request.body.is_null() ? 0 : 1, request.caller, caller_is_operator, &call,
             &refusal)) {
    return refusal;
  }
  return Run(call, std::move(request));
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
