// gRPC's own interop suite under the preload: the C++ interop client and server of the gRPC
// release Debian ships (test/cpp/interop, built unmodified by interop/build_interop.sh)
// run every test case the client has for insecure channels, once over insecure channels
// and once over TLS (--use_tls with gRPC's test CA and server certificate, the name
// checked against foo.test.google.fr as the test provider overrides it), each
//
//   - between two hosts, both programs preloaded (carried by the two conduitds),
//   - within one host, both preloaded (one conduitd),
//   - in fallback: preloaded, but no daemon to talk to (native gRPC under the shim),
//   - a plain client (no preload) of the managed server, which gRPC still serves natively
//     on its port beside conduitd (the gradual rollout).
//
// Each case is one run of interop_client, which asserts on everything it checks (status,
// payloads, metadata echo, compression flags seen by the inspectors, cancellation,
// deadlines) and exits non-zero on the first failure. Cases run several at a time, the
// eight configurations at once, so the suite takes as long as its slowest case
// (slow_consumer: 40 s by design). A second test shows TLS that native gRPC refuses
// (roots that do not hold the server's CA, TLS to an insecure port) refused alike.
#include <gtest/gtest.h>

#include <deque>
#include <thread>

#include "greeter_rig.h"
#include "integration_env.h"

namespace conduit::it {
namespace {

constexpr int kManagedPort = 50081;
constexpr int kFallbackPort = 50082;
constexpr int kTlsManagedPort = 50083;
constexpr int kTlsFallbackPort = 50084;
constexpr const char* kNoDaemon = "CONDUIT_SOCKET=/nonexistent/conduitd.sock";

// Every case of interop_client's --test_case for an insecure channel (client.cc of 1.51),
// which it also runs over TLS; its TLS-only cases (compute_engine_creds, jwt_token_creds,
// oauth2_auth_token, per_rpc_creds) need Google's credentials and servers.
const std::vector<std::string>& Cases() {
  static const std::vector<std::string> cases = {
      "slow_consumer",  // first: the longest, so the others run beside it
      "empty_unary", "large_unary", "server_compressed_unary", "client_compressed_unary", "client_streaming",
      "server_streaming", "server_compressed_streaming", "client_compressed_streaming", "half_duplex",
      "ping_pong", "cancel_after_begin", "cancel_after_first_response", "timeout_on_sleeping_server",
      "empty_stream", "pick_first_unary", "status_code_and_message", "special_status_message",
      "custom_metadata", "unimplemented_method", "unimplemented_service", "channel_soak", "rpc_soak",
      "long_lived_channel"};
  return cases;
}

std::string InteropPath(const std::string& name) { return std::string(INTEROP_DIR) + "/" + name; }

struct Configuration {
  enum Client {
    kManaged,   // preloaded; its channel must be carried by conduitd
    kFallback,  // preloaded without a daemon; its channel must be native
    kPlain,     // no preload at all
  };
  std::string name;
  int client_host;
  std::string server_host;  // as the client names it
  int port;
  Client client;
  bool tls = false;
};

struct Job {
  const Configuration* config;
  std::string test_case;
  Subprocess* process = nullptr;
  std::chrono::steady_clock::time_point started{};
};

class RpcInteropTest : public SharedClusterTest<RpcInteropTest> {
 protected:
  static void SetUpTestSuite() {
    ClusterConfig c;
    c.prefix = "ri";
    c.subnet = "10.231.45";
    c.hosts = 2;
    StartSuite(c, [](GreeterRig&, std::string* error) {
      return StartServer(kManagedPort, {}, false, "is served through conduitd", error) &&
             StartServer(kFallbackPort, {kNoDaemon}, false, "uses native gRPC", error) &&
             StartServer(kTlsManagedPort, {}, true, "is served through conduitd with TLS", error) &&
             StartServer(kTlsFallbackPort, {kNoDaemon}, true, "uses native gRPC", error);
    });
  }

