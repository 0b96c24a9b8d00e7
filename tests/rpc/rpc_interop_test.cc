// gRPC's own interop suite under the preload: the C++ interop client and server of the gRPC
// release Debian ships (test/cpp/interop, built unmodified by interop/build_interop.sh)
// run every test case the client has for insecure channels
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
// four configurations at once, so the suite takes as long as its slowest case
// (slow_consumer: 40 s by design).
#include <gtest/gtest.h>

#include <deque>
#include <thread>

#include "greeter_rig.h"
#include "integration_env.h"

namespace conduit::it {
namespace {

constexpr int kManagedPort = 50081;
constexpr int kFallbackPort = 50082;
constexpr const char* kNoDaemon = "CONDUIT_SOCKET=/nonexistent/conduitd.sock";

// Every case of interop_client's --test_case for an insecure channel (client.cc of 1.51;
// the TLS-only ones need Google credentials or a TLS channel).
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
      return StartServer(kManagedPort, {}, "is served through conduitd", error) &&
             StartServer(kFallbackPort, {kNoDaemon}, "uses native gRPC", error);
    });
  }

  // interop_server on host 1, preloaded; waits for the shim's line saying how it serves.
  static bool StartServer(int port, std::vector<std::string> env, const std::string& says, std::string* error) {
    Subprocess& p = suite_.cluster->Launch(
        1, "interop_server", {InteropPath("interop_server"), "--port=" + std::to_string(port)},
        GreeterRig::ProgramEnv(std::move(env), /*preload=*/true));
    if (!Cluster::WaitForOutput(p, says, std::chrono::seconds(20))) {
      *error = "interop_server on port " + std::to_string(port) + " did not say '" + says + "': " + p.Output();
      return false;
    }
    return true;
  }

  Subprocess& StartClient(const Configuration& c, const std::string& test_case) {
    std::vector<std::string> env;
    if (c.client == Configuration::kFallback) env.push_back(kNoDaemon);
    return cluster_->Launch(c.client_host, "interop_client " + c.name + " " + test_case,
                            {InteropPath("interop_client"), "--server_host=" + c.server_host,
                             "--server_port=" + std::to_string(c.port), "--test_case=" + test_case,
                             // The soak cases: a bounded number of calls, each allowed a second
                             // (the default of 0 ms fails any call slower than 1 ms, native or not).
                             "--soak_iterations=10", "--soak_overall_timeout_seconds=60",
                             "--soak_per_iteration_max_acceptable_latency_ms=1000", "--iteration_interval=1"},
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

TEST_F(RpcInteropTest, EveryInsecureCaseCrossHostSameHostFallbackAndPlainClient) {
  const std::vector<Configuration> configs = {
      {"cross-host", 0, cluster_->Ip(1), kManagedPort, Configuration::kManaged},
      {"same-host", 1, "localhost", kManagedPort, Configuration::kManaged},
      {"fallback", 0, cluster_->Ip(1), kFallbackPort, Configuration::kFallback},
      {"plain-client", 0, cluster_->Ip(1), kManagedPort, Configuration::kPlain},
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
      const char* expect = j.config->client == Configuration::kManaged ? "is carried by conduitd" : "uses native gRPC";
      EXPECT_NE(output.find(expect), std::string::npos)
          << j.config->name << " " << j.test_case << ": the channel was not what the configuration needs ('"
          << expect << "'):\n" << output;
    }
    if (ok) ++passed;
  }
  std::printf("interop: %d of %zu case runs passed (%zu cases x %zu configurations)\n", passed, done.size(),
              Cases().size(), configs.size());
}

}  // namespace
}  // namespace conduit::it
