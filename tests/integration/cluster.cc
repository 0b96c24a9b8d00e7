#include "cluster.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

namespace conduit::it {
namespace {

constexpr auto kDaemonReadyTimeout = std::chrono::seconds(20);
constexpr auto kDaemonExitGrace = std::chrono::seconds(5);
constexpr size_t kTailBytes = 3000;

std::string IpTool() {
  for (const char* p : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
    if (::access(p, X_OK) == 0) return p;
  }
  return "";
}

std::string NetnsScript() { return std::string(CONDUIT_SOURCE_DIR) + "/tools/netns/conduit-netns"; }

// Ready means accepting: the socket file can appear before listen() is called.
bool CanConnect(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

std::string Tail(const std::string& s) { return s.size() <= kTailBytes ? s : "..." + s.substr(s.size() - kTailBytes); }

// A fresh cluster key file (64 hex digits, mode 0600), as `conduitctl keygen` writes one.
bool WriteKeyFile(const std::string& path) {
  unsigned char bytes[32];
  int rnd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  bool ok = rnd >= 0 && ::read(rnd, bytes, sizeof(bytes)) == static_cast<ssize_t>(sizeof(bytes));
  if (rnd >= 0) ::close(rnd);
  if (!ok) return false;
  std::string hex;
  for (unsigned char b : bytes) {
    hex.push_back("0123456789abcdef"[b >> 4]);
    hex.push_back("0123456789abcdef"[b & 15]);
  }
  hex.push_back('\n');
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  ok = fd >= 0 && ::write(fd, hex.data(), hex.size()) == static_cast<ssize_t>(hex.size());
  if (fd >= 0) ::close(fd);
  return ok;
}

}  // namespace

std::string Cluster::SkipReason() {
  if (::geteuid() != 0) return "needs root for network namespaces";
  std::string ip = IpTool();
  if (ip.empty()) return "the ip tool (iproute2) is not installed";
  if (RunCommand({ip, "netns", "list"}, nullptr) != 0) return "'ip netns' is unavailable here";
  if (::access(NetnsScript().c_str(), X_OK) != 0) return NetnsScript() + " is missing";
  if (ConduitdPath().empty() || ::access(ConduitdPath().c_str(), X_OK) != 0) return "conduitd is not built";
  return "";
}

std::string Cluster::ConduitdPath() { return CONDUITD_PATH; }
std::string Cluster::CollCheckPath() { return COLL_CHECK_PATH; }
// Test programs are built into their own directory, away from the programs a user runs.
std::string Cluster::BinPath(const std::string& name) {
  return std::filesystem::path(CollCheckPath()).parent_path() / name;
}
std::string Cluster::ToolPath(const std::string& name) {
  return std::filesystem::path(ConduitdPath()).parent_path() / name;
}

Cluster::Cluster(ClusterConfig config) : config_(std::move(config)) {
  // Checkouts testing side by side on one machine keep their namespaces apart with a tag.
  if (const char* tag = std::getenv("CONDUIT_IT_NS_TAG"); tag != nullptr) config_.prefix = tag + config_.prefix;
  std::string tmpl = "/tmp/conduit-it-" + config_.prefix + "-XXXXXX";
  if (::mkdtemp(tmpl.data()) != nullptr) dir_ = tmpl;
}

Cluster::~Cluster() {
  for (auto& p : procs_) p->Kill(SIGKILL);  // ranks still running
  // Every daemon is told first, then each awaited: they end together, not one after another
  // (under ThreadSanitizer each process sleeps at exit, tools/run-tests).
  for (auto& d : daemons_) {
    if (d != nullptr) d->Kill(SIGTERM);
  }
  for (auto& d : daemons_) {
    if (d != nullptr) d->Wait(kDaemonExitGrace);  // kills it if SIGTERM did not work
  }
  // Under the sanitizer builds a report in any daemon or program fails the test, even when
  // the test's own checks passed (a daemon may race or leak without a wrong result).
  for (const auto* list : {&daemons_, &procs_}) {
    for (const auto& p : *list) {
      if (p == nullptr) continue;
      std::string out = p->Output();
      for (const char* marker : {"ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "WARNING: ThreadSanitizer",
                                 "runtime error:"}) {
        size_t at = out.find(marker);
        if (at != std::string::npos) {
          ADD_FAILURE() << "sanitizer report from " << p->CommandLine() << ":\n" << out.substr(at, 6000);
          break;
        }
      }
    }
  }
  procs_.clear();
  daemons_.clear();
  if (netns_up_) StopLeftovers();
  if (netns_up_) RunCommand({NetnsScript(), "down", "--prefix", config_.prefix}, nullptr);
  if (prefix_lock_ >= 0) ::close(prefix_lock_);
  if (!dir_.empty() && std::getenv("CONDUIT_IT_KEEP") == nullptr) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

// Processes the harness did not start itself are still in the namespaces: daemons that
// replaced the ones it started (live upgrade), anything a test left behind. They get
// SIGTERM and the daemons' grace, then SIGKILL. Orphans are not our children: a zombie
// counts as gone (ProcessEnded).
void Cluster::StopLeftovers() {
  std::vector<pid_t> pids;
  for (int h = 0; h < config_.hosts; ++h) {
    std::string out;
    if (RunCommand({IpTool(), "netns", "pids", Netns(h)}, &out, std::chrono::seconds(10)) != 0) continue;
    for (size_t at = 0; at < out.size();) {
      size_t end = out.find('\n', at);
      if (end == std::string::npos) end = out.size();
      const int pid = atoi(out.substr(at, end - at).c_str());
      if (pid > 1) pids.push_back(pid);
      at = end + 1;
    }
  }
  auto alive = [](pid_t pid) { return !ProcessEnded(pid); };
  for (pid_t pid : pids) kill(pid, SIGTERM);
  const auto until = std::chrono::steady_clock::now() + kDaemonExitGrace;
  for (pid_t pid : pids) {
    while (alive(pid) && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (alive(pid)) kill(pid, SIGKILL);
  }
}

int Cluster::RunIn(int host, const std::vector<std::string>& argv, std::string* output) {
  std::vector<std::string> full = {IpTool(), "netns", "exec", Netns(host)};
  full.insert(full.end(), argv.begin(), argv.end());
  return RunCommand(full, output, std::chrono::seconds(10));
}

std::string Cluster::Netns(int host) const { return config_.prefix + "-h" + std::to_string(host); }
std::string Cluster::Ip(int host) const { return config_.subnet + "." + std::to_string(host + 1); }
std::string Cluster::Socket(int host) const { return dir_ + "/h" + std::to_string(host) + ".sock"; }
std::string Cluster::AdminSocket(int host) const { return dir_ + "/h" + std::to_string(host) + "-admin.sock"; }
std::string Cluster::PeerAddr(int host) const { return Ip(host) + ":" + std::to_string(config_.port); }

bool Cluster::Start(std::string* error) {
  if (dir_.empty()) {
    *error = "cannot create a temp dir";
    return false;
  }
  // Starting (and stopping) a cluster deletes every namespace under its prefix, so two live
  // clusters with one prefix silently break each other's links (ctest runs executables in
  // parallel). The lock turns that into a clear error.
  const std::string lock_path = "/tmp/conduit-netns-" + config_.prefix + ".lock";
  prefix_lock_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (prefix_lock_ < 0 || ::flock(prefix_lock_, LOCK_EX | LOCK_NB) != 0) {
    *error = "namespace prefix '" + config_.prefix + "' is in use by another running cluster (" + lock_path +
             " is locked): each test executable needs its own prefix";
    if (prefix_lock_ >= 0) ::close(prefix_lock_);
    prefix_lock_ = -1;
    return false;
  }
  // A previous run that crashed may have left namespaces behind under our prefix.
  RunCommand({NetnsScript(), "down", "--prefix", config_.prefix}, nullptr);
  std::vector<std::string> shape = {"--hosts", std::to_string(config_.hosts), "--subnet", config_.subnet,
                                    "--racks", std::to_string(config_.racks), "--mesh", std::to_string(config_.mesh)};
  std::vector<std::string> up = {NetnsScript(), "up", "--prefix", config_.prefix};
  up.insert(up.end(), shape.begin(), shape.end());
  for (const auto& [flag, value] : {std::pair<const char*, std::string>{"--rate", config_.rate},
                                    {"--uplink-rate", config_.uplink_rate},
                                    {"--mesh-rate", config_.mesh_rate}}) {
    if (value.empty()) continue;
    up.push_back(flag);
    up.push_back(value);
  }
  std::string out;
  int rc = RunCommand(up, &out);
  if (rc != 0) {
    *error = "conduit-netns up failed (exit " + std::to_string(rc) + "): " + out;
    return false;
  }
  netns_up_ = true;
  std::string topology = config_.topology_json;
  if (topology.empty() && config_.netns_topology) {
    std::vector<std::string> describe = {NetnsScript(), "topology"};
    describe.insert(describe.end(), shape.begin(), shape.end());
    if (RunCommand(describe, &topology) != 0) {
      *error = "conduit-netns topology failed: " + topology;
      return false;
    }
  }
  if (!topology.empty()) {
    topology_path_ = dir_ + "/topology.json";
    FILE* f = fopen(topology_path_.c_str(), "w");
    if (f == nullptr || fwrite(topology.data(), 1, topology.size(), f) != topology.size()) {
      *error = "cannot write " + topology_path_;
      if (f != nullptr) fclose(f);
      return false;
    }
    fclose(f);
  }
  if (config_.peer_auth == ClusterConfig::PeerAuth::kClusterKey) {
    key_path_ = dir_ + "/cluster.key";
    if (!WriteKeyFile(key_path_)) {
      *error = "cannot write the cluster key " + key_path_;
      return false;
    }
  }
  daemons_.resize(config_.hosts);
  for (int h = 0; h < config_.hosts; ++h) {
    if (!StartDaemon(h, error)) return false;
  }
  return true;
}

bool Cluster::StartDaemon(int host, std::string* error) {
  std::vector<std::string> argv = {IpTool(), "netns", "exec", Netns(host)};
  argv.insert(argv.end(), config_.daemon_wrapper.begin(), config_.daemon_wrapper.end());
  std::vector<std::string> daemon = {config_.daemon_binary.empty() ? ConduitdPath() : config_.daemon_binary,
                                   "--socket",
                                   Socket(host),
                                   "--listen",
                                   // With direct paths peers may dial any of this host's addresses.
                                   (config_.mesh > 0 ? std::string("0.0.0.0") : Ip(host)) + ":" +
                                       std::to_string(config_.port),
                                   "--advertise",
                                   Ip(host),
                                   "--timeout-ms",
                                   std::to_string(config_.timeout_ms),
                                   "--log-level",
                                   "info"};
  argv.insert(argv.end(), daemon.begin(), daemon.end());
  if (!topology_path_.empty()) {
    argv.push_back("--topology");
    argv.push_back(topology_path_);
  }
  if (!key_path_.empty()) {
    argv.push_back("--cluster-key");
    argv.push_back(key_path_);
    if (config_.encrypt) argv.push_back("--encrypt-peers");
  }
  if (config_.peer_auth == ClusterConfig::PeerAuth::kInsecure) argv.push_back("--insecure-peers");
  argv.insert(argv.end(), config_.daemon_args.begin(), config_.daemon_args.end());
  if (auto it = config_.host_daemon_args.find(host); it != config_.host_daemon_args.end()) {
    argv.insert(argv.end(), it->second.begin(), it->second.end());
  }
  if (config_.object_peers) {
    std::string peers;
    for (int h = 0; h < config_.hosts; ++h) {
      if (h > 0) peers += ',';
      peers += PeerAddr(h);
    }
    argv.push_back("--object-peers");
    argv.push_back(peers);
  }
  ::unlink(Socket(host).c_str());
  std::string log = dir_ + "/conduitd-h" + std::to_string(host) + ".log";
  daemons_.at(host) = std::make_unique<Subprocess>(argv, std::vector<std::string>{}, log);
  auto deadline = std::chrono::steady_clock::now() + kDaemonReadyTimeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (daemons_[host]->Poll()) {
      *error = "conduitd on host " + std::to_string(host) + " exited with " +
               std::to_string(daemons_[host]->exit_code()) + ": " + Tail(daemons_[host]->Output());
      return false;
    }
    if (::access(Socket(host).c_str(), F_OK) == 0 && CanConnect(Socket(host))) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  *error = "conduitd on host " + std::to_string(host) + " not ready after 20 s: " + Tail(daemons_[host]->Output());
  return false;
}

bool Cluster::DaemonAlive(int host) {
  Subprocess& d = daemon(host);
  return d.started() && !d.Poll() && ::kill(d.pid(), 0) == 0;
}

void Cluster::KillDaemon(int host) { daemon(host).Kill(SIGKILL); }

Subprocess& Cluster::Launch(int host, const std::string& name, std::vector<std::string> argv,
                            std::vector<std::string> env) {
  std::vector<std::string> full = {IpTool(), "netns", "exec", Netns(host)};
  full.insert(full.end(), argv.begin(), argv.end());
  env.insert(env.begin(), "CONDUIT_SOCKET=" + Socket(host));  // later entries win
  std::vector<std::string> merged;
  for (size_t i = 0; i < env.size(); ++i) {
    bool shadowed = false;
    std::string key = env[i].substr(0, env[i].find('=') + 1);
    for (size_t j = i + 1; j < env.size(); ++j) shadowed = shadowed || env[j].rfind(key, 0) == 0;
    if (!shadowed) merged.push_back(env[i]);
  }
  std::string out = dir_ + "/" + name + "-" + std::to_string(procs_.size()) + ".log";
  procs_.push_back(std::make_unique<Subprocess>(full, merged, out));
  proc_names_.push_back(name);
  return *procs_.back();
}

std::string Cluster::NewIdFile() { return dir_ + "/id-" + std::to_string(id_files_++); }
std::string Cluster::NewReleaseFile() { return dir_ + "/release-" + std::to_string(id_files_++); }

bool Cluster::WaitForOutput(Subprocess& p, const std::string& text, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (p.Output().find(text) != std::string::npos) return true;
    if (p.Poll()) return p.Output().find(text) != std::string::npos;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

std::string Cluster::Describe() {
  std::string s;
  for (size_t i = 0; i < procs_.size(); ++i) {
    Subprocess& p = *procs_[i];
    p.Poll();
    s += "--- " + proc_names_[i] + " (exit " + std::to_string(p.exit_code()) + (p.timed_out() ? ", timed out" : "") +
         "): " + p.CommandLine() + "\n" + Tail(p.Output()) + "\n";
  }
  for (size_t h = 0; h < daemons_.size(); ++h) {
    if (daemons_[h] == nullptr) continue;
    daemons_[h]->Poll();
    s += "--- conduitd h" + std::to_string(h) + " (exit " + std::to_string(daemons_[h]->exit_code()) + ")\n" +
         Tail(daemons_[h]->Output()) + "\n";
  }
  return s;
}

}  // namespace conduit::it