  // interop_server on host 1, preloaded; waits for the shim's line saying how it serves.
  static bool StartServer(int port, std::vector<std::string> env, bool tls, const std::string& says,
                          std::string* error) {
    Subprocess& p = suite_.cluster->Launch(
        1, "interop_server",
        {InteropPath("interop_server"), "--port=" + std::to_string(port), tls ? "--use_tls=true" : "--use_tls=false"},
        GreeterRig::ProgramEnv(std::move(env), /*preload=*/true));
    if (!Cluster::WaitForOutput(p, says, std::chrono::seconds(20))) {
      *error = "interop_server on port " + std::to_string(port) + " did not say '" + says + "': " + p.Output();
      return false;
    }
    return true;
  }

  // `tls_args`: what TLS the client uses (none for an insecure configuration).
  Subprocess& StartClient(const Configuration& c, const std::string& test_case,
                          std::vector<std::string> tls_args = {}) {
    std::vector<std::string> env;
    if (c.client == Configuration::kFallback) env.push_back(kNoDaemon);
    std::vector<std::string> argv = {InteropPath("interop_client"), "--server_host=" + c.server_host,
                                     "--server_port=" + std::to_string(c.port), "--test_case=" + test_case,
                                     // The soak cases: a bounded number of calls, each allowed a second
                                     // (the default of 0 ms fails any call slower than 1 ms, native or not).
                                     "--soak_iterations=10", "--soak_overall_timeout_seconds=60",
                                     "--soak_per_iteration_max_acceptable_latency_ms=1000", "--iteration_interval=1"};
    // custom_credentials_type too: pick_first_unary makes its channel from that flag only.
    if (c.tls && tls_args.empty()) tls_args = {"--use_tls=true", "--use_test_ca=true", "--custom_credentials_type=ssl"};
    argv.insert(argv.end(), tls_args.begin(), tls_args.end());
    return cluster_->Launch(c.client_host, "interop_client " + c.name + " " + test_case, argv,
                            GreeterRig::ProgramEnv(env, /*preload=*/c.client != Configuration::kPlain));
  }

