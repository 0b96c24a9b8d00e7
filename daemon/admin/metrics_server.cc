#include "admin/metrics_server.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>

#include <chrono>
#include <system_error>
#include <utility>

#include "common/detached_thread.h"
#include "common/log.h"
#include "common/net_addr.h"
#include "common/thread_guard.h"

namespace conduit {
namespace {

// After a refusal the caller may still be sending (a body we never read); closing with
// unread bytes makes TCP reset the connection, and the reset can destroy the answer before
// the caller reads it. So the daemon stops sending, then drains a bounded amount for a
// bounded time before it closes.
constexpr int kLingerMs = 500;
constexpr size_t kLingerBytes = 64 * 1024;

void CloseGracefully(int fd) {
  shutdown(fd, SHUT_WR);
  const Deadline deadline = Deadline::AfterMs(kLingerMs);
  char buf[4096];
  size_t drained = 0;
  while (drained < kLingerBytes) {
    ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n > 0) {
      drained += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return;
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return;
    if (!WaitFd(fd, POLLIN, deadline, "drain a refused request").ok()) return;
  }
}

HttpResponse TextResponse(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.content_type = "text/plain; charset=utf-8";
  r.body = std::move(body);
  return r;
}


}  // namespace

bool MetricsServer::TryAcquireSlot() {
  int now = in_flight_.load();
  while (now < options_.max_connections) {
    if (in_flight_.compare_exchange_weak(now, now + 1)) return true;
  }
  return false;
}

void MetricsServer::Serve(int listener, ListenerGate* gate) {
  AcceptLoop(listener, "metrics port", gate, &refused_, [this](UniqueFd conn, const SockAddr& addr) {
    const int fd = conn.get();
    const std::string peer = addr.len > 0 ? FormatSockAddr(addr) : std::string("an unknown address");
    if (!TryAcquireSlot()) {
      // Answered without waiting: the caller may not even read.
      Refuse(fd, peer, "a connection",
             TextResponse(503, "all " + std::to_string(options_.max_connections) +
                                   " metrics connections are in use; try again\n"),
             Deadline::AfterMs(0), /*send_body=*/true, /*linger=*/false);
      return;
    }
    try {
      SpawnDetached("a metrics connection", [this, fd, peer] {
        RunGuarded("a metrics request", [&] { ServeConnection(UniqueFd(fd), peer); });
        ReleaseSlot();
      });
      conn.release();  // the thread owns it now
    } catch (const std::system_error& e) {
      ReleaseSlot();
      Refuse(fd, peer, "a connection",
             TextResponse(503, std::string("the daemon cannot start a thread now: ") + e.what() + "\n"),
             Deadline::AfterMs(0), /*send_body=*/true, /*linger=*/false);
    }
  });
}

HttpResponse MetricsServer::Answer(const HttpRequest& request) const {
  if (request.path != kPath) return TextResponse(404, "not found: this port serves only GET /metrics\n");
  if (request.method != "GET" && request.method != "HEAD") {
    HttpResponse r = TextResponse(405, "method not allowed: this port serves only GET and HEAD of /metrics\n");
    r.headers.emplace_back("Allow", "GET, HEAD");
    return r;
  }
  if (request.content_length > 0) return TextResponse(400, "a metrics request takes no body\n");
  HttpResponse r;
  r.content_type = kContentType;
  r.body = api_->RenderMetrics();
  return r;
}

void MetricsServer::ServeConnection(UniqueFd fd, const std::string& peer) {
  const Deadline head_deadline = Deadline::AfterMs(options_.head_timeout_ms);
  HttpRequest request;
  std::string early_body;
  Status st = ReadHttpRequestHead(fd.get(), head_deadline, &request, &early_body);
  if (!st.ok()) {
    if (IsEndOfStream(st)) return;  // a port probe
    // poll(2) waits in whole milliseconds: a read that ran out of time may return up to
    // 1 ms before the deadline itself.
    HttpResponse r = head_deadline.PollTimeoutMs() == 0
                         ? TextResponse(408, "the request head did not arrive within " +
                                                 std::to_string(options_.head_timeout_ms) + " ms\n")
                         : TextResponse(400, st.message() + "\n");
    Refuse(fd.get(), peer, "a request", r, Deadline::AfterMs(options_.reply_timeout_ms), /*send_body=*/true,
           /*linger=*/true);
    return;
  }
  HttpResponse response = Answer(request);
  const bool send_body = request.method != "HEAD";  // HEAD gets the head GET would get
  const Deadline reply_deadline = Deadline::AfterMs(options_.reply_timeout_ms);
  if (response.status != 200) {
    Refuse(fd.get(), peer, PrintableForLog(request.method) + " " + PrintableForLog(request.path), response,
           reply_deadline, send_body, /*linger=*/true);
    return;
  }
  (void)WriteHttpResponse(fd.get(), response, reply_deadline, send_body);
  CloseGracefully(fd.get());
}

void MetricsServer::Refuse(int fd, const std::string& peer, const std::string& what, const HttpResponse& response,
                           Deadline deadline, bool send_body, bool linger) {
  std::string_view why = response.body;
  while (!why.empty() && why.back() == '\n') why.remove_suffix(1);
  refusals_.Log("metrics: refused " + what + " from " + peer + ": " + std::to_string(response.status) + " " +
                HttpReason(response.status) + ": " + PrintableForLog(why));
  (void)WriteHttpResponse(fd, response, deadline, send_body);
  if (linger) CloseGracefully(fd);
}

}  // namespace conduit
