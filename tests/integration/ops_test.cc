// Running conduitd as a packaged service does: settings from `--config FILE` (a bad file
// stops the daemon with exit status 2 and names file and line), SIGHUP applying what can
// change live and keeping the rest, and the metrics port (--metrics-listen) scraped by a
// real Prometheus server, read back through Prometheus's query API.
//
// The configuration tests run conduitd on loopback in this namespace and need no root; the
// metrics port and Prometheus tests run in network namespaces (root), Prometheus in one
// emulated host scraping conduitd in the other. Without /usr/bin/prometheus (Debian's
// `prometheus` package) the Prometheus test skips, saying so.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "admin/http.h"
#include "common/fd_io.h"
#include "common/json.h"
#include "common/version.h"
#include "integration_env.h"
#include "transport/tcp.h"

namespace conduit::it {
namespace {

using namespace std::chrono_literals;

constexpr int kMetricsPort = 9650;
constexpr int kPrometheusPort = 9090;
constexpr char kPrometheus[] = "/usr/bin/prometheus";

// ---- HTTP by hand: requests conduitd's own client would never send, answers read to EOF.

struct RawAnswer {
  int status = 0;  // 0: no answer
  std::string head;  // status line and header fields, names lower-cased
  std::string body;
  std::string error;

  bool HasHeader(const std::string& line) const { return head.find("\r\n" + line + "\r\n") != std::string::npos; }
};

// Sends `request` on fd and reads the answer until the daemon closes the connection.
RawAnswer Exchange(int fd, const std::string& request, std::chrono::milliseconds timeout = 15s) {
  RawAnswer a;
  const Deadline deadline = Deadline::AfterMs(timeout.count());
  Status st = WriteFull(fd, request.data(), request.size(), deadline);
  if (!st.ok()) {
    a.error = "send: " + st.message();
    return a;
  }
  std::string raw;
  char buf[65536];
  for (;;) {
    ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (n > 0) {
      raw.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) break;
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      a.error = std::string("receive: ") + strerror(errno);
      break;
    }
    st = WaitFd(fd, POLLIN, deadline, "an HTTP answer");
    if (!st.ok()) {
      a.error = st.message();
      break;
    }
  }
  size_t end = raw.find("\r\n\r\n");
  if (raw.rfind("HTTP/1.", 0) != 0 || raw.size() < 12 || end == std::string::npos) {
    if (a.error.empty()) a.error = "not an HTTP answer: '" + raw.substr(0, 200) + "'";
    return a;
  }
  a.status = atoi(raw.substr(9, 3).c_str());
  a.head = raw.substr(0, end + 2);
  // Field names lower-cased (each starts after a CRLF and ends at its colon).
  for (size_t i = a.head.find("\r\n"); i != std::string::npos; i = a.head.find("\r\n", i + 2)) {
    for (size_t j = i + 2; j < a.head.size() && a.head[j] != ':'; ++j) {
      a.head[j] = static_cast<char>(tolower(static_cast<unsigned char>(a.head[j])));
    }
  }
  a.body = raw.substr(end + 4);
  return a;
}

UniqueFd ConnectUnix(const std::string& path) {
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
  if (connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) return UniqueFd();
  return fd;
}

// A TCP connection to `addr` opened from inside network namespace `netns`: a thread of
// ours enters it (network namespaces are per thread) and the socket stays in it. Refused
// connections are retried until the timeout (a server that is still starting).
UniqueFd ConnectInNetns(const std::string& netns, const std::string& addr, std::chrono::milliseconds timeout,
                        std::string* error) {
  UniqueFd out;
  std::thread([&] {
    UniqueFd ns(open(("/run/netns/" + netns).c_str(), O_RDONLY | O_CLOEXEC));
    if (!ns.valid() || setns(ns.get(), CLONE_NEWNET) != 0) {
      *error = "cannot enter network namespace " + netns + ": " + strerror(errno);
      return;
    }
    Status st = TcpConnect(addr, Deadline::AfterMs(timeout.count()), &out);
    if (!st.ok()) *error = "connect to " + addr + " from " + netns + ": " + st.message();
  }).join();
  return out;
}

RawAnswer ExchangeInNetns(const std::string& netns, const std::string& addr, const std::string& request,
                          std::chrono::milliseconds connect_timeout = 10s) {
  RawAnswer a;
  UniqueFd fd = ConnectInNetns(netns, addr, connect_timeout, &a.error);
  return fd.valid() ? Exchange(fd.get(), request) : a;
}

std::string Get(const std::string& target) { return "GET " + target + " HTTP/1.1\r\nHost: test\r\n\r\n"; }

// "0.1.0" of kDaemonVersion ("conduitd 0.1.0").
std::string Release() {
  std::string v = kDaemonVersion;
  return v.substr(v.rfind(' ') + 1);
}

// ---- conduitd on loopback, with a configuration file

class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::access(Cluster::ConduitdPath().c_str(), X_OK) != 0) GTEST_SKIP() << "conduitd is not built";
    std::string tmpl = "/tmp/conduit-it-ops-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    config_ = dir_ + "/conduitd.conf";
  }
  void TearDown() override {
    if (daemon_ != nullptr) {
      // Under the sanitizer builds a report fails the test even when its checks passed.
      std::string out = daemon_->Output();
      for (const char* marker : {"ERROR: AddressSanitizer", "WARNING: ThreadSanitizer", "runtime error:"}) {
        EXPECT_EQ(out.find(marker), std::string::npos) << out;
      }
    }
    daemon_.reset();  // killed if still running
    if (!dir_.empty() && std::getenv("CONDUIT_IT_KEEP") == nullptr) {
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
    }
  }

  void WriteConfig(const std::string& text) { std::ofstream(config_, std::ios::trunc) << text; }

  // conduitd on loopback with --config and `extra` flags; waits for its admin socket and for
  // the "serving programs on" line (logged just after the sockets open: a test that reads the
  // start-up lines must not race it).
  void StartDaemon(std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {Cluster::ConduitdPath(), "--config", config_, "--socket", dir_ + "/c.sock",
                                     "--admin-socket", AdminSocket(), "--listen", "127.0.0.1:0"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    daemon_ = std::make_unique<Subprocess>(argv, std::vector<std::string>{}, dir_ + "/conduitd.log");
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (std::chrono::steady_clock::now() < deadline) {
      ASSERT_FALSE(daemon_->Poll()) << "conduitd exited with " << daemon_->exit_code() << ":\n" << daemon_->Output();
      if (ConnectUnix(AdminSocket()).valid() && daemon_->Output().find("serving programs on") != std::string::npos) {
        return;
      }
      std::this_thread::sleep_for(20ms);
    }
    FAIL() << "conduitd not ready after 20 s:\n" << daemon_->Output();
  }

  // Sends SIGHUP and waits until the log holds `n` lines with `marker`.
  void Reload(const std::string& marker, int n) {
    ASSERT_EQ(::kill(daemon_->pid(), SIGHUP), 0);
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (std::chrono::steady_clock::now() < deadline) {
      if (CountOf(daemon_->Output(), marker) >= n) return;
      std::this_thread::sleep_for(20ms);
    }
    FAIL() << "no '" << marker << "' line after SIGHUP:\n" << daemon_->Output();
  }

  static int CountOf(const std::string& text, const std::string& what) {
    int n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  }

  // GET /v1/policies/admission's deny_exe, joined with ','.
  std::string DeniedExes() {
    UniqueFd fd = ConnectUnix(AdminSocket());
    if (!fd.valid()) return "(admin socket unreachable)";
    RawAnswer a = Exchange(fd.get(), Get("/v1/policies/admission"));
    Json body;
    if (a.status != 200 || !Json::Parse(a.body, &body).ok() || body.find("deny_exe") == nullptr) {
      return "(bad answer " + std::to_string(a.status) + ": " + a.body + a.error + ")";
    }
    std::string out;
    for (const Json& name : body.find("deny_exe")->items()) out += (out.empty() ? "" : ",") + name.as_string();
    return out;
  }

  std::string AdminSocket() const { return dir_ + "/c-admin.sock"; }

  std::string dir_;
  std::string config_;
  std::unique_ptr<Subprocess> daemon_;
};

