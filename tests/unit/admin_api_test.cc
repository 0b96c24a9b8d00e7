// The admin API's pieces without a daemon: HTTP over a socketpair, route matching and
// access control, and the metrics histogram.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <cmath>
#include <thread>

#include "admin/admin_api.h"
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

TEST(HttpTest, PercentCoding) {
  EXPECT_EQ(PercentDecode("a%2Fb%20c+d"), "a/b c+d");
  EXPECT_EQ(PercentDecode("a+b", true), "a b");
  EXPECT_EQ(PercentDecode("bad%zz%4"), "bad%zz%4");
  EXPECT_EQ(PercentEncode("a b/c?"), "a%20b/c%3F");
}

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
