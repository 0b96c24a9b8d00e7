// Trust at the daemon's boundaries, with real daemons in network namespaces (issue 12):
// strangers on the network without the cluster key, a program that knows a communicator's
// key but not its id, hosts whose ranks disagree on a collective, connections that start
// and go silent, floods under thread and descriptor limits, and a frozen peer daemon.
#include <gtest/gtest.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "coll_run.h"
#include "common/frame.h"
#include "conduitctl_run.h"
#include "integration_env.h"
#include "protocol/shim_protocol.h"

namespace conduit::it {
namespace {

using Clock = std::chrono::steady_clock;

ClusterConfig TrustCluster(int hosts, int timeout_ms = 10000) {
  ClusterConfig c;
  c.prefix = "tr";
  c.subnet = "10.231.50";
  c.hosts = hosts;
  c.timeout_ms = timeout_ms;
  return c;
}

std::string ProbePath() { return Cluster::BinPath("trust_probe"); }
std::string ProberPath() { return Cluster::BinPath("peer_prober"); }

std::string DaemonLog(Cluster& cluster, int host) { return cluster.daemon(host).Output(); }

bool WaitForFile(const std::string& path, std::chrono::seconds timeout) {
  auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    if (std::filesystem::exists(path) && std::filesystem::file_size(path) >= 128) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// Program socket helpers: a raw client that speaks just enough of the shim protocol.
int ConnectUnix(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Milliseconds until the daemon closes `fd` (reading and dropping what it sends).
long MsUntilClosed(int fd, Clock::time_point since, std::chrono::seconds give_up) {
  char buf[512];
  auto deadline = Clock::now() + give_up;
  while (Clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    ssize_t r = ::recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (r > 0 || (r < 0 && errno == EAGAIN)) continue;
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - since).count();
  }
  return -1;
}

// A legitimate job while the test attacks: one rank on each of the first `hosts` hosts,
// float-sum all-reduces of `sizes` for `seconds`, checked; returns once the job's id file
// (its ncclUniqueId) exists. `*id_file` is that file.
std::vector<Subprocess*> StartAllreduceLoop(Cluster& cluster, int hosts, const char* sizes, const char* seconds,
                                            std::string* id_file) {
  CollLaunch job = Ranks(1, {"--colls", "allreduce", "--types", "float", "--ops", "sum", "--sizes", sizes,
                             "--seconds", seconds})
                       .OnHosts(hosts);
  job.id_file = cluster.NewIdFile();
  *id_file = job.id_file;
  auto procs = LaunchCollCheck(cluster, job);
  EXPECT_TRUE(WaitForFile(job.id_file, std::chrono::seconds(30))) << cluster.Describe();
  return procs;
}

// A stranger namespace (host 2, which has no part in the job) sends every daemon-to-daemon
// message type to the job's daemons, raw and behind a forged handshake, knowing the job's
// communicator id, while the job's all-reduces run: every message is refused, every result
// stays right, both daemons live on.
TEST(TrustTest, StrangersWithoutTheClusterKeyAreRefusedWhileCollectivesStayCorrect) {
  CONDUIT_SKIP_UNLESS_CLUSTER();
  Cluster cluster(TrustCluster(3));
  CONDUIT_START_CLUSTER(cluster);
  std::string id_file;
  auto procs = StartAllreduceLoop(cluster, 2, "4096,256K", "8", &id_file);
  ASSERT_FALSE(HasFailure());
  for (int target : {0, 1}) {
    Subprocess& p = cluster.Launch(2, "peer_prober", {ProberPath(), "--daemon", cluster.PeerAddr(target), "--id-file",
                                                      id_file});
    ASSERT_TRUE(p.Wait(std::chrono::seconds(120))) << cluster.Describe();
    EXPECT_EQ(p.exit_code(), 0) << p.Output();
    EXPECT_NE(p.Output().find("all refused"), std::string::npos) << p.Output();
  }
  std::string failure = WaitCollCheck(cluster, procs, std::chrono::seconds(120 * kSanitizerSlowdown));
  EXPECT_TRUE(failure.empty()) << failure;
  for (int h : {0, 1}) {
    EXPECT_TRUE(cluster.DaemonAlive(h)) << cluster.Describe();
    EXPECT_NE(DaemonLog(cluster, h).find("refused"), std::string::npos) << DaemonLog(cluster, h);
  }
}

// A program on one of the job's own hosts that learned the communicator's key (views show
// its start, logs the whole) but not its ncclUniqueId cannot join it: the daemon refuses a
// secret that does not produce the key, and the job goes on undisturbed.
TEST(TrustTest, AProgramThatKnowsTheKeyButNotTheIdCannotJoin) {
  CONDUIT_SKIP_UNLESS_CLUSTER();
  Cluster cluster(TrustCluster(2));
  CONDUIT_START_CLUSTER(cluster);
  std::string id_file;
  auto procs = StartAllreduceLoop(cluster, 2, "4096", "6", &id_file);
  ASSERT_FALSE(HasFailure());
  for (int host : {0, 1}) {
    Subprocess& forger = cluster.Launch(host, "forger", {ProbePath(), "forge", "--rank", "1", "--nranks", "2",
                                                         "--id-file", id_file});
    ASSERT_TRUE(forger.Wait(std::chrono::seconds(60))) << cluster.Describe();
    EXPECT_EQ(forger.exit_code(), 0) << forger.Output();
    EXPECT_NE(forger.Output().find("does not match its secret"), std::string::npos) << forger.Output();
  }
  std::string failure = WaitCollCheck(cluster, procs, std::chrono::seconds(120 * kSanitizerSlowdown));
  EXPECT_TRUE(failure.empty()) << failure;
}

// A daemon that holds the cluster key is trusted to run the protocols, but acts only as
// itself: it cannot take another member's place on a link or in a rendezvous, a Register it
// sends is checked for bounds before anything is kept, and a link it parks for a
// communicator that never forms is dropped on the timer.
TEST(TrustTest, AKeyHolderActsOnlyAsItself) {
  CONDUIT_SKIP_UNLESS_CLUSTER();
  Cluster cluster(TrustCluster(3, /*timeout_ms=*/3000));
  CONDUIT_START_CLUSTER(cluster);
  std::string id_file;
  auto procs = StartAllreduceLoop(cluster, 2, "4096", "8", &id_file);
  ASSERT_FALSE(HasFailure());
  // The communicator must be formed on its root, or a link claim would only be parked.
  bool ready = false;
  for (int i = 0; i < 200 && !ready; ++i) {
    ready = Ctl(cluster, 0, {"--json", "comms"}).out.find("\"ready\": true") != std::string::npos;
    if (!ready) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(ready) << cluster.Describe();
  Subprocess& p = cluster.Launch(2, "member", {ProberPath(), "--daemon", cluster.PeerAddr(0), "--mode", "member",
                                               "--cluster-key", cluster.key_path(), "--id-file", id_file});
  ASSERT_TRUE(p.Wait(std::chrono::seconds(60))) << cluster.Describe();
  EXPECT_EQ(p.exit_code(), 0) << p.Output();
  EXPECT_NE(p.Output().find("refused link claiming host 1"), std::string::npos) << p.Output();
  EXPECT_NE(p.Output().find("refused register as another daemon"), std::string::npos) << p.Output();
  EXPECT_NE(p.Output().find("refused register with nranks -1"), std::string::npos) << p.Output();
  EXPECT_NE(p.Output().find("refused register with nranks 2^30"), std::string::npos) << p.Output();
  std::smatch m;
  std::string out = p.Output();
  ASSERT_TRUE(std::regex_search(out, m, std::regex("parked link dropped after ([0-9]+) ms"))) << out;
  EXPECT_GE(std::stol(m[1]), 3000 - 100);
  EXPECT_LE(std::stol(m[1]), 3000 + 1000 + 2000 * kSanitizerSlowdown) << out;
  std::string failure = WaitCollCheck(cluster, procs, std::chrono::seconds(120 * kSanitizerSlowdown));
  EXPECT_TRUE(failure.empty()) << failure;
  EXPECT_TRUE(cluster.DaemonAlive(0)) << cluster.Describe();
}

// Without authentication (--insecure-peers, for isolated networks) the daemons still work
// together, and say loudly at start that anyone can join them.
TEST(TrustTest, InsecurePeersWorkAndWarn) {
  CONDUIT_SKIP_UNLESS_CLUSTER();
  ClusterConfig c = TrustCluster(2);
  c.peer_auth = ClusterConfig::PeerAuth::kInsecure;
  Cluster cluster(c);
  CONDUIT_START_CLUSTER(cluster);
  auto procs = LaunchCollCheck(cluster, Ranks(1, {"--colls", "allreduce,broadcast,sendrecv", "--types", "float",
                                                  "--ops", "sum", "--sizes", "1000"}));
  std::string failure = WaitCollCheck(cluster, procs, std::chrono::seconds(120 * kSanitizerSlowdown));
  EXPECT_TRUE(failure.empty()) << failure;
  EXPECT_NE(DaemonLog(cluster, 0).find("--insecure-peers: daemon connections are NOT authenticated"),
            std::string::npos)
      << DaemonLog(cluster, 0);
}

// --deny-exe judges a program by what the kernel says its executable is: a program that
// names itself something else in its Hello is still refused, and one that borrows a denied
// name is not refused for it.
TEST(TrustTest, AdmissionGoesByTheKernelsNameNotTheHellos) {
  CONDUIT_SKIP_UNLESS_CLUSTER();
  for (const char* denied : {"trust_test", "coll_check"}) {
    SCOPED_TRACE(denied);
    ClusterConfig c = TrustCluster(1);
    c.daemon_args = {"--deny-exe", denied};
    Cluster cluster(c);
    CONDUIT_START_CLUSTER(cluster);
    int fd = ConnectUnix(cluster.Socket(0));
    ASSERT_GE(fd, 0);
    shimproto::HelloRequest hello{};
    hello.pid = 1;
    hello.version = shimproto::kVersion;
    CopyCString(hello.exe, "coll_check");  // this process is trust_test
    ASSERT_TRUE(WriteFrame(fd, shimproto::kMagic, shimproto::kVersion, shimproto::kHello, 0, &hello, sizeof(hello),
                           Deadline::AfterMs(2000))
                    .ok());
    Frame reply;
    ASSERT_TRUE(ReadFrame(fd, shimproto::kMagic, shimproto::kVersion, shimproto::kMaxPayload, &reply,
                          Deadline::AfterMs(5000))
                    .ok());
    ::close(fd);
    shimproto::HelloReply r{};
    ASSERT_EQ(reply.payload.size(), sizeof(r));
    memcpy(&r, reply.payload.data(), sizeof(r));
    const bool kernel_name_denied = std::string(denied) == "trust_test";
    EXPECT_EQ(r.accepted, kernel_name_denied ? 0u : 1u) << FromCString(r.status.message);
    if (kernel_name_denied) {
      EXPECT_NE(FromCString(r.status.message).find("trust_test"), std::string::npos);
    }
  }
}

// Runs trust_probe allreduce with 2 ranks per host, host h's ranks passing counts[h].
std::vector<Subprocess*> LaunchCounts(Cluster& cluster, const std::vector<size_t>& counts) {
  const int hosts = static_cast<int>(counts.size()), per_host = 2, nranks = hosts * per_host;
  std::string id = cluster.NewIdFile();
  std::vector<Subprocess*> procs;
  for (int h = 0; h < hosts; ++h) {
    for (int l = 0; l < per_host; ++l) {
      int rank = h * per_host + l;
      procs.push_back(&cluster.Launch(h, "probe-r" + std::to_string(rank),
                                      {ProbePath(), "allreduce", "--rank", std::to_string(rank), "--nranks",
                                       std::to_string(nranks), "--id-file", id, "--count", std::to_string(counts[h])}));
    }
  }
  return procs;
}

// Every rank must fail with ncclInvalidUsage (exit 10 + 5) and a message naming both
// calls; none may get ncclSuccess, least of all with wrong data.
void ExpectAllInvalidUsage(Cluster& cluster, const std::vector<Subprocess*>& procs) {
  for (Subprocess* p : procs) {
    ASSERT_TRUE(p->Wait(std::chrono::seconds(60 * kSanitizerSlowdown))) << cluster.Describe();
    EXPECT_EQ(p->exit_code(), 10 + ncclInvalidUsage) << p->CommandLine() << "\n" << p->Output();
    EXPECT_NE(p->Output().find("ncclInvalidUsage"), std::string::npos) << p->Output();
    EXPECT_NE(p->Output().find("different collectives"), std::string::npos) << p->Output();
    EXPECT_EQ(p->Output().find("WRONG DATA"), std::string::npos) << p->Output();
  }
}

TEST(TrustTest, HostsWhoseRanksPassDifferentCountsAllGetInvalidUsage) {
  CONDUIT_SKIP_UNLESS_CLUSTER();
  {
    Cluster cluster(TrustCluster(2));
    CONDUIT_START_CLUSTER(cluster);
    ExpectAllInvalidUsage(cluster, LaunchCounts(cluster, {1u << 20, 2u << 20}));
    ExpectAllInvalidUsage(cluster, LaunchCounts(cluster, {1u << 20, (1u << 20) - 1}));
    // Small ones take another algorithm (recursive doubling) with the same check.
    ExpectAllInvalidUsage(cluster, LaunchCounts(cluster, {256, 255}));
    EXPECT_TRUE(cluster.DaemonAlive(0) && cluster.DaemonAlive(1)) << cluster.Describe();
    // Agreeing ranks still work on the same daemons.
    for (Subprocess* p : LaunchCounts(cluster, {4096, 4096})) {
      ASSERT_TRUE(p->Wait(std::chrono::seconds(60 * kSanitizerSlowdown)));
      EXPECT_EQ(p->exit_code(), 0) << p->Output();
    }
  }
  {
    // Three hosts, only the last disagreeing: the others, which never exchange data with
    // it directly in every step, fail too, with its reason.
    Cluster cluster(TrustCluster(3));
    CONDUIT_START_CLUSTER(cluster);
    ExpectAllInvalidUsage(cluster, LaunchCounts(cluster, {1u << 20, 1u << 20, (1u << 20) - 1}));
  }
}

// Daemons whose settings choose different all-reduce algorithms would run different
// exchanges for one collective: the algorithm travels in the collective header, and every
// rank fails with ncclInvalidUsage naming the settings, instead of hanging or mixing data.
TEST(TrustTest, DaemonsThatChooseDifferentAllReduceAlgorithmsRefuseTheCollective) {
  CONDUIT_SKIP_UNLESS_CLUSTER();
  ClusterConfig config = TrustCluster(2);
  config.host_daemon_args[0] = {"--allreduce-algo", "ring"};
  config.host_daemon_args[1] = {"--allreduce-algo", "rd"};
  Cluster cluster(config);
  CONDUIT_START_CLUSTER(cluster);
  for (Subprocess* p : LaunchCounts(cluster, {4096, 4096})) {
    ASSERT_TRUE(p->Wait(std::chrono::seconds(60 * kSanitizerSlowdown))) << cluster.Describe();
    EXPECT_EQ(p->exit_code(), 10 + ncclInvalidUsage) << p->CommandLine() << "\n" << p->Output();
    EXPECT_NE(p->Output().find("--allreduce-algo"), std::string::npos) << p->Output();
    EXPECT_EQ(p->Output().find("WRONG DATA"), std::string::npos) << p->Output();
  }
  EXPECT_TRUE(cluster.DaemonAlive(0) && cluster.DaemonAlive(1)) << cluster.Describe();
}

// On 4 hosts the ring and halving-doubling begin on different links, so a daemon choosing
// one never reads the header of a daemon choosing the other: the collective fails when the
// daemons' --timeout-ms is up, and the error names the settings that must agree.
TEST(TrustTest, DaemonsThatWaitOnDifferentLinksNameTheAlgorithmSettingsWhenTheyTimeOut) {
  CONDUIT_SKIP_UNLESS_CLUSTER();
  ClusterConfig config = TrustCluster(4, 3000 * kSanitizerSlowdown);
  config.daemon_args = {"--rh-max-bytes", "0"};
  config.host_daemon_args[0] = {"--rh-max-bytes", "1048576"};
  Cluster cluster(config);
  CONDUIT_START_CLUSTER(cluster);
  for (Subprocess* p : LaunchCounts(cluster, {65536, 65536, 65536, 65536})) {
    ASSERT_TRUE(p->Wait(std::chrono::seconds(60 * kSanitizerSlowdown))) << cluster.Describe();
    EXPECT_EQ(p->exit_code(), 10 + ncclRemoteError) << p->CommandLine() << "\n" << p->Output();
    EXPECT_NE(p->Output().find("--rh-max-bytes differ)"), std::string::npos) << p->Output();
    EXPECT_EQ(p->Output().find("WRONG DATA"), std::string::npos) << p->Output();
  }
  for (int h = 0; h < 4; ++h) EXPECT_TRUE(cluster.DaemonAlive(h)) << cluster.Describe();
}

// A peer that connects and says nothing (or half a handshake) is dropped when the
// handshake's 5 s are up; a program that sends nothing, half a frame header, or a header
// without its payload is dropped 10 s after its first byte (docs/security.md). Others are
// served meanwhile.
TEST(TrustTest, SlowSendersAreDroppedWithinTheDocumentedBounds) {
  CONDUIT_SKIP_UNLESS_CLUSTER();
  Cluster cluster(TrustCluster(2));
  CONDUIT_START_CLUSTER(cluster);
  const auto slack = std::chrono::milliseconds(3000 * kSanitizerSlowdown);
  Subprocess& silent = cluster.Launch(1, "silent", {ProberPath(), "--daemon", cluster.PeerAddr(0), "--mode", "silent"});
  Subprocess& partial = cluster.Launch(1, "partial", {ProberPath(), "--daemon", cluster.PeerAddr(0), "--mode", "partial"});

  auto start = Clock::now();
  int quiet = ConnectUnix(cluster.Socket(0));
  int half = ConnectUnix(cluster.Socket(0));
  int body = ConnectUnix(cluster.Socket(0));
  ASSERT_GE(quiet, 0);
  ASSERT_GE(half, 0);
  ASSERT_GE(body, 0);
  FrameHeader h{shimproto::kMagic, shimproto::kVersion, shimproto::kHello, sizeof(shimproto::HelloRequest), 0};
  ASSERT_EQ(::send(half, &h, sizeof(h) / 2, 0), static_cast<ssize_t>(sizeof(h) / 2));
  // A whole Hello first (the session starts), then a Group header whose payload never comes.
  shimproto::HelloRequest hello{};
  hello.version = shimproto::kVersion;
  std::string msg(reinterpret_cast<const char*>(&h), sizeof(h));
  msg.append(reinterpret_cast<const char*>(&hello), sizeof(hello));
  FrameHeader group{shimproto::kMagic, shimproto::kVersion, shimproto::kGroup, 4096, 0};
  msg.append(reinterpret_cast<const char*>(&group), sizeof(group));
  ASSERT_EQ(::send(body, msg.data(), msg.size(), 0), static_cast<ssize_t>(msg.size()));

  // Meanwhile the daemons serve a job.
  auto procs = LaunchCollCheck(cluster, Ranks(1, {"--colls", "allreduce", "--types", "float", "--ops", "sum",
                                                  "--sizes", "1024"}));
  std::string failure = WaitCollCheck(cluster, procs, std::chrono::seconds(120 * kSanitizerSlowdown));
  EXPECT_TRUE(failure.empty()) << failure;

  const auto bound = std::chrono::milliseconds(shimproto::kFrameTimeoutMs) + slack;
  for (int fd : {quiet, half, body}) {
    long ms = MsUntilClosed(fd, start, std::chrono::seconds(60));
    EXPECT_GE(ms, 0) << "a silent program connection was never dropped";
    EXPECT_LE(ms, bound.count()) << "dropped after " << ms << " ms";
    ::close(fd);
  }
  for (Subprocess* p : {&silent, &partial}) {
    ASSERT_TRUE(p->Wait(std::chrono::seconds(60))) << cluster.Describe();
    std::smatch m;
    std::string out = p->Output();
    ASSERT_TRUE(std::regex_search(out, m, std::regex("closed after ([0-9]+) ms"))) << out;
    EXPECT_LE(std::stol(m[1]), 5000 + slack.count()) << out;
  }
  EXPECT_TRUE(cluster.DaemonAlive(0)) << cluster.Describe();
}

// The test's unprivileged user (created if missing): the daemon runs as it, so that
// RLIMIT_NPROC applies (root is exempt).
bool TestUser(uid_t* uid, gid_t* gid) {
  if (getpwnam("conduit-ittest") == nullptr) {
    if (std::system("useradd --system --no-create-home --shell /usr/sbin/nologin conduit-ittest >/dev/null 2>&1") != 0 &&
        getpwnam("conduit-ittest") == nullptr) {
      return false;
    }
  }
  passwd* pw = getpwnam("conduit-ittest");
  if (pw == nullptr) return false;
  *uid = pw->pw_uid;
  *gid = pw->pw_gid;
  return true;
}

// A daemon with few threads and descriptors allowed (as an ordinary user, under prlimit)
// is flooded on both sockets: it refuses what it cannot serve, says so in its log, never
// aborts, and serves a job afterwards.
TEST(TrustTest, FloodsUnderThreadAndDescriptorLimitsAreRefusedWithoutAnAbort) {
  CONDUIT_SKIP_UNLESS_CLUSTER();
  uid_t uid;
  gid_t gid;
  if (!TestUser(&uid, &gid)) GTEST_SKIP() << "cannot create the test user conduit-ittest";
  ClusterConfig c = TrustCluster(1);
  c.peer_auth = ClusterConfig::PeerAuth::kNoKey;  // one host: nothing to share
  c.daemon_wrapper = {"setpriv",    "--reuid",   std::to_string(uid), "--regid", std::to_string(gid),
                      "--clear-groups", "prlimit", "--nproc=60",      "--nofile=96:96", "--"};
  Cluster cluster(c);
  // The daemon, now an ordinary user, must create its sockets in the cluster's directory.
  ASSERT_EQ(::chown(cluster.dir().c_str(), uid, gid), 0);
  CONDUIT_START_CLUSTER(cluster);

  std::vector<int> held;
  for (int i = 0; i < 300; ++i) {
    int fd = ConnectUnix(cluster.Socket(0));
    if (fd >= 0) held.push_back(fd);
  }
  Subprocess& flood = cluster.Launch(0, "flood", {ProberPath(), "--daemon", cluster.PeerAddr(0), "--mode", "flood",
                                                  "--count", "300", "--hold", "3"});
  ASSERT_TRUE(flood.Wait(std::chrono::seconds(60))) << cluster.Describe();
  EXPECT_TRUE(cluster.DaemonAlive(0)) << cluster.Describe();
  for (int fd : held) ::close(fd);
  std::string log = DaemonLog(cluster, 0);
  EXPECT_TRUE(log.find("out of file descriptors") != std::string::npos ||
              log.find("cannot start a thread") != std::string::npos)
      << log;
  // Once the flood is gone, the daemon serves programs again.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  auto procs = LaunchCollCheck(cluster, Ranks(2, {"--colls", "allreduce", "--types", "float", "--ops", "sum",
                                                  "--sizes", "1024"}));
  std::string failure = WaitCollCheck(cluster, procs, std::chrono::seconds(120 * kSanitizerSlowdown));
  EXPECT_TRUE(failure.empty()) << failure;
  EXPECT_TRUE(cluster.DaemonAlive(0)) << cluster.Describe();
}

// A peer daemon frozen by SIGSTOP in the middle of streamed all-reduces: the ranks on the
// other host fail within the daemon's timeout (plus scheduling slack), the ranks of the
// frozen daemon within the shim's bound, 3 x timeout + 30 s (docs/shim-protocol.md).
TEST(TrustTest, AFrozenPeerDaemonFailsItsPeersWithinTheBound) {
  CONDUIT_SKIP_UNLESS_CLUSTER();
  constexpr int kTimeoutMs = 3000;
  Cluster cluster(TrustCluster(2, kTimeoutMs));
  CONDUIT_START_CLUSTER(cluster);
  // 2 MiB per call: streamed copies (CONDUIT_STREAM_MIN_BYTES, 1 MiB).
  auto procs = LaunchCollCheck(cluster, Ranks(2, {"--expect-error", "--error-count", "524288", "--hold-ms", "5",
                                                  "--max-seconds", "120"}));
  for (Subprocess* p : procs) {
    ASSERT_TRUE(Cluster::WaitForOutput(*p, "looping", std::chrono::seconds(60))) << cluster.Describe();
  }
  ::kill(cluster.daemon(1).pid(), SIGSTOP);
  auto stopped = Clock::now();
  const auto peer_bound = std::chrono::milliseconds(kTimeoutMs + 7000 * kSanitizerSlowdown);
  const auto shim_bound = std::chrono::milliseconds(3 * kTimeoutMs + 30000 + 5000);
  for (size_t i = 0; i < procs.size(); ++i) {
    Subprocess* p = procs[i];
    const bool frozen_host = i >= 2;
    ASSERT_TRUE(p->Wait(shim_bound + std::chrono::seconds(10))) << "rank hung\n" << cluster.Describe();
    auto took = std::chrono::duration_cast<std::chrono::milliseconds>(p->exit_time() - stopped);
    EXPECT_EQ(p->exit_code(), 0) << p->Output();
    EXPECT_LE(took.count(), (frozen_host ? shim_bound : peer_bound).count())
        << p->CommandLine() << " failed only after " << took.count() << " ms\n" << p->Output();
  }
  ::kill(cluster.daemon(1).pid(), SIGCONT);
}

}  // namespace
}  // namespace conduit::it
