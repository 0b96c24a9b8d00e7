// The operator plane's decisions without daemons: topology parsing and paths, the
// locality-aware ring, flow assignment over paths (balance, hash, single, reservations),
// tenant matching and rate caps, and reconfiguration requests and their wire form.
#include <gtest/gtest.h>

#include <chrono>
#include <set>

#include "collectives/comm_config.h"
#include "config/json_message.h"
#include "policy/fabric.h"
#include "policy/placement_policy.h"
#include "policy/tenant_policy.h"
#include "policy/tenant_pacer.h"
#include "topology/locality.h"
#include "topology/topology.h"

namespace conduit {
namespace {

Json ParseOrDie(const std::string& text) {
  Json j;
  EXPECT_TRUE(Json::Parse(text, &j).ok()) << text;
  return j;
}

Topology Make(const std::string& text) {
  Topology t;
  Status st = Topology::FromJson(ParseOrDie(text), &t);
  EXPECT_TRUE(st.ok()) << st.message();
  return t;
}

const char kFourHosts[] = R"({
  "hosts": [
    {"name": "a0", "addr": "10.0.0.1", "rack": "a", "path_addrs": ["10.1.0.1", "10.2.0.1"]},
    {"name": "b0", "addr": "10.0.0.2", "rack": "b", "path_addrs": ["10.1.0.2", "10.2.0.2"]},
    {"name": "a1", "addr": "10.0.0.3", "rack": "a", "path_addrs": ["10.1.0.3"]},
    {"name": "b1", "addr": "10.0.0.4", "rack": "b"}],
  "links": [{"hosts": ["b1", "a0"], "paths": [["10.9.0.2", "10.9.0.1"]]}]})";

TEST(TopologyTest, PathsComeFromLinksOrPerHostAddresses) {
  Topology t = Make(kFourHosts);
  auto ab = t.PathsBetween("10.0.0.1", "10.0.0.2");  // both have two path addresses
  ASSERT_EQ(ab.size(), 2u);
  EXPECT_EQ(ab[1].local, "10.2.0.1");
  EXPECT_EQ(ab[1].remote, "10.2.0.2");
  EXPECT_EQ(t.PathsBetween("10.0.0.1", "10.0.0.3").size(), 1u);  // the shorter list wins
  auto explicit_pair = t.PathsBetween("10.0.0.1", "10.0.0.4");
  ASSERT_EQ(explicit_pair.size(), 1u);
  EXPECT_EQ(explicit_pair[0].local, "10.9.0.1");  // oriented from the asking host
  EXPECT_EQ(t.PathsBetween("10.0.0.4", "10.0.0.1")[0].local, "10.9.0.2");
  EXPECT_TRUE(t.PathsBetween("10.0.0.1", "10.7.7.7").empty());
  // Round trip through JSON.
  Topology again;
  ASSERT_TRUE(Topology::FromJson(t.ToJson(), &again).ok());
  EXPECT_EQ(again.ToJson().Dump(), t.ToJson().Dump());
}

TEST(TopologyTest, RejectsBadDescriptions) {
  for (const char* bad : {
           "[]", R"({"hosts": 1})", R"({"hosts": [{"name": "x"}]})", R"({"hosts": [{"addr": "host.example"}]})",
           R"({"hosts": [{"addr": "10.0.0.1"}, {"addr": "10.0.0.1"}]})",
           R"({"hosts": [{"addr": "10.0.0.1", "name": "x"}, {"addr": "10.0.0.2", "name": "x"}]})",
           R"({"hosts": [{"addr": "10.0.0.1", "colour": "red"}]})",
           R"({"hosts": [{"addr": "10.0.0.1", "path_addrs": ["nope"]}]})",
           R"({"hosts": [{"addr": "10.0.0.1"}], "links": [{"hosts": ["10.0.0.1", "10.0.0.1"], "paths": [["1.1.1.1", "2.2.2.2"]]}]})",
           R"({"hosts": [{"addr": "10.0.0.1"}, {"addr": "10.0.0.2"}], "links": [{"hosts": ["10.0.0.1", "10.0.0.2"], "paths": [["1.1.1.1"]]}]})",
           R"({"hosts": [], "links": [{"hosts": ["x", "y"], "paths": [["1.1.1.1", "2.2.2.2"]]}]})"}) {
    Topology t;
    EXPECT_FALSE(Topology::FromJson(ParseOrDie(bad), &t).ok()) << bad;
  }
}

