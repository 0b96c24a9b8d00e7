#include "admin/http.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>

#include <cctype>
#include <cstdlib>
#include <cstring>

#include "common/fd_io.h"

namespace conduit {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Reads until the blank line ending the header block (at most kMaxHttpHeaderBytes before
// it). `rest` gets bytes read past it (the start of the body).
Status ReadHead(int fd, Deadline deadline, std::string* head, std::string* rest) {
  std::string buf;
  char chunk[4096];
  size_t searched = 0;  // no "\r\n\r\n" starts before this offset
  for (;;) {
    size_t end = buf.find("\r\n\r\n", searched);
    if (end != std::string::npos && end <= kMaxHttpHeaderBytes) {
      *head = buf.substr(0, end);
      *rest = buf.substr(end + 4);
      return Status::Ok();
    }
    if (buf.size() >= kMaxHttpHeaderBytes + 4) return InvalidArgument("HTTP header block over %zu bytes", kMaxHttpHeaderBytes);
    searched = buf.size() < 3 ? 0 : buf.size() - 3;
    ssize_t r = recv(fd, chunk, sizeof(chunk), MSG_DONTWAIT);
    if (r > 0) {
      buf.append(chunk, static_cast<size_t>(r));
      continue;
    }
    if (r == 0) {
      return buf.empty() ? SystemError("connection closed by peer after 0 of 1 bytes")
                         : InvalidArgument("connection closed in the middle of the HTTP header");
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return SystemError("receive failed: %s", strerror(errno));
    CONDUIT_RETURN_IF_ERROR(WaitFd(fd, POLLIN, deadline, "receive an HTTP header"));
  }
}

// RFC 9110 token characters (methods and header names).
bool IsTokenChar(unsigned char c) {
  return std::isalnum(c) || (c != 0 && std::strchr("!#$%&'*+-.^_`|~", c) != nullptr);
}

bool IsToken(std::string_view s) {
  if (s.empty()) return false;
  for (unsigned char c : s) {
    if (!IsTokenChar(c)) return false;
  }
  return true;
}

// Field values: visible characters, spaces and tabs (no other controls, no bare CR or LF).
bool IsFieldValue(std::string_view s) {
  for (unsigned char c : s) {
    if ((c < 0x20 && c != '\t') || c == 0x7f) return false;
  }
  return true;
}

// Parses "Name: value" lines after the start line; names lower-cased.
Status ParseHeaderLines(std::string_view lines, HttpFields* headers) {
  while (!lines.empty()) {
    size_t eol = lines.find("\r\n");
    std::string_view line = lines.substr(0, eol);
    lines = eol == std::string_view::npos ? std::string_view() : lines.substr(eol + 2);
    size_t colon = line.find(':');
    if (colon == std::string_view::npos || !IsToken(line.substr(0, colon))) {
      return InvalidArgument("malformed HTTP header line");
    }
    std::string_view value = Trim(line.substr(colon + 1));
    if (!IsFieldValue(value)) return InvalidArgument("control character in an HTTP header value");
    headers->emplace_back(Lower(line.substr(0, colon)), std::string(value));
  }
  return Status::Ok();
}

const std::string* FindField(const HttpFields& fields, std::string_view name) {
  for (const auto& [k, v] : fields) {
    if (k == name) return &v;
  }
  return nullptr;
}

// The body length the header fields announce: Content-Length (digits only, at most once,
// within kMaxHttpBodyBytes), 0 when absent. Chunked bodies are refused.
Status BodyLength(const HttpFields& headers, size_t* length) {
  *length = 0;
  const std::string* cl = nullptr;
  for (const auto& [k, v] : headers) {
    if (k == "transfer-encoding") {
      return InvalidArgument("Transfer-Encoding '%s' is not supported; send Content-Length", v.c_str());
    }
    if (k != "content-length") continue;
    if (cl != nullptr) return InvalidArgument("Content-Length given twice");
    cl = &v;
  }
  if (cl == nullptr) return Status::Ok();
  if (cl->empty() || cl->size() > 20 || cl->find_first_not_of("0123456789") != std::string::npos) {
    return InvalidArgument("bad Content-Length '%s'", cl->c_str());
  }
  unsigned long long n = strtoull(cl->c_str(), nullptr, 10);  // 20 digits may overflow: ULLONG_MAX
  if (n > kMaxHttpBodyBytes) return InvalidArgument("body of %s bytes is over the %zu limit", cl->c_str(), kMaxHttpBodyBytes);
  *length = static_cast<size_t>(n);
  return Status::Ok();
}

// Reads the body of `length` bytes, given the bytes already read past the head.
Status ReadBody(int fd, size_t length, std::string rest, Deadline deadline, std::string* body) {
  if (rest.size() > length) return InvalidArgument("more bytes than Content-Length announced");
  *body = std::move(rest);
  size_t have = body->size();
  body->resize(length);
  if (length > have) CONDUIT_RETURN_IF_ERROR(ReadFull(fd, body->data() + have, length - have, deadline));
  return Status::Ok();
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

const std::string* HttpRequest::Header(std::string_view name) const { return FindField(headers, name); }
const std::string* HttpRequest::Query(std::string_view name) const { return FindField(query, name); }

std::string PercentDecode(std::string_view s, bool plus_is_space) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && HexValue(s[i + 1]) >= 0 && HexValue(s[i + 2]) >= 0) {
      out.push_back(static_cast<char>(HexValue(s[i + 1]) * 16 + HexValue(s[i + 2])));
      i += 2;
    } else if (s[i] == '+' && plus_is_space) {
      out.push_back(' ');
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

std::string PercentEncode(std::string_view s) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '/') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

HttpFields ParseQuery(std::string_view query) {
  HttpFields out;
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.empty()) continue;
    size_t eq = pair.find('=');
    out.emplace_back(PercentDecode(pair.substr(0, eq), true),
                     eq == std::string_view::npos ? std::string() : PercentDecode(pair.substr(eq + 1), true));
  }
  return out;
}

Status ParseHttpRequestHead(std::string_view head, HttpRequest* request) {
  *request = HttpRequest();
  if (head.size() > kMaxHttpHeaderBytes) return InvalidArgument("HTTP header block over %zu bytes", kMaxHttpHeaderBytes);
  size_t eol = head.find("\r\n");
  std::string_view start = head.substr(0, eol);
  size_t sp1 = start.find(' ');
  size_t sp2 = sp1 == std::string_view::npos ? sp1 : start.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos) return InvalidArgument("malformed HTTP request line");
  std::string_view method = start.substr(0, sp1);
  std::string_view target = start.substr(sp1 + 1, sp2 - sp1 - 1);
  std::string_view version = start.substr(sp2 + 1);
  if (!IsToken(method)) return InvalidArgument("malformed HTTP method");
  if (version != "HTTP/1.1" && version != "HTTP/1.0") return InvalidArgument("unsupported HTTP version");
  if (target.empty() || target[0] != '/') return InvalidArgument("request target must start with '/'");
  for (unsigned char c : target) {
    if (c <= 0x20 || c >= 0x7f) return InvalidArgument("request target with a space, control or non-ASCII byte");
  }
  request->method = std::string(method);
  request->target = std::string(target);
  size_t q = target.find('?');
  request->path = PercentDecode(target.substr(0, q));
  if (q != std::string_view::npos) request->query = ParseQuery(target.substr(q + 1));
  if (eol != std::string_view::npos) CONDUIT_RETURN_IF_ERROR(ParseHeaderLines(head.substr(eol + 2), &request->headers));
  return BodyLength(request->headers, &request->content_length);
}

