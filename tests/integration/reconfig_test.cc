// Live reconfiguration under load: while ranks on three daemons run checked collectives
// of every kind, operators on every daemon switch the communicator's ring order,
// all-reduce algorithm and link paths thousands of times, concurrently. The results must
// stay right, and the daemons' traces must show that every collective ran under the same
// configuration on every daemon, with no sequence number missing or repeated.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <map>
#include <mutex>
#include <thread>

#include "admin_call.h"
#include "coll_run.h"
#include "integration_env.h"

namespace conduit::it {
namespace {

constexpr int kHosts = 3;
constexpr int kMinSwitches = 1000;  // the test fails below this many applied switches
constexpr int kMaxSwitches = 3000;  // and stops asking after this many

ClusterConfig ReconfigCluster() {
  ClusterConfig c;
  c.prefix = "rc";
  c.subnet = "10.231.41";
  c.hosts = kHosts;
  c.mesh = 2;
  c.netns_topology = true;
  return c;
}

// The n-th request of operator `who`: ring orders, algorithms, now and then new paths.
std::string Plan(int who, int n) {
  static const char* const kRings[] = {"[0,1,2]", "[0,2,1]", "[1,0,2]", "[1,2,0]", "[2,0,1]", "[2,1,0]"};
  static const char* const kAlgos[] = {"auto", "ring", "rd"};
  const int i = who * 7 + n;
  if (n % 40 == 13) return R"({"paths": "policy"})";
  if (n % 40 == 33) {
    const int a = i % kHosts, b = (i + 1) % kHosts, path = i % 3 - 1;
    return R"({"paths": [{"hosts": [)" + std::to_string(a) + "," + std::to_string(b) + "], \"path\": " +
           std::to_string(path) + "}]}";
  }
  std::string body = std::string(R"({"ring": )") + kRings[i % 6];
  if (n % 3 == 0) body += std::string(R"(, "algorithm": ")") + kAlgos[i % 3] + "\"";
  return body + "}";
}

struct TraceView {
  std::map<int64_t, std::pair<int64_t, std::vector<int64_t>>> by_seq;  // seq -> (epoch, ring)
  std::string problem;
};

TraceView ReadTrace(const Cluster& cluster, int host, const std::string& key) {
  TraceView v;
  AdminAnswer a = AdminCall(cluster, host, "GET", "/v1/communicators/" + key + "/trace?limit=1024");
  const Json* trace = a.body.is_object() ? a.body.find("trace") : nullptr;
  if (trace == nullptr) {
    v.problem = "no trace from host " + std::to_string(host) + ": " + a.text;
    return v;
  }
  int64_t prev = -1;
  for (const Json& e : trace->items()) {
    int64_t seq = e.find("seq")->as_int();
    if (prev >= 0 && seq != prev + 1) {
      v.problem = "host " + std::to_string(host) + ": sequence " + std::to_string(prev) + " followed by " +
                  std::to_string(seq);
    }
    prev = seq;
    v.by_seq[seq] = {e.find("epoch")->as_int(), Ints(e.find("ring"))};
  }
  return v;
}

// Every sequence number two daemons both still remember ran under the same epoch and ring.
std::string CompareTraces(const Cluster& cluster, const std::string& key, int* compared) {
  std::vector<TraceView> views;
  for (int h = 0; h < kHosts; ++h) {
    views.push_back(ReadTrace(cluster, h, key));
    if (!views.back().problem.empty()) return views.back().problem;
  }
  for (int h = 1; h < kHosts; ++h) {
    for (const auto& [seq, config] : views[h].by_seq) {
      auto it = views[0].by_seq.find(seq);
      if (it == views[0].by_seq.end()) continue;
      ++*compared;
      if (it->second != config) {
        return "collective " + std::to_string(seq) + " ran under epoch " + std::to_string(it->second.first) +
               " on host 0 but epoch " + std::to_string(config.first) + " on host " + std::to_string(h);
      }
    }
  }
  return "";
}

TEST(ReconfigTest, ThousandsOfSwitchesUnderLoad) {
  CONDUIT_SKIP_UNLESS_CLUSTER();
  Cluster cluster(ReconfigCluster());
  CONDUIT_START_CLUSTER(cluster);
  // Sizes on both sides of the recursive-doubling threshold, so algorithm switches matter.
  auto ranks = LaunchCollCheck(cluster, Ranks(1, {"--colls", "allreduce,allgather,reducescatter,broadcast,reduce",
                                                   "--types", "float", "--ops", "sum", "--sizes", "1000,40K",
                                                   "--inplace", "no", "--seconds", "30"}));
  Json comm = WaitForComm(
      cluster, 0, [](const Json&) { return true; }, std::chrono::seconds(60));
  ASSERT_TRUE(comm.is_object()) << cluster.Describe();
  const std::string key = comm.find("key")->as_string();
  const std::string target = "/v1/communicators/" + key + "/reconfigure";

  // One operator per daemon, all at once: host 0 sequences them all.
  std::atomic<int> applied{0}, asked{0};
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::string failure;
  auto fail = [&](const std::string& why) {
    std::lock_guard<std::mutex> lock(mu);
    if (failure.empty()) failure = why;
    stop = true;
  };
  std::vector<std::thread> operators;
  for (int who = 0; who < kHosts; ++who) {
    operators.emplace_back([&, who] {
      for (int n = 0; !stop && asked.fetch_add(1) < kMaxSwitches; ++n) {
        std::string body = Plan(who, n);
        AdminAnswer a = AdminCall(cluster, who, "POST", target, body);
        if (a.status == 404 || a.status == 409) return;  // the ranks finished and destroyed it
        if (a.status != 200) return fail("host " + std::to_string(who) + " " + body + " -> " + std::to_string(a.status) + ": " + a.text);
        if (!Field(a.body, "applied").as_bool()) return fail("not applied: " + a.text);
        ++applied;
      }
    });
  }
  int compared = 0;
  while (!stop && asked < kMaxSwitches && !ranks[0]->Poll()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    std::string bad = CompareTraces(cluster, key, &compared);
    if (!bad.empty() && ranks[0]->Poll()) break;  // the communicator went away while reading
    if (!bad.empty()) fail(bad);
  }
  stop = true;
  for (auto& t : operators) t.join();
  EXPECT_EQ(failure, "") << cluster.Describe();

  // Quiesced: every daemon ends on the same epoch (while the ranks still run).
  if (!ranks[0]->Poll()) {
    std::vector<int64_t> epochs;
    for (int h = 0; h < kHosts; ++h) {
      for (int tries = 0; tries < 100; ++tries) {
        Json c = AdminCall(cluster, h, "GET", "/v1/communicators/" + key).body;
        if (!c.is_object() || c.find("config") == nullptr) break;
        int64_t e = c.find("config")->find("epoch")->as_int();
        if (h == 0 || e == epochs[0] || tries == 99) {
          epochs.push_back(e);
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
    if (epochs.size() == kHosts) {
      EXPECT_EQ(epochs[1], epochs[0]);
      EXPECT_EQ(epochs[2], epochs[0]);
    }
  }
  EXPECT_GE(applied.load(), kMinSwitches) << "the ranks finished before enough switches were made";
  EXPECT_GT(compared, 1000) << "too few collectives compared across daemons";
  EXPECT_EQ(WaitCollCheck(cluster, ranks, std::chrono::seconds(120)), "");
  std::printf("reconfig_test: %d switches applied, %d collectives compared across daemons\n", applied.load(), compared);
}

// Reconfiguring an idle communicator (no collective in flight) applies at once, and a
// communicator whose ranks share a host (local combine stage) survives switches too.
TEST(ReconfigTest, IdleAndMultiRankHosts) {
  CONDUIT_SKIP_UNLESS_CLUSTER();
  Cluster cluster(ReconfigCluster());
  CONDUIT_START_CLUSTER(cluster);
  auto loop = LaunchCollCheck(cluster, Ranks(2, {"--expect-error", "--hold-ms", "300", "--max-seconds", "120"}).AsThreads());
  for (Subprocess* p : loop) ASSERT_TRUE(Cluster::WaitForOutput(*p, "looping", std::chrono::seconds(60))) << cluster.Describe();
  Json comm = WaitForComm(
      cluster, 2, [](const Json&) { return true; }, std::chrono::seconds(60));
  ASSERT_TRUE(comm.is_object());
  const std::string key = comm.find("key")->as_string();
  // Mostly idle (300 ms between collectives): each switch must not wait for one.
  for (int i = 0; i < 20; ++i) {
    auto start = std::chrono::steady_clock::now();
    AdminAnswer a = AdminCall(cluster, i % kHosts, "POST", "/v1/communicators/" + key + "/reconfigure",
                              i % 2 ? R"({"ring": "reverse", "paths": "policy"})" : R"({"ring": "rank", "algorithm": "ring"})");
    ASSERT_EQ(a.status, 200) << a.text;
    EXPECT_TRUE(Field(a.body, "applied").as_bool());
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(250)) << "waited for a collective";
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  for (Subprocess* p : loop) {
    EXPECT_FALSE(p->Poll()) << cluster.Describe();
    EXPECT_EQ(p->Output().find("FAIL"), std::string::npos) << cluster.Describe();
    EXPECT_EQ(p->Output().find("got nccl"), std::string::npos) << cluster.Describe();
  }
  Json after = AdminCall(cluster, 0, "GET", "/v1/communicators/" + key).body;
  EXPECT_EQ(after.find("config")->find("epoch")->as_int(), 20) << after.Dump(2);
  for (Subprocess* p : loop) p->Kill(SIGKILL);
}

}  // namespace
}  // namespace conduit::it