TEST(LocalityTest, RackNeighboursAreAdjacent) {
  Topology t = Make(kFourHosts);
  const std::vector<std::string> hosts = {"10.0.0.1:7650", "10.0.0.2:7650", "10.0.0.3:7650", "10.0.0.4:7650"};
  const std::vector<int> rank_order = {0, 1, 2, 3};
  EXPECT_EQ(RackCrossings(t, hosts, rank_order), 4);
  std::vector<int> ring = LocalityRing(t, hosts);
  EXPECT_EQ(ring, (std::vector<int>{0, 2, 1, 3}));
  EXPECT_EQ(RackCrossings(t, hosts, ring), 2);
  // Nothing known: rank order, every host its own rack.
  EXPECT_EQ(LocalityRing(Topology(), hosts), rank_order);
  // Pods group racks: pod p1 = racks x and z, pod p2 = rack y.
  Topology pods = Make(R"({"hosts": [
      {"addr": "10.0.0.1", "rack": "x", "pod": "p1"}, {"addr": "10.0.0.2", "rack": "y", "pod": "p2"},
      {"addr": "10.0.0.3", "rack": "z", "pod": "p1"}, {"addr": "10.0.0.4", "rack": "x", "pod": "p1"}]})");
  EXPECT_EQ(LocalityRing(pods, hosts), (std::vector<int>{0, 3, 2, 1}));
}

TEST(FlowAssignmentTest, BalanceSpreadsRingTrafficAcrossPaths) {
  PathTable table;
  FlowPolicy balance;
  auto a = table.Choose("rackB", 2, balance, 0, 0, 1, -2);
  auto idle = table.Choose("rackB", 2, balance, 0, 0, 0, -2);  // weight 0: no ring traffic
  auto b = table.Choose("rackB", 2, balance, 0, 0, 1, -2);
  EXPECT_EQ(a->path(), 0);
  EXPECT_EQ(b->path(), 1);
  auto other_rack = table.Choose("rackC", 2, balance, 0, 0, 1, -2);
  EXPECT_EQ(other_rack->path(), 0);  // loads are per destination group
  a.reset();  // lease released: path 0 is free again
  EXPECT_EQ(table.Choose("rackB", 2, balance, 0, 0, 1, -2)->path(), 0);
  EXPECT_EQ(table.Choose("rackB", 0, balance, 0, 0, 1, -2)->path(), -1);  // no paths: primary
  EXPECT_EQ(table.Choose("rackB", 2, balance, 0, 0, 1, 1)->path(), 1);    // pinned
}

TEST(FlowAssignmentTest, SingleHashAndReservations) {
  PathTable table;
  FlowPolicy single;
  single.assignment = FlowAssignment::kSingle;
  std::vector<std::unique_ptr<PathLease>> leases;
  for (int i = 0; i < 3; ++i) {
    leases.push_back(table.Choose("g", 2, single, 0, i, 1, -2));
    EXPECT_EQ(leases.back()->path(), 0);
  }
  FlowPolicy hash;
  hash.assignment = FlowAssignment::kHash;
  std::set<int> seen;
  for (uint64_t h = 0; h < 8; ++h) seen.insert(table.Choose("g", 2, hash, 0, h, 1, -2)->path());
  EXPECT_EQ(seen, (std::set<int>{0, 1}));
  FlowPolicy primary;
  primary.assignment = FlowAssignment::kPrimary;
  EXPECT_EQ(table.Choose("g", 2, primary, 0, 0, 1, -2)->path(), -1);

  // Path 1 reserved for priority >= 1: low priority stays off it even when it is empty;
  // the prioritized tenant prefers it even when both are empty.
  Json reserve = ParseOrDie(R"({"assignment": "balance", "reserve": [{"path": 1, "min_priority": 1}]})");
  FlowPolicy pfa;
  ASSERT_TRUE(FlowPolicy::FromJson(reserve, &pfa).ok());
  PathTable fresh;
  auto hi = fresh.Choose("g", 2, pfa, 3, 0, 1, -2);
  EXPECT_EQ(hi->path(), 1);
  auto lo1 = fresh.Choose("g", 2, pfa, 0, 0, 1, -2);
  auto lo2 = fresh.Choose("g", 2, pfa, 0, 0, 1, -2);
  EXPECT_EQ(lo1->path(), 0);
  EXPECT_EQ(lo2->path(), 0);
  EXPECT_EQ(fresh.Choose("g", 1, pfa, 0, 0, 1, -2)->path(), 0);
}

