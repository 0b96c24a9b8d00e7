// Every collective, type and op at small sizes across 2 emulated hosts, in the rank layouts
// programs use: 1/2/4 processes per host, threads in one process, non-blocking init, and
// both allreduce algorithms of the daemon.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "coll_run.h"
#include "integration_env.h"
#include "page_adoption.h"

namespace conduit::it {
namespace {

// Every type and op, in the plain build: the reductions and the per-type copy paths.
// The sanitizer builds (which run only the slices named in CMakeLists.txt) look for memory
// and thread errors in the daemon and the shim, whose paths do not depend on the element
// type: there every collective and size runs with a narrow, a half and a wide type and the
// ops with their own paths (PreMulSum's scalar, Avg's deferred division). Every type and op
// is checked by the plain build, reduce_test and collective_algorithms_test.
const std::vector<std::string> kAllSmall =
    kSanitizerSlowdown > 1
        ? std::vector<std::string>{"--types", "int8,half,double", "--ops", "sum,premulsum,avg", "--sizes",
                                   "0,1,7,1000,65539"}
        : std::vector<std::string>{"--types", "all", "--ops", "all", "--sizes", "0,1,7,1000,65539"};
// The rank layouts (several ranks per host, threads, streamed copies, ncclMemAlloc buffers,
// non-blocking init): what they change is where buffers live, how local ranks are combined
// and who waits for whom, not the element arithmetic, which OneRankPerHost and the
// algorithm tests check for every type and op. Every op runs with an element of each width
// (1, 2 and 8 bytes, integer and floating point, both 16-bit formats, the common float), so
// Avg's division by the rank count and the streamed copies' alignment are covered.
const std::vector<std::string> kLayoutSmall =
    kSanitizerSlowdown > 1 ? kAllSmall
                           : std::vector<std::string>{"--types", "int8,uint64,half,bfloat16,float", "--ops", "all",
                                                      "--sizes", "0,1,7,1000,65539"};
constexpr auto kRunTimeout = std::chrono::seconds(240 * kSanitizerSlowdown);

ClusterConfig TwoHosts(std::vector<std::string> daemon_args = {}) {
  ClusterConfig c;
  c.prefix = "c2";
  c.subnet = "10.231.12";
  c.hosts = 2;
  c.daemon_args = std::move(daemon_args);
  return c;
}

void RunOn(Cluster& cluster, CollLaunch launch) {
  auto procs = LaunchCollCheck(cluster, launch);
  std::string failure = WaitCollCheck(cluster, procs, kRunTimeout);
  EXPECT_TRUE(failure.empty()) << failure;
}

// One cluster for the layout tests: daemons must serve communicator after communicator.
class TwoHostTest : public ClusterSuiteTest<TwoHostTest> {
 public:
  static ClusterConfig Config() { return TwoHosts(); }
};

TEST_F(TwoHostTest, OneRankPerHost) { RunOn(*cluster_, Ranks(1, kAllSmall)); }
TEST_F(TwoHostTest, TwoRanksPerHost) { RunOn(*cluster_, Ranks(2, kLayoutSmall)); }
TEST_F(TwoHostTest, FourRanksPerHost) { RunOn(*cluster_, Ranks(4, kLayoutSmall)); }

// Every single-collective group streamed through the staging control page, whatever its
// size (the shim streams only from 1 MiB by default, above these sizes).
TEST_F(TwoHostTest, StreamedCopies) {
  CollLaunch launch = Ranks(2, kLayoutSmall);
  launch.env.push_back("CONDUIT_STREAM_MIN_BYTES=0");
  RunOn(*cluster_, launch);
}

// Outputs copied out with non-temporal stores (common/stream_copy.h) at every size: the
// streamed collectives' (in place and out of place, from the segment and from the result
// area) and the other groups' (send, receive, all-to-all, gather, scatter); by default only
// outputs of 16 MiB and more are.
TEST_F(TwoHostTest, StreamedOutputsCopiedNonTemporal) {
  CollLaunch launch = Ranks(2, kLayoutSmall);
  launch.env.push_back("CONDUIT_STREAM_MIN_BYTES=0");
  launch.env.push_back("CONDUIT_NT_OUTPUT_MIN_BYTES=0");
  RunOn(*cluster_, launch);
}

// Buffers from ncclMemAlloc: AllReduce, AllGather and Broadcast run in the programs' own
// buffers (host regions), in place and out of place; the other collectives stage as usual.
TEST_F(TwoHostTest, NcclMemAllocBuffers) {
  std::vector<std::string> args = kLayoutSmall;
  args.push_back("--mem-alloc");
  RunOn(*cluster_, Ranks(2, args));
  RunOn(*cluster_, Ranks(1, args));
}

// Sends and receives in ncclMemAlloc'd buffers are read and written where they are; a
// group whose receive overwrites the bytes it sends is staged instead, so each rank still
// sends what its buffer held (ranks on the same host and on the other).
TEST_F(TwoHostTest, SendAndReceiveInOneNcclMemAllocBuffer) {
  auto procs = LaunchCollCheck(*cluster_, Ranks(2, {"--colls", "replace", "--types", "int8,float", "--sizes",
                                                    "7,65539,1MiB", "--iters", "3", "--mem-alloc", "--verbose"}));
  ASSERT_EQ(WaitCollCheck(*cluster_, procs, kRunTimeout), "");
  for (Subprocess* p : procs) {
    EXPECT_NE(p->Output().find("replace type=float count=262144"), std::string::npos) << p->Output();
  }
}

// The programs' own buffers adopted as host regions (CONDUIT_ADOPT_HOST_BUFFERS,
// libmccs-nccl/page_adoption.h) from one page up: malloc'd buffers whose first and last
// pages they share with malloc's headers, freed and allocated again between cases at the
// same addresses (an adoption the shim did not notice was gone would give wrong results),
// in place and out of place. On a kernel without PROCMAP_QUERY nothing is adopted and the
// ops stage; where it has it, the shim's NCCL_DEBUG lines must show adoptions.
TEST_F(TwoHostTest, AdoptedBuffers) {
  for (int per_host : {1, 2}) {
    CollLaunch launch = Ranks(per_host, kLayoutSmall);
    for (const char* v : {"CONDUIT_ADOPT_HOST_BUFFERS=1", "CONDUIT_ADOPT_MIN_BYTES=0", "NCCL_DEBUG=INFO",
                          "NCCL_DEBUG_SUBSYS=REG"}) {
      launch.env.push_back(v);
    }
    auto procs = LaunchCollCheck(*cluster_, launch);
    ASSERT_EQ(WaitCollCheck(*cluster_, procs, kRunTimeout), "");
    if (!PageAdoptionSupported()) continue;  // the shim asks the kernel the same way
    for (Subprocess* p : procs) {
      EXPECT_NE(p->Output().find("adopted: its ops run in place"), std::string::npos) << p->Output().substr(0, 4000);
    }
  }
}

TEST_F(TwoHostTest, TwoThreadsPerHost) { RunOn(*cluster_, Ranks(2, kLayoutSmall).AsThreads()); }

TEST_F(TwoHostTest, NonBlockingInit) {
  std::vector<std::string> args = kLayoutSmall;
  args.push_back("--nonblocking");
  RunOn(*cluster_, Ranks(2, args));
}

// ncclCommInitAll: all ranks of the communicator are threads of one process on one host.
// NCCL_COMM_ID: no id is handed around; every rank computes the same one from the
// address, as launchers that set it expect. Twice with the same address: the second
// communicator forms once the first is gone, as NCCL's do.
TEST_F(TwoHostTest, UniqueIdFromNcclCommId) {
  CollLaunch launch = Ranks(2, {"--types", "float", "--ops", "sum", "--sizes", "1,65539"});
  launch.env = {"NCCL_COMM_ID=" + cluster_->Ip(0) + ":29500"};
  RunOn(*cluster_, launch);
  RunOn(*cluster_, launch);
}

// NCCL_DEBUG on the managed path speaks NCCL's form, so the tools built on NCCL's output
// work: "host:pid:tid [dev] NCCL INFO|WARN ...", the version line, an Init COMPLETE line
// per rank and a line per collective call (COLL), NCCL_DEBUG_SUBSYS choosing which INFO
// lines appear (warnings always), NCCL_DEBUG_FILE with %h and %p.
TEST_F(TwoHostTest, NcclDebugInNcclsForm) {
  const std::string logs = cluster_->dir() + "/nccl-debug";
  std::filesystem::create_directories(logs);
  CollLaunch launch = Ranks(1, {"--types", "float", "--ops", "sum", "--sizes", "7", "--colls", "allreduce"});
  launch.env = {"NCCL_DEBUG=INFO", "NCCL_DEBUG_SUBSYS=INIT,COLL", "NCCL_DEBUG_FILE=" + logs + "/nccl.%h.%p.log",
                "NCCL_ALGO=Ring"};
  RunOn(*cluster_, launch);
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(logs)) files.push_back(entry.path().string());
  ASSERT_EQ(files.size(), 2u) << "one NCCL_DEBUG_FILE per rank process";
  const std::regex prefix(R"(^[^:\s]+:[0-9]+:[0-9]+ \[[0-9]+\] NCCL (INFO|WARN) )");
  for (const std::string& file : files) {
    EXPECT_NE(file.find(".log"), std::string::npos);
    std::ifstream in(file);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      EXPECT_TRUE(std::regex_search(line, prefix)) << "not in NCCL's form: " << line;
    }
    EXPECT_NE(text.find("NCCL INFO NCCL version 2.28."), std::string::npos) << text;
    EXPECT_NE(text.find("NCCL INFO ncclCommInitRank comm 0x"), std::string::npos) << text;
    EXPECT_NE(text.find(" nranks 2 "), std::string::npos) << text;
    EXPECT_NE(text.find("Init COMPLETE"), std::string::npos) << text;
    EXPECT_NE(text.find("NCCL INFO AllReduce: opCount 0 sendbuff 0x"), std::string::npos) << text;
    EXPECT_NE(text.find("count 7 datatype 7 op 0 root 0 comm 0x"), std::string::npos) << text;
    EXPECT_NE(text.find("NCCL WARN conduitd runs this program's collectives"), std::string::npos) << text;
    EXPECT_EQ(text.find("set by environment"), std::string::npos) << "ENV lines shown without ENV:\n" << text;
  }
  // Everything but COLL and INIT: the variables (ENV), no collective or init lines. WARN: no
  // INFO line at all, nor the version.
  std::filesystem::remove_all(logs);
  launch.env = {"NCCL_DEBUG=INFO", "NCCL_DEBUG_SUBSYS=^COLL,INIT", "NCCL_ALGO=Ring"};
  auto procs = LaunchCollCheck(*cluster_, launch);
  ASSERT_EQ(WaitCollCheck(*cluster_, procs, kRunTimeout), "");
  for (Subprocess* p : procs) {
    const std::string out = p->Output();
    EXPECT_NE(out.find("NCCL INFO NCCL_ALGO set by environment to Ring (ignored"), std::string::npos) << out;
    EXPECT_NE(out.find("NCCL INFO NCCL_DEBUG_SUBSYS set by environment to ^COLL,INIT."), std::string::npos) << out;
    EXPECT_EQ(out.find("AllReduce: opCount"), std::string::npos) << out;
    EXPECT_EQ(out.find("Init COMPLETE"), std::string::npos) << out;
  }
  launch.env = {"NCCL_DEBUG=WARN", "NCCL_DEBUG_SUBSYS=ALL", "NCCL_ALGO=Ring"};
  procs = LaunchCollCheck(*cluster_, launch);
  ASSERT_EQ(WaitCollCheck(*cluster_, procs, kRunTimeout), "");
  for (Subprocess* p : procs) {
    const std::string out = p->Output();
    EXPECT_EQ(out.find("NCCL INFO"), std::string::npos) << out;
    EXPECT_NE(out.find("NCCL WARN conduitd runs this program's collectives"), std::string::npos) << out;
  }
}

