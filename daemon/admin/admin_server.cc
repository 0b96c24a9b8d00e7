#include "admin/admin_server.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "admin/http.h"
#include "common/log.h"

namespace conduit {

bool AdminServer::IsOperator(int uid) const {
  if (uid == 0 || uid == static_cast<int>(geteuid())) return true;
  return std::find(options_.operator_uids.begin(), options_.operator_uids.end(), uid) != options_.operator_uids.end();
}

void AdminServer::Serve(int listener) {
  for (;;) {
    int fd = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      CLOG_ERROR("accept on the admin socket failed: %s", strerror(errno));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    UniqueFd conn(fd);
    if (active_.fetch_add(1) >= options_.max_connections) {
      active_.fetch_sub(1);
      HttpResponse busy;
      busy.status = 503;
      busy.body = AdminReply::Error(503, "too many admin requests at once").body.Dump();
      (void)WriteHttpResponse(conn.get(), busy, Deadline::AfterMs(1000));
      continue;
    }
    std::thread([this, c = std::move(conn)]() mutable {
      ServeConnection(std::move(c));
      active_.fetch_sub(1);
    }).detach();
  }
}

void AdminServer::ServeConnection(UniqueFd fd) {
  const Deadline deadline = Deadline::AfterMs(options_.request_timeout_ms);
  ProgramCredentials caller;
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (getsockopt(fd.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
    caller = ProgramCredentials{cred.pid, static_cast<int>(cred.uid), static_cast<int>(cred.gid)};
  }
  HttpRequest http;
  AdminReply reply;
  Status st = ReadHttpRequest(fd.get(), deadline, &http);
  if (!st.ok()) {
    if (st.message().rfind("connection closed by peer after 0 of", 0) == 0) return;  // a probe
    CLOG_WARN("admin: malformed request from pid %d uid %d: %s", caller.pid, caller.uid, st.message().c_str());
    reply = AdminReply::Error(st.code() == ncclInvalidArgument ? 400 : 500, st.message());
  } else {
    AdminRequest req;
    req.method = http.method;
    req.path = http.path;
    for (auto& [k, v] : http.query) req.query[k] = v;
    req.caller = caller;
    st = http.body.empty() ? Status::Ok() : Json::Parse(http.body, &req.body);
    if (!st.ok()) {
      reply = AdminReply::Error(400, "request body: " + st.message());
    } else {
      reply = api_->Dispatch(std::move(req), IsOperator(caller.uid));
      if (http.method != "GET") {
        CLOG_INFO("admin: %s %s by uid %d (pid %d) -> %d", http.method.c_str(), http.path.c_str(), caller.uid,
                  caller.pid, reply.http_status);
      }
    }
  }
  HttpResponse out;
  out.status = reply.http_status;
  out.content_type = reply.content_type;
  out.body = reply.raw.empty() ? reply.body.Dump(2) + "\n" : std::move(reply.raw);
  (void)WriteHttpResponse(fd.get(), out, deadline);
}

}  // namespace conduit