Status ParseHttpRequest(std::string_view bytes, HttpRequest* request) {
  size_t end = bytes.substr(0, kMaxHttpHeaderBytes + 4).find("\r\n\r\n");
  if (end == std::string_view::npos) {
    *request = HttpRequest();
    return InvalidArgument(bytes.size() > kMaxHttpHeaderBytes ? "HTTP header block too large" : "HTTP header block not ended");
  }
  CONDUIT_RETURN_IF_ERROR(ParseHttpRequestHead(bytes.substr(0, end), request));
  std::string_view body = bytes.substr(end + 4);
  if (body.size() != request->content_length) {
    return InvalidArgument("a body of %zu bytes where Content-Length announced %zu", body.size(), request->content_length);
  }
  request->body = std::string(body);
  return Status::Ok();
}

Status ReadHttpRequestHead(int fd, Deadline deadline, HttpRequest* request, std::string* early_body) {
  *request = HttpRequest();
  early_body->clear();
  std::string head;
  CONDUIT_RETURN_IF_ERROR(ReadHead(fd, deadline, &head, early_body));
  return ParseHttpRequestHead(head, request);
}

Status ReadHttpRequestBody(int fd, Deadline deadline, std::string early_body, HttpRequest* request) {
  return ReadBody(fd, request->content_length, std::move(early_body), deadline, &request->body);
}

