#include "admin/admin_server.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <system_error>
#include <utility>

#include "admin/http.h"
#include "common/detached_thread.h"
#include "common/log.h"

namespace conduit {
namespace {

bool PeerCredentials(int fd, ProgramCredentials* out) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return false;
  *out = ProgramCredentials{cred.pid, static_cast<int>(cred.uid), static_cast<int>(cred.gid)};
  return true;
}

std::string Who(const ProgramCredentials& caller) {
  return "uid " + std::to_string(caller.uid) + " (pid " + std::to_string(caller.pid) + ")";
}

void WriteReply(int fd, AdminReply reply, Deadline deadline) {
  HttpResponse out;
  out.status = reply.http_status;
  out.content_type = reply.content_type;
  out.body = reply.raw.empty() ? reply.body.Dump(2) + "\n" : std::move(reply.raw);
  (void)WriteHttpResponse(fd, out, deadline);
}

// Whether a read that failed ran out of time: poll(2) waits in whole milliseconds, so it
// returns up to 1 ms before the deadline itself has passed.
bool OutOfTime(const Deadline& deadline) { return deadline.PollTimeoutMs() == 0; }

}  // namespace

bool AdminServer::IsOperator(int uid) const {
  if (uid == 0 || uid == static_cast<int>(geteuid())) return true;
  return std::find(options_.operator_uids.begin(), options_.operator_uids.end(), uid) != options_.operator_uids.end();
}

void AdminServer::Serve(int listener, ListenerGate* gate) {
  AcceptLoop(listener, "admin socket", gate, &refused_, [this](UniqueFd conn, const SockAddr&) {
    const int fd = conn.get();
    ProgramCredentials caller;
    if (!PeerCredentials(fd, &caller)) {
      CLOG_WARN("admin: cannot tell who connected (SO_PEERCRED: %s); closing the connection", strerror(errno));
      return;
    }
    const bool is_operator = IsOperator(caller.uid);
    std::string why;
    if (!slots_.TryAcquire(caller.uid, is_operator, &why)) {
      // Answered without waiting: the caller may not even read.
      Refuse(fd, caller, "a connection", AdminReply::Error(503, why), Deadline::AfterMs(0));
      return;
    }
    try {
      SpawnDetached("an admin connection", [this, fd, caller, is_operator] {
        try {
          ServeConnection(UniqueFd(fd), caller);
        } catch (const std::exception& e) {  // a handler's bug must not take the daemon down
          CLOG_ERROR("admin: a request from %s failed: %s", Who(caller).c_str(), e.what());
        }
        slots_.Release(caller.uid, is_operator);
      });
      conn.release();  // the thread owns it now
    } catch (const std::system_error& e) {
      slots_.Release(caller.uid, is_operator);
      Refuse(fd, caller, "a connection",
             AdminReply::Error(503, std::string("the daemon cannot start a thread now: ") + e.what()),
             Deadline::AfterMs(0));
    }
  });
}

bool AdminServer::WaitServing(int at_most, Deadline deadline) { return slots_.WaitInUseAtMost(at_most, deadline); }

void AdminServer::ServeConnection(UniqueFd fd, const ProgramCredentials& caller) {
  const bool is_operator = IsOperator(caller.uid);
  const Deadline head_deadline = Deadline::AfterMs(options_.head_timeout_ms);
  HttpRequest http;
  std::string early_body;
  Status st = ReadHttpRequestHead(fd.get(), head_deadline, &http, &early_body);
  if (!st.ok()) {
    if (IsEndOfStream(st)) return;  // a probe
    AdminReply reply = OutOfTime(head_deadline)
                           ? AdminReply::Error(408, "the request head did not arrive within " +
                                                        std::to_string(options_.head_timeout_ms) + " ms")
                           : AdminReply::Error(st.code() == ncclInvalidArgument ? 400 : 500, st.message());
    Refuse(fd.get(), caller, "a request", reply, Deadline::AfterMs(options_.reply_timeout_ms));
    return;
  }
  const std::string what = PrintableForLog(http.method) + " " + PrintableForLog(http.path);

  // Who may call the route, and whether it takes the body announced, is decided from the
  // head: a refused caller never gets the daemon to read or parse a byte of the body.
  AdminCall call;
  AdminReply reply;
  if (!api_->Admit(http.method, http.path, http.content_length, caller, is_operator, &call, &reply)) {
    Refuse(fd.get(), caller, what, reply, Deadline::AfterMs(options_.reply_timeout_ms));
    return;
  }
  const Deadline body_deadline = Deadline::AfterMs(options_.body_timeout_ms);
  st = ReadHttpRequestBody(fd.get(), body_deadline, std::move(early_body), &http);
  if (!st.ok()) {
    reply = OutOfTime(body_deadline) ? AdminReply::Error(408, "the request body (" + std::to_string(http.content_length) +
                                                                 " bytes) did not arrive within " +
                                                                 std::to_string(options_.body_timeout_ms) + " ms")
                                    : AdminReply::Error(400, st.message());
    Refuse(fd.get(), caller, what, reply, Deadline::AfterMs(options_.reply_timeout_ms));
    return;
  }
  AdminRequest req;
  req.method = http.method;
  req.path = http.path;
  for (auto& [k, v] : http.query) req.query[k] = v;
  req.caller = caller;
  st = http.body.empty() ? Status::Ok() : Json::Parse(http.body, &req.body);
  if (!st.ok()) {
    reply = AdminReply::Error(400, "request body: " + st.message());
  } else {
    reply = AdminApi::Run(call, std::move(req));
  }
  if (http.method != "GET") {
    CLOG_INFO("admin: %s by %s -> %d", what.c_str(), Who(caller).c_str(), reply.http_status);
  }
  WriteReply(fd.get(), std::move(reply), Deadline::AfterMs(options_.reply_timeout_ms));
}

void AdminServer::Refuse(int fd, const ProgramCredentials& caller, const std::string& what, const AdminReply& reply,
                         Deadline deadline) {
  refusals_.Log("admin: refused " + what + " from " + Who(caller) + ": " + std::to_string(reply.http_status) + " " +
                HttpStatusName(reply.http_status) + ": " + reply.ErrorMessage());
  WriteReply(fd, reply, deadline);
}

}  // namespace conduit
