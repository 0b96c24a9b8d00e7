// Just enough HTTP/1.1 for the admin API over a Unix socket: one request and one response
// per connection, bodies sized by Content-Length (no chunked encoding), strict limits on
// header and body size. Both sides are here: the daemon's server and conduitctl's client.
//
// Parsing is separate from I/O: ParseHttpRequestHead works on bytes in memory, so the
// daemon's reader and the fuzzer (tests/fuzz/admin_http_fuzzer.cc) run the same code. The
// server reads a request in two steps, head then body, so it can decide who may send a
// body (and whether the route takes one) before reading a byte of it.
#ifndef CONDUIT_DAEMON_ADMIN_HTTP_H_
#define CONDUIT_DAEMON_ADMIN_HTTP_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/deadline.h"
#include "common/status.h"

namespace conduit {

inline constexpr size_t kMaxHttpHeaderBytes = 16 * 1024;
inline constexpr size_t kMaxHttpBodyBytes = 16 * 1024 * 1024;

using HttpFields = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;
  std::string target;  // as sent: path plus optional "?query"
  std::string path;    // percent-decoded, without the query
  HttpFields query;    // percent-decoded name=value pairs
  HttpFields headers;  // names lower-cased
  size_t content_length = 0;  // announced by Content-Length (0 when absent)
  std::string body;

  const std::string* Header(std::string_view name) const;
  const std::string* Query(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  // Client side: the fields received, names lower-cased. Server side: fields sent besides
  // Content-Type, Content-Length and Connection (e.g. "Allow" with a 405).
  HttpFields headers;
};

// Parses a request head: the request line and the header fields, without the blank line
// that ends them. Checks the grammar and the limits and sets everything but `body`.
// A request that breaks them yields InvalidArgument (here and below).
Status ParseHttpRequestHead(std::string_view head, HttpRequest* request);
// A whole request in memory: head, blank line, then exactly content_length body bytes.
Status ParseHttpRequest(std::string_view bytes, HttpRequest* request);

// Server side. Reads up to the end of the head (at most kMaxHttpHeaderBytes) and parses it;
// bytes read past the head (the start of the body) go to *early_body.
Status ReadHttpRequestHead(int fd, Deadline deadline, HttpRequest* request, std::string* early_body);
// Reads the rest of the body the head announced.
Status ReadHttpRequestBody(int fd, Deadline deadline, std::string early_body, HttpRequest* request);
// Both steps under one deadline.
Status ReadHttpRequest(int fd, Deadline deadline, HttpRequest* request);
// Without `send_body` (the answer to HEAD) the head still announces the body's length.
Status WriteHttpResponse(int fd, const HttpResponse& response, Deadline deadline, bool send_body = true);

// Client side.
Status WriteHttpRequest(int fd, std::string_view method, std::string_view target, std::string_view body,
                        Deadline deadline);
Status ReadHttpResponse(int fd, Deadline deadline, HttpResponse* response);

const char* HttpReason(int status);
// Splits "a=1&b=x%20y" into decoded pairs.
HttpFields ParseQuery(std::string_view query);
// '+' means a space only in query strings (HTML form encoding), not in paths.
std::string PercentDecode(std::string_view s, bool plus_is_space = false);
std::string PercentEncode(std::string_view s);

}  // namespace conduit

#endif  // CONDUIT_DAEMON_ADMIN_HTTP_H_
