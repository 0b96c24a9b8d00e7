// Policy modules changed in place (docs/upgrade.md, "Policy modules"): replacing a policy
// keeps its place and the state that must outlive a change of settings, and leaves every
// other policy's filter alone; calls that started keep the filters they started with.
#include <gtest/gtest.h>

#include "common/json.h"
#include "rpc/policy/engine.h"
#include "rpc/policy/metrics_filter.h"
#include "rpc/policy/rate_limit_filter.h"

namespace conduit::rpc {
namespace {

RpcInfo Call() {
  RpcInfo info;
  info.method = "/pkg.Greeter/SayHello";
  info.program = "client[1]";
  return info;
}

std::shared_ptr<Filter> RateLimit(const std::string& name, const std::string& spec) {
  Json json;
  EXPECT_TRUE(Json::Parse(spec, &json).ok()) << spec;
  std::shared_ptr<Filter> f;
  Status st = RateLimitFilter::Create(name, json, &f);
  EXPECT_TRUE(st.ok()) << st.message();
  return f;
}

void Install(PolicyEngine& engine, const std::string& name, const std::string& spec) {
  engine.Install(InstalledPolicy{"rpc-ratelimit", name, Json::Object(), RateLimit(name, spec)});
}

// Admits one call through every filter that applies; the first verdict that is not Continue.
Verdict Admit(const PolicyEngine& engine) {
  for (const auto& f : engine.FiltersFor(Call())) {
    Verdict v = f->OnAdmit(Call());
    if (v.action != Verdict::Action::kContinue) return v;
  }
  return Verdict::Continue();
}

TEST(PolicyEngineTest, AChangedRateLimitDoesNotHandOutAFreshBurst) {
  PolicyEngine engine;
  Install(engine, "limit", R"({"service": "pkg.Greeter", "rate": 0.01, "burst": 3, "on_limit": "reject"})");
  for (int i = 0; i < 3; ++i) EXPECT_EQ(Admit(engine).action, Verdict::Action::kContinue) << i;
  EXPECT_EQ(Admit(engine).action, Verdict::Action::kDeny);
  // The operator raises the burst: the bucket it took over is still empty.
  Install(engine, "limit", R"({"service": "pkg.Greeter", "rate": 0.01, "burst": 10, "on_limit": "reject"})");
  EXPECT_EQ(Admit(engine).action, Verdict::Action::kDeny) << "a replaced rate limit started with a full bucket";
}

// Across a binary upgrade the bucket travels as JSON (Filter::SavedState) to a filter made
// from the same spec in the new process, which refills it for the time in between; a
// state that is not the rate limiter's is refused.
TEST(PolicyEngineTest, ARateLimitersBucketSurvivesAnUpgrade) {
  const std::string spec = R"({"service": "pkg.Greeter", "rate": 0.01, "burst": 3, "on_limit": "reject"})";
  std::shared_ptr<Filter> old_filter = RateLimit("limit", spec);
  for (int i = 0; i < 2; ++i) EXPECT_EQ(old_filter->OnAdmit(Call()).action, Verdict::Action::kContinue);
  const Json saved = old_filter->SavedState();
  ASSERT_TRUE(saved.is_object()) << saved.Dump();
  Json text;
  ASSERT_TRUE(Json::Parse(saved.Dump(), &text).ok());  // as it crosses the handover

  std::shared_ptr<Filter> fresh = RateLimit("limit", spec);
  ASSERT_TRUE(fresh->RestoreState(text).ok());
  EXPECT_EQ(fresh->OnAdmit(Call()).action, Verdict::Action::kContinue);
  EXPECT_EQ(fresh->OnAdmit(Call()).action, Verdict::Action::kDeny) << "the new process started with a full bucket";

  std::shared_ptr<Filter> other = RateLimit("limit", spec);
  for (const char* bad : {R"({"tokens": "3", "monotonic_ns": 1})", R"({"tokens": 1})", R"([1, 2])",
                          R"({"tokens": 1e999, "monotonic_ns": 1})", R"({"tokens": 1, "monotonic_ns": 1.5})"}) {
    Json j;
    if (!Json::Parse(bad, &j).ok()) continue;  // 1e999 may not parse at all
    EXPECT_FALSE(other->RestoreState(j).ok()) << bad;
  }
  // A bucket from the future or below empty restores as empty, never as more than the burst.
  Json odd;
  ASSERT_TRUE(Json::Parse(R"({"tokens": -50, "monotonic_ns": 9223372036854775807})", &odd).ok());
  ASSERT_TRUE(other->RestoreState(odd).ok());
  EXPECT_EQ(other->OnAdmit(Call()).action, Verdict::Action::kDeny);
  ASSERT_TRUE(Json::Parse(R"({"tokens": 1000, "monotonic_ns": 0})", &odd).ok());
  ASSERT_TRUE(other->RestoreState(odd).ok());
  for (int i = 0; i < 3; ++i) EXPECT_EQ(other->OnAdmit(Call()).action, Verdict::Action::kContinue) << i;
  EXPECT_EQ(other->OnAdmit(Call()).action, Verdict::Action::kDeny);
}

// The per-method RPC metrics go on counting in the new process where the old one stopped;
// a malformed saved state is refused whole and adds nothing.
TEST(PolicyEngineTest, RpcMetricsCountsSurviveAnUpgrade) {
  MetricsFilter old_filter;
  RpcInfo server = Call();
  server.side = Side::kServer;
  for (int i = 0; i < 5; ++i) {
    CallOutcome o;
    o.code = i == 4 ? 5 : 0;
    o.latency = std::chrono::microseconds(100 * (i + 1));
    o.request_bytes = 10;
    o.response_bytes = 20;
    o.request_messages = 1;
    o.response_messages = 2;
    old_filter.OnFinish(i % 2 == 0 ? Call() : server, o);
  }
  Json saved;
  ASSERT_TRUE(Json::Parse(old_filter.SavedState().Dump(), &saved).ok());
  MetricsFilter fresh;
  ASSERT_TRUE(fresh.RestoreState(saved).ok());
  EXPECT_EQ(fresh.Snapshot().Dump(), old_filter.Snapshot().Dump());

  MetricsFilter other;
  for (const char* bad :
       {R"({"methods": 3})", R"({"methods": [{"method": "/a/b", "side": "middle"}]})",
        R"({"methods": [{"method": "/a/b", "side": "client", "codes": [1, 2]}]})", R"([])"}) {
    Json j;
    ASSERT_TRUE(Json::Parse(bad, &j).ok()) << bad;
    EXPECT_FALSE(other.RestoreState(j).ok()) << bad;
  }
  Json tampered = saved;
  tampered["methods"] = Json::Array();
  Json entry = saved.find("methods")->items()[0];
  entry["request_bytes"] = -1;
  Json list = Json::Array();
  list.push_back(saved.find("methods")->items()[1]);
  list.push_back(entry);
  tampered["methods"] = std::move(list);
  EXPECT_FALSE(other.RestoreState(tampered).ok());
  EXPECT_EQ(other.Snapshot().Dump(), MetricsFilter().Snapshot().Dump()) << "a refused state added something";
}

TEST(PolicyEngineTest, ALowerBurstCapsWhatWasCarried) {
  PolicyEngine engine;
  Install(engine, "limit", R"({"service": "pkg.Greeter", "rate": 0.01, "burst": 10, "on_limit": "reject"})");
  Install(engine, "limit", R"({"service": "pkg.Greeter", "rate": 0.01, "burst": 2, "on_limit": "reject"})");
  EXPECT_EQ(Admit(engine).action, Verdict::Action::kContinue);
  EXPECT_EQ(Admit(engine).action, Verdict::Action::kContinue);
  EXPECT_EQ(Admit(engine).action, Verdict::Action::kDeny);
}

TEST(PolicyEngineTest, WaitingCallsKeepTheirTurnAcrossAChange) {
  PolicyEngine engine;
  Install(engine, "limit", R"({"service": "pkg.Greeter", "rate": 10, "burst": 1, "max_wait_ms": 60000})");
  EXPECT_EQ(Admit(engine).action, Verdict::Action::kContinue);
  for (int i = 1; i <= 4; ++i) {
    Verdict v = Admit(engine);
    ASSERT_EQ(v.action, Verdict::Action::kDelay);
    EXPECT_NEAR(std::chrono::duration<double>(v.delay).count(), 0.1 * i, 0.05) << i;
  }
  // Four calls wait for tokens 100..400 ms away. The next call after the change waits
  // behind them (at the new rate), not at the head of an empty queue.
  Install(engine, "limit", R"({"service": "pkg.Greeter", "rate": 20, "burst": 1, "max_wait_ms": 60000})");
  Verdict v = Admit(engine);
  ASSERT_EQ(v.action, Verdict::Action::kDelay);
  EXPECT_NEAR(std::chrono::duration<double>(v.delay).count(), 5 * 0.05, 0.05);
}

TEST(PolicyEngineTest, OtherPoliciesAndRunningCallsAreNotTouched) {
  PolicyEngine engine;
  Install(engine, "a", R"({"service": "pkg.Greeter", "rate": 100})");
  Install(engine, "b", R"({"service": "pkg.Greeter", "rate": 100})");
  const FilterChain before = engine.FiltersFor(Call());
  ASSERT_EQ(before.size(), 2u);
  Install(engine, "a", R"({"service": "pkg.Greeter", "rate": 50})");
  const FilterChain after = engine.FiltersFor(Call());
  ASSERT_EQ(after.size(), 2u);
  EXPECT_NE(after[0], before[0]) << "a was replaced";
  EXPECT_EQ(after[0]->name(), "a") << "in its place";
  EXPECT_EQ(after[1], before[1]) << "b is the same filter, with its own state";
  EXPECT_EQ(before[0]->name(), "a") << "a call that started keeps the filter it started with";
}

}  // namespace
}  // namespace conduit::rpc