TEST_F(ConfigTest, BadFilesStopTheDaemonWithExit2NamingFileAndLine) {
  struct Case {
    std::string text;
    std::string expect;  // in the error, after "conduitd: "
  };
  const std::vector<Case> cases = {
      {"log-level = info\n\nno-such-setting = 1\n", config_ + ":3: unknown setting 'no-such-setting'"},
      {"# ok\ntimeout-ms = soon\n", config_ + ":2: timeout-ms: 'soon' is not a number"},
      {"insecure-peers = yes\n", config_ + ":1: insecure-peers: 'yes' must be true or false"},
      {"log-level info\n", config_ + ":1: expected 'name = value'"},
      {"--listen = 127.0.0.1:1\n", config_ + ":1: write the setting's name without the leading '--'"},
      {"metrics-listen = nowhere\n", config_ + ":1: metrics-listen: 'nowhere' is not IP:PORT"},
      {"config = /etc/other.conf\n", config_ + ":1: 'config' names this file"},
      {"#" + std::string(1 << 20, 'x') + "\n",
       "configuration file " + config_ + " is 1048578 bytes, over the 1048576-byte limit"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text.substr(0, 60));
    WriteConfig(c.text);
    std::string out;
    EXPECT_EQ(RunCommand({Cluster::ConduitdPath(), "--config", config_}, &out, 20s), 2) << out;
    EXPECT_NE(out.find("conduitd: " + c.expect), std::string::npos) << out;
  }
  std::string out;
  EXPECT_EQ(RunCommand({Cluster::ConduitdPath(), "--config", dir_ + "/missing.conf"}, &out, 20s), 2) << out;
  EXPECT_NE(out.find("cannot open configuration file " + dir_ + "/missing.conf"), std::string::npos) << out;
  EXPECT_EQ(RunCommand({Cluster::ConduitdPath(), "--config", dir_}, &out, 20s), 2) << out;
  EXPECT_NE(out.find("configuration file " + dir_ + " is not a regular file"), std::string::npos) << out;
  // A good file with a bad command line: the command line's error, with the usage.
  WriteConfig("log-level = info\n");
  EXPECT_EQ(RunCommand({Cluster::ConduitdPath(), "--config", config_, "--timeout-ms", "x"}, &out, 20s), 2) << out;
  EXPECT_NE(out.find("--timeout-ms: 'x' is not a number"), std::string::npos) << out;
}

