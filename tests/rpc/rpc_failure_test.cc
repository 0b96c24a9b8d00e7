// Failures around managed gRPC calls: no daemon (the program runs natively), a daemon
// killed under a call (clear UNAVAILABLE, no hang, service back when the daemon is),
// programs dying mid-call, a graceful server shutdown under native and managed calls, and
// malformed frames between daemons.
#include <gtest/gtest.h>
#include <signal.h>

#include <thread>

#include "greeter_rig.h"
#include "integration_env.h"

namespace conduit::it {
namespace {

constexpr int kPort = 50061;

class RpcFailureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CONDUIT_SKIP_UNLESS_CLUSTER();
    ClusterConfig c;
    c.prefix = "rf";
    c.subnet = "10.231.42";
    c.hosts = 2;
    c.timeout_ms = 5000;
    cluster_ = std::make_unique<Cluster>(c);
    CONDUIT_START_CLUSTER(*cluster_);
    rig_ = std::make_unique<GreeterRig>(cluster_.get());
    std::string error;
    server_ = rig_->StartServer(1, kPort, "sync", /*preload=*/true, &error);
    ASSERT_NE(server_, nullptr) << error;
  }

  ClientRun Call(std::vector<std::string> args) { return rig_->RunClient(0, rig_->Target(1, kPort), args, true); }