  // Waits until the server answers an empty_unary (it may log before it listens).
  void WaitUntilServing(const Configuration& c) {
    for (int attempt = 0; attempt < 40; ++attempt) {
      Subprocess& p = StartClient(c, "empty_unary");
      if (p.Wait(std::chrono::seconds(20)) && p.exit_code() == 0) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    FAIL() << c.name << ": the interop server never answered\n" << cluster_->Describe();
  }
};

TEST_F(RpcInteropTest, EveryCaseInsecureAndTlsCrossHostSameHostFallbackAndPlainClient) {
  const std::vector<Configuration> configs = {
      {"cross-host", 0, cluster_->Ip(1), kManagedPort, Configuration::kManaged},
      {"same-host", 1, "localhost", kManagedPort, Configuration::kManaged},
      {"fallback", 0, cluster_->Ip(1), kFallbackPort, Configuration::kFallback},
      {"plain-client", 0, cluster_->Ip(1), kManagedPort, Configuration::kPlain},
      {"tls-cross-host", 0, cluster_->Ip(1), kTlsManagedPort, Configuration::kManaged, true},
      {"tls-same-host", 1, "localhost", kTlsManagedPort, Configuration::kManaged, true},
      {"tls-fallback", 0, cluster_->Ip(1), kTlsFallbackPort, Configuration::kFallback, true},
      {"tls-plain-client", 0, cluster_->Ip(1), kTlsManagedPort, Configuration::kPlain, true},
  };
  for (const Configuration& c : configs) WaitUntilServing(c);
  if (HasFatalFailure()) return;

  std::deque<Job> queue;
  for (const std::string& test_case : Cases()) {
    for (const Configuration& c : configs) queue.push_back(Job{&c, test_case});
  }
  constexpr size_t kAtOnce = 8;
  constexpr auto kCaseLimit = std::chrono::seconds(120);
  std::vector<Job> running, done;
  while (!queue.empty() || !running.empty()) {
    while (running.size() < kAtOnce && !queue.empty()) {
      Job j = queue.front();
      queue.pop_front();
      j.process = &StartClient(*j.config, j.test_case);
      j.started = std::chrono::steady_clock::now();
      running.push_back(j);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    for (auto it = running.begin(); it != running.end();) {
      // Each case is bounded: a hung one is killed (Wait's timeout) and fails.
      bool over = std::chrono::steady_clock::now() - it->started > kCaseLimit;
      if (it->process->Poll() || (over && !it->process->Wait(std::chrono::milliseconds(1)))) {
        done.push_back(*it);
        it = running.erase(it);
      } else {
        ++it;
      }
    }
  }

  int passed = 0;
  for (const Job& j : done) {
    std::string output = j.process->Output();
    bool ok = j.process->exit_code() == 0;
    EXPECT_TRUE(ok) << j.config->name << " " << j.test_case << ": exit " << j.process->exit_code()
                    << (j.process->timed_out() ? " (timed out)" : "") << "\n" << output;
    if (j.config->client != Configuration::kPlain) {
      const char* expect = j.config->client != Configuration::kManaged ? "uses native gRPC"
                           : j.config->tls                             ? "is carried by conduitd (TLS)"
                                                                       : "is carried by conduitd";
      EXPECT_NE(output.find(expect), std::string::npos)
          << j.config->name << " " << j.test_case << ": the channel was not what the configuration needs ('"
          << expect << "'):\n" << output;
    }
    if (ok) ++passed;
  }
  std::printf("interop: %d of %zu case runs passed (%zu cases x %zu configurations)\n", passed, done.size(),
              Cases().size(), configs.size());
}

// What native gRPC refuses over TLS, the preload refuses alike: the daemon's handshake fails,
// the channel stays native (with the reason in its log line) and native gRPC fails the call
// as it would have. Roots without the test CA (gRPC's default roots), and TLS to a port that
// serves without it.
TEST_F(RpcInteropTest, TlsThatNativeGrpcRefusesIsRefusedAlike) {
  struct Refusal {
    Configuration config;
    std::vector<std::string> tls_args;
    std::string managed_says;  // in the preloaded client's log
  };
  const std::vector<Refusal> refusals = {
      {{"untrusted-cross-host", 0, cluster_->Ip(1), kTlsManagedPort, Configuration::kManaged, true},
       {"--use_tls=true", "--use_test_ca=false", "--server_host_override=foo.test.google.fr"},
       "certificate"},
      {{"untrusted-same-host", 1, "localhost", kTlsManagedPort, Configuration::kManaged, true},
       {"--use_tls=true", "--use_test_ca=false", "--server_host_override=foo.test.google.fr"},
       "certificate"},
      {{"tls-to-insecure", 0, cluster_->Ip(1), kManagedPort, Configuration::kManaged, true},
       {"--use_tls=true", "--use_test_ca=true"},
       "without TLS"},
      {{"insecure-to-tls", 0, cluster_->Ip(1), kTlsManagedPort, Configuration::kManaged, false},
       {},
       "serves TLS"},
  };
  for (const Refusal& r : refusals) {
    for (bool preload : {true, false}) {
      Configuration c = r.config;
      if (!preload) c.client = Configuration::kPlain;
      Subprocess& p = StartClient(c, "empty_unary", r.tls_args);
      ASSERT_TRUE(p.Wait(std::chrono::seconds(60))) << c.name << ": hung\n" << p.Output();
      EXPECT_NE(p.exit_code(), 0) << c.name << (preload ? " (preloaded)" : " (plain)") << ": the call passed\n"
                                  << p.Output();
      if (preload) {
        EXPECT_NE(p.Output().find("uses native gRPC"), std::string::npos) << c.name << "\n" << p.Output();
        EXPECT_NE(p.Output().find(r.managed_says), std::string::npos) << c.name << "\n" << p.Output();
      }
    }
  }
}

}  // namespace
}  // namespace conduit::it