TEST(TenantTest, MatchingAndValidation) {
  Tenants tenants;
  ASSERT_TRUE(tenants.Put("by-exe", ParseOrDie(R"({"match": {"exe": "trainer"}, "priority": 1})")).ok());
  ASSERT_TRUE(tenants.Put("by-key", ParseOrDie(R"({"match": {"comm": "00000000000000aa"}, "priority": 5})")).ok());
  EXPECT_EQ(tenants.Resolve("trainer", "0000000000000001")->policy().name, "by-exe");
  EXPECT_EQ(tenants.Resolve("trainer", "00000000000000aa")->policy().name, "by-key");  // key beats exe
  EXPECT_EQ(tenants.Resolve("other", "0000000000000001"), nullptr);
  const uint64_t g = tenants.generation();
  ASSERT_TRUE(tenants.Remove("by-exe").ok());
  EXPECT_GT(tenants.generation(), g);
  EXPECT_FALSE(tenants.Remove("by-exe").ok());
  for (const char* bad : {R"({})", R"({"match": {}})", R"({"match": {"exe": ""}})", R"({"match": {"uid": 3}})",
                          R"({"match": {"exe": "x"}, "priority": 8})", R"({"match": {"exe": "x"}, "max_mbit_per_s": -1})",
                          R"({"match": {"exe": "x"}, "yield": 1})", R"({"match": {"exe": "x"}, "speed": 1})",
                          R"({"match": {"exe": "x"}, "priority": 1.5})", R"({"match": ["x"]})"}) {
    EXPECT_FALSE(tenants.Put("t", ParseOrDie(bad)).ok()) << bad;
  }
  EXPECT_FALSE(tenants.Put("bad name", ParseOrDie(R"({"match": {"exe": "x"}})")).ok());
}

TEST(TenantTest, CountersGoOnAcrossALiveUpgradeAndBadSavedCountersChangeNothing) {
  Tenants old_daemon;
  ASSERT_TRUE(old_daemon.Put("job", ParseOrDie(R"({"match": {"exe": "trainer"}})")).ok());
  auto state = old_daemon.Resolve("trainer", "0000000000000001");
  state->sent_bytes += 1000;
  state->collectives += 7;
  const Json saved = old_daemon.SavedCounters("job");
  EXPECT_TRUE(old_daemon.SavedCounters("nobody").is_null());

  Tenants new_daemon;
  ASSERT_TRUE(new_daemon.Put("job", ParseOrDie(R"({"match": {"exe": "trainer"}})")).ok());
  auto fresh = new_daemon.Resolve("trainer", "0000000000000001");
  fresh->collectives += 1;  // counted here before the state came
  for (const char* bad : {R"([])", R"({})", R"({"sent_bytes": 1, "capped_us": 0, "yielded_us": 0})",
                          R"({"sent_bytes": -1, "capped_us": 0, "yielded_us": 0, "collectives": 0})",
                          R"({"sent_bytes": 1.5, "capped_us": 0, "yielded_us": 0, "collectives": 0})",
                          R"({"sent_bytes": 1, "capped_us": 0, "yielded_us": 0, "collective": 0})"}) {
    EXPECT_FALSE(new_daemon.RestoreCounters("job", ParseOrDie(bad)).ok()) << bad;
  }
  EXPECT_EQ(fresh->sent_bytes.load(), 0u);
  EXPECT_FALSE(new_daemon.RestoreCounters("other", saved).ok());
  ASSERT_TRUE(new_daemon.RestoreCounters("job", saved).ok());
  EXPECT_EQ(fresh->sent_bytes.load(), 1000u);
  EXPECT_EQ(fresh->collectives.load(), 8u);
}

