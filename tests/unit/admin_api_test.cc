// The admin API's pieces without a daemon: HTTP over a socketpair, route matching and
// access control, the server's order of checks (caller before body), its connection caps,
// and the metrics histogram.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <chrono>
#include <cmath>
#include <thread>

#include "admin/admin_api.h"
#include "admin/admin_server.h"
#include "admin/connection_slots.h"
#include "admin/http.h"
#include "common/fd_io.h"

namespace conduit {
namespace {

struct Pair {
  UniqueFd a, b;
  Pair() {
    int fds[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    a.reset(fds[0]);
    b.reset(fds[1]);
  }
};

Status ParseRaw(const std::string& raw, HttpRequest* req) {
  Pair p;
  EXPECT_TRUE(WriteFull(p.a.get(), raw.data(), raw.size(), Deadline::AfterMs(1000)).ok());
  shutdown(p.a.get(), SHUT_WR);
  return ReadHttpRequest(p.b.get(), Deadline::AfterMs(1000), req);
}

TEST(HttpTest, RequestAndResponseRoundTrip) {
  Pair p;
  std::thread client([&] {
    ASSERT_TRUE(WriteHttpRequest(p.a.get(), "PUT", "/v1/policies/x%20y?limit=5&flag", R"({"a":1})",
                                 Deadline::AfterMs(1000)).ok());
  });
  HttpRequest req;
  ASSERT_TRUE(ReadHttpRequest(p.b.get(), Deadline::AfterMs(1000), &req).ok());
  client.join();
  EXPECT_EQ(req.method, "PUT");
  EXPECT_EQ(req.path, "/v1/policies/x y");
  ASSERT_NE(req.Query("limit"), nullptr);
  EXPECT_EQ(*req.Query("limit"), "5");
  ASSERT_NE(req.Query("flag"), nullptr);
  EXPECT_EQ(req.body, R"({"a":1})");
  ASSERT_NE(req.Header("content-length"), nullptr);

  HttpResponse out;
  out.status = 403;
  out.body = "denied";
  ASSERT_TRUE(WriteHttpResponse(p.b.get(), out, Deadline::AfterMs(1000)).ok());
  HttpResponse in;
  ASSERT_TRUE(ReadHttpResponse(p.a.get(), Deadline::AfterMs(1000), &in).ok());
  EXPECT_EQ(in.status, 403);
  EXPECT_EQ(in.body, "denied");
}

TEST(HttpTest, RejectsMalformedRequests) {
  HttpRequest req;
  EXPECT_FALSE(ParseRaw("GARBAGE\r\n\r\n", &req).ok());
  EXPECT_FALSE(ParseRaw("GET /x HTTP/2\r\n\r\n", &req).ok());
  EXPECT_FALSE(ParseRaw("GET x HTTP/1.1\r\n\r\n", &req).ok());
  EXPECT_FALSE(ParseRaw("GET /x HTTP/1.1\r\nno colon\r\n\r\n", &req).ok());
  EXPECT_FALSE(ParseRaw("POST /x HTTP/1.1\r\nContent-Length: abc\r\n\r\n", &req).ok());
  EXPECT_FALSE(ParseRaw("POST /x HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n", &req).ok());
  EXPECT_FALSE(ParseRaw("POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", &req).ok());
  EXPECT_FALSE(ParseRaw("POST /x HTTP/1.1\r\nContent-Length: 10\r\n\r\nshort", &req).ok());
  EXPECT_FALSE(ParseRaw("GET /x HTTP/1.1\r\nX: " + std::string(kMaxHttpHeaderBytes + 10, 'a'), &req).ok());
  EXPECT_TRUE(ParseRaw("GET /ok HTTP/1.1\r\nHost: h\r\n\r\n", &req).ok());
}

TEST(HttpTest, ParsesFromBytesWithStrictFields) {
  HttpRequest req;
  ASSERT_TRUE(ParseHttpRequest("PUT /v1/x?a=1 HTTP/1.1\r\nContent-Length: 2\r\nX-Y:  z \r\n\r\n{}", &req).ok());
  EXPECT_EQ(req.method, "PUT");
  EXPECT_EQ(req.path, "/v1/x");
  EXPECT_EQ(req.content_length, 2u);
  EXPECT_EQ(req.body, "{}");
  ASSERT_NE(req.Header("x-y"), nullptr);
  EXPECT_EQ(*req.Header("x-y"), "z");
  ASSERT_TRUE(ParseHttpRequestHead("GET /v1 HTTP/1.0", &req).ok());
  EXPECT_EQ(req.content_length, 0u);

  const char* bad[] = {
      "PUT /x HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n{",  // given twice
      "PUT /x HTTP/1.1\r\nContent-Length: +1\r\n\r\n{",
      "PUT /x HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n",
      "PUT /x HTTP/1.1\r\nContent-Length: 3\r\n\r\n{}",      // shorter than announced
      "PUT /x HTTP/1.1\r\nContent-Length: 1\r\n\r\n{}",      // longer
      "G{T /x HTTP/1.1\r\n\r\n",                               // method not a token
      "GET /x\x01y HTTP/1.1\r\n\r\n",                           // control byte in the target
      "GET /x HTTP/1.1\r\nBad Name: v\r\n\r\n",
      "GET /x HTTP/1.1\r\n folded: v\r\n\r\n",
      "GET /x HTTP/1.1\r\nX: a\rb\r\n\r\n",                     // bare CR in a value
      "GET /x HTTP/1.1\r\nX: v\r\n",                             // head never ends
  };
  for (const char* text : bad) EXPECT_FALSE(ParseHttpRequest(text, &req).ok()) << "accepted: " << text;
  std::string huge = "GET /x HTTP/1.1\r\nX: " + std::string(kMaxHttpHeaderBytes, 'a') + "\r\n\r\n";
  EXPECT_FALSE(ParseHttpRequest(huge, &req).ok());
}

TEST(HttpTest, PercentCoding) {
  EXPECT_EQ(PercentDecode("a%2Fb%20c+d"), "a/b c+d");
  EXPECT_EQ(PercentDecode("a+b", true), "a b");
  EXPECT_EQ(PercentDecode("bad%zz%4"), "bad%zz%4");
  EXPECT_EQ(PercentEncode("a b/c?"), "a%20b/c%3F");
}

std::string ErrorText(const AdminReply& r) { return r.body.Dump(); }

void AddThings(AdminApi& api) {
  api.Route("GET", "/v1/things/{id}", AdminAccess::kRead, [](const AdminRequest& r) {
    Json b = Json::Object();
    b["id"] = r.params.at("id");
    return AdminReply::Ok(b);
  });
  api.Route("PUT", "/v1/things/{id}", AdminAccess::kOperator,
            [](const AdminRequest&) { return AdminReply::Ok(Json::Object()); });
}

TEST(AdminApiTest, RoutesBindParameters) {
  AdminApi api;
  AddThings(api);
  AdminRequest req;
  req.method = "GET";
  req.path = "/v1/things/42/";
  AdminReply r = api.Dispatch(req, false);
  EXPECT_EQ(r.http_status, 200);
  EXPECT_EQ(r.body.find("id")->as_string(), "42");
}

TEST(AdminApiTest, UnknownPathWrongMethodAndNonOperator) {
  AdminApi api;
  AddThings(api);
  AdminRequest req;
  req.method = "GET";
  req.path = "/v1/nothing";
  EXPECT_EQ(api.Dispatch(req, true).http_status, 404);
  req.method = "DELETE";
  req.path = "/v1/things/1";
  EXPECT_EQ(api.Dispatch(req, true).http_status, 405);
  req.method = "PUT";
  AdminReply denied = api.Dispatch(req, false);
  EXPECT_EQ(denied.http_status, 403);
  EXPECT_EQ(denied.body.find("error")->find("status")->as_string(), "PERMISSION_DENIED");
  EXPECT_EQ(api.Dispatch(req, true).http_status, 200);
}

TEST(AdminApiTest, AdmitDecidesFromTheHeadAlone) {
  AdminApi api;
  AddThings(api);
  api.Route("POST", "/v1/things/{id}/poke", AdminAccess::kOperator, AdminBody::kNone,
            [](const AdminRequest&) { return AdminReply::Ok(Json::Object()); });
  ProgramCredentials reader{100, 4242, 4242};
  AdminCall call;
  AdminReply refusal;
  EXPECT_TRUE(api.Admit("PUT", "/v1/things/7", 1 << 20, reader, true, &call, &refusal));
  EXPECT_EQ(call.body, AdminBody::kJson);
  EXPECT_EQ(call.params.at("id"), "7");
  EXPECT_FALSE(api.Admit("PUT", "/v1/things/7", 1 << 20, reader, false, &call, &refusal));
  EXPECT_EQ(refusal.http_status, 403);
  EXPECT_NE(ErrorText(refusal).find("caller uid 4242"), std::string::npos) << ErrorText(refusal);
  // Routes that take no body refuse one: GET and DELETE by default, others when declared.
  EXPECT_FALSE(api.Admit("GET", "/v1/things/7", 5, reader, false, &call, &refusal));
  EXPECT_EQ(refusal.http_status, 400);
  EXPECT_NE(ErrorText(refusal).find("takes no request body"), std::string::npos) << ErrorText(refusal);
  EXPECT_TRUE(api.Admit("GET", "/v1/things/7", 0, reader, false, &call, &refusal));
  EXPECT_FALSE(api.Admit("POST", "/v1/things/7/poke", 2, reader, true, &call, &refusal));
  EXPECT_EQ(refusal.http_status, 400);
  EXPECT_TRUE(api.Admit("POST", "/v1/things/7/poke", 0, reader, true, &call, &refusal));
}

// One request through AdminServer::ServeConnection from a caller with the given uid (the
// accept loop would take it from SO_PEERCRED); returns the raw answer and how long it took.
struct Exchange {
  std::string answer;
  double seconds = 0;
};

Exchange ServeOne(const AdminApi& api, int uid, const std::string& request, bool close_after = true,
                  AdminServerOptions options = {}) {
  AdminServer server(&api, options);
  Pair p;
  // MSG_NOSIGNAL: the server may close before reading everything.
  (void)!send(p.a.get(), request.data(), request.size(), MSG_NOSIGNAL);
  if (close_after) shutdown(p.a.get(), SHUT_WR);
  const auto start = std::chrono::steady_clock::now();
  std::thread serve([&] { server.ServeConnection(std::move(p.b), ProgramCredentials{1234, uid, uid}); });
  Exchange out;
  char buf[4096];
  for (ssize_t n; (n = read(p.a.get(), buf, sizeof(buf))) > 0;) out.answer.append(buf, static_cast<size_t>(n));
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  serve.join();
  return out;
}

void AddCounting(AdminApi& api, int* calls) {
  api.Route("PUT", "/v1/things/{id}", AdminAccess::kOperator, [calls](const AdminRequest& r) {
    ++*calls;
    Json b = Json::Object();
    b["got"] = r.body;
    return AdminReply::Ok(b);
  });
  api.Route("GET", "/v1/things", AdminAccess::kRead, [calls](const AdminRequest&) {
    ++*calls;
    return AdminReply::Ok(Json::Object());
  });
}

TEST(AdminServerTest, ReadOnlyCallerIsRefusedBeforeTheBodyIsParsed) {
  int calls = 0;
  AdminApi api;
  AddCounting(api, &calls);
  const std::string malformed = "PUT /v1/things/1 HTTP/1.1\r\nContent-Length: 5\r\n\r\n{bad}";
  // A read-only caller's malformed body: 403 (refused from the head), not 400 (parsed).
  Exchange reader = ServeOne(api, 4242, malformed);
  EXPECT_NE(reader.answer.find("HTTP/1.1 403"), std::string::npos) << reader.answer;
  EXPECT_NE(reader.answer.find("PERMISSION_DENIED"), std::string::npos) << reader.answer;
  // The operator gets the parser's verdict.
  Exchange op = ServeOne(api, 0, malformed);
  EXPECT_NE(op.answer.find("HTTP/1.1 400"), std::string::npos) << op.answer;
  EXPECT_NE(op.answer.find("invalid JSON"), std::string::npos) << op.answer;
  EXPECT_EQ(calls, 0);
  Exchange good = ServeOne(api, 0, "PUT /v1/things/1 HTTP/1.1\r\nContent-Length: 7\r\n\r\n{\"a\":1}");
  EXPECT_NE(good.answer.find("HTTP/1.1 200"), std::string::npos) << good.answer;
  EXPECT_NE(good.answer.find("\"a\": 1"), std::string::npos) << good.answer;
  EXPECT_EQ(calls, 1);
}

TEST(AdminServerTest, BodiesAreNotAwaitedFromRefusedCallers) {
  int calls = 0;
  AdminApi api;
  AddCounting(api, &calls);
  AdminServerOptions slow;
  slow.body_timeout_ms = 20000;  // waiting for the body would show
  // 16 MiB announced, nothing sent, connection kept open: answered at once.
  const std::string big = "PUT /v1/things/1 HTTP/1.1\r\nContent-Length: 16000000\r\n\r\n";
  Exchange reader = ServeOne(api, 4242, big, /*close_after=*/false, slow);
  EXPECT_NE(reader.answer.find("HTTP/1.1 403"), std::string::npos) << reader.answer;
  EXPECT_LT(reader.seconds, 5.0);
  Exchange get = ServeOne(api, 4242, "GET /v1/things HTTP/1.1\r\nContent-Length: 1000\r\n\r\n", false, slow);
  EXPECT_NE(get.answer.find("HTTP/1.1 400"), std::string::npos) << get.answer;
  EXPECT_NE(get.answer.find("takes no request body"), std::string::npos) << get.answer;
  EXPECT_LT(get.seconds, 5.0);
  EXPECT_EQ(calls, 0);
}

TEST(AdminServerTest, SlowCallersTimeOut) {
  int calls = 0;
  AdminApi api;
  AddCounting(api, &calls);
  AdminServerOptions quick;
  quick.head_timeout_ms = 200;
  quick.body_timeout_ms = 300;
  Exchange head = ServeOne(api, 4242, "GET /v1/thi", /*close_after=*/false, quick);
  EXPECT_NE(head.answer.find("HTTP/1.1 408"), std::string::npos) << head.answer;
  EXPECT_GE(head.seconds, 0.15);
  EXPECT_LT(head.seconds, 5.0);
  Exchange body = ServeOne(api, 0, "PUT /v1/things/1 HTTP/1.1\r\nContent-Length: 10\r\n\r\n{", false, quick);
  EXPECT_NE(body.answer.find("HTTP/1.1 408"), std::string::npos) << body.answer;
  EXPECT_NE(body.answer.find("did not arrive within 300 ms"), std::string::npos) << body.answer;
  EXPECT_LT(body.seconds, 5.0);
  EXPECT_EQ(calls, 0);
}

TEST(ConnectionSlotsTest, OperatorKeepsReservedSlots) {
  ConnectionSlots slots(ConnectionLimits{10, 4, 3});
  std::string why;
  // One uid: at most 3.
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(slots.TryAcquire(1000, false, &why));
  EXPECT_FALSE(slots.TryAcquire(1000, false, &why));
  EXPECT_NE(why.find("uid 1000 already holds 3"), std::string::npos) << why;
  // Other uids together: at most 10 - 4 = 6.
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(slots.TryAcquire(1001, false, &why));
  EXPECT_FALSE(slots.TryAcquire(1002, false, &why));
  EXPECT_NE(why.find("kept for the operator"), std::string::npos) << why;
  // The operator gets the reserved 4, then nothing more.
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(slots.TryAcquire(0, true, &why));
  EXPECT_FALSE(slots.TryAcquire(0, true, &why));
  EXPECT_EQ(slots.in_use(), 10);
  slots.Release(1000, false);
  EXPECT_TRUE(slots.TryAcquire(1000, false, &why));
  slots.Release(0, true);
  EXPECT_FALSE(slots.TryAcquire(1002, false, &why)) << "a freed operator slot stays reserved";
  EXPECT_TRUE(slots.TryAcquire(0, true, &why));
}

TEST(MetricsTest, HistogramPercentilesAndExposition) {
  LatencyHistogram h;
  for (int i = 1; i <= 1000; ++i) h.Observe(i);  // 1..1000 us
  auto s = h.Read();
  EXPECT_EQ(s.count, 1000u);
  EXPECT_NEAR(s.sum_us, 500500, 1);
  // Buckets are 2^(1/4) wide: estimates within ~19%.
  EXPECT_NEAR(s.Percentile(0.5), 500, 500 * 0.19);
  EXPECT_NEAR(s.Percentile(0.99), 990, 990 * 0.19);
  MetricsWriter w;
  w.Family("x_seconds", "histogram", "test");
  w.Histogram("x_seconds", {{"op", "a\"b"}}, s);
  const std::string& t = w.text();
  EXPECT_NE(t.find("x_seconds_bucket{op=\"a\\\"b\",le=\"+Inf\"} 1000"), std::string::npos) << t;
  EXPECT_NE(t.find("x_seconds_bucket{op=\"a\\\"b\",le=\"0.000512\"} 512"), std::string::npos) << t;
  EXPECT_NE(t.find("x_seconds_count{op=\"a\\\"b\"} 1000"), std::string::npos) << t;
}

}  // namespace
}  // namespace conduit
