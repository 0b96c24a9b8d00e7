// RPC policies set through the daemons' admin sockets while the programs run: access
// control on a request field (client side and server side, nested fields), token-bucket
// rate limits that refuse or delay, small-RPC-first QoS, per-method metrics, and a policy
// added and removed under a running client. The daemons run --rpc-managed-only, as an
// operator who wants every call under policy does: no call reaches a managed server
// around them.
#include <gtest/gtest.h>

#include <cstdlib>
#include <thread>

#include "greeter_rig.h"
#include "integration_env.h"

namespace conduit::it {
namespace {

constexpr int kPort = 50071;

// The number after `key` in `text` ("code0=" -> 12), -1 when absent.
int NumberAfter(const std::string& text, const std::string& key) {
  size_t at = text.find(key);
  return at == std::string::npos ? -1 : atoi(text.c_str() + at + key.size());
}

class RpcPolicyTest : public SharedClusterTest<RpcPolicyTest> {
 protected:
  static void SetUpTestSuite() {
    ClusterConfig c;
    c.prefix = "rp";
    c.subnet = "10.231.43";
    c.hosts = 2;
    c.rate = "200mbit";  // bulk transfers queue on the daemons' link (QoS)
    c.daemon_args = {"--rpc-managed-only"};
    StartSuite(c, [](GreeterRig& rig, std::string* error) {
      return (server_ = rig.StartServer(1, kPort, "sync", /*preload=*/true, error)) != nullptr;
    });
  }
  void TearDown() override {
    if (cluster_ == nullptr) return;
    for (int h : {0, 1}) {
      for (const char* p : {"rpc-acl/deny", "rpc-acl/allow", "rpc-ratelimit/limit"}) Admin(h, {"raw", "DELETE", std::string("/v1/policies/") + p});
      Admin(h, {"raw", "DELETE", "/v1/policies/rpc-qos"});
      Admin(h, {"raw", "DELETE", "/v1/policies/rpc-metrics"});
    }
  }

  // conduitctl against host h's admin socket; returns its exit code, output in *out.
  static int Admin(int h, std::vector<std::string> args, std::string* out = nullptr) {
    std::vector<std::string> argv = {Cluster::ToolPath("conduitctl"), "--socket", cluster_->AdminSocket(h), "--json"};
    argv.insert(argv.end(), args.begin(), args.end());
    std::string ignored;
    return RunCommand(argv, out != nullptr ? out : &ignored);
  }
  static std::string Descriptor() { return Cluster::BinPath("greeter.desc"); }
  static std::string Acl(const std::string& list, const std::string& values, const std::string& extra = "") {
    return "{\"service\":\"conduit.test.Greeter\",\"field\":\"account.user\",\"" + list + "\":[" + values +
           "],\"descriptor_set_file\":\"" + Descriptor() + "\"" + extra + "}";
  }
  inline static Subprocess* server_ = nullptr;

