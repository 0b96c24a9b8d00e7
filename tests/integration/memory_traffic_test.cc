// Copies per payload byte (docs/design.md "Copies per payload byte"): every collective on 2
// hosts, with 1 and 2 ranks per host, as the daemon measures it (MemoryTraffic, shown per
// collective in the admin API's trace) must equal the table's formula exactly. A change that
// adds a copy, a reduction pass or a resend fails here, not only in a benchmark's noise.
#include <gtest/gtest.h>

#include <set>
#include <tuple>
#include <string>

#include "admin_call.h"
#include "coll_run.h"
#include "common/json.h"
#include "conduitctl_run.h"
#include "integration_env.h"
#include "linger.h"
#include "page_adoption.h"

namespace conduit::it {
namespace {

constexpr int kHosts = 2;

struct Traffic {
  uint64_t program_copies = 0, local_copies = 0, reduce_writes = 0, socket_sends = 0, socket_receives = 0;
  std::string Text() const {
    return "program " + std::to_string(program_copies) + ", local " + std::to_string(local_copies) + ", reduce " +
           std::to_string(reduce_writes) + ", sends " + std::to_string(socket_sends) + ", receives " +
           std::to_string(socket_receives);
  }
  bool operator==(const Traffic& o) const {
    return program_copies == o.program_copies && local_copies == o.local_copies && reduce_writes == o.reduce_writes &&
           socket_sends == o.socket_sends && socket_receives == o.socket_receives;
  }
};

// One collective as host 0's daemon saw it, and the communicator's shape there.
struct Seen {
  std::string op, algorithm;
  uint64_t s = 0;    // bytes of one rank's buffer (a block, for AllGather and ReduceScatter)
  int root = -1;     // rank
  int local = 0;     // ranks on this host (L)
  int nranks = 0;    // R
  bool root_here = false;
  bool regions = false;     // buffers from ncclMemAlloc: the op ran in them (host regions)
  bool result_area = false;  // the local ranks read the result from the result area
};

// The table in docs/design.md, for 2 hosts (H = 2): each line names who writes what.
Traffic Expected(const Seen& c) {
  const uint64_t S = c.s, L = c.local, R = c.nranks;
  Traffic t;
  // The reductions in host regions (out of place here) write what they write staged, less
  // the shims' copies: no input is copied into the work buffer (with two local ranks the
  // first one's is folded in with the second's, Reduce2; alone, the algorithm reads it
  // where it is, HostGroup::input, and folds it in as it reduces). The work buffer is the
  // first local rank's output for AllReduce, the root's for Reduce on its host, and daemon
  // memory for Reduce elsewhere and for ReduceScatter, whose every local block is then
  // copied out, but for a lone rank's, reduced straight into its output.
  if (c.regions && (c.op == "AllReduce" || c.op == "Reduce" || c.op == "ReduceScatter")) {
    Seen staged = c;
    staged.regions = false;
    t = Expected(staged);
    t.program_copies = 0;
    if (c.op == "ReduceScatter") t.local_copies = L == 1 ? 0 : L * S;
    return t;
  }
  if (c.regions && c.op == "Broadcast") {
    t.local_copies = (L - 1) * S + (c.root_here ? S : 0);  // the root's input into its output
    (c.root_here ? t.socket_sends : t.socket_receives) = S;
    return t;
  }
  if (c.regions && c.op == "AllGather") {
    t.local_copies = L * S + (L - 1) * R * S;  // every local block into the work buffer, the result out
    t.socket_sends = L * S;
    t.socket_receives = L * S;
    return t;
  }
  // In the result area (streamed, two local ranks or more) the result is written once for
  // all local ranks: no copies to the others' segments. A broadcast's root input, and an
  // AllGather's every local block, is copied into the area instead of the first local
  // rank's (or the root's) segment holding it already.
  const uint64_t to_others = c.result_area ? 0 : L - 1;
  if (c.op == "AllReduce") {
    t.program_copies = 2 * L * S;                  // each rank: input in, result out
    t.reduce_writes = (L - 1) * S;                 // the other local ranks folded in
    t.local_copies = to_others * S;                // the result to the other local ranks
    if (c.algorithm == "recursive-doubling") {     // one exchange of the whole buffer
      t.reduce_writes += S;
      t.socket_sends = S;
      t.socket_receives = S;
    } else {                                       // ring: reduce-scatter, then all-gather
      t.reduce_writes += S / 2;
      t.socket_sends = S;
      t.socket_receives = S;
    }
  } else if (c.op == "Broadcast") {
    t.program_copies = L * S + (c.root_here ? S : 0);  // the root's input in, every output out
    t.local_copies = c.result_area ? (c.root_here ? S : 0) : (L - 1) * S;
    (c.root_here ? t.socket_sends : t.socket_receives) = S;  // a chain of two
  } else if (c.op == "Reduce") {
    t.program_copies = L * S + (c.root_here ? S : 0);  // every input in, the root's output out
    t.reduce_writes = (L - 1) * S;
    if (c.root_here) {
      t.reduce_writes += S;  // the other host's partial result
      t.socket_receives = S;  // the result is left in the root's own region
    } else {
      t.socket_sends = S;
    }
  } else if (c.op == "AllGather") {
    t.program_copies = L * (S + R * S);   // each rank: its block in, every block out
    t.local_copies = c.result_area ? L * S  // every local block into the area
                                   : (L - 1) * S          // the other local ranks' blocks into the first's region
                                         + (L - 1) * R * S;  // the whole result to them
    t.socket_sends = L * S;               // this host's blocks
    t.socket_receives = L * S;            // the other host's
  } else if (c.op == "ReduceScatter") {
    t.program_copies = L * (R * S + S);   // each rank: every block in, its own out
    t.reduce_writes = (L - 1) * R * S     // the other local ranks folded in
                      + L * S;            // the other host's partial results for this host's blocks
    t.local_copies = (L - 1) * S;         // their own blocks to the other local ranks
    t.socket_sends = L * S;               // the other host's blocks, reduced here
    t.socket_receives = L * S;
  }
  return t;
}

ClusterConfig TwoHosts(const char* prefix, const char* subnet) {
  ClusterConfig config;
  config.prefix = prefix;
  config.subnet = subnet;
  config.hosts = kHosts;
  return config;
}

// Where the programs' buffers come from: their own (malloc), ncclMemAlloc, or their own
// adopted by the shim (CONDUIT_ADOPT_HOST_BUFFERS): host regions both of the latter.
enum class Buffers { kOwn, kNcclMemAlloc, kAdopted };

const char* BuffersName(Buffers b) {
  return b == Buffers::kOwn ? "" : b == Buffers::kNcclMemAlloc ? ", ncclMemAlloc" : ", adopted";
}

// Runs coll_check with `args` (float sums of `sizes`, out of place unless `inplace` is "yes";
// in `buffers`) on `per_host` ranks per host, waits until every rank lingers with its
// communicator open, and reads host 0's communicators, which must be one. The ranks linger
// until the test calls ReleaseLingerers(*release) (linger.h).
void RunAndReadComms(Cluster& cluster, int per_host, Buffers buffers, std::vector<std::string> args,
                     std::vector<Subprocess*>* procs, Json* comms_json, CtlResult* comms, std::string* release,
                     const std::string& inplace = "no", const std::string& sizes = "64KiB,1MiB") {
  const int linger_ms = 30000 * kSanitizerSlowdown;  // at most: the test releases them sooner
  *release = cluster.NewReleaseFile();
  args.insert(args.end(), {"--types", "float", "--ops", "sum", "--sizes", sizes, "--inplace", inplace,
                           "--linger-ms", std::to_string(linger_ms), "--release-file", *release});
  if (buffers == Buffers::kNcclMemAlloc) args.push_back("--mem-alloc");
  CollLaunch launch = Ranks(per_host, args);
  if (buffers == Buffers::kAdopted) {
    // Every buffer adopted: each in a mapping of its own (glibc's malloc maps anything
    // from a page up then, as the sanitizers' allocators do from 128 KiB), so no two share
    // a page and none is staged for that.
    launch.env = {"CONDUIT_ADOPT_HOST_BUFFERS=1", "CONDUIT_ADOPT_MIN_BYTES=0", "MALLOC_MMAP_THRESHOLD_=4096"};
  }
  *procs = LaunchCollCheck(cluster, launch);
  for (Subprocess* p : *procs) {
    ASSERT_TRUE(Cluster::WaitForOutput(*p, "lingering", std::chrono::seconds(120 * kSanitizerSlowdown)))
        << cluster.Describe();
  }
  *comms = Ctl(cluster, 0, {"--json", "comms"});
  ASSERT_EQ(comms->rc, 0) << comms->out;
  ASSERT_TRUE(Json::Parse(comms->out, comms_json).ok()) << comms->out;
  const Json* list = comms_json->find("communicators");
  ASSERT_TRUE(list != nullptr && list->size() == 1) << comms->out;
}

// Host 0's local ranks of the one communicator in `comms_json` (RunAndReadComms), and that
// communicator's trace there (`trace`, parsed into `trace_json`).
void ReadTrace(Cluster& cluster, const Json& comms_json, std::vector<int>* local, CtlResult* trace, Json* trace_json) {
  const Json& comm = comms_json.find("communicators")->items()[0];
  for (const Json& r : comm.find("local_ranks")->items()) local->push_back(static_cast<int>(r.as_int()));
  *trace = Ctl(cluster, 0, {"--json", "trace", comm.find("key")->as_string(), "--limit", "1000"});
  ASSERT_EQ(trace->rc, 0) << trace->out;
  ASSERT_TRUE(Json::Parse(trace->out, trace_json).ok()) << trace->out;
}

// Ranks per host, and where the buffers come from.
class MemoryTrafficTest : public ::testing::TestWithParam<std::tuple<int, Buffers>> {};

TEST_P(MemoryTrafficTest, EveryCollectiveMatchesTheTable) {
  CONDUIT_SKIP_UNLESS_CLUSTER();
  const int per_host = std::get<0>(GetParam());
  const Buffers buffers = std::get<1>(GetParam());
  const bool mem_alloc = buffers != Buffers::kOwn;  // host regions
  if (buffers == Buffers::kAdopted && !PageAdoptionSupported()) GTEST_SKIP() << "no PROCMAP_QUERY: nothing is adopted";
  Cluster cluster(TwoHosts("mt", "10.231.19"));
  CONDUIT_START_CLUSTER(cluster);
  // 2 MiB per rank: streamed copies, chunked algorithms, the ring for AllReduce (above the
  // 1 MiB to which 2 hosts run recursive doubling); 64 KiB (512 KiB adopted, where the
  // sanitizers' allocators give each buffer pages of its own): the unstreamed path and
  // recursive doubling.
  std::vector<Subprocess*> procs;
  Json cj;
  CtlResult comms;
  std::string release;
  RunAndReadComms(cluster, per_host, buffers, {"--colls", "allreduce,broadcast,reduce,allgather,reducescatter"},
                  &procs, &cj, &comms, &release, "no", buffers == Buffers::kAdopted ? "512KiB,2MiB" : "64KiB,2MiB");
  if (HasFatalFailure()) return;
  const int nranks = static_cast<int>(cj.find("communicators")->items()[0].find("nranks")->as_int());
  std::vector<int> local;
  CtlResult trace;
  Json tj;
  ReadTrace(cluster, cj, &local, &trace, &tj);
  if (HasFatalFailure()) return;
  ASSERT_EQ(static_cast<int>(local.size()), per_host) << comms.out;
  std::set<std::string> checked;
  for (const Json& e : tj.find("trace")->items()) {
    Seen c;
    c.op = e.find("op")->as_string();
    c.algorithm = e.find("algorithm")->as_string();
    c.s = static_cast<uint64_t>(e.find("bytes")->as_int());
    c.root = static_cast<int>(e.find("root")->as_int());
    c.local = per_host;
    c.nranks = nranks;
    c.root_here = std::find(local.begin(), local.end(), c.root) != local.end();
    c.regions = mem_alloc;  // every collective here but PreMulSum, which the test does not run
    c.result_area = e.find("result_area") != nullptr && e.find("result_area")->as_bool();
    // Staged ranks read a streamed (2 MiB) AllGather's and Broadcast's result from the
    // area from two per host, an AllReduce's from three (shimproto::ResultAreaServes), and
    // nothing else does.
    const bool shareable = ((c.op == "AllGather" || c.op == "Broadcast") && per_host >= 2) ||
                           (c.op == "AllReduce" && per_host >= 3);
    EXPECT_EQ(c.result_area, !mem_alloc && shareable && c.s >= (2u << 20) / (c.op == "AllGather" ? nranks : 1))
        << c.op << ", " << c.s << " bytes, " << per_host << " ranks per host" << BuffersName(buffers);
    const Json* memory = e.find("memory");
    ASSERT_NE(memory, nullptr) << trace.out;
    Traffic got{Counter(*memory, "program_copies"), Counter(*memory, "local_copies"), Counter(*memory, "reduce_writes"),
                Counter(*memory, "socket_sends"), Counter(*memory, "socket_receives")};
    Traffic want = Expected(c);
    EXPECT_EQ(got, want) << c.op << " (" << c.algorithm << ", " << c.s << " bytes, root " << c.root
                         << ", ranks here " << per_host << BuffersName(buffers) << "): measured " << got.Text() << "; the table says "
                         << want.Text();
    checked.insert(c.op + "/" + c.algorithm);
  }
  for (const char* want : {"AllReduce/recursive-doubling", "AllReduce/ring", "Broadcast/chain", "Reduce/chain",
                           "AllGather/ring", "ReduceScatter/ring"}) {
    EXPECT_EQ(checked.count(want), 1u) << "no " << want << " in the trace:\n" << trace.out;
  }
  ReleaseLingerers(release);
  std::string failure = WaitCollCheck(cluster, procs, std::chrono::seconds(120 * kSanitizerSlowdown));
  EXPECT_TRUE(failure.empty()) << failure;
}

// Three ranks per host: an AllReduce's result in the result area too.
INSTANTIATE_TEST_SUITE_P(RanksPerHostAndMemory, MemoryTrafficTest,
                         ::testing::Combine(::testing::Values(1, 2, 3),
                                            ::testing::Values(Buffers::kOwn, Buffers::kNcclMemAlloc,
                                                              Buffers::kAdopted)));

// A broadcast in place, as torch.distributed.broadcast calls it: the root's buffer already
// holds the result, so its shim copies the input in and nothing back out (kOpOutputIsInput),
// and every rank copies the buffer once: the root in, every other rank out. An all-reduce
// comes first: its reply tells the shims that the daemon counts this (kReplyCountsInPlaceRoot).
class InPlaceBroadcastTrafficTest : public ::testing::TestWithParam<int> {};

TEST_P(InPlaceBroadcastTrafficTest, TheRootCopiesNothingBackOut) {
  CONDUIT_SKIP_UNLESS_CLUSTER();
  const int per_host = GetParam();
  Cluster cluster(TwoHosts("mb", "10.231.22"));
  CONDUIT_START_CLUSTER(cluster);
  std::vector<Subprocess*> procs;
  Json cj;
  CtlResult comms;
  std::string release;
  RunAndReadComms(cluster, per_host, Buffers::kOwn, {"--colls", "allreduce,broadcast", "--all-roots"}, &procs,
                  &cj, &comms, &release, "yes");
  if (HasFatalFailure()) return;
  std::vector<int> local;
  CtlResult trace;
  Json tj;
  ReadTrace(cluster, cj, &local, &trace, &tj);
  if (HasFatalFailure()) return;
  int roots_here = 0, roots_away = 0;
  for (const Json& e : tj.find("trace")->items()) {
    if (e.find("op")->as_string() != "Broadcast") continue;
    const int root = static_cast<int>(e.find("root")->as_int());
    const bool here = std::find(local.begin(), local.end(), root) != local.end();
    ++(here ? roots_here : roots_away);
    const uint64_t S = static_cast<uint64_t>(e.find("bytes")->as_int());
    EXPECT_EQ(Counter(*e.find("memory"), "program_copies"), per_host * S)
        << "in-place broadcast of " << S << " bytes, root " << root << (here ? " (here)" : "") << ", "
        << per_host << " ranks per host:\n" << trace.out;
  }
  EXPECT_GT(roots_here, 0) << trace.out;
  EXPECT_GT(roots_away, 0) << trace.out;
  ReleaseLingerers(release);
  std::string failure = WaitCollCheck(cluster, procs, std::chrono::seconds(120 * kSanitizerSlowdown));
  EXPECT_TRUE(failure.empty()) << failure;
}

INSTANTIATE_TEST_SUITE_P(RanksPerHost, InPlaceBroadcastTrafficTest, ::testing::Values(1, 2));

// Point-to-point, through all-to-all (docs/design.md, its point-to-point table): what host
// 0's daemon counted for its ranks' Sends and Recvs (`p2p_memory`) against the table. Each
// rank sends a block B to every other rank (to itself its shim copies, unseen here): a
// staged Send and Recv cost their shim's copy each, a message between hosts a socket copy
// on each side, and a receive's copy here is certain from a local sender and, from
// another host, happens only for what arrived before the receive was posted.
class PointToPointTrafficTest : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(PointToPointTrafficTest, AllToAllMatchesTheTable) {
  CONDUIT_SKIP_UNLESS_CLUSTER();
  const int per_host = std::get<0>(GetParam());
  const bool mem_alloc = std::get<1>(GetParam());
  Cluster cluster(TwoHosts("mp", "10.231.21"));
  CONDUIT_START_CLUSTER(cluster);
  // An all-reduce first: its reply tells the shims the daemon serves Send and Recv in
  // regions, so every all-to-all runs there with --mem-alloc.
  std::vector<Subprocess*> procs;
  Json cj;
  CtlResult comms;
  std::string release;
  RunAndReadComms(cluster, per_host, mem_alloc ? Buffers::kNcclMemAlloc : Buffers::kOwn, {"--colls", "allreduce,alltoall"},
                  &procs, &cj, &comms, &release);
  if (HasFatalFailure()) return;
  const Json* memory = cj.find("communicators")->items()[0].find("p2p_memory");
  ASSERT_NE(memory, nullptr) << comms.out;
  const uint64_t L = per_host, R = kHosts * per_host, B = (64 << 10) + (1 << 20);  // both sizes' blocks
  const uint64_t program = mem_alloc ? 0 : L * 2 * (R - 1) * B;
  const uint64_t across = L * (R - L) * B;
  EXPECT_EQ(Counter(*memory, "program_copies"), program) << comms.out;
  EXPECT_EQ(Counter(*memory, "socket_sends"), across) << comms.out;
  EXPECT_EQ(Counter(*memory, "socket_receives"), across) << comms.out;
  EXPECT_GE(Counter(*memory, "local_copies"), L * (L - 1) * B) << comms.out;
  EXPECT_LE(Counter(*memory, "local_copies"), L * (R - 1) * B) << comms.out;
  EXPECT_EQ(Counter(*memory, "reduce_writes"), 0u) << comms.out;
  ReleaseLingerers(release);
  std::string failure = WaitCollCheck(cluster, procs, std::chrono::seconds(120 * kSanitizerSlowdown));
  EXPECT_TRUE(failure.empty()) << failure;
}

INSTANTIATE_TEST_SUITE_P(RanksPerHostAndMemory, PointToPointTrafficTest,
                         ::testing::Combine(::testing::Values(1, 2), ::testing::Bool()));

}  // namespace
}  // namespace conduit::it
