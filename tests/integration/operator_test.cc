// The operator's plane on real daemons in network namespaces: the topology decides the
// ring order of new communicators; collective connections spread over the paths of a
// two-link-per-pair mesh; reserved paths, rate caps and yielding change while programs run
// collectives whose results are checked; the topology reloads at run time; and the
// operator routes refuse callers who are not the operator and answer malformed requests
// with errors.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <thread>

#include "admin_call.h"
#include "coll_run.h"
#include "integration_env.h"

namespace conduit::it {
namespace {

constexpr int kNobody = 65534;
constexpr auto kCommWait = std::chrono::seconds(60);

ClusterConfig OperatorCluster(int hosts) {
  ClusterConfig c;
  c.prefix = "op";
  c.subnet = "10.231.40";
  c.hosts = hosts;
  return c;
}

// Checked all-reduce loops (one rank per host) that run until killed.
std::vector<Subprocess*> StartLoop(Cluster& cluster, const std::string& binary = "") {
  CollLaunch l = Ranks(1, {"--expect-error", "--hold-ms", "2", "--max-seconds", "120"});
  l.binary = binary;
  auto procs = LaunchCollCheck(cluster, l);
  for (Subprocess* p : procs) EXPECT_TRUE(Cluster::WaitForOutput(*p, "looping", kCommWait)) << cluster.Describe();
  return procs;
}

// Asserts the loops are still running and every result they checked so far was right,
// then stops them (killing one makes the others see errors, which no longer count).
void StopLoop(Cluster& cluster, const std::vector<Subprocess*>& procs) {
  for (Subprocess* p : procs) {
    EXPECT_FALSE(p->Poll()) << "a loop ended early:\n" << cluster.Describe();
    EXPECT_EQ(p->Output().find("FAIL"), std::string::npos) << cluster.Describe();
    EXPECT_EQ(p->Output().find("got nccl"), std::string::npos) << cluster.Describe();
  }
  for (Subprocess* p : procs) {
    p->Kill(SIGKILL);
    p->Wait(std::chrono::seconds(10));
  }
}

// Two hosts joined by two direct links (paths), with the matching topology.
ClusterConfig TwoPathCluster() {
  ClusterConfig c = OperatorCluster(2);
  c.mesh = 2;
  c.netns_topology = true;
  return c;
}

std::string KeyOf(const Json& comm) { return comm.find("key")->as_string(); }

// The first ready communicator on `host` whose key is not in `seen`; adds it there.
Json NewComm(const Cluster& cluster, int host, std::set<std::string>* seen) {
  Json c = WaitForComm(
      cluster, host, [seen](const Json& comm) { return seen->count(KeyOf(comm)) == 0; }, kCommWait);
  if (c.is_object()) seen->insert(KeyOf(c));
  return c;
}

// A checked loop as a new tenant, and its communicator as host 1 (which dials) sees it.
struct Tenant {
  std::vector<Subprocess*> procs;
  Json comm;
};
Tenant StartTenant(Cluster& cluster, std::set<std::string>* seen, const std::string& binary = "") {
  Tenant t;
  t.procs = StartLoop(cluster, binary);
  t.comm = NewComm(cluster, 1, seen);
  EXPECT_TRUE(t.comm.is_object()) << cluster.Describe();
  return t;
}

Json CommOn(const Cluster& cluster, int host, const std::string& key) {
  return AdminCall(cluster, host, "GET", "/v1/communicators/" + key).body;
}

// The communicator on `host` once that daemon has applied configuration `epoch` (a
// reconfiguration answers when the asked daemon switched; the others switch after the same
// collective, which they may still be running).
Json CommAtEpoch(const Cluster& cluster, int host, const std::string& key, int64_t epoch) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (;;) {
    Json c = CommOn(cluster, host, key);
    const Json* config = c.is_object() ? c.find("config") : nullptr;
    if ((config != nullptr && config->find("epoch")->as_int() >= epoch) || std::chrono::steady_clock::now() > deadline) {
      return c;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::vector<int64_t> RingOf(const Json& comm) {
  const Json* config = comm.is_object() ? comm.find("config") : nullptr;
  return Ints(config ? config->find("ring") : nullptr);
}

// h0 and h2 in rack "a", h1 and h3 in rack "b": rank order alternates racks.
std::string AlternatingRacks(const Cluster& cluster) {
  std::string hosts;
  for (int h = 0; h < 4; ++h) {
    hosts += std::string(h ? "," : "") + "{\"name\": \"h" + std::to_string(h) + "\", \"addr\": \"" +
             cluster.config().subnet + "." + std::to_string(h + 1) + "\", \"rack\": \"" + (h % 2 ? "b" : "a") + "\"}";
  }
  return "{\"hosts\": [" + hosts + "]}";
}

// Ranks 0..3 on hosts 0..3, racks a,b,a,b: the daemons order the ring so each rack's hosts
// are adjacent (ring 0>2>1>3, 2 rack crossings instead of 4), and every daemon agrees.
TEST(OperatorTest, LocalityAwareRingOrder) {
  CONDUIT_SKIP_UNLESS_CLUSTER();
  ClusterConfig config = OperatorCluster(4);
  Cluster probe(config);  // only for the subnet in the topology text
  config.topology_json = AlternatingRacks(probe);
  Cluster cluster(config);
  CONDUIT_START_CLUSTER(cluster);

  std::set<std::string> seen;
  auto loop = StartLoop(cluster);
  Json comm = NewComm(cluster, 0, &seen);
  ASSERT_TRUE(comm.is_object()) << cluster.Describe();
  const std::string key = KeyOf(comm);
  for (int h = 0; h < 4; ++h) {
    Json c = CommOn(cluster, h, key);
    EXPECT_EQ(RingOf(c), (std::vector<int64_t>{0, 2, 1, 3})) << "host " << h << ": " << c.Dump(2);
    EXPECT_EQ(c.find("config")->find("rack_crossings")->as_int(), 2) << c.Dump(2);
  }
  // The trace shows the order each collective used.
  CtlResult trace = Ctl(cluster, 1, {"trace", key, "--limit", "3"});
  ASSERT_EQ(trace.rc, 0) << trace.out;
  EXPECT_NE(trace.out.find("[0,2,1,3]"), std::string::npos) << trace.out;

  // Every collective, large enough for the ring algorithms, is right under that order.
  auto check = LaunchCollCheck(cluster, Ranks(1, {"--colls", "allreduce,broadcast,reduce,allgather,reducescatter",
                                                   "--types", "float,int32", "--ops", "sum,max", "--sizes",
                                                   "0,7,1000,100K", "--all-roots"}));
  EXPECT_EQ(WaitCollCheck(cluster, check, std::chrono::seconds(120)), "");

  // Rank order for new communicators: the ring then crosses racks 4 times. The root of the
  // rendezvous (rank 0's daemon) decides.
  ASSERT_EQ(Ctl(cluster, 0, {"policy", "set", "ring", R"({"order": "rank"})"}).rc, 0);
  auto loop2 = StartLoop(cluster);
  Json comm2 = WaitForComm(
      cluster, 3, [&](const Json& c) { return KeyOf(c) != key; }, kCommWait);
  ASSERT_TRUE(comm2.is_object()) << cluster.Describe();
  const std::string key2 = KeyOf(comm2);
  EXPECT_EQ(RingOf(comm2), (std::vector<int64_t>{0, 1, 2, 3})) << comm2.Dump(2);
  EXPECT_EQ(comm2.find("config")->find("rack_crossings")->as_int(), 4);

  // conduitctl reconfigure on a daemon other than host 0 (forwarded to it): every daemon
  // switches to the locality-aware order while the loop keeps checking results.
  CtlResult re = Ctl(cluster, 2, {"reconfigure", key2, "--ring", "locality"});
  ASSERT_EQ(re.rc, 0) << re.out;
  EXPECT_NE(re.out.find("\"applied\": true"), std::string::npos) << re.out;
  for (int h = 0; h < 4; ++h) {
    Json c = CommAtEpoch(cluster, h, key2, 1);
    EXPECT_EQ(RingOf(c), (std::vector<int64_t>{0, 2, 1, 3})) << "host " << h;
    EXPECT_EQ(c.find("config")->find("epoch")->as_int(), 1);
    EXPECT_EQ(c.find("reconfigurations")->as_int(), 1);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  StopLoop(cluster, loop);
  StopLoop(cluster, loop2);
}

// Two tenants on two hosts joined by two direct links: the daemons put their collective
// connections on different paths; with "single" assignment they share path 0; a pinned
// reconfiguration moves a running communicator to the other path.
TEST(OperatorTest, FlowAssignmentSpreadsTenantsOverPaths) {
  CONDUIT_SKIP_UNLESS_CLUSTER();
  Cluster cluster(TwoPathCluster());
  CONDUIT_START_CLUSTER(cluster);

  std::set<std::string> seen;
  auto [a, ca] = StartTenant(cluster, &seen);
  auto [b, cb] = StartTenant(cluster, &seen);
  ASSERT_TRUE(ca.is_object() && cb.is_object());
  // Host 1 dialed both links (the higher host of a pair does): one per path.
  const int pa = CollectivePath(CommOn(cluster, 1, KeyOf(ca)), 0);
  const int pb = CollectivePath(CommOn(cluster, 1, KeyOf(cb)), 0);
  EXPECT_EQ(std::set<int>({pa, pb}), (std::set<int>{0, 1})) << CommOn(cluster, 1, KeyOf(cb)).Dump(2);
  // The accepting side reports the same path.
  EXPECT_EQ(CollectivePath(CommOn(cluster, 0, KeyOf(ca)), 1), pa);
  AdminAnswer paths = AdminCall(cluster, 1, "GET", "/v1/paths");
  EXPECT_EQ(Field(paths.body, "paths").size(), 2u) << paths.text;

  // "single": a third tenant lands on path 0 whatever the load.
  ASSERT_EQ(Ctl(cluster, 1, {"policy", "set", "flows", R"({"assignment": "single"})"}).rc, 0);
  auto [c, cc] = StartTenant(cluster, &seen);
  ASSERT_TRUE(cc.is_object());
  EXPECT_EQ(CollectivePath(CommOn(cluster, 1, KeyOf(cc)), 0), 0);

  // Move it, while it runs, to path 1 and then to the primary address.
  int epoch = 0;
  for (int path : {1, -1}) {
    AdminAnswer r = AdminCall(cluster, 0, "POST", "/v1/communicators/" + KeyOf(cc) + "/reconfigure",
                              R"({"paths": [{"hosts": [0, 1], "path": )" + std::to_string(path) + "}]}");
    ASSERT_EQ(r.status, 200) << r.text;
    ++epoch;
    Json now = CommAtEpoch(cluster, 1, KeyOf(cc), epoch);
    EXPECT_EQ(CollectivePath(now, 0), path) << now.Dump(2);
    EXPECT_EQ(CollectivePath(CommAtEpoch(cluster, 0, KeyOf(cc), epoch), 1), path);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  StopLoop(cluster, a);
  StopLoop(cluster, b);
  StopLoop(cluster, c);
}

// Path 1 is reserved for priority >= 1: low-priority tenants share path 0, the prioritized
// one (another executable) gets path 1. Then a rate cap and yielding are set, changed and
// removed on the running low-priority tenants; the checked loops and a full check run under
// the cap stay correct, and the tenant metrics show the policies acted.
TEST(OperatorTest, PriorityCapAndYieldWhileRunning) {
  CONDUIT_SKIP_UNLESS_CLUSTER();
  Cluster cluster(TwoPathCluster());
  CONDUIT_START_CLUSTER(cluster);
  const std::string hi_exe = cluster.dir() + "/hi_check";
  std::filesystem::copy_file(Cluster::CollCheckPath(), hi_exe);
  chmod(hi_exe.c_str(), 0755);
  for (int h = 0; h < 2; ++h) {
    ASSERT_EQ(Ctl(cluster, h, {"policy", "set", "flows", R"({"assignment": "balance", "reserve": [{"path": 1, "min_priority": 1}]})"}).rc, 0);
    ASSERT_EQ(Ctl(cluster, h, {"policy", "set", "tenant", "hi", R"({"match": {"exe": "hi_check"}, "priority": 2})"}).rc, 0);
  }
  std::set<std::string> seen;
  auto [lo1, c1] = StartTenant(cluster, &seen);
  auto [lo2, c2] = StartTenant(cluster, &seen);
  auto [hi, ch] = StartTenant(cluster, &seen, hi_exe);
  ASSERT_TRUE(c1.is_object() && c2.is_object() && ch.is_object());
  EXPECT_EQ(CollectivePath(CommOn(cluster, 1, KeyOf(c1)), 0), 0);
  EXPECT_EQ(CollectivePath(CommOn(cluster, 1, KeyOf(c2)), 0), 0);
  Json hi_comm = CommOn(cluster, 1, KeyOf(ch));
  EXPECT_EQ(CollectivePath(hi_comm, 0), 1) << hi_comm.Dump(2);
  EXPECT_EQ(hi_comm.find("tenant")->as_string(), "hi");

  // Cap and yield the low-priority tenant while everything runs.
  const std::string lo = R"({"match": {"exe": "coll_check"}, "max_mbit_per_s": 50, "yield": true, "yield_max_ms": 20})";
  for (int h = 0; h < 2; ++h) ASSERT_EQ(Ctl(cluster, h, {"policy", "set", "tenant", "lo", lo}).rc, 0);
  // A full check under the cap: 1 MiB collectives at 50 Mbit/s.
  auto capped = LaunchCollCheck(cluster, Ranks(1, {"--colls", "allreduce,allgather,reducescatter,broadcast", "--types",
                                                    "float", "--ops", "sum", "--sizes", "7,256K"}));
  EXPECT_EQ(WaitCollCheck(cluster, capped, std::chrono::seconds(120)), "");
  CtlResult metrics = Ctl(cluster, 0, {"metrics"});
  std::smatch m;
  ASSERT_TRUE(std::regex_search(metrics.out, m, std::regex(R"(conduit_tenant_sent_bytes_total\{tenant="lo"\} ([0-9.e+]+))")))
      << metrics.out;
  EXPECT_GT(std::stod(m[1]), 1e6);
  ASSERT_TRUE(std::regex_search(metrics.out, m, std::regex(R"(conduit_tenant_capped_seconds_total\{tenant="lo"\} ([0-9.e+-]+))")));
  EXPECT_GT(std::stod(m[1]), 0.0) << "the 50 Mbit/s cap never held a send back";
  ASSERT_TRUE(std::regex_search(metrics.out, m, std::regex(R"(conduit_tenant_collectives_total\{tenant="hi"\} ([0-9.e+]+))")));
  EXPECT_GT(std::stod(m[1]), 0.0);

  // Change and remove the policy under load.
  for (int h = 0; h < 2; ++h) {
    ASSERT_EQ(Ctl(cluster, h, {"policy", "set", "tenant", "lo", R"({"match": {"exe": "coll_check"}, "max_mbit_per_s": 5})"}).rc, 0);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  for (int h = 0; h < 2; ++h) ASSERT_EQ(Ctl(cluster, h, {"policy", "rm", "tenant", "lo"}).rc, 0);
  CtlResult gone = Ctl(cluster, 0, {"policy", "get", "tenant", "lo"});
  EXPECT_EQ(gone.rc, 1);
  EXPECT_NE(gone.out.find("NOT_FOUND"), std::string::npos) << gone.out;
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  StopLoop(cluster, lo1);
  StopLoop(cluster, lo2);
  StopLoop(cluster, hi);
}

// The topology is replaced through the API, re-read from its file on request and on
// SIGHUP; invalid ones are refused and leave the current one in place.
TEST(OperatorTest, TopologyReloads) {
  CONDUIT_SKIP_UNLESS_CLUSTER();
  ClusterConfig config = OperatorCluster(1);
  config.netns_topology = true;
  Cluster cluster(config);
  CONDUIT_START_CLUSTER(cluster);
  auto generation = [&] { return Field(AdminCall(cluster, 0, "GET", "/v1/topology").body, "generation").as_int(); };
  EXPECT_EQ(generation(), 1);

  AdminAnswer put = AdminCall(cluster, 0, "PUT", "/v1/topology",
                              R"({"hosts": [{"name": "x", "addr": "10.1.2.3", "rack": "r9", "path_addrs": ["10.9.0.1"]}]})");
  ASSERT_EQ(put.status, 200) << put.text;
  EXPECT_EQ(Field(put.body, "source").as_string(), "admin");
  EXPECT_EQ(generation(), 2);
  for (const char* bad : {R"({"hosts": [{"addr": "not-an-ip"}]})", R"({"hosts": [{"addr": "10.0.0.1"}, {"addr": "10.0.0.1"}]})",
                          R"({"hosts": [], "links": [{"hosts": ["a", "b"], "paths": []}]})", R"({"hostz": []})", "[1]"}) {
    AdminAnswer r = AdminCall(cluster, 0, "PUT", "/v1/topology", bad);
    EXPECT_EQ(r.status, 400) << bad << ": " << r.text;
  }
  EXPECT_EQ(generation(), 2);

  {
    std::ofstream out(cluster.topology_path());
    out << R"({"hosts": [{"name": "only", "addr": "10.231.40.1", "rack": "r7"}]})";
  }
  CtlResult reload = Ctl(cluster, 0, {"topology", "reload"});
  ASSERT_EQ(reload.rc, 0) << reload.out;
  EXPECT_NE(reload.out.find("\"r7\""), std::string::npos) << reload.out;
  EXPECT_EQ(generation(), 3);
  {
    std::ofstream out(cluster.topology_path());
    out << R"({"hosts": [{"name": "only", "addr": "10.231.40.1", "rack": "r8"}]})";
  }
  cluster.daemon(0).Kill(SIGHUP);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (generation() != 4 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(generation(), 4);
  {
    std::ofstream out(cluster.topology_path());
    out << "{broken";
  }
  CtlResult broken = Ctl(cluster, 0, {"topology", "reload"});
  EXPECT_EQ(broken.rc, 1);
  EXPECT_NE(broken.out.find("INVALID_ARGUMENT"), std::string::npos) << broken.out;
  EXPECT_NE(Ctl(cluster, 0, {"topology"}).out.find("\"r8\""), std::string::npos);
  EXPECT_TRUE(cluster.DaemonAlive(0));
}

// Operator routes: refused to other users, malformed requests answered with errors, and
// the daemon keeps serving.
TEST(OperatorTest, OperatorRoutesRefuseAndValidate) {
  CONDUIT_SKIP_UNLESS_CLUSTER();
  if (::access("/usr/bin/setpriv", X_OK) != 0) GTEST_SKIP() << "setpriv (util-linux) is not installed";
  ClusterConfig config = OperatorCluster(2);
  config.daemon_args = {"--admin-mode", "0666"};
  Cluster cluster(config);
  CONDUIT_START_CLUSTER(cluster);
  ASSERT_EQ(chmod(cluster.dir().c_str(), 0755), 0);
  std::set<std::string> seen;
  auto loop = StartLoop(cluster);
  Json comm = NewComm(cluster, 0, &seen);
  ASSERT_TRUE(comm.is_object()) << cluster.Describe();
  const std::string key = KeyOf(comm);

  // Anyone may read; only the operator may change anything.
  EXPECT_EQ(Ctl(cluster, 0, {"topology"}, kNobody).rc, 0);
  EXPECT_EQ(Ctl(cluster, 0, {"comm", key}, kNobody).rc, 0);
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"reconfigure", key, "--ring", "reverse"},
           {"topology", "set", R"({"hosts": []})"},
           {"topology", "reload"},
           {"policy", "set", "flows", R"({"assignment": "single"})"},
           {"policy", "set", "ring", R"({"order": "rank"})"},
           {"policy", "set", "tenant", "t", R"({"match": {"exe": "x"}, "priority": 1})"},
           {"policy", "rm", "tenant", "t"}}) {
    CtlResult r = Ctl(cluster, 0, args, kNobody);
    EXPECT_EQ(r.rc, 1) << args[0] << ": " << r.out;
    EXPECT_NE(r.out.find("PERMISSION_DENIED"), std::string::npos) << args[0] << ": " << r.out;
  }
  EXPECT_EQ(CommOn(cluster, 0, key).find("config")->find("epoch")->as_int(), 0) << "a refused change applied";

  const std::string reconf = "/v1/communicators/" + key + "/reconfigure";
  struct Bad {
    std::string method, target, body;
    int status;
  };
  for (const Bad& b : std::vector<Bad>{
           {"POST", reconf, R"({"ring": [0, 0]})", 400},
           {"POST", reconf, R"({"ring": [0, 1, 2]})", 400},
           {"POST", reconf, R"({"ring": "sideways"})", 400},
           {"POST", reconf, R"({"algorithm": "bogus"})", 400},
           {"POST", reconf, R"({"paths": [{"hosts": [0, 0], "path": 1}]})", 400},
           {"POST", reconf, R"({"paths": "everywhere"})", 400},
           {"POST", reconf, R"({})", 400},
           {"POST", reconf, R"({"wait_ms": -5, "ring": "rank"})", 400},
           {"POST", reconf, "[]", 400},
           {"POST", "/v1/communicators/00000000000000ff/reconfigure", R"({"ring": "rank"})", 404},
           {"GET", reconf, "", 405},
           {"PUT", "/v1/policies/flows", R"({"assignment": "random"})", 400},
           {"PUT", "/v1/policies/flows", R"({"reserve": [{"path": -1}]})", 400},
           {"PUT", "/v1/policies/ring", R"({"order": 3})", 400},
           {"PUT", "/v1/policies/tenant/t", R"({"priority": 1})", 400},
           {"PUT", "/v1/policies/tenant/t", R"({"match": {"exe": "x"}, "priority": 99})", 400},
           {"PUT", "/v1/policies/tenant/t", R"({"match": {"comm": "XYZ"}})", 400},
           {"PUT", "/v1/policies/tenant/bad%20name", R"({"match": {"exe": "x"}})", 400},
           {"GET", "/v1/policies/tenant/none", "", 404},
           {"DELETE", "/v1/policies/tenant/none", "", 404}}) {
    AdminAnswer r = AdminCall(cluster, 0, b.method, b.target, b.body);
    EXPECT_EQ(r.status, b.status) << b.method << " " << b.target << " " << b.body << ": " << r.text;
    const Json* err = r.body.is_object() ? r.body.find("error") : nullptr;
    EXPECT_TRUE(err != nullptr && err->find("message") != nullptr) << r.text;
  }
  EXPECT_EQ(CommOn(cluster, 0, key).find("config")->find("epoch")->as_int(), 0);
  // A good request still works afterwards, and the loop's results stayed right.
  AdminAnswer ok = AdminCall(cluster, 1, "POST", reconf, R"({"algorithm": "ring", "ring": "reverse"})");
  EXPECT_EQ(ok.status, 200) << ok.text;
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_TRUE(cluster.DaemonAlive(0) && cluster.DaemonAlive(1));
  StopLoop(cluster, loop);
}

}  // namespace
}  // namespace conduit::it
