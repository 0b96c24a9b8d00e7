// GreeterRig: runs the greeter programs on an integration Cluster, with or without
// LD_PRELOAD=libmrpc-grpc.so, and reads what they printed.
#ifndef CONDUIT_TESTS_RPC_GREETER_RIG_H_
#define CONDUIT_TESTS_RPC_GREETER_RIG_H_

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cluster.h"
#include "integration_env.h"

namespace conduit::it {

struct ClientRun {
  int exit_code = -1;
  bool timed_out = false;
  std::string output;
  double seconds = 0;

  bool passed() const { return exit_code == 0 && output.find("PASS ") != std::string::npos; }
  // The code of the first "status <code> ..." line, -1 when none.
  int status() const;
  bool managed() const { return output.find("is carried by conduitd") != std::string::npos; }
};

// EXPECT_TRUE(Passed(run)): a failure shows what the client printed.
inline ::testing::AssertionResult Passed(const ClientRun& run) {
  if (run.passed()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "the client did not pass (exit " << run.exit_code
                                       << (run.timed_out ? ", timed out" : "") << "):\n" << run.output;
}

class GreeterRig {
 public:
  explicit GreeterRig(Cluster* cluster) : cluster_(cluster) {}

  static std::string ShimPath();
  // LD_PRELOAD=... for a preloaded program (the sanitizer runtime first in such builds).
  static std::string PreloadEnv();
  // The environment of a greeter program (the preload, sanitizer options).
  static std::vector<std::string> ProgramEnv(std::vector<std::string> env, bool preload);

  // Starts greeter_server on `host` and waits until it listens; nullptr (with the output
  // in *error) when it does not.
  // `args`: more greeter_server flags (--relay ...).
  Subprocess* StartServer(int host, int port, const std::string& mode, bool preload, std::string* error,
                          std::vector<std::string> env = {}, std::vector<std::string> args = {});
  // The same, listening on `listen` ("127.0.0.1:50071", "[::1]:50071", "10.0.0.2:50071").
  Subprocess* StartServerOn(int host, const std::string& listen, const std::string& mode, bool preload,
                            std::string* error, std::vector<std::string> env = {},
                            std::vector<std::string> args = {});
  // Runs greeter_client on `host` to completion (bounded by `timeout`).
  ClientRun RunClient(int host, const std::string& target, std::vector<std::string> args, bool preload,
                      std::chrono::seconds timeout = std::chrono::seconds(60), std::vector<std::string> env = {});
  // Starts a client and returns at once (for runs that must overlap something).
  Subprocess& StartClient(int host, const std::string& target, std::vector<std::string> args, bool preload,
                          std::vector<std::string> env = {});
  std::string Target(int host, int port) const { return cluster_->Ip(host) + ":" + std::to_string(port); }

 private:
  Cluster* cluster_;
};

// Makes, in `dir` (emptied first), a test CA (ca.pem/.key), a server certificate from it
// for `server_ip` and 127.0.0.1 (server.pem/.key), a client one (client.pem/.key, DNS
// greeter-client), and a rogue CA with a client certificate from it (rogue.pem/.key);
// false with the reason in *error when openssl cannot.
bool MakeTestCertificates(const std::string& dir, const std::string& server_ip, std::string* error);

// A cluster and rig shared by all the tests of a suite (SetUpTestSuite / TearDownTestSuite).
struct SuiteCluster {
  Cluster* cluster = nullptr;
  GreeterRig* rig = nullptr;
  std::string error;

  // Starts the cluster, then the suite's servers; on failure leaves nothing running and
  // the reason in `error`.
  void Start(ClusterConfig config, const std::function<bool(GreeterRig&, std::string*)>& servers);
  void Stop();
};

// A fixture whose tests share one SuiteCluster: the suite's SetUpTestSuite calls
// StartSuite; each test is skipped without namespaces and fails when the start failed.
template <typename Suite>
class SharedClusterTest : public ::testing::Test {
 protected:
  static void StartSuite(ClusterConfig config, const std::function<bool(GreeterRig&, std::string*)>& servers) {
    if (!Cluster::SkipReason().empty()) return;
    suite_.Start(std::move(config), servers);
    cluster_ = suite_.cluster;
    rig_ = suite_.rig;
  }
  static void TearDownTestSuite() {
    suite_.Stop();
    cluster_ = nullptr;
    rig_ = nullptr;
  }
  void SetUp() override {
    CONDUIT_SKIP_UNLESS_CLUSTER();
    ASSERT_NE(suite_.cluster, nullptr) << suite_.error;
  }

  inline static SuiteCluster suite_;
  inline static Cluster* cluster_ = nullptr;
  inline static GreeterRig* rig_ = nullptr;
};

}  // namespace conduit::it

#endif  // CONDUIT_TESTS_RPC_GREETER_RIG_H_