  // Calls until one passes (the daemon or server needs a moment to come back).
  // A call carried by conduitd passes within 5 s (a native one, which the server's own
  // listener would also take, does not count).
  bool EventuallyPasses() {
    for (int i = 0; i < 20; ++i) {
      ClientRun run = Call({"--case", "unary"});
      if (run.passed() && run.managed()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    return false;
  }

  std::unique_ptr<Cluster> cluster_;
  std::unique_ptr<GreeterRig> rig_;
  Subprocess* server_ = nullptr;
};

TEST_F(RpcFailureTest, NoDaemonMeansNativeGrpc) {
  std::vector<std::string> env = {"CONDUIT_SOCKET=/nonexistent/conduitd.sock"};
  std::string error;
  Subprocess* native = rig_->StartServer(1, kPort + 1, "sync", /*preload=*/true, &error, env);
  ASSERT_NE(native, nullptr) << error;
  EXPECT_NE(native->Output().find("uses native gRPC"), std::string::npos) << native->Output();
  for (const char* c : {"unary", "server_stream", "client_stream", "bidi"}) {
    ClientRun run = rig_->RunClient(0, rig_->Target(1, kPort + 1), {"--case", c}, /*preload=*/true,
                                    std::chrono::seconds(60), env);
    EXPECT_TRUE(run.passed()) << run.output;
    EXPECT_NE(run.output.find("uses native gRPC: no conduitd"), std::string::npos) << run.output;
  }
}

TEST_F(RpcFailureTest, ServerDaemonKilledUnderACall) {
  Subprocess& slow = rig_->StartClient(0, rig_->Target(1, kPort), {"--case", "unary", "--delay-ms", "20000", "--expect", "14"},
                                       /*preload=*/true);
  ASSERT_TRUE(Cluster::WaitForOutput(slow, "carried by conduitd", std::chrono::seconds(10))) << slow.Output();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  cluster_->KillDaemon(1);
  auto killed = std::chrono::steady_clock::now();
  ASSERT_TRUE(slow.Wait(std::chrono::seconds(10))) << "the client hung after its server's daemon died";
  EXPECT_LT(slow.exit_time() - killed, std::chrono::seconds(3));
  EXPECT_EQ(slow.exit_code(), 0) << slow.Output();
  EXPECT_NE(slow.Output().find("status 14 conduit: lost the link"), std::string::npos) << slow.Output();
  // New calls still succeed while the daemon is gone: the client falls back to native gRPC
  // and reaches the server on its own port, where gRPC listens beside conduitd...
  ClientRun during = Call({"--case", "unary"});
  EXPECT_TRUE(Passed(during));
  EXPECT_FALSE(during.managed()) << during.output;
  EXPECT_LT(during.seconds, 10);
  // ...and the server is served through conduitd again once it is back.
  std::string error;
  ASSERT_TRUE(cluster_->StartDaemon(1, &error)) << error;
  EXPECT_TRUE(EventuallyPasses()) << cluster_->Describe();
}

TEST_F(RpcFailureTest, ClientDaemonKilledUnderACall) {
  Subprocess& slow = rig_->StartClient(0, rig_->Target(1, kPort), {"--case", "unary", "--delay-ms", "20000", "--expect", "14"},
                                       /*preload=*/true);
  ASSERT_TRUE(Cluster::WaitForOutput(slow, "carried by conduitd", std::chrono::seconds(10))) << slow.Output();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  cluster_->KillDaemon(0);
  auto killed = std::chrono::steady_clock::now();
  ASSERT_TRUE(slow.Wait(std::chrono::seconds(10))) << "the client hung after its daemon died";
  EXPECT_LT(slow.exit_time() - killed, std::chrono::seconds(3));
  EXPECT_EQ(slow.exit_code(), 0) << slow.Output();
  EXPECT_NE(slow.Output().find("status 14 conduit: lost contact with conduitd"), std::string::npos) << slow.Output();
  // The server heard its call was abandoned.
  EXPECT_TRUE(Cluster::WaitForOutput(*server_, "was cancelled", std::chrono::seconds(5))) << server_->Output();
  std::string error;
  ASSERT_TRUE(cluster_->StartDaemon(0, &error)) << error;
  EXPECT_TRUE(EventuallyPasses()) << cluster_->Describe();
}

// SIGTERM to the client's daemon (docs/configuration.md, "Stopping"): the call in flight
// ends UNAVAILABLE with the daemon's reason rather than a lost connection, the server hears
// it cancelled, and the daemon exits 0.
TEST_F(RpcFailureTest, ClientDaemonStoppedUnderACall) {
  Subprocess& slow = rig_->StartClient(0, rig_->Target(1, kPort), {"--case", "unary", "--delay-ms", "20000", "--expect", "14"},
                                       /*preload=*/true);
  ASSERT_TRUE(Cluster::WaitForOutput(slow, "carried by conduitd", std::chrono::seconds(10))) << slow.Output();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  cluster_->daemon(0).Kill(SIGTERM);
  auto stopped = std::chrono::steady_clock::now();
  ASSERT_TRUE(slow.Wait(std::chrono::seconds(10))) << "the client hung after its daemon was stopped";
  EXPECT_LT(slow.exit_time() - stopped, std::chrono::seconds(3));
  EXPECT_EQ(slow.exit_code(), 0) << slow.Output();
  EXPECT_NE(slow.Output().find("status 14 conduit: conduitd on"), std::string::npos) << slow.Output();
  EXPECT_NE(slow.Output().find("is shutting down (Terminated)"), std::string::npos) << slow.Output();
  EXPECT_TRUE(Cluster::WaitForOutput(*server_, "was cancelled", std::chrono::seconds(5))) << server_->Output();
  ASSERT_TRUE(cluster_->daemon(0).Wait(std::chrono::seconds(10))) << "conduitd did not exit after SIGTERM";
  EXPECT_EQ(cluster_->daemon(0).exit_code(), 0) << cluster_->daemon(0).Output();
  // The RPC link it had dialed to the server's daemon was closed, so its reader ended.
  EXPECT_NE(cluster_->daemon(0).Output().find("stopped: every connection and loop thread ended"), std::string::npos)
      << cluster_->daemon(0).Output();
  std::string error;
  ASSERT_TRUE(cluster_->StartDaemon(0, &error)) << error;
  EXPECT_TRUE(EventuallyPasses()) << cluster_->Describe();
}

TEST_F(RpcFailureTest, ServerProgramDiesUnderACall) {
  Subprocess& slow = rig_->StartClient(0, rig_->Target(1, kPort), {"--case", "unary", "--delay-ms", "20000", "--expect", "14"},
                                       /*preload=*/true);
  ASSERT_TRUE(Cluster::WaitForOutput(slow, "carried by conduitd", std::chrono::seconds(10))) << slow.Output();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  server_->Kill(SIGKILL);
  ASSERT_TRUE(slow.Wait(std::chrono::seconds(10))) << "the client hung after the server died";
  EXPECT_EQ(slow.exit_code(), 0) << slow.Output();
  EXPECT_TRUE(cluster_->DaemonAlive(0) && cluster_->DaemonAlive(1));
}

TEST_F(RpcFailureTest, ClientProgramDiesUnderACall) {
  Subprocess& slow = rig_->StartClient(0, rig_->Target(1, kPort), {"--case", "unary", "--name", "doomed", "--delay-ms", "20000"},
                                       /*preload=*/true);
  ASSERT_TRUE(Cluster::WaitForOutput(slow, "carried by conduitd", std::chrono::seconds(10))) << slow.Output();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  slow.Kill(SIGKILL);
  EXPECT_TRUE(Cluster::WaitForOutput(*server_, "SayHello doomed was cancelled", std::chrono::seconds(5)))
      << server_->Output();
  EXPECT_TRUE(Passed(Call({"--case", "unary"})));
}

// A graceful Shutdown (SIGTERM: Shutdown with a 2 s deadline) lets the calls in flight
// finish, native and managed alike, and stops both ways in: gRPC's own listener at once,
// conduitd's path too. The async server (whose requests the shim shares between the two
// kinds of call) stops as promptly after serving both.
TEST_F(RpcFailureTest, GracefulShutdownFinishesPlainAndManagedCalls) {
  std::string error;
  Subprocess* async_server = rig_->StartServer(1, kPort + 1, "async", /*preload=*/true, &error);
  ASSERT_NE(async_server, nullptr) << error;
  EXPECT_TRUE(Passed(rig_->RunClient(0, rig_->Target(1, kPort + 1), {"--case", "unary"}, /*preload=*/false)));
  EXPECT_TRUE(Passed(rig_->RunClient(0, rig_->Target(1, kPort + 1), {"--case", "unary"}, /*preload=*/true)));

  Subprocess& plain = rig_->StartClient(0, rig_->Target(1, kPort), {"--case", "unary", "--delay-ms", "1000"},
                                        /*preload=*/false);
  Subprocess& managed = rig_->StartClient(0, rig_->Target(1, kPort), {"--case", "unary", "--delay-ms", "1000"},
                                          /*preload=*/true);
  ASSERT_TRUE(Cluster::WaitForOutput(managed, "carried by conduitd", std::chrono::seconds(10))) << managed.Output();
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  auto stop = std::chrono::steady_clock::now();
  server_->Kill(SIGTERM);
  async_server->Kill(SIGTERM);
  for (Subprocess* p : {&plain, &managed}) {
    ASSERT_TRUE(p->Wait(std::chrono::seconds(10))) << p->Output();
    EXPECT_EQ(p->exit_code(), 0) << "a call in flight did not finish during the graceful shutdown:\n" << p->Output();
  }
  for (Subprocess* server : {server_, async_server}) {
    ASSERT_TRUE(server->Wait(std::chrono::seconds(10))) << "the server did not stop:\n" << server->Output();
    EXPECT_EQ(server->exit_code(), 0) << server->Output();
    EXPECT_NE(server->Output().find("greeter_server stopped"), std::string::npos) << server->Output();
    EXPECT_LT(server->exit_time() - stop, std::chrono::seconds(4)) << server->Output();
  }
  // Nobody listens any more, either way.
  for (bool preload : {false, true}) {
    ClientRun run = rig_->RunClient(0, rig_->Target(1, kPort), {"--case", "unary", "--deadline-ms", "2000", "--expect", "14"},
                                    preload);
    EXPECT_TRUE(Passed(run)) << "preload " << preload;
  }
  EXPECT_TRUE(cluster_->DaemonAlive(0) && cluster_->DaemonAlive(1));
}

// A daemon that takes connections but does not answer (one being replaced, or frozen)
// holds up only the calls that go to it: while a channel waits for its hello, calls from
// the same daemon to another one go on.
TEST_F(RpcFailureTest, AMuteDaemonDelaysOnlyTheCallsToIt) {
  // The mute "daemon": an address of host 1 with a listener on the daemon port that never
  // accepts; it prints "dialed" once a connection waits in its backlog.
  const std::string mute_ip = "10.231.42.200";
  Subprocess& address = cluster_->Launch(1, "mute_address", {"ip", "addr", "replace", mute_ip + "/32", "dev", "lo"});
  ASSERT_TRUE(address.Wait(std::chrono::seconds(10)));
  ASSERT_EQ(address.exit_code(), 0) << address.Output();
  const std::string listener =
      "import select, socket, sys, time\n"
      "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
      "s.bind(('" + mute_ip + "', " + std::to_string(cluster_->config().port) + ")); s.listen(16)\n"
      "print('listening', flush=True)\n"
      "select.select([s], [], [])\n"
      "print('dialed', flush=True)\n"
      "time.sleep(60)\n";
  Subprocess& mute = cluster_->Launch(1, "mute_daemon", {"python3", "-c", listener});
  ASSERT_TRUE(Cluster::WaitForOutput(mute, "listening", std::chrono::seconds(10))) << mute.Output();
  // A program opens a channel to a server behind the mute daemon: its daemon dials it and
  // waits for a hello that does not come (up to its timeout, 5 s).
  Subprocess& stuck = rig_->StartClient(0, mute_ip + ":" + std::to_string(kPort),
                                        {"--case", "unary", "--deadline-ms", "2000"}, /*preload=*/true);
  ASSERT_TRUE(Cluster::WaitForOutput(mute, "dialed", std::chrono::seconds(15))) << mute.Output() << stuck.Output();
  // Meanwhile calls to the live daemon are carried at once, on new channels and old links.
  const auto start = std::chrono::steady_clock::now();
  ClientRun run = Call({"--case", "unary"});
  EXPECT_TRUE(Passed(run));
  EXPECT_TRUE(run.managed()) << run.output;
  EXPECT_FALSE(stuck.Poll()) << "the channel to the mute daemon gave up before the other call was served:\n"
                             << stuck.Output();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(4));
  ASSERT_TRUE(stuck.Wait(std::chrono::seconds(30))) << stuck.Output();
  mute.Kill(SIGKILL);
  EXPECT_TRUE(cluster_->DaemonAlive(0) && cluster_->DaemonAlive(1));
}

TEST_F(RpcFailureTest, MalformedFramesBetweenDaemons) {
  // A call in flight on the real link between the two daemons must not notice.
  Subprocess& inflight = rig_->StartClient(0, rig_->Target(1, kPort), {"--case", "unary", "--delay-ms", "2500"}, true);
  ASSERT_TRUE(Cluster::WaitForOutput(inflight, "carried by conduitd", std::chrono::seconds(10)));
  std::string daemon = cluster_->Ip(1) + ":" + std::to_string(cluster_->config().port);
  struct Case {
    const char* name;
    const char* want;
  };
  for (Case c : {Case{"bad_magic", "closed"}, Case{"bad_version", "answered hello error"},
                 Case{"garbage_call", "closed"}, Case{"unknown_type", "closed"}, Case{"oversized", "closed"},
                 Case{"inline_overrun", "closed"}, Case{"fragment_gap", "closed"},
                 Case{"fragment_past_end", "closed"}, Case{"truncated", "closed"},
                 Case{"unknown_port", "answered status 14"}}) {
    SCOPED_TRACE(c.name);
    Subprocess& raw = cluster_->Launch(0, "rpc_raw_peer",
                                       {Cluster::BinPath("rpc_raw_peer"), "--daemon", daemon, "--case", c.name,
                                        "--port", std::to_string(kPort), "--cluster-key", cluster_->key_path()});
    ASSERT_TRUE(raw.Wait(std::chrono::seconds(15)));
    EXPECT_NE(raw.Output().find(c.want), std::string::npos) << raw.Output();
    ASSERT_TRUE(cluster_->DaemonAlive(1)) << cluster_->Describe();
  }
  ASSERT_TRUE(inflight.Wait(std::chrono::seconds(20)));
  EXPECT_EQ(inflight.exit_code(), 0) << inflight.Output();
  EXPECT_TRUE(Call({"--case", "bidi"}).passed()) << cluster_->Describe();
}

}  // namespace
}  // namespace conduit::it