TEST_F(TwoHostTest, InitAllInOneProcess) { RunOn(*cluster_, Ranks(4, kLayoutSmall).OnHosts(1).AsThreads()); }

class AllReduceAlgoTest : public ::testing::TestWithParam<const char*> {};

// 3 ranks per host: 6 ranks is not a power of two, the awkward case for recursive doubling.
TEST_P(AllReduceAlgoTest, AllTypesAndOps) {
  CONDUIT_SKIP_UNLESS_CLUSTER();
  Cluster cluster(TwoHosts({"--allreduce-algo", GetParam()}));
  CONDUIT_START_CLUSTER(cluster);
  std::vector<std::string> args = kAllSmall;
  args.insert(args.end(), {"--colls", "allreduce"});
  RunOn(cluster, Ranks(3, args));
  RunOn(cluster, Ranks(1, args));
}

INSTANTIATE_TEST_SUITE_P(Algos, AllReduceAlgoTest, ::testing::Values("ring", "rd", "rh"));

// The daemon's connections on its peer port in host's namespace: the congestion control
// `ss -ti` shows for each (listener included), one word per socket.
std::vector<std::string> PeerPortCongestion(const Cluster& cluster, int host, bool* listening) {
  const std::string port = std::to_string(cluster.config().port);
  const std::string cmd = "ip netns exec " + cluster.Netns(host) + " ss -taniH '( sport = :" + port +
                          " or dport = :" + port + " )' 2>&1";
  std::vector<std::string> names;
  *listening = false;
  FILE* f = popen(cmd.c_str(), "r");
  if (f == nullptr) return names;
  char line[4096];
  bool next_is_info = false, listener = false;
  while (fgets(line, sizeof(line), f) != nullptr) {
    std::string l(line);
    if (!l.empty() && (l[0] == ' ' || l[0] == '\t')) {  // the info line of the socket above
      if (!next_is_info) continue;
      std::istringstream words(l);
      std::string first;
      words >> first;
      names.push_back(first);
      if (listener) *listening = true;
      next_is_info = false;
      continue;
    }
    listener = l.rfind("LISTEN", 0) == 0;
    next_is_info = l.rfind("ESTAB", 0) == 0 || listener;
  }
  pclose(f);
  return names;
}