// Settings come from the file; SIGHUP applies the live ones (log-level, deny-exe), logs one
// warning per changed setting that needs a restart and keeps its old value; a file that no
// longer loads changes nothing. The metrics port named in the file serves.
TEST_F(ConfigTest, SighupAppliesLiveSettingsAndKeepsTheRest) {
  WriteConfig(
      "# conduitd, as the package runs it\n"
      "log-level = info\n"
      "deny-exe = first\n"
      "timeout-ms = 10000\n"
      "metrics-listen = 127.0.0.1:0\n");
  ASSERT_NO_FATAL_FAILURE(StartDaemon());
  EXPECT_EQ(DeniedExes(), "first");
  std::string log = daemon_->Output();
  EXPECT_NE(log.find("timeout 10000 ms; settings: " + config_), std::string::npos) << log;

  // The metrics port from the file answers on loopback.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(log, m, std::regex(R"(serving metrics \(Prometheus\) on http://([0-9.:]+)/metrics)")))
      << log;
  UniqueFd fd;
  ASSERT_TRUE(TcpConnect(m[1].str(), Deadline::AfterMs(5000), &fd).ok());
  RawAnswer scrape = Exchange(fd.get(), Get("/metrics"));
  ASSERT_EQ(scrape.status, 200) << scrape.head << scrape.error;
  EXPECT_NE(scrape.body.find("conduit_build_info{version=\"" + Release() + "\"} 1\n"), std::string::npos)
      << scrape.body;

  WriteConfig(
      "log-level = debug\n"
      "deny-exe = second\n"
      "deny-exe = third\n"
      "timeout-ms = 20000\n"
      "metrics-listen = 127.0.0.1:0\n");
  ASSERT_NO_FATAL_FAILURE(Reload("SIGHUP: reloaded", 1));
  log = daemon_->Output();
  EXPECT_EQ(DeniedExes(), "second,third");
  EXPECT_NE(log.find("SIGHUP: timeout-ms changed from 10000 to 20000 in " + config_ +
                     ", which needs a restart; keeping 10000"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("SIGHUP: reloaded " + config_ + ": applied deny-exe = second, third; log-level = debug; "
                     "1 changed setting(s) need a restart"),
            std::string::npos)
      << log;
  EXPECT_EQ(CountOf(log, "needs a restart"), 1) << log;

  // Broken on line 2: nothing changes, and the log says where.
  WriteConfig("log-level = info\ndeny-exe =\n");
  ASSERT_NO_FATAL_FAILURE(Reload("nothing reloaded", 1));
  log = daemon_->Output();
  EXPECT_NE(log.find("SIGHUP: " + config_ + ":2: 'deny-exe' has no value; nothing reloaded"), std::string::npos)
      << log;
  EXPECT_EQ(DeniedExes(), "second,third");
  EXPECT_TRUE(daemon_->Poll() == false) << log;
}

// Flags on the command line override the file, at start and on every reload; a repeatable
// flag's values replace the file's list.
TEST_F(ConfigTest, CommandLineOverridesTheFileAcrossReloads) {
  WriteConfig("deny-exe = from-file\ndeny-exe = also-from-file\nlog-level = error\n");
  ASSERT_NO_FATAL_FAILURE(StartDaemon({"--deny-exe", "from-cli", "--log-level", "info"}));
  EXPECT_EQ(DeniedExes(), "from-cli");
  EXPECT_NE(daemon_->Output().find("serving programs on"), std::string::npos) << "info lines are logged";

  WriteConfig("deny-exe = changed\nlog-level = warn\nring-order = rank\n");
  ASSERT_NO_FATAL_FAILURE(Reload("SIGHUP: reloaded", 1));
  EXPECT_EQ(DeniedExes(), "from-cli");
  std::string log = daemon_->Output();
  EXPECT_NE(log.find("SIGHUP: reloaded " + config_ + ": applied ring-order = rank; 0 changed setting(s)"),
            std::string::npos)
      << log;
}

// ---- the metrics port and Prometheus, in network namespaces

class MetricsPortTest : public ClusterSuiteTest<MetricsPortTest> {
 public:
  static ClusterConfig Config() {
    ClusterConfig c;
    c.prefix = "pm";
    c.subnet = "10.231.60";
    c.hosts = 2;
    c.daemon_args = {"--metrics-listen", "0.0.0.0:" + std::to_string(kMetricsPort)};
    return c;
  }

 protected:
  // host 0's metrics port, from host 1.
  RawAnswer AskMetricsPort(const std::string& request) {
    return ExchangeInNetns(cluster_->Netns(1), cluster_->Ip(0) + ":" + std::to_string(kMetricsPort), request);
  }
};

TEST_F(MetricsPortTest, ServesOnlyGetAndHeadOfMetrics) {
  RawAnswer a = AskMetricsPort(Get("/metrics"));
  ASSERT_EQ(a.status, 200) << a.head << a.error;
  EXPECT_TRUE(a.HasHeader("content-type: text/plain; version=0.0.4; charset=utf-8")) << a.head;
  for (const char* family : {"# TYPE conduit_up gauge", "# TYPE conduit_build_info gauge",
                             "# TYPE process_start_time_seconds gauge", "# TYPE conduit_uptime_seconds gauge",
                             "# TYPE conduit_communicators gauge", "# TYPE conduit_path_ring_connections gauge"}) {
    EXPECT_NE(a.body.find(family), std::string::npos) << family << " in\n" << a.body;
  }
  EXPECT_NE(a.body.find("conduit_build_info{version=\"" + Release() + "\"} 1\n"), std::string::npos) << a.body;

  RawAnswer head = AskMetricsPort("HEAD /metrics HTTP/1.1\r\nHost: test\r\n\r\n");
  EXPECT_EQ(head.status, 200) << head.head << head.error;
  EXPECT_TRUE(head.body.empty()) << head.body;
  EXPECT_NE(head.head.find("content-length: "), std::string::npos) << head.head;

  // A query string is not a different resource.
  EXPECT_EQ(AskMetricsPort(Get("/metrics?name[]=conduit_up")).status, 200);

  for (const char* path : {"/", "/v1/status", "/metrics/", "/v1/policies/admission", "/api/v1/query"}) {
    RawAnswer r = AskMetricsPort(Get(path));
    EXPECT_EQ(r.status, 404) << path << ": " << r.head << r.error;
  }
  for (const char* method : {"POST", "PUT", "DELETE", "PATCH", "OPTIONS"}) {
    RawAnswer r = AskMetricsPort(std::string(method) + " /metrics HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\n{}");
    EXPECT_EQ(r.status, 405) << method << ": " << r.head << r.error;
    EXPECT_TRUE(r.HasHeader("allow: GET, HEAD")) << r.head;
  }
  EXPECT_EQ(AskMetricsPort("GET /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello").status, 400);
  EXPECT_EQ(AskMetricsPort("GET /metrics HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n").status, 400);
  EXPECT_EQ(AskMetricsPort("BREW /metrics HTCPCP/1.0\r\n\r\n").status, 400);
  EXPECT_EQ(AskMetricsPort("GET /metrics HTTP/1.1\r\nX: " + std::string(20000, 'a') + "\r\n\r\n").status, 400);

  // A caller that sends nothing is answered 408 at the head deadline (2 s), not waited for.
  std::string error;
  UniqueFd idle = ConnectInNetns(cluster_->Netns(1), cluster_->Ip(0) + ":" + std::to_string(kMetricsPort), 10s, &error);
  ASSERT_TRUE(idle.valid()) << error;
  const auto t0 = std::chrono::steady_clock::now();
  RawAnswer timed_out = Exchange(idle.get(), "");
  EXPECT_EQ(timed_out.status, 408) << timed_out.head << timed_out.error;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 8s);

  // Every refusal left the daemon serving.
  EXPECT_EQ(AskMetricsPort(Get("/metrics")).status, 200);
  EXPECT_TRUE(cluster_->DaemonAlive(0)) << cluster_->Describe();
}

