// RPC calls in flight across a live upgrade (rpc/call_handover.h): what each end writes of
// a call, how the new process joins the two ends it gets back, and what happens to a call
// one of whose ends never comes back, or comes back too late.
#include "rpc/call_handover.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "protocol/upgrade_state.pb.h"
#include "rpc/policy/engine.h"

namespace conduit::rpc {
namespace {

// An end that records what reaches it.
class RecordingEnd : public Endpoint {
 public:
  void Deliver(RpcCall&, uint64_t id, Event ev) override { events.push_back({id, std::move(ev)}); }
  void Forget(uint64_t id) override { forgotten.push_back(id); }
  std::string name() const override { return "recording end"; }

  std::vector<std::pair<uint64_t, Event>> events;
  std::vector<uint64_t> forgotten;
};

upgrade::v1::RpcCallState Exported(RpcCall& call, uint64_t id, bool client_end) {
  upgrade::v1::RpcCallState state;
  EXPECT_TRUE(ExportCall(call, id, client_end, &state).ok());
  return state;
}

// A stream half-way: started 3 s ago, 7 requests and 6 responses through.
void StreamHalfWay(RpcCall* c) {
  RpcCall& call = *c;
  call.info.method = "/helloworld.Greeter/Chat";
  call.info.program = "greeter_client[42]";
  call.info.side = Side::kClient;
  call.request_encoding = Encoding::kGzip;
  call.start_forwarded = true;
  call.outcome.request_messages = 7;
  call.outcome.request_bytes = 700;
  call.outcome.response_messages = 6;
  call.started = std::chrono::steady_clock::now() - std::chrono::seconds(3);
}

TEST(CallHandoverTest, BothEndsJoinOneCallWithItsFields) {
  RpcCall old_call;
  StreamHalfWay(&old_call);
  const upgrade::v1::RpcCallState client = Exported(old_call, 5, /*client_end=*/true);
  const upgrade::v1::RpcCallState server = Exported(old_call, 1ull << 63 | 9, /*client_end=*/false);
  EXPECT_EQ(client.key(), server.key());
  EXPECT_GE(client.age_us(), 3000000u);

  AdoptedCalls adopted;
  auto a = std::make_shared<RecordingEnd>(), b = std::make_shared<RecordingEnd>();
  std::shared_ptr<RpcCall> first, second;
  ASSERT_TRUE(adopted.Attach(server, b, &second).ok());
  ASSERT_TRUE(adopted.Attach(client, a, &first).ok());
  ASSERT_EQ(first, second) << "the two ends made two calls";
  EXPECT_EQ(first->client_end, a);
  EXPECT_EQ(first->client_id, 5u);
  EXPECT_EQ(first->server_end, b);
  EXPECT_EQ(first->server_id, 1ull << 63 | 9);
  EXPECT_EQ(first->info.method, "/helloworld.Greeter/Chat");
  EXPECT_EQ(first->request_encoding, Encoding::kGzip);
  EXPECT_TRUE(first->start_forwarded);
  EXPECT_EQ(first->outcome.request_messages, 7u);
  EXPECT_EQ(first->outcome.response_messages, 6u);
  EXPECT_GE(std::chrono::steady_clock::now() - first->started, std::chrono::seconds(3));

  PolicyEngine policies;
  EXPECT_EQ(adopted.Finish(&policies), 1u);
  EXPECT_TRUE(a->events.empty());
  EXPECT_TRUE(b->events.empty());
  EXPECT_FALSE(first->is_finished());
}

TEST(CallHandoverTest, ACallMissingAnEndEndsAtTheOther) {
  RpcCall old_call;
  StreamHalfWay(&old_call);
  AdoptedCalls adopted;
  auto server = std::make_shared<RecordingEnd>();
  std::shared_ptr<RpcCall> call;
  ASSERT_TRUE(adopted.Attach(Exported(old_call, 9, false), server, &call).ok());
  PolicyEngine policies;
  EXPECT_EQ(adopted.Finish(&policies), 0u);
  // The server saw the call start: it hears a cancellation, and forgets the call.
  ASSERT_EQ(server->events.size(), 1u);
  EXPECT_EQ(server->events[0].first, 9u);
  EXPECT_TRUE(server->events[0].second.has(kCancel));
  EXPECT_EQ(server->forgotten, std::vector<uint64_t>{9});
  EXPECT_TRUE(call->is_finished());
}

TEST(CallHandoverTest, RefusesWhatCannotBeACallAndEndsComingBackLate) {
  RpcCall old_call;
  StreamHalfWay(&old_call);
  const upgrade::v1::RpcCallState client = Exported(old_call, 5, true);
  AdoptedCalls adopted;
  auto end = std::make_shared<RecordingEnd>();
  std::shared_ptr<RpcCall> call;
  upgrade::v1::RpcCallState bad = client;
  bad.set_method("");
  EXPECT_FALSE(adopted.Attach(bad, end, &call).ok());
  bad = client;
  bad.set_side(7);
  EXPECT_FALSE(adopted.Attach(bad, end, &call).ok());
  bad = client;
  bad.set_key(0);
  EXPECT_FALSE(adopted.Attach(bad, end, &call).ok());
  bad = client;
  bad.set_age_us(1ull << 60);
  EXPECT_FALSE(adopted.Attach(bad, end, &call).ok());
  ASSERT_TRUE(adopted.Attach(client, end, &call).ok());
  EXPECT_FALSE(adopted.Attach(client, end, &call).ok()) << "two client ends";
  upgrade::v1::RpcCallState other = Exported(old_call, 9, false);
  other.set_method("/other.Service/Method");
  EXPECT_FALSE(adopted.Attach(other, end, &call).ok()) << "the ends disagree on the method";
  PolicyEngine policies;
  adopted.Finish(&policies);
  // The client heard UNAVAILABLE; a server end that comes back now is refused.
  ASSERT_EQ(end->events.size(), 1u);
  EXPECT_TRUE(end->events[0].second.has(kStatus));
  EXPECT_EQ(end->events[0].second.status_code, GrpcStatusOf(StatusCode::kUnavailable));
  EXPECT_FALSE(adopted.Attach(Exported(old_call, 9, false), end, &call).ok());
}

TEST(CallHandoverTest, ACallWaitingOnARateLimitDoesNotMove) {
  RpcCall call;
  StreamHalfWay(&call);
  call.held = true;
  upgrade::v1::RpcCallState state;
  Status st = ExportCall(call, 5, true, &state);
  EXPECT_EQ(st.canonical(), StatusCode::kAborted);
  EXPECT_NE(st.message().find("rate limit"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace conduit::rpc
