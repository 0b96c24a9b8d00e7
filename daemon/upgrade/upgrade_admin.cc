#include "upgrade/upgrade_admin.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <memory>

#include "common/log.h"
#include "common/version.h"
#include "config/json_message.h"
#include "config/upgrade.pb.h"

namespace conduit::upgrade {
namespace {

constexpr int64_t kDefaultTimeoutMs = 60000;
constexpr int64_t kMaxTimeoutMs = 600000;
// How long program sessions get to reach a request boundary (RPC calls in flight to end).
// The new daemon waits for the state longer than the longest drain (conduitd.cc).
constexpr int64_t kDefaultDrainMs = 3000;
constexpr int64_t kMaxDrainMs = 120000;

// The new binary runs with the daemon's privileges: it must be a regular file that only
// root or the daemon's own user can have written (as the cluster key file must be).
Status CheckBinary(const std::string& path) {
  struct stat st {};
  if (path.empty() || path[0] != '/') return InvalidArgument("\"binary\" must be an absolute path");
  if (stat(path.c_str(), &st) != 0) return InvalidArgument("cannot use %s: %s", path.c_str(), strerror(errno));
  if (!S_ISREG(st.st_mode)) return InvalidArgument("%s is not a regular file", path.c_str());
  if (st.st_uid != 0 && st.st_uid != geteuid()) {
    return Status(StatusCode::kPermissionDenied,
                  path + " is owned by uid " + std::to_string(st.st_uid) + ": the new conduitd must be owned by root "
                  "or the daemon's user");
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return Status(StatusCode::kPermissionDenied, path + " is writable by group or others (chmod go-w)");
  }
  return Status::Ok();
}

}  // namespace

void AddUpgradeAdmin(AdminApi* api, UpgradeSetup setup) {
  auto shared = std::make_shared<UpgradeSetup>(std::move(setup));
  auto busy = std::make_shared<std::atomic<bool>>(false);
  api->Route("POST", "/v1/upgrade", AdminAccess::kOperator, [shared, busy](const AdminRequest& req) {
    // Operators named with --admin-uid change policy; they may not make the daemon run a
    // binary of their choice with its privileges.
    if (req.caller.uid != 0 && req.caller.uid != static_cast<int>(geteuid())) {
      return AdminReply::Error(403, "only root or the daemon's own user may replace the daemon (caller uid " +
                                        std::to_string(req.caller.uid) + ")");
    }
    config::v1::UpgradeRequest doc;
    if (!req.body.is_null()) {
      Status st = config::MessageFromJson(req.body, "upgrade request", &doc);
      if (!st.ok()) return AdminReply::FromStatus(st);
    }
    HandOverRequest request;
    request.binary = doc.binary().empty() ? shared->default_binary : doc.binary();
    request.args = shared->args;
    const int64_t timeout_ms = doc.has_timeout_ms() ? doc.timeout_ms() : kDefaultTimeoutMs;
    if (timeout_ms < 1000 || timeout_ms > kMaxTimeoutMs) {
      return AdminReply::Error(400, "\"timeout_ms\" must be 1000..600000");
    }
    request.timeout_ms = static_cast<int>(timeout_ms);
    const int64_t drain_ms = doc.has_drain_ms() ? doc.drain_ms() : kDefaultDrainMs;
    if (drain_ms < 100 || drain_ms > kMaxDrainMs) return AdminReply::Error(400, "\"drain_ms\" must be 100..120000");
    // The whole handover, a drain asked for included, must end within timeout_ms.
    if (doc.has_drain_ms() && drain_ms >= timeout_ms) {
      return AdminReply::Error(400, "\"drain_ms\" must be below \"timeout_ms\"");
    }
    request.drain_ms = static_cast<int>(drain_ms);
    Status st = CheckBinary(request.binary);
    if (!st.ok()) return AdminReply::FromStatus(st);
    if (busy->exchange(true)) return AdminReply::Error(409, "an upgrade of this daemon is already under way");
    CLOG_INFO("upgrade: replacing this conduitd (pid %d, %s) by %s, asked by uid %d", getpid(), kDaemonVersion,
              request.binary.c_str(), req.caller.uid);
    HandOverOutcome outcome;
    st = HandOver(request, shared->hooks, &outcome);
    if (!st.ok()) {
      busy->store(false);
      return AdminReply::FromStatus(st);
    }
    CLOG_INFO("upgrade: %s (pid %d) serves now; accept loops were parked %.1f ms; this process exits",
              outcome.new_release.c_str(), outcome.new_pid, outcome.pause_ms);
    Json body = Json::Object();
    body["old_pid"] = static_cast<int64_t>(getpid());
    body["old_release"] = kDaemonVersion;
    body["new_pid"] = static_cast<int64_t>(outcome.new_pid);
    body["new_release"] = outcome.new_release;
    body["binary"] = request.binary;
    body["pause_ms"] = outcome.pause_ms;
    shared->exit();
    return AdminReply::Ok(std::move(body));
  });
}

Status ReplayOperatorState(const AdminApi& api, const v1::DaemonState& state) {
  for (const v1::OperatorDocument& doc : state.operator_state()) {
    AdminRequest request;
    request.method = doc.method();
    request.path = doc.path();
    request.caller.uid = static_cast<int>(geteuid());
    request.caller.pid = getpid();
    if (!doc.body_json().empty()) {
      Status st = Json::Parse(doc.body_json(), &request.body);
      if (!st.ok()) return InvalidArgument("%s %s: %s", doc.method().c_str(), doc.path().c_str(), st.message().c_str());
    }
    AdminReply reply = api.Dispatch(std::move(request), /*caller_is_operator=*/true);
    if (reply.http_status != 200) {
      return InvalidUsage("the old daemon's %s %s is refused here (HTTP %d): %s", doc.method().c_str(),
                          doc.path().c_str(), reply.http_status, reply.ErrorMessage().c_str());
    }
    if (!doc.state_json().empty()) {
      OperatorDocument replayed{doc.method(), doc.path(), Json(), Json()};
      Status st = Json::Parse(doc.state_json(), &replayed.state);
      if (st.ok()) st = api.RestoreState(replayed);
      if (!st.ok()) {
        return InvalidUsage("the state of the old daemon's %s %s: %s", doc.method().c_str(), doc.path().c_str(),
                            st.message().c_str());
      }
    }
  }
  return Status::Ok();
}

}  // namespace conduit::upgrade