TEST_F(MetricsPortTest, CapsConnectionsAtOnce) {
  // 16 idle connections hold every slot; the 17th is answered 503 at once.
  const std::string addr = cluster_->Ip(0) + ":" + std::to_string(kMetricsPort);
  std::vector<UniqueFd> idle;
  std::string error;
  for (int i = 0; i < 16; ++i) {
    idle.push_back(ConnectInNetns(cluster_->Netns(1), addr, 10s, &error));
    ASSERT_TRUE(idle.back().valid()) << error;
  }
  // The accept loop takes connections in order: wait until it took the 16th.
  std::this_thread::sleep_for(200ms);
  // It sends nothing: a refused request's unread bytes could make TCP reset the answer.
  const auto t0 = std::chrono::steady_clock::now();
  RawAnswer busy = ExchangeInNetns(cluster_->Netns(1), addr, "");
  EXPECT_EQ(busy.status, 503) << busy.head << busy.error;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1500ms);
  idle.clear();
  // Slots come back once those connections end (at the latest at their 2 s head deadline).
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  int status = 0;
  while (std::chrono::steady_clock::now() < deadline && (status = AskMetricsPort(Get("/metrics")).status) != 200) {
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(status, 200);
}

// Prometheus's answer to `query` (instant), the result vector; null Json on failure.
Json PrometheusQuery(const Cluster& cluster, const std::string& query, std::string* error) {
  RawAnswer a = ExchangeInNetns(cluster.Netns(1), cluster.Ip(1) + ":" + std::to_string(kPrometheusPort),
                                "GET /api/v1/query?query=" + PercentEncode(query) + " HTTP/1.0\r\n\r\n", 1s);
  Json body;
  if (a.status != 200 || !Json::Parse(a.body, &body).ok()) {
    *error = "status " + std::to_string(a.status) + " " + a.error + " " + a.body.substr(0, 500);
    return Json();
  }
  const Json* data = body.find("data");
  const Json* result = data != nullptr && data->is_object() ? data->find("result") : nullptr;
  if (result == nullptr || !result->is_array()) {
    *error = "no data.result in " + a.body.substr(0, 500);
    return Json();
  }
  return *result;
}

