// The RPC service's two untrusted edges, with real daemons in network namespaces:
//
//   * a gRPC server's bind address is honoured: bound to loopback it is reachable only from
//     programs of its host (a remote client gets UNAVAILABLE, as natively), bound to one
//     address only through that address, bound to every address from anywhere (control);
//   * the program edge: admission by the executable the kernel names, never the one a
//     Hello claims; a frame stopped half-way is dropped within the frame deadline; a frame
//     announcing 64 MiB costs what arrived, not what was announced;
//   * the peer edge: the same for a raw daemon link, a message larger than gRPC can frame
//     closes the link instead of allocating, announced messages cost what arrived, and
//     incomplete messages beyond the link's budget fail their call.
// After each attack the daemons go on serving real calls.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "greeter_rig.h"
#include "integration_env.h"

namespace conduit::it {
namespace {

constexpr int kLoopbackPort = 50071;  // greeter_server --listen 127.0.0.1:PORT
constexpr int kWildcardPort = 50072;  // --listen 0.0.0.0:PORT
constexpr int kAddressPort = 50073;   // --listen <host 1's address>:PORT
constexpr int kSharedPort = 50074;    // two programs: 127.0.0.1 and host 1's address
constexpr int kFrameBoundMs = 3000;   // the daemons' --timeout-ms, so the frame deadline
constexpr int kSlackMs = 2500;        // scheduling, sanitizers
constexpr const char* kDeniedExe = "rpc_denied_program";
constexpr int kAssemblyBudget = 16 << 20;  // --rpc-link-assembly-bytes

// Resident memory of a process, in KiB (-1 when unreadable).
long RssKb(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return atol(line.c_str() + 6);
  }
  return -1;
}

// N from "closed after N ms" in a raw tool's output, -1 when it did not close.
long ClosedAfterMs(const std::string& output) {
  size_t at = output.find("closed after ");
  return at == std::string::npos ? -1 : atol(output.c_str() + at + 13);
}

class RpcTrustTest : public SharedClusterTest<RpcTrustTest> {
 protected:
  static void SetUpTestSuite() {
    ClusterConfig c;
    c.prefix = "rbd";
    c.subnet = "10.231.47";
    c.hosts = 2;
    c.timeout_ms = kFrameBoundMs;
    // Every address of the host reaches its daemon (the address-bound test dials a second
    // one); programs named rpc_denied_program are refused; a link may assemble 16 MiB of
    // incomplete messages.
    c.daemon_args = {"--listen", "0.0.0.0:" + std::to_string(c.port), "--deny-exe", kDeniedExe,
                     "--rpc-link-assembly-bytes", std::to_string(kAssemblyBudget)};
    StartSuite(c, [](GreeterRig& rig, std::string* error) {
      return rig.StartServerOn(1, "127.0.0.1:" + std::to_string(kLoopbackPort), "sync", true, error) != nullptr &&
             rig.StartServerOn(1, "0.0.0.0:" + std::to_string(kWildcardPort), "sync", true, error) != nullptr &&
             rig.StartServerOn(1, rig.Target(1, kAddressPort), "async", true, error) != nullptr;
    });
  }

  ClientRun Run(int host, const std::string& target, std::vector<std::string> args) {
    return rig_->RunClient(host, target, std::move(args), /*preload=*/true, std::chrono::seconds(30));
  }
  std::string Local(int port) { return "127.0.0.1:" + std::to_string(port); }

  // A managed call that must pass.
  void ExpectManaged(int host, const std::string& target) {
    ClientRun run = Run(host, target, {"--case", "unary"});
    EXPECT_TRUE(run.passed()) << run.output << cluster_->Describe();
    EXPECT_TRUE(run.managed()) << run.output;
  }
  // A call that must end with UNAVAILABLE, as a native client's would; `reason` in the
  // client's output (the shim's log line says why the channel is not carried).
  void ExpectUnavailable(int host, const std::string& target, const std::string& reason) {
    ClientRun run = Run(host, target, {"--case", "unary", "--expect", "14", "--deadline-ms", "5000"});
    EXPECT_TRUE(run.passed()) << run.output;
    EXPECT_FALSE(run.managed()) << run.output;
    EXPECT_NE(run.output.find(reason), std::string::npos) << run.output;
  }

