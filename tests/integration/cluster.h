// Cluster: N emulated hosts (network namespaces from tools/netns/conduit-netns), one conduitd
// per host, and rank processes launched inside them. Everything it starts is torn down by
// the destructor (processes killed, namespaces removed, temp dir deleted), and every wait
// is bounded, so a broken daemon fails a test instead of hanging ctest.
#ifndef CONDUIT_TESTS_INTEGRATION_CLUSTER_H_
#define CONDUIT_TESTS_INTEGRATION_CLUSTER_H_

#include <chrono>
#include <memory>
#include <map>
#include <string>
#include <vector>

#include "subprocess.h"

namespace conduit::it {

struct ClusterConfig {
  // Namespace prefix, unique per test executable; with $CONDUIT_IT_NS_TAG in front it must
  // stay <= 6 chars, so keep it to 3.
  std::string prefix;  // namespace names; unique per test executable (a lock enforces it)
  std::string subnet;  // "A.B.C", unique per test executable
  int hosts = 2;
  int timeout_ms = 10000;                // conduitd --timeout-ms
  std::vector<std::string> daemon_args;  // extra conduitd flags (--allreduce-algo, --deny-exe ...)
  std::map<int, std::vector<std::string>> host_daemon_args;  // more flags for one host's daemon, after those
  int port = 29611;
  // The emulated network (tools/netns/conduit-netns up): host link rate, racks joined by
  // shaped uplinks, and `mesh` direct links (paths) between every pair of hosts.
  std::string rate;
  int racks = 1;
  std::string uplink_rate;
  int mesh = 0;
  std::string mesh_rate;
  // Daemons get --topology: this JSON when set, else (with netns_topology) the topology
  // conduit-netns describes for the network above.
  std::string topology_json;
  bool netns_topology = false;
  // Pass every daemon the list of all daemons as --object-peers (the object store).
  bool object_peers = false;
  // How the daemons authenticate each other: a cluster key the harness writes (the
  // default, as operators deploy it), no key at all (each daemon talks only to itself), or
  // --insecure-peers. `encrypt` adds --encrypt-peers to the cluster key.
  enum class PeerAuth { kClusterKey, kNoKey, kInsecure };
  PeerAuth peer_auth = PeerAuth::kClusterKey;
  bool encrypt = false;
  // Words put in front of conduitd's command line inside the namespace (e.g. prlimit,
  // setpriv), to start daemons under resource limits or as another user.
  std::vector<std::string> daemon_wrapper;
  // The daemon program every host starts ("" = conduitd; e.g. a build of an earlier
  // release for an upgrade test).
  std::string daemon_binary;
};

class Cluster {
 public:
  // Why the integration tests cannot run on this machine, or "" when they can.
  static std::string SkipReason();
  // Paths baked in by CMake.
  static std::string ConduitdPath();
  static std::string CollCheckPath();
  static std::string BinPath(const std::string& name);   // a test helper next to coll_check
  static std::string ToolPath(const std::string& name);  // a Conduit program next to conduitd

  explicit Cluster(ClusterConfig config);
  ~Cluster();
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  // Creates the namespaces and starts every daemon; false with *error on failure.
  bool Start(std::string* error);
  bool StartDaemon(int host, std::string* error);

  const ClusterConfig& config() const { return config_; }
  const std::string& dir() const { return dir_; }
  std::string Netns(int host) const;
  std::string Ip(int host) const;
  std::string Socket(int host) const;
  std::string AdminSocket(int host) const;
  // The topology file the daemons were started with ("" when none).
  const std::string& topology_path() const { return topology_path_; }
  // The cluster key file every daemon was given (PeerAuth::kClusterKey), else "".
  const std::string& key_path() const { return key_path_; }
  std::string PeerAddr(int host) const;  // "ip:port" of the host's daemon

  Subprocess& daemon(int host) { return *daemons_.at(host); }
  bool DaemonAlive(int host);
  void KillDaemon(int host);  // SIGKILL, as a crash would

  // Runs argv (argv[0] a path) inside host's namespace with CONDUIT_SOCKET=Socket(host)
  // unless env sets it. The returned process is owned by the cluster.
  Subprocess& Launch(int host, const std::string& name, std::vector<std::string> argv,
                     std::vector<std::string> env = {});
  // Runs a command found on PATH (`ip netns exec`) in host's namespace to completion;
  // its exit code, output in *output.
  int RunIn(int host, const std::vector<std::string>& argv, std::string* output);
  // A fresh path for a coll_check --id-file.
  std::string NewIdFile();
  // A fresh path for a --release-file (linger.h): lingering programs end once it exists.
  std::string NewReleaseFile();

  // Waits until `text` appears in p's output or p exits; false on timeout or exit.
  static bool WaitForOutput(Subprocess& p, const std::string& text, std::chrono::milliseconds timeout);

  // All processes with exit codes and output tails, for assertion messages.
  std::string Describe();

 private:
  void StopLeftovers();

  ClusterConfig config_;
  std::string dir_;
  bool netns_up_ = false;
  int prefix_lock_ = -1;  // flock on /tmp/conduit-netns-<prefix>.lock while this cluster lives
  std::string topology_path_;
  std::string key_path_;
  int id_files_ = 0;
  std::vector<std::unique_ptr<Subprocess>> daemons_;
  std::vector<std::unique_ptr<Subprocess>> procs_;
  std::vector<std::string> proc_names_;
};

}  // namespace conduit::it

#endif  // CONDUIT_TESTS_INTEGRATION_CLUSTER_H_