  ClientRun Call(std::vector<std::string> args) { return rig_->RunClient(0, rig_->Target(1, kPort), args, true); }
  // Calls counted by host h's metrics for SayHello on `side`.
  static std::string Methods(int h) {
    std::string out;
    Admin(h, {"raw", "GET", "/v1/rpc/methods"}, &out);
    return out;
  }
};

// With --rpc-managed-only a managed server's port takes calls only through conduitd: a
// client without the preload finds nobody listening there.
TEST_F(RpcPolicyTest, ManagedOnlyKeepsPlainClientsOut) {
  ClientRun run = rig_->RunClient(0, rig_->Target(1, kPort), {"--case", "unary", "--deadline-ms", "2000", "--expect", "14"},
                                  /*preload=*/false);
  EXPECT_TRUE(run.passed()) << run.output;
  EXPECT_TRUE(Passed(Call({"--case", "unary"})));
}

TEST_F(RpcPolicyTest, AclOnARequestFieldAtTheCallersDaemon) {
  std::string out;
  ASSERT_EQ(Admin(1, {"policy", "set", "rpc-metrics", "{}"}), 0);
  ASSERT_EQ(Admin(0, {"policy", "set", "rpc-acl", "deny", Acl("deny", "\"mallory\"")}, &out), 0) << out;
  EXPECT_TRUE(Passed(Call({"--case", "unary", "--user", "alice"})));
  ClientRun denied = Call({"--case", "unary", "--user", "mallory", "--expect", "7"});
  EXPECT_TRUE(denied.passed()) << denied.output;
  EXPECT_NE(denied.output.find("access denied by policy 'deny': account.user = 'mallory'"), std::string::npos)
      << denied.output;
  // A denied request never reached the server: its daemon saw alice's call only.
  EXPECT_NE(Methods(1).find("\"calls\": 1,"), std::string::npos) << Methods(1);
  // Large requests (in shared memory) are read from the daemon's private copy all the same.
  EXPECT_TRUE(Passed(Call({"--case", "unary", "--user", "mallory", "--bytes", "4000000", "--expect", "7"})));
  EXPECT_TRUE(Passed(Call({"--case", "unary", "--user", "alice", "--bytes", "4000000"})));
  // Every message of a stream is checked.
  EXPECT_TRUE(Passed(Call({"--case", "client_stream", "--user", "mallory", "--expect", "7"})));
}

// A compressed request (gzip, end to end between the shims) is read decompressed by the
// policy, and reaches the server still compressed.
TEST_F(RpcPolicyTest, AclReadsCompressedRequests) {
  std::string out;
  ASSERT_EQ(Admin(0, {"policy", "set", "rpc-acl", "deny", Acl("deny", "\"mallory\"")}, &out), 0) << out;
  // A long, repetitive name makes the request worth compressing (gRPC sends a message
  // uncompressed when compressing does not make it smaller).
  std::string name = "inspect-gzip-" + std::string(2000, 'a');
  ClientRun allowed = Call({"--case", "unary", "--user", "alice", "--compress", "gzip", "--name", name});
  EXPECT_TRUE(Passed(allowed));
  std::string seen = server_->Output();
  size_t at = seen.find("server: ping-" + name + " sees ");
  ASSERT_NE(at, std::string::npos) << seen;
  EXPECT_NE(seen.find("encoding=[2]", at), std::string::npos) << "the request did not arrive gzip-compressed:\n"
                                                             << seen.substr(at, 300);
  ClientRun denied = Call({"--case", "unary", "--user", "mallory", "--compress", "gzip", "--name", name, "--expect", "7"});
  EXPECT_TRUE(denied.passed()) << denied.output;
  EXPECT_NE(denied.output.find("access denied by policy 'deny': account.user = 'mallory'"), std::string::npos)
      << denied.output;
  EXPECT_TRUE(Passed(Call({"--case", "unary", "--user", "mallory", "--compress", "deflate", "--name", name,
                           "--expect", "7"})));
}

TEST_F(RpcPolicyTest, AllowListAtTheServersDaemon) {
  std::string out;
  ASSERT_EQ(Admin(1, {"policy", "set", "rpc-acl", "allow", Acl("allow", "\"alice\",\"bob\"", ",\"method\":\"SayHello\",\"side\":\"server\"")}, &out), 0) << out;
  EXPECT_TRUE(Passed(Call({"--case", "unary", "--user", "bob"})));
  ClientRun denied = Call({"--case", "unary", "--user", "eve", "--expect", "7", "--bytes", "2000000"});
  EXPECT_TRUE(denied.passed()) << denied.output;
  EXPECT_NE(denied.output.find("is not allowed"), std::string::npos) << denied.output;
  // The rule names SayHello only.
  EXPECT_TRUE(Passed(Call({"--case", "server_stream", "--user", "eve"})));
}

TEST_F(RpcPolicyTest, BadPoliciesAreRefused) {
  std::string out;
  EXPECT_NE(Admin(0, {"policy", "set", "rpc-acl", "deny", "{\"service\":\"conduit.test.Greeter\",\"field\":\"account.nope\",\"deny\":[],\"descriptor_set_file\":\"" + Descriptor() + "\"}"}, &out), 0);
  EXPECT_NE(out.find("has no field 'nope'"), std::string::npos) << out;
  EXPECT_NE(Admin(0, {"policy", "set", "rpc-acl", "deny", Acl("deny", "\"x\"", ",\"side\":\"sideways\"")}, &out), 0);
  EXPECT_NE(Admin(0, {"policy", "set", "rpc-ratelimit", "limit", "{\"service\":\"conduit.test.Greeter\",\"rate\":-1}"}, &out), 0);
  EXPECT_NE(out.find("\"rate\""), std::string::npos) << out;
  EXPECT_NE(Admin(0, {"policy", "set", "rpc-qos", "{\"small_bytes\":\"big\"}"}, &out), 0);
  EXPECT_TRUE(Passed(Call({"--case", "unary"})));
}

TEST_F(RpcPolicyTest, RateLimitRefusesBeyondTheBucket) {
  std::string out;
  ASSERT_EQ(Admin(0, {"policy", "set", "rpc-ratelimit", "limit",
                      "{\"service\":\"conduit.test.Greeter\",\"method\":\"SayHello\",\"rate\":5,\"burst\":2,\"on_limit\":\"reject\"}"},
                  &out),
            0)
      << out;
  ClientRun run = Call({"--case", "burst", "--count", "40", "--inflight", "8"});
  ASSERT_TRUE(run.passed()) << run.output;
  int passed = NumberAfter(run.output, "code0="), refused = NumberAfter(run.output, "code8=");
  EXPECT_GE(passed, 2) << run.output;
  EXPECT_LE(passed, 10) << "far more calls passed than 2 + 5/s allow: " << run.output;
  EXPECT_EQ(passed + refused, 40) << run.output;
  EXPECT_NE(run.output.find("rate limit 'limit' (5 calls/s) exceeded"), std::string::npos) << run.output;
}

TEST_F(RpcPolicyTest, RateLimitDelaysInsteadWhenAskedTo) {
  std::string out;
  ASSERT_EQ(Admin(0, {"policy", "set", "rpc-ratelimit", "limit",
                      "{\"service\":\"conduit.test.Greeter\",\"rate\":20,\"burst\":1,\"on_limit\":\"wait\",\"max_wait_ms\":5000}"},
                  &out),
            0)
      << out;
  ClientRun run = Call({"--case", "burst", "--count", "21", "--inflight", "21"});
  ASSERT_TRUE(run.passed()) << run.output;
  EXPECT_NE(run.output.find("code0=21"), std::string::npos) << run.output;
  // 20 calls beyond the first wait 50 ms each for their token.
  EXPECT_GE(NumberAfter(run.output, "elapsed_ms "), 800) << run.output;
}

TEST_F(RpcPolicyTest, PolicyAddedAndRemovedUnderARunningClient) {
  Subprocess& loop = rig_->StartClient(0, rig_->Target(1, kPort),
                                       {"--case", "loop", "--count", "80", "--interval-ms", "40", "--user", "carol"}, true);
  ASSERT_TRUE(Cluster::WaitForOutput(loop, "call 5 code 0", std::chrono::seconds(20))) << loop.Output();
  ASSERT_EQ(Admin(0, {"policy", "set", "rpc-acl", "deny", Acl("deny", "\"carol\"")}), 0);
  ASSERT_TRUE(Cluster::WaitForOutput(loop, "code 7", std::chrono::seconds(10))) << loop.Output();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_EQ(Admin(0, {"policy", "rm", "rpc-acl", "deny"}), 0);
  ASSERT_TRUE(loop.Wait(std::chrono::seconds(30)));
  EXPECT_EQ(loop.exit_code(), 0) << loop.Output();
  // The same process saw: allowed, then denied, then allowed again.
  std::string out = loop.Output();
  size_t denied = out.find("code 7");
  ASSERT_NE(denied, std::string::npos);
  EXPECT_NE(out.rfind("code 0", denied), std::string::npos);
  EXPECT_NE(out.find("code 0", out.rfind("code 7")), std::string::npos) << out;
}

// QoS: with a bulk stream queued on the link, small calls' frames go first. The client's
// daemon counts the frames it sent ahead of queued bulk ones: none for the same traffic
// without the policy, some with it. (What that buys in latency is a benchmark's business.)
TEST_F(RpcPolicyTest, SmallRpcsFirstWithBulkTraffic) {
  auto small_first = [] {
    std::string out;
    Admin(0, {"raw", "GET", "/v1/rpc"}, &out);
    return NumberAfter(out, "\"small_first_frames\": ");
  };
  auto traffic = [&] {
    // Small calls for ~2 s; 32 MB of requests (~1.3 s on the shaped link) start among them.
    constexpr int kSmall = 150;
    Subprocess& small = rig_->StartClient(0, rig_->Target(1, kPort),
                                          {"--case", "loop", "--count", std::to_string(kSmall), "--interval-ms", "12"},
                                          true);
    ASSERT_TRUE(Cluster::WaitForOutput(small, "call 2 code 0", std::chrono::seconds(20))) << small.Output();
    EXPECT_TRUE(Passed(Call({"--case", "client_stream", "--count", "8", "--bytes", "4000000"})));
    ASSERT_TRUE(small.Wait(std::chrono::seconds(60)));
    EXPECT_EQ(small.exit_code(), 0) << small.Output();
    std::string out = small.Output();
    int ok = 0;
    for (size_t at = out.find(" code 0 "); at != std::string::npos; at = out.find(" code 0 ", at + 1)) ++ok;
    EXPECT_EQ(ok, kSmall) << out;
  };
  int before = small_first();
  ASSERT_GE(before, 0);
  traffic();
  EXPECT_EQ(small_first(), before) << "frames overtook others without the QoS policy";
  std::string out;
  ASSERT_EQ(Admin(0, {"policy", "set", "rpc-qos", "{\"small_bytes\":4096}"}, &out), 0) << out;
  EXPECT_NE(out.find("\"small_bytes\": 4096"), std::string::npos) << out;
  // Whether a small call's frame meets bulk frames waiting in the queue depends on timing
  // (a sanitizer's slowdown on 2 cores may let the bulk stream drain between two small
  // calls): up to three rounds of the same traffic; without the policy none in one.
  for (int round = 0; round < 3 && small_first() == before; ++round) traffic();
  EXPECT_GT(small_first(), before) << "no small frame went ahead of the bulk stream in three rounds";
}

TEST_F(RpcPolicyTest, PerMethodMetrics) {
  ASSERT_EQ(Admin(0, {"policy", "set", "rpc-metrics", "{}"}), 0);
  EXPECT_TRUE(Passed(Call({"--case", "burst", "--count", "50", "--inflight", "5"})));
  EXPECT_TRUE(Passed(Call({"--case", "unary", "--fail-code", "5", "--expect", "5"})));
  EXPECT_TRUE(Passed(Call({"--case", "server_stream", "--count", "7", "--bytes", "1000"})));
  std::string methods = Methods(0);
  EXPECT_NE(methods.find("\"method\": \"/conduit.test.Greeter/SayHello\""), std::string::npos) << methods;
  EXPECT_NE(methods.find("\"calls\": 51"), std::string::npos) << methods;
  EXPECT_NE(methods.find("\"NOT_FOUND\": 1"), std::string::npos) << methods;
  EXPECT_NE(methods.find("\"response_messages\": 7"), std::string::npos) << methods;
  EXPECT_NE(methods.find("\"p99\""), std::string::npos) << methods;
  std::string prom;
  ASSERT_EQ(Admin(0, {"metrics"}, &prom), 0);
  EXPECT_NE(prom.find("conduit_rpc_calls_total{method=\"/conduit.test.Greeter/SayHello\",side=\"client\",code=\"OK\"} 50"),
            std::string::npos)
      << prom;
  EXPECT_NE(prom.find("conduit_rpc_latency_seconds_bucket"), std::string::npos);
}

// A binary upgrade of the caller's daemon (docs/upgrade.md) keeps its rate limiter's bucket
// (the two calls of the burst spent before the upgrade stay spent in the new process) and
// its per-method metrics (the same counts and histograms afterwards).
// Last in this file: the daemon of host 0 is a new process afterwards.
TEST_F(RpcPolicyTest, RateLimitBucketSurvivesABinaryUpgrade) {
  std::string out;
  ASSERT_EQ(Admin(0, {"policy", "set", "rpc-metrics", "{}"}), 0);
  ASSERT_EQ(Admin(0, {"policy", "set", "rpc-ratelimit", "limit",
                      "{\"service\":\"conduit.test.Greeter\",\"method\":\"SayHello\",\"rate\":0.01,\"burst\":2,"
                      "\"on_limit\":\"reject\"}"},
                  &out),
            0)
      << out;
  EXPECT_TRUE(Passed(Call({"--case", "unary"})));
  EXPECT_TRUE(Passed(Call({"--case", "unary"})));
  const std::string methods = Methods(0);
  EXPECT_NE(methods.find("\"calls\": "), std::string::npos) << methods;
  ASSERT_EQ(Admin(0, {"upgrade"}, &out), 0) << out;
  EXPECT_NE(out.find("\"new_pid\""), std::string::npos) << out;
  EXPECT_EQ(Methods(0), methods) << "the metrics started again";
  ClientRun refused = Call({"--case", "unary", "--expect", "8"});
  EXPECT_TRUE(refused.passed()) << "the new daemon's bucket was full again: " << refused.output;
  EXPECT_NE(refused.output.find("rate limit 'limit' (0.01 calls/s) exceeded"), std::string::npos) << refused.output;
}

}  // namespace
}  // namespace conduit::it