TEST(TenantTest, CapLimitsGrantsAndYieldWaitsForHigherPriority) {
  TenantPolicy p;
  ASSERT_TRUE(TenantPolicy::FromJson("t", ParseOrDie(R"({"match": {"exe": "x"}, "max_mbit_per_s": 80})"), &p).ok());
  TenantState state(p);  // 10 MB/s, 100 KB burst
  ActivityBoard board;
  TenantPacer pacer(&state, &board);
  std::chrono::microseconds wait{0};
  size_t total = 0;
  auto start = std::chrono::steady_clock::now();
  while (total < 1000 * 1000) {
    size_t g = pacer.Grant(256 * 1024, &wait);
    if (g == 0) {
      EXPECT_GT(wait.count(), 0);
      std::this_thread::sleep_for(wait);
      continue;
    }
    pacer.Sent(g, g);
    total += g;
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GT(seconds, 0.07) << "1 MB at 10 MB/s with a 100 KB burst cannot take less than ~90 ms";
  EXPECT_EQ(state.sent_bytes.load(), total);

  TenantPolicy y;
  ASSERT_TRUE(TenantPolicy::FromJson("y", ParseOrDie(R"({"match": {"exe": "x"}, "yield": true, "yield_max_ms": 1000})"), &y).ok());
  TenantState yielding(y);
  TenantPacer yp(&yielding, &board);
  EXPECT_EQ(yp.Grant(4096, &wait), 4096u);  // nobody busy
  board.Enter(3);
  EXPECT_EQ(yp.Grant(4096, &wait), 0u);
  board.Exit(3);
  EXPECT_EQ(yp.Grant(4096, &wait), 4096u);
  board.Enter(0);  // lower or equal priorities never hold it back
  EXPECT_EQ(yp.Grant(4096, &wait), 4096u);
  board.Exit(0);
}

TEST(ReconfigPlanTest, ParsesResolvesAndRoundTrips) {
  ReconfigContext ctx;
  ctx.nhosts = 4;
  ctx.current_ring = {0, 1, 2, 3};
  ctx.locality_ring = {0, 2, 1, 3};
  ReconfigPlan plan;
  ASSERT_TRUE(ParseReconfigPlan(ParseOrDie(R"({"ring": "reverse", "algorithm": "rd", "paths": [{"hosts": [3, 1], "path": -1}]})"),
                                ctx, &plan).ok());
  EXPECT_EQ(plan.ring, (std::vector<int>{0, 3, 2, 1}));
  int pin = 0;
  EXPECT_TRUE(plan.Renews(1, 3, &pin));
  EXPECT_EQ(pin, -1);
  EXPECT_FALSE(plan.Renews(0, 1, &pin));
  ASSERT_TRUE(ParseReconfigPlan(ParseOrDie(R"({"ring": "locality", "paths": "policy"})"), ctx, &plan).ok());
  EXPECT_EQ(plan.ring, ctx.locality_ring);
  EXPECT_TRUE(plan.Renews(0, 1, &pin));
  EXPECT_EQ(pin, kPolicyPath);

  peerproto::ReconfigHeader head{};
  head.epoch = 9;
  head.origin_host = 2;
  head.request_id = 77;
  plan.set_algorithm = true;
  plan.algorithm = "ring";
  plan.pins.push_back({0, 3, 1});
  std::vector<uint8_t> wire = EncodeReconfig(head, plan);
  peerproto::ReconfigHeader got_head;
  ReconfigPlan got;
  ASSERT_TRUE(DecodeReconfig(wire, 4, &got_head, &got).ok());
  EXPECT_EQ(got_head.epoch, 9u);
  EXPECT_EQ(got_head.request_id, 77u);
  EXPECT_EQ(got.ring, plan.ring);
  EXPECT_EQ(got.algorithm, "ring");
  EXPECT_TRUE(got.repath);
  ASSERT_EQ(got.pins.size(), 1u);
  EXPECT_EQ(got.pins[0].path, 1);
  // Truncated, padded, or for another host count: refused.
  std::vector<uint8_t> cut(wire.begin(), wire.end() - 1);
  EXPECT_FALSE(DecodeReconfig(cut, 4, &got_head, &got).ok());
  std::vector<uint8_t> longer = wire;
  longer.push_back(0);
  EXPECT_FALSE(DecodeReconfig(longer, 4, &got_head, &got).ok());
  EXPECT_FALSE(DecodeReconfig(wire, 5, &got_head, &got).ok());

  for (const char* bad : {R"({})", R"({"ring": [0, 1, 2]})", R"({"ring": [0, 1, 2, 2]})", R"({"ring": [0, 1, 2, 4]})",
                          R"({"ring": "up"})", R"({"algorithm": "tree"})", R"({"paths": [{"hosts": [1, 1], "path": 0}]})",
                          R"({"paths": [{"hosts": [0, 9], "path": 0}]})", R"({"paths": [{"hosts": [0, 1], "path": 99}]})",
                          R"({"colour": 1})", R"({"ring": "rank", "wait_ms": 600001})", R"({"ring": "rank", "wait_ms": -1})",
                          R"({"paths": [{"hosts": [0, 1]}]})", R"({"paths": [{"hosts": [0, 1], "path": 0, "x": 1}]})",
                          R"({"ring": [0, 1.5, 2, 3]})"}) {
    EXPECT_FALSE(ParseReconfigPlan(ParseOrDie(bad), ctx, &plan).ok()) << bad;
  }
  int wait_ms = 0;
  ASSERT_TRUE(ParseReconfigPlan(ParseOrDie(R"({"ring": "rank", "wait_ms": 250})"), ctx, &plan, &wait_ms).ok());
  EXPECT_EQ(wait_ms, 250);
  ASSERT_TRUE(ParseReconfigPlan(ParseOrDie(R"({"ring": "rank"})"), ctx, &plan, &wait_ms).ok());
  EXPECT_EQ(wait_ms, kDefaultReconfigWaitMs);
}

// The documents are protobuf messages (config/*.proto) read through protobuf's JSON mapping:
// a wrong type or an unknown field is refused with the field's path, at any depth, and the
// mapping's other spellings are accepted (lowerCamelCase names, integers as strings).
TEST(ConfigSchemaTest, ErrorsNameTheFieldAndTheMappingIsProtobufs) {
  struct Case {
    const char* json;
    const char* names;
  };
  for (const Case& c : {Case{R"({"match": {"exe": "x"}, "priority": "high"})", "priority"},
                        Case{R"({"match": {"exe": "x", "uid": 3}})", "uid"},
                        Case{R"({"match": {"exe": 7}})", "match.exe"},
                        Case{R"({"match": {"exe": "x"}, "yield_max_ms": 1e12})", "yield_max_ms"}}) {
    TenantPolicy p;
    Status st = TenantPolicy::FromJson("t", ParseOrDie(c.json), &p);
    ASSERT_FALSE(st.ok()) << c.json;
    EXPECT_NE(st.message().find(c.names), std::string::npos) << c.json << " -> " << st.message();
    EXPECT_NE(st.message().find("tenant policy"), std::string::npos) << st.message();
  }
  FlowPolicy flows;
  Status st = FlowPolicy::FromJson(ParseOrDie(R"({"reserve": [{"path": 1, "min_prio": 2}]})"), &flows);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("min_prio"), std::string::npos) << st.message();
  Topology topo;
  st = Topology::FromJson(ParseOrDie(R"({"hosts": [{"addr": "10.0.0.1"}, {"addr": ["10.0.0.2"]}]})"), &topo);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("addr"), std::string::npos) << st.message();

  TenantPolicy p;
  ASSERT_TRUE(TenantPolicy::FromJson("t", ParseOrDie(R"({"match": {"exe": "x"}, "maxMbitPerS": 80, "priority": "3"})"), &p).ok());
  EXPECT_EQ(p.max_mbit_per_s, 80);
  EXPECT_EQ(p.priority, 3);
  ASSERT_TRUE(TenantPolicy::FromJson("t", ParseOrDie(R"({"match": {"exe": "x"}, "yield": null})"), &p).ok());
  EXPECT_FALSE(p.yield) << "null is the field's default";
}

// A Value's numbers are doubles: integers are taken only where the double holds them exactly.
TEST(ConfigSchemaTest, IntegersAreTakenOnlyWhereExact) {
  google::protobuf::Value v;
  int64_t n = 0;
  v.set_number_value(9007199254740992.0);  // 2^53
  ASSERT_TRUE(config::AsInteger(v, &n));
  EXPECT_EQ(n, config::kMaxExactInteger);
  v.set_number_value(-9007199254740992.0);
  EXPECT_TRUE(config::AsInteger(v, &n));
  v.set_number_value(9007199254740994.0);  // 2^53 + 2: 2^53 + 1 would read as 2^53
  EXPECT_FALSE(config::AsInteger(v, &n));
  v.set_number_value(1.5);
  EXPECT_FALSE(config::AsInteger(v, &n));
  v.set_string_value("7");
  EXPECT_FALSE(config::AsInteger(v, &n));
}

}  // namespace
}  // namespace conduit