// --peer-congestion reaches the sockets conduitd makes: the peer port's listener and every
// connection on it, accepted or dialed (the object store's control connections, which stay
// open), take the host's own choice; the other host's daemon keeps its default (cubic).
TEST(PeerCongestionTest, EachDaemonsPeerConnectionsUseItsChoice) {
  CONDUIT_SKIP_UNLESS_CLUSTER();
  ClusterConfig config = TwoHosts();
  config.object_peers = true;
  config.host_daemon_args[0] = {"--peer-congestion", "reno"};
  Cluster cluster(config);
  CONDUIT_START_CLUSTER(cluster);
  // Both daemons dial each other's object control connection once they are up.
  std::vector<std::string> h0, h1;
  bool listening0 = false, listening1 = false;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20 * kSanitizerSlowdown);
  while (std::chrono::steady_clock::now() < until) {
    h0 = PeerPortCongestion(cluster, 0, &listening0);
    h1 = PeerPortCongestion(cluster, 1, &listening1);
    if (h0.size() >= 3 && h1.size() >= 3) break;  // a listener and both directions' connections
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(listening0 && listening1) << cluster.Describe();
  ASSERT_GE(h0.size(), 3u) << "host 0 has no connection of its own and one of host 1's on the peer port";
  ASSERT_GE(h1.size(), 3u);
  for (const std::string& name : h0) EXPECT_EQ(name, "reno") << "host 0's listener and connections";
  for (const std::string& name : h1) EXPECT_EQ(name, "cubic") << "host 1's listener and connections (the default)";
  std::ifstream log(cluster.dir() + "/conduitd-h0.log");
  std::stringstream text;
  text << log.rdbuf();
  EXPECT_NE(text.str().find("connections to other daemons use TCP congestion control reno"), std::string::npos)
      << text.str();
}

}  // namespace
}  // namespace conduit::it