Status ReadHttpRequest(int fd, Deadline deadline, HttpRequest* request) {
  std::string early_body;
  CONDUIT_RETURN_IF_ERROR(ReadHttpRequestHead(fd, deadline, request, &early_body));
  return ReadHttpRequestBody(fd, deadline, std::move(early_body), request);
}

Status WriteHttpResponse(int fd, const HttpResponse& response, Deadline deadline, bool send_body) {
  std::string head = "HTTP/1.1 " + std::to_string(response.status) + " " + HttpReason(response.status) +
                     "\r\nContent-Type: " + response.content_type +
                     "\r\nContent-Length: " + std::to_string(response.body.size()) + "\r\nConnection: close\r\n";
  for (const auto& [name, value] : response.headers) head += name + ": " + value + "\r\n";
  head += "\r\n";
  iovec iov[2] = {{head.data(), head.size()}, {const_cast<char*>(response.body.data()), response.body.size()}};
  return WriteFullV(fd, iov, send_body ? 2 : 1, deadline);
}

Status WriteHttpRequest(int fd, std::string_view method, std::string_view target, std::string_view body,
                        Deadline deadline) {
  std::string head = std::string(method) + " " + std::string(target) +
                     " HTTP/1.1\r\nHost: conduitd\r\nContent-Type: application/json\r\nContent-Length: " +
                     std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n";
  iovec iov[2] = {{head.data(), head.size()}, {const_cast<char*>(body.data()), body.size()}};
  return WriteFullV(fd, iov, 2, deadline);
}

Status ReadHttpResponse(int fd, Deadline deadline, HttpResponse* response) {
  *response = HttpResponse();
  std::string head, rest;
  CONDUIT_RETURN_IF_ERROR(ReadHead(fd, deadline, &head, &rest));
  size_t eol = head.find("\r\n");
  std::string_view start = std::string_view(head).substr(0, eol);
  if (start.substr(0, 5) != "HTTP/" || start.size() < 12) return InvalidArgument("malformed HTTP status line");
  response->status = atoi(std::string(start.substr(9, 3)).c_str());
  if (eol != std::string::npos) {
    CONDUIT_RETURN_IF_ERROR(ParseHeaderLines(std::string_view(head).substr(eol + 2), &response->headers));
  }
  if (const std::string* ct = FindField(response->headers, "content-type"); ct != nullptr) response->content_type = *ct;
  size_t length = 0;
  CONDUIT_RETURN_IF_ERROR(BodyLength(response->headers, &length));
  return ReadBody(fd, length, std::move(rest), deadline, &response->body);
}

const char* HttpReason(int status) {
  switch (status) {
    case 200: return "OK";
    case 201: return "Created";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 413: return "Payload Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Unknown";
  }
}

}  // namespace conduit