// The single sample's value and labels of an instant query, once Prometheus has it.
struct Sample {
  double value = 0;
  Json labels;
};

bool WaitForSample(const Cluster& cluster, const std::string& query, std::chrono::seconds timeout, Sample* out,
                   std::string* error) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    Json result = PrometheusQuery(cluster, query, error);
    if (result.is_array() && result.size() == 1) {
      const Json& s = result.items()[0];
      const Json* value = s.find("value");
      if (value != nullptr && value->is_array() && value->size() == 2 && value->items()[1].is_string()) {
        out->value = strtod(value->items()[1].as_string().c_str(), nullptr);
        out->labels = s.find("metric") != nullptr ? *s.find("metric") : Json();
        return true;
      }
    }
    if (result.is_array()) *error = "result so far: " + std::to_string(result.size()) + " series";
    std::this_thread::sleep_for(500ms);
  }
  return false;
}

std::string Label(const Sample& s, const char* name) {
  const Json* v = s.labels.is_object() ? s.labels.find(name) : nullptr;
  return v != nullptr && v->is_string() ? v->as_string() : "";
}

TEST_F(MetricsPortTest, PrometheusScrapesConduitd) {
  if (::access(kPrometheus, X_OK) != 0) {
    GTEST_SKIP() << kPrometheus << " is not installed (Debian package 'prometheus')";
  }
  const auto test_start = std::chrono::system_clock::now();
  const std::string target = cluster_->Ip(0) + ":" + std::to_string(kMetricsPort);
  const std::string config = cluster_->dir() + "/prometheus.yml";
  std::ofstream(config) << "global:\n"
                           "  scrape_interval: 1s\n"
                           "  scrape_timeout: 1s\n"
                           "scrape_configs:\n"
                           "  - job_name: conduitd\n"
                           "    static_configs:\n"
                           "      - targets: ['" + target + "']\n";
  const std::string data = cluster_->dir() + "/prometheus-data";
  Subprocess& prometheus = cluster_->Launch(
      1, "prometheus",
      {kPrometheus, "--config.file=" + config, "--storage.tsdb.path=" + data,
       "--web.listen-address=" + cluster_->Ip(1) + ":" + std::to_string(kPrometheusPort), "--log.level=warn"});
  // Prometheus goes at the end of the test, passed or not (the cluster would kill it later).
  struct Stop {
    Subprocess& p;
    ~Stop() {
      p.Kill(SIGKILL);
      p.Wait(10s);
    }
  } stop{prometheus};

  const auto timeout = std::chrono::seconds(30 * kSanitizerSlowdown);
  std::string error;
  Sample up;
  ASSERT_TRUE(WaitForSample(*cluster_, "up{job=\"conduitd\"}", timeout, &up, &error))
      << error << "\n" << prometheus.Output();
  // Prometheus parsed every line of a whole scrape (a malformed line fails all of it).
  const auto scraped_by = std::chrono::steady_clock::now() + timeout;
  while (up.value != 1 && std::chrono::steady_clock::now() < scraped_by) {
    std::this_thread::sleep_for(500ms);
    WaitForSample(*cluster_, "up{job=\"conduitd\"}", 5s, &up, &error);
  }
  ASSERT_EQ(up.value, 1) << "Prometheus could not scrape " << target << "\n" << prometheus.Output();

  Sample build;
  ASSERT_TRUE(WaitForSample(*cluster_, "conduit_build_info", timeout, &build, &error)) << error;
  EXPECT_EQ(build.value, 1);
  EXPECT_EQ(Label(build, "version"), Release());
  EXPECT_EQ(Label(build, "instance"), target);
  EXPECT_EQ(Label(build, "job"), "conduitd");

  Sample uptime;
  ASSERT_TRUE(WaitForSample(*cluster_, "conduit_uptime_seconds", timeout, &uptime, &error)) << error;
  EXPECT_GT(uptime.value, 0);

  Sample started;
  ASSERT_TRUE(WaitForSample(*cluster_, "process_start_time_seconds", timeout, &started, &error)) << error;
  const double test_start_s = std::chrono::duration<double>(test_start.time_since_epoch()).count();
  EXPECT_GT(started.value, test_start_s - 600) << "the daemon started with this test suite";
  EXPECT_LT(started.value, test_start_s + 1);
}

}  // namespace
}  // namespace conduit::it
