// The operator's admin socket on real daemons: conduitctl reads status, programs,
// communicators, traces and metrics while ranks run collectives; the admission policy
// changes at run time; callers who are not the operator cannot change policy, nor lock the
// operator out with idle connections, nor make the daemon read a body it refuses;
// malformed requests get errors and the daemon keeps serving.
#include <grp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <thread>

#include "coll_run.h"
#include "conduitctl_run.h"
#include "integration_env.h"

namespace conduit::it {
namespace {

constexpr int kNobody = 65534;

ClusterConfig AdminCluster(int hosts, std::vector<std::string> daemon_args = {}) {
  ClusterConfig c;
  c.prefix = "ad";
  c.subnet = "10.231.18";
  c.hosts = hosts;
  c.daemon_args = std::move(daemon_args);
  return c;
}

// A raw exchange on the admin socket, for requests conduitctl would never send.
std::string RawExchange(const std::string& path, const std::string& bytes) {
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return "connect failed";
  }
  (void)!write(fd, bytes.data(), bytes.size());
  shutdown(fd, SHUT_WR);
  std::string out;
  char buf[4096];
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) out.append(buf, static_cast<size_t>(n));
  close(fd);
  return out;
}

// The uid and gid of a local user made for tests (useradd when absent); -1 on failure.
std::pair<int, int> TestUser(const std::string& name) {
  for (int attempt = 0; attempt < 20; ++attempt) {
    if (passwd* pw = getpwnam(name.c_str()); pw != nullptr) {
      return {static_cast<int>(pw->pw_uid), static_cast<int>(pw->pw_gid)};
    }
    // Another test may hold the lock on /etc/passwd for a moment: try again.
    std::string out;
    RunCommand({"/usr/sbin/useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name}, &out);
    if (getpwnam(name.c_str()) == nullptr) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return {-1, -1};
}

// What a caller who holds many idle connections saw: how many connected, and how the
// daemon answered each (by HTTP status), once it stopped waiting for them.
struct IdleReport {
  int connected = 0;
  int status_503 = 0;
  int status_408 = 0;
  int other = 0;
};

// A child process, running as uid/gid, opens `n` connections to the admin socket and sends
// nothing. It reports the connections once open, then the daemon's answers. (Between fork
// and exit it makes only system calls, as a child of a threaded process must.)
class IdleConnections {
 public:
  IdleConnections(const std::string& socket_path, int uid, int gid, int n) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", socket_path.c_str());
    int p[2];
    if (pipe(p) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      close(p[0]);
      if (setgroups(0, nullptr) != 0 || setresgid(gid, gid, gid) != 0 || setresuid(uid, uid, uid) != 0) _exit(3);
      int fds[kMax];
      IdleReport r;
      for (int i = 0; i < n && i < kMax; ++i) {
        fds[r.connected] = socket(AF_UNIX, SOCK_STREAM, 0);
        if (connect(fds[r.connected], reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0) ++r.connected;
      }
      if (write(p[1], &r, sizeof(r)) != sizeof(r)) _exit(4);
      for (int i = 0; i < r.connected; ++i) {
        timeval tv{30, 0};
        setsockopt(fds[i], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        char head[13] = {};
        ssize_t got = 0;
        for (ssize_t k; got < 12 && (k = read(fds[i], head + got, static_cast<size_t>(12 - got))) > 0;) got += k;
        if (got == 12 && memcmp(head, "HTTP/1.1 503", 12) == 0) {
          ++r.status_503;
        } else if (got == 12 && memcmp(head, "HTTP/1.1 408", 12) == 0) {
          ++r.status_408;
        } else {
          ++r.other;
        }
      }
      if (write(p[1], &r, sizeof(r)) != sizeof(r)) _exit(4);
      _exit(0);
    }
    close(p[1]);
    fd_ = p[0];
  }
  ~IdleConnections() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (fd_ >= 0) close(fd_);
  }

  // The child's next report; false after `timeout` without one.
  bool Next(IdleReport* r, std::chrono::milliseconds timeout) {
    pollfd pfd{fd_, POLLIN, 0};
    if (fd_ < 0 || poll(&pfd, 1, static_cast<int>(timeout.count())) != 1) return false;
    return read(fd_, r, sizeof(*r)) == sizeof(*r);
  }

 private:
  static constexpr int kMax = 64;
  pid_t pid_ = -1;
  int fd_ = -1;
};

TEST(AdminTest, ObservesRunningCollectives) {
  CONDUIT_SKIP_UNLESS_CLUSTER();
  Cluster cluster(AdminCluster(2));
  CONDUIT_START_CLUSTER(cluster);
  auto procs = LaunchCollCheck(cluster, Ranks(2, {"--expect-error", "--hold-ms", "5", "--max-seconds", "60"}));
  for (Subprocess* p : procs) {
    ASSERT_TRUE(Cluster::WaitForOutput(*p, "looping", std::chrono::seconds(60))) << cluster.Describe();
  }

  CtlResult status = Ctl(cluster, 0, {"status"});
  ASSERT_EQ(status.rc, 0) << status.out;
  EXPECT_NE(status.out.find("\"daemon_version\": \"conduitd"), std::string::npos) << status.out;
  EXPECT_TRUE(status.out.find("\"reduce_loops\": \"baseline\"") != std::string::npos ||
              status.out.find("\"reduce_loops\": \"avx2\"") != std::string::npos ||
              status.out.find("\"reduce_loops\": \"avx512\"") != std::string::npos)
      << status.out;
  EXPECT_NE(status.out.find("\"collectives\": 2"), std::string::npos) << "two rank connections:\n" << status.out;

  CtlResult programs = Ctl(cluster, 1, {"programs"});
  ASSERT_EQ(programs.rc, 0) << programs.out;
  EXPECT_NE(programs.out.find("coll_check"), std::string::npos) << programs.out;

  CtlResult comms = Ctl(cluster, 0, {"--json", "comms"});
  ASSERT_EQ(comms.rc, 0) << comms.out;
  // Views name a communicator by the start of its key, never the whole of it.
  std::smatch key;
  ASSERT_TRUE(std::regex_search(comms.out, key, std::regex("\"key\": \"([0-9a-f]{8})\""))) << comms.out;
  EXPECT_NE(comms.out.find("\"nranks\": 4"), std::string::npos) << comms.out;
  EXPECT_NE(comms.out.find("\"local_ranks\": [\n        0,\n        1\n      ]"), std::string::npos) << comms.out;

  CtlResult trace = Ctl(cluster, 0, {"trace", key[1], "--limit", "5"});
  ASSERT_EQ(trace.rc, 0) << trace.out;
  EXPECT_NE(trace.out.find("AllReduce"), std::string::npos) << trace.out;
  // 4 KiB across 2 hosts: the daemon picks the latency-optimal algorithm.
  EXPECT_NE(trace.out.find("recursive-doubling"), std::string::npos) << trace.out;

  CtlResult metrics = Ctl(cluster, 0, {"metrics"});
  ASSERT_EQ(metrics.rc, 0) << metrics.out;
  std::smatch ops;
  ASSERT_TRUE(std::regex_search(
      metrics.out, ops,
      std::regex("conduit_collective_ops_total\\{comm=\"" + key[1].str() + "\",op=\"AllReduce\"\\} ([0-9]+)")))
      << metrics.out;
  EXPECT_GT(std::stoll(ops[1]), 0);
  EXPECT_NE(metrics.out.find("conduit_collective_latency_seconds_bucket{comm=\"" + key[1].str()), std::string::npos);

  CtlResult missing = Ctl(cluster, 0, {"trace", "0000000000000000"});
  EXPECT_EQ(missing.rc, 1) << missing.out;
  EXPECT_NE(missing.out.find("NOT_FOUND"), std::string::npos) << missing.out;

  for (Subprocess* p : procs) p->Kill(SIGKILL);
}

// deny_exe set at run time makes the next program fall back; clearing it admits it again.
TEST(AdminTest, AdmissionPolicyChangesAtRunTime) {
  CONDUIT_SKIP_UNLESS_CLUSTER();
  Cluster cluster(AdminCluster(1));
  CONDUIT_START_CLUSTER(cluster);
  const std::string probe = Cluster::BinPath("fallback_probe");
  auto run_probe = [&] {
    Subprocess& p = cluster.Launch(0, "fallback_probe", {probe});
    EXPECT_TRUE(p.Wait(std::chrono::seconds(60))) << cluster.Describe();
    return p.Output();
  };
  EXPECT_EQ(run_probe().find("falling back"), std::string::npos) << "admitted program must not fall back";

  CtlResult set = Ctl(cluster, 0, {"policy", "set", "admission", R"({"deny_exe": ["fallback_probe"]})"});
  ASSERT_EQ(set.rc, 0) << set.out;
  std::string denied = run_probe();
  EXPECT_NE(denied.find("refused this program"), std::string::npos) << denied;

  ASSERT_EQ(Ctl(cluster, 0, {"policy", "set", "admission", R"({"deny_exe": []})"}).rc, 0);
  EXPECT_EQ(run_probe().find("falling back"), std::string::npos) << "cleared policy must admit the program again";

  CtlResult bad = Ctl(cluster, 0, {"policy", "set", "admission", R"({"deny_exe": "fallback_probe"})"});
  EXPECT_EQ(bad.rc, 1) << bad.out;
  EXPECT_NE(bad.out.find("INVALID_ARGUMENT"), std::string::npos) << bad.out;
}

TEST(AdminTest, OnlyTheOperatorChangesPolicy) {
  CONDUIT_SKIP_UNLESS_CLUSTER();
  if (::access("/usr/bin/setpriv", X_OK) != 0) GTEST_SKIP() << "setpriv (util-linux) is not installed";
  {
    // Default mode 0660: other users cannot even connect.
    Cluster cluster(AdminCluster(1));
    CONDUIT_START_CLUSTER(cluster);
    ASSERT_EQ(chmod(cluster.dir().c_str(), 0755), 0);
    CtlResult r = Ctl(cluster, 0, {"status"}, kNobody);
    EXPECT_EQ(r.rc, 3) << r.out;
    EXPECT_NE(r.out.find("Permission denied"), std::string::npos) << r.out;
  }
  // A world-connectable socket: others may read but not change policy.
  Cluster cluster(AdminCluster(1, {"--admin-mode", "0666"}));
  CONDUIT_START_CLUSTER(cluster);
  ASSERT_EQ(chmod(cluster.dir().c_str(), 0755), 0);
  CtlResult read = Ctl(cluster, 0, {"status"}, kNobody);
  EXPECT_EQ(read.rc, 0) << read.out;
  CtlResult write = Ctl(cluster, 0, {"policy", "set", "admission", R"({"deny_exe": ["x"]})"}, kNobody);
  EXPECT_EQ(write.rc, 1) << write.out;
  EXPECT_NE(write.out.find("PERMISSION_DENIED"), std::string::npos) << write.out;
  CtlResult after = Ctl(cluster, 0, {"policy", "get", "admission"});
  EXPECT_EQ(after.out.find("\"x\""), std::string::npos) << "the refused change must not apply:\n" << after.out;
}

// An unprivileged local user holds 40 idle connections: it keeps its share (8), the rest
// are refused at once, the operator is served promptly all the while, another read-only
// user too, and the held connections are dropped at the head deadline (2 s). Before the
// caps, 32 idle connections of anyone locked the operator out for 10 s at a time.
TEST(AdminTest, IdleReadersCannotLockTheOperatorOut) {
  CONDUIT_SKIP_UNLESS_CLUSTER();
  if (::access("/usr/bin/setpriv", X_OK) != 0) GTEST_SKIP() << "setpriv (util-linux) is not installed";
  const auto [uid, gid] = TestUser("conduit-it-reader");
  ASSERT_GE(uid, 0) << "cannot create the local user conduit-it-reader";
  Cluster cluster(AdminCluster(1, {"--admin-mode", "0666"}));
  CONDUIT_START_CLUSTER(cluster);
  ASSERT_EQ(chmod(cluster.dir().c_str(), 0755), 0);

  IdleConnections idle(cluster.AdminSocket(0), uid, gid, 40);
  IdleReport opened;
  ASSERT_TRUE(idle.Next(&opened, std::chrono::seconds(10))) << cluster.Describe();
  ASSERT_EQ(opened.connected, 40);
  const auto start = std::chrono::steady_clock::now();
  CtlResult status = Ctl(cluster, 0, {"status"});
  EXPECT_EQ(status.rc, 0) << status.out;
  CtlResult set = Ctl(cluster, 0, {"policy", "set", "admission", R"({"deny_exe": []})"});
  EXPECT_EQ(set.rc, 0) << set.out;
  const double operator_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(operator_s, 5.0) << "the operator waited";
  CtlResult other = Ctl(cluster, 0, {"status"}, kNobody);
  EXPECT_EQ(other.rc, 0) << "another read-only user keeps its own share:\n" << other.out;

  IdleReport answers;
  ASSERT_TRUE(idle.Next(&answers, std::chrono::seconds(20))) << cluster.Describe();
  EXPECT_EQ(answers.status_503, 32) << "refused over the per-uid share";
  EXPECT_EQ(answers.status_408, 8) << "held until the head deadline";
  EXPECT_EQ(answers.other, 0);
  const std::string log = cluster.daemon(0).Output();
  EXPECT_NE(log.find("admin: refused a connection from uid " + std::to_string(uid)), std::string::npos) << log;
  EXPECT_NE(log.find("already holds 8 admin connections"), std::string::npos) << log;
  EXPECT_TRUE(cluster.DaemonAlive(0)) << cluster.Describe();
}

// A read-only caller announcing a 15 MB body for an operator route is refused from the
// head (403), without the daemon reading the body; conduitctl still shows the answer.
TEST(AdminTest, RefusedCallersBodiesAreNotRead) {
  CONDUIT_SKIP_UNLESS_CLUSTER();
  if (::access("/usr/bin/setpriv", X_OK) != 0) GTEST_SKIP() << "setpriv (util-linux) is not installed";
  Cluster cluster(AdminCluster(1, {"--admin-mode", "0666"}));
  CONDUIT_START_CLUSTER(cluster);
  ASSERT_EQ(chmod(cluster.dir().c_str(), 0755), 0);
  const std::string body_file = cluster.dir() + "/big.json";
  {
    std::ofstream f(body_file);
    // JSON (conduitctl checks), but not a policy: a string where a list belongs.
    f << "{\"deny_exe\": \"" << std::string(15 << 20, 'x') << "\"}";
  }
  ASSERT_EQ(chmod(body_file.c_str(), 0644), 0);
  CtlResult denied = Ctl(cluster, 0, {"policy", "set", "admission", "@" + body_file}, kNobody);
  EXPECT_EQ(denied.rc, 1) << denied.out;
  EXPECT_NE(denied.out.find("PERMISSION_DENIED"), std::string::npos) << denied.out;
  // The daemon reads and parses all 15 MB before it answers: under TSan on two busy cores
  // that took longer than conduitctl's default 10 s wait for the answer (a CI run).
  CtlResult bad = Ctl(cluster, 0, {"--timeout-ms", "25000", "policy", "set", "admission", "@" + body_file});
  EXPECT_EQ(bad.rc, 1) << bad.out;
  EXPECT_NE(bad.out.find("expected {\"deny_exe\""), std::string::npos) << "the operator's body is read:\n" << bad.out;
  const std::string log = cluster.daemon(0).Output();
  EXPECT_NE(log.find("admin: refused PUT /v1/policies/admission from uid 65534"), std::string::npos) << log;
}

TEST(AdminTest, MalformedRequestsGetErrors) {
  CONDUIT_SKIP_UNLESS_CLUSTER();
  Cluster cluster(AdminCluster(1));
  CONDUIT_START_CLUSTER(cluster);
  const std::string sock = cluster.AdminSocket(0);
  EXPECT_NE(RawExchange(sock, "NONSENSE\r\n\r\n").find("HTTP/1.1 400"), std::string::npos);
  EXPECT_NE(RawExchange(sock, "GET /v1/status HTTP/1.1\r\nX: " + std::string(100000, 'a')).find("HTTP/1.1 400"),
            std::string::npos);
  EXPECT_NE(RawExchange(sock, "PUT /v1/policies/admission HTTP/1.1\r\nContent-Length: 5\r\n\r\n{bad}")
                .find("HTTP/1.1 400"),
            std::string::npos);
  EXPECT_NE(RawExchange(sock, "POST /v1/status HTTP/1.1\r\n\r\n").find("HTTP/1.1 405"), std::string::npos);
  EXPECT_NE(RawExchange(sock, "GET /v2/everything HTTP/1.1\r\n\r\n").find("HTTP/1.1 404"), std::string::npos);
  // Random bytes, then a half-sent request: neither may take the daemon down or wedge it.
  std::string noise(5000, '\0');
  for (size_t i = 0; i < noise.size(); ++i) noise[i] = static_cast<char>((i * 7919) & 0xff);
  RawExchange(sock, noise);
  RawExchange(sock, "GET /v1/sta");
  EXPECT_TRUE(cluster.DaemonAlive(0)) << cluster.Describe();
  CtlResult status = Ctl(cluster, 0, {"status"});
  EXPECT_EQ(status.rc, 0) << status.out;
}

}  // namespace
}  // namespace conduit::it