  std::string RawPeer(const std::string& what, int port, std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {Cluster::BinPath("rpc_raw_peer"), "--daemon", cluster_->PeerAddr(1), "--case", what,
                                     "--port", std::to_string(port), "--cluster-key", cluster_->key_path()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    Subprocess& raw = cluster_->Launch(0, "rpc_raw_peer", argv);
    EXPECT_TRUE(raw.Wait(std::chrono::seconds(60))) << what;
    return raw.Output();
  }
  std::string RawProgram(const std::string& path, std::vector<std::string> args) {
    args.insert(args.begin(), path);
    Subprocess& raw = cluster_->Launch(1, "rpc_raw_program", args);
    EXPECT_TRUE(raw.Wait(std::chrono::seconds(30)));
    return raw.Output();
  }

  // The daemons still carry calls, remote and local.
  void ExpectStillServing() {
    ASSERT_TRUE(cluster_->DaemonAlive(0) && cluster_->DaemonAlive(1)) << cluster_->Describe();
    ExpectManaged(0, rig_->Target(1, kWildcardPort));
    ExpectManaged(1, Local(kLoopbackPort));
  }
};

TEST_F(RpcTrustTest, LoopbackBoundServerIsReachableOnlyFromItsHost) {
  ExpectManaged(1, Local(kLoopbackPort));
  ExpectManaged(1, "localhost:" + std::to_string(kLoopbackPort));
  // Another host: refused as a native client would be (nothing listens for it).
  ExpectUnavailable(0, rig_->Target(1, kLoopbackPort), "calls from other hosts cannot reach it");
  // This host, but through its external address: natively refused too.
  ExpectUnavailable(1, rig_->Target(1, kLoopbackPort), "is bound to 127.0.0.1");
  // A daemon that does not probe, or says what it likes, cannot reach it either.
  std::string call = RawPeer("call_port", kLoopbackPort);
  EXPECT_NE(call.find("answered status 14: conduit: port 50071 is bound to 127.0.0.1"), std::string::npos) << call;
  std::string probe = RawPeer("probe_port", kLoopbackPort);
  EXPECT_NE(probe.find("probe served=0"), std::string::npos) << probe;
  EXPECT_NE(probe.find("calls from other hosts cannot reach it"), std::string::npos) << probe;
}

TEST_F(RpcTrustTest, WildcardBoundServerIsReachableFromAnywhere) {
  ExpectManaged(0, rig_->Target(1, kWildcardPort));
  ExpectManaged(1, Local(kWildcardPort));
  ExpectManaged(1, rig_->Target(1, kWildcardPort));
  std::string probe = RawPeer("probe_port", kWildcardPort);
  EXPECT_NE(probe.find("probe served=1"), std::string::npos) << probe;
}

TEST_F(RpcTrustTest, AddressBoundServerIsReachableOnlyThroughThatAddress) {
  ExpectManaged(0, rig_->Target(1, kAddressPort));
  ExpectManaged(1, rig_->Target(1, kAddressPort));
  ExpectUnavailable(1, Local(kAddressPort), "is bound to 10.231.47.2, not to 127.0.0.1");
  // A second address on host 1: its daemon answers there too, its server does not.
  std::string second = "10.231.47.200";
  std::string add = "ip -n " + cluster_->Netns(1) + " addr replace " + second + "/24 dev eth0";
  ASSERT_EQ(system(add.c_str()), 0) << add;
  ExpectUnavailable(0, second + ":" + std::to_string(kAddressPort), "is bound to 10.231.47.2, not to " + second);
  ExpectManaged(0, rig_->Target(1, kAddressPort));
}

TEST_F(RpcTrustTest, TwoProgramsServeOnePortOnDisjointAddresses) {
  std::string error;
  Subprocess* loop = rig_->StartServerOn(1, Local(kSharedPort), "sync", true, &error);
  ASSERT_NE(loop, nullptr) << error;
  Subprocess* addr = rig_->StartServerOn(1, rig_->Target(1, kSharedPort), "callback", true, &error);
  ASSERT_NE(addr, nullptr) << error;
  for (Subprocess* s : {loop, addr}) {
    EXPECT_NE(s->Output().find("is served through conduitd"), std::string::npos) << s->Output();
  }
  ExpectManaged(1, Local(kSharedPort));
  ExpectManaged(0, rig_->Target(1, kSharedPort));
  // Every address overlaps both: refused by the daemon (the program then runs natively).
  Subprocess* wild = rig_->StartServerOn(1, "0.0.0.0:" + std::to_string(kSharedPort), "sync", true, &error);
  ASSERT_NE(wild, nullptr) << error;
  EXPECT_NE(wild->Output().find("port 50074 is already served on"), std::string::npos) << wild->Output();
  wild->Kill(SIGKILL);
  wild->Wait(std::chrono::seconds(5));
  // Each program gets the calls for its own address only.
  loop->Kill(SIGKILL);
  loop->Wait(std::chrono::seconds(5));
  ExpectUnavailable(1, Local(kSharedPort), "is bound to 10.231.47.2, not to 127.0.0.1");
  ExpectManaged(0, rig_->Target(1, kSharedPort));
  addr->Kill(SIGKILL);
}

TEST_F(RpcTrustTest, AdmissionGoesByTheKernelsNameNotTheClaimedOne) {
  std::string denied = cluster_->dir() + "/" + kDeniedExe;
  std::filesystem::copy_file(Cluster::BinPath("rpc_raw_program"), denied,
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::permissions(denied, std::filesystem::perms::owner_all);
  std::string out = RawProgram(denied, {"--case", "hello", "--exe", "greeter_client"});
  EXPECT_NE(out.find("refused: program '" + std::string(kDeniedExe) + "' is refused"), std::string::npos) << out;
  out = RawProgram(Cluster::BinPath("rpc_raw_program"), {"--case", "hello", "--exe", kDeniedExe});
  EXPECT_NE(out.find("accepted"), std::string::npos) << out;
}

TEST_F(RpcTrustTest, ProgramChannelsAreCappedAndClosedChannelsFreed) {
  std::string out = RawProgram(Cluster::BinPath("rpc_raw_program"),
                               {"--case", "channels", "--target", Local(kWildcardPort)});
  EXPECT_NE(out.find("opened 16384\n"), std::string::npos) << out;
  EXPECT_NE(out.find("refused: this program has 16384 channels open"), std::string::npos) << out;
  EXPECT_NE(out.find("after close: managed"), std::string::npos) << out;
}

// Both kinds of half frame at once (each waits out the bound).
void ExpectDroppedWithinBound(std::vector<Subprocess*> raws) {
  for (Subprocess* raw : raws) {
    ASSERT_TRUE(raw->Wait(std::chrono::seconds(20)));
    long ms = ClosedAfterMs(raw->Output());
    EXPECT_GE(ms, 0) << raw->Output();
    EXPECT_LT(ms, kFrameBoundMs + kSlackMs) << raw->Output();
  }
}

TEST_F(RpcTrustTest, ProgramThatStopsMidFrameIsDroppedWithinTheBound) {
  std::vector<Subprocess*> raws;
  for (const char* what : {"partial_header", "header_silence"}) {
    raws.push_back(&cluster_->Launch(1, "rpc_raw_program",
                                     {Cluster::BinPath("rpc_raw_program"), "--case", what, "--wait-ms", "10000"}));
  }
  ExpectDroppedWithinBound(raws);
  ExpectStillServing();
}

TEST_F(RpcTrustTest, ProgramAnnouncingAHugeFrameCostsOnlyWhatItSent) {
  constexpr int kPrograms = 6;  // 6 x 65 MiB announced
  pid_t daemon = cluster_->daemon(1).pid();
  long before = RssKb(daemon);
  std::vector<Subprocess*> raws;
  for (int i = 0; i < kPrograms; ++i) {
    raws.push_back(&cluster_->Launch(1, "rpc_raw_program",
                                     {Cluster::BinPath("rpc_raw_program"), "--case", "huge_frame", "--wait-ms", "10000"}));
  }
  for (Subprocess* raw : raws) ASSERT_TRUE(Cluster::WaitForOutput(*raw, "holding", std::chrono::seconds(10))) << raw->Output();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  long during = RssKb(daemon);
  ASSERT_GT(before, 0);
  EXPECT_LT(during - before, 64 << 10) << "the daemon grew by " << (during - before) / 1024 << " MiB";
  ExpectDroppedWithinBound(raws);
  ExpectStillServing();
}

// Descriptors a process holds (-1 when unreadable).
long OpenFds(pid_t pid) {
  std::error_code ec;
  long n = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++n;
  }
  return ec ? -1 : n;
}

// Descriptors sent with bytes that no frame takes (a frame sent a byte at a time, 4 of
// them with each byte): the daemon ends that connection instead of holding them, and
// holds no more than before once it has.
TEST_F(RpcTrustTest, ProgramSendingDescriptorsNoFrameTakesIsDropped) {
  pid_t daemon = cluster_->daemon(1).pid();
  const long before = OpenFds(daemon);
  ASSERT_GT(before, 0);
  Subprocess& raw = cluster_->Launch(1, "rpc_raw_program",
                                     {Cluster::BinPath("rpc_raw_program"), "--case", "fd_flood", "--wait-ms", "5000"});
  ASSERT_TRUE(raw.Wait(std::chrono::seconds(30)));
  EXPECT_NE(raw.Output().find("closed"), std::string::npos) << "the daemon kept the connection: " << raw.Output();
  const long after = OpenFds(daemon);
  EXPECT_LE(after, before + 4) << "the daemon went from " << before << " descriptors to " << after;
  ExpectStillServing();
}

TEST_F(RpcTrustTest, PeerThatStopsMidFrameIsDroppedWithinTheBound) {
  std::vector<Subprocess*> raws;
  for (const char* what : {"partial_header", "header_silence"}) {
    raws.push_back(&cluster_->Launch(0, "rpc_raw_peer",
                                     {Cluster::BinPath("rpc_raw_peer"), "--daemon", cluster_->PeerAddr(1), "--case",
                                      what, "--wait-ms", "10000", "--cluster-key", cluster_->key_path()}));
  }
  ExpectDroppedWithinBound(raws);
  ExpectStillServing();
}

TEST_F(RpcTrustTest, PeerAnnouncingHugeMessagesCostsOnlyWhatItSent) {
  // Larger than gRPC can frame: a malformed frame, the link closes (no allocation).
  std::string out = RawPeer("huge_total", kWildcardPort);
  EXPECT_NE(out.find("closed"), std::string::npos) << out;
  ASSERT_TRUE(cluster_->DaemonAlive(1)) << cluster_->Describe();
  // Three calls announcing 400 MiB each (more than the server's receive memory) and
  // sending 1 KiB each: memory follows the bytes.
  pid_t daemon = cluster_->daemon(1).pid();
  long before = RssKb(daemon);
  Subprocess& raw = cluster_->Launch(0, "rpc_raw_peer",
                                     {Cluster::BinPath("rpc_raw_peer"), "--daemon", cluster_->PeerAddr(1), "--case",
                                      "announce_many", "--calls", "3", "--port", std::to_string(kWildcardPort),
                                      "--cluster-key", cluster_->key_path()});
  ASSERT_TRUE(Cluster::WaitForOutput(raw, "holding", std::chrono::seconds(10))) << raw.Output();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  long during = RssKb(daemon);
  EXPECT_LT(during - before, 64 << 10) << "the daemon grew by " << (during - before) / 1024 << " MiB";
  raw.Kill(SIGKILL);  // the link closes: its calls end, their memory goes back
  raw.Wait(std::chrono::seconds(10));
  ExpectStillServing();
}

TEST_F(RpcTrustTest, PeerPastTheIncompleteMessageBudgetLosesTheCall) {
  std::string out = RawPeer("over_budget", kWildcardPort, {"--bytes", std::to_string(kAssemblyBudget + (4 << 20))});
  EXPECT_NE(out.find("answered status 8"), std::string::npos) << out;
  ExpectStillServing();
}

}  // namespace
}  // namespace conduit::it
