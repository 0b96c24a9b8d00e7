// MetricsServer: the daemon's metrics over plain TCP for a Prometheus server to scrape
// (conduitd --metrics-listen IP:PORT). The text is the admin socket's GET /metrics
// (AdminApi::RenderMetrics); nothing else is served: GET and HEAD of /metrics answer, any
// other path is 404, any other method 405, a request body or a malformed request 400.
//
// Whoever reaches the port reads the metrics and nothing more (no authentication, no
// state changes), so operators bind it to a management address. Like the admin socket,
// nothing a caller sends can hold the daemon: connections are capped (more get 503 at
// once), one request per connection, its head (at most kMaxHttpHeaderBytes) must arrive
// within a short deadline, no body is ever read, and the answer must be taken in time.
#ifndef CONDUIT_DAEMON_ADMIN_METRICS_SERVER_H_
#define CONDUIT_DAEMON_ADMIN_METRICS_SERVER_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "admin/admin_api.h"
#include "admin/http.h"
#include "admin/refusal_log.h"
#include "common/fd_io.h"
#include "server/acceptor.h"

namespace conduit {

struct MetricsServerOptions {
  int max_connections = 16;    // served at once; Prometheus needs one per scrape
  int head_timeout_ms = 2000;  // from accept to the end of the request head
  int reply_timeout_ms = 10000;  // for the caller to take the answer
};

class MetricsServer {
 public:
  static constexpr char kPath[] = "/metrics";
  static constexpr char kContentType[] = "text/plain; version=0.0.4; charset=utf-8";

  explicit MetricsServer(const AdminApi* api, MetricsServerOptions options = {}) : api_(api), options_(options) {}

  // Accept loop on a listening TCP socket; returns once `gate` is stopped (server/acceptor.h).
  void Serve(int listener, ListenerGate* gate);
  // Answers the one request of an accepted connection; `peer` names the caller in logs.
  void ServeConnection(UniqueFd fd, const std::string& peer);
  // The answer to a request head (no I/O): the metrics, or the refusal.
  HttpResponse Answer(const HttpRequest& request) const;

 private:
  bool TryAcquireSlot();
  void ReleaseSlot() { in_flight_.fetch_sub(1); }
  // Sends `response` and logs the refusal it carries (rate-limited). `linger`: drain what
  // the caller still sends before closing (never in the accept loop, which must not wait).
  void Refuse(int fd, const std::string& peer, const std::string& what, const HttpResponse& response,
              Deadline deadline, bool send_body, bool linger);

  const AdminApi* api_;
  const MetricsServerOptions options_;
  std::atomic<int> in_flight_{0};
  std::atomic<uint64_t> refused_{0};  // connections refused for want of descriptors
  RefusalLog refusals_;
};

}  // namespace conduit

#endif  // CONDUIT_DAEMON_ADMIN_METRICS_SERVER_H_
