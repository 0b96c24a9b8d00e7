// LaunchQueue (daemon/collectives/launch_queue.h): local ranks' collectives are matched by
// position, a batch runs only when every local rank has one queued and nothing runs, and a
// request that gives up is never matched.
#include "collectives/launch_queue.h"

#include <gtest/gtest.h>

namespace conduit {
namespace {

struct Req {
  int id;
};

TEST(LaunchQueue, MatchesEachRanksOldestAndRunsOneBatchAtATime) {
  LaunchQueue<Req> q;
  q.Init(3);
  Req a0{0}, a1{1}, b0{10}, c0{20}, c1{21}, b1{11};
  EXPECT_TRUE(q.idle());
  q.Push(0, &a0);
  q.Push(0, &a1);
  q.Push(2, &c0);
  EXPECT_FALSE(q.Ready());
  EXPECT_EQ(q.Missing(), std::vector<size_t>{1});
  q.Push(1, &b0);
  ASSERT_TRUE(q.Ready());
  std::vector<Req*> batch = q.Start();
  EXPECT_EQ(batch, (std::vector<Req*>{&a0, &b0, &c0}));
  q.Push(2, &c1);
  q.Push(1, &b1);
  EXPECT_FALSE(q.Ready()) << "a second batch while the first runs";
  EXPECT_FALSE(q.idle());
  q.Finish();
  ASSERT_TRUE(q.Ready());
  EXPECT_EQ(q.Start(), (std::vector<Req*>{&a1, &b1, &c1}));
  q.Finish();
  EXPECT_TRUE(q.idle());
}

TEST(LaunchQueue, ARequestThatGaveUpIsNotMatchedAndTheTokenHoldsLaunches) {
  LaunchQueue<Req> q;
  q.Init(2);
  Req a0{0}, a1{1}, b0{10};
  q.Push(0, &a0);
  q.Push(0, &a1);
  q.Remove(0, &a0);
  q.Push(1, &b0);
  q.Hold();  // a reconfiguration is being applied
  EXPECT_FALSE(q.Ready());
  EXPECT_FALSE(q.idle());
  q.Release();
  ASSERT_TRUE(q.Ready());
  EXPECT_EQ(q.Start(), (std::vector<Req*>{&a1, &b0}));
}

}  // namespace
}  // namespace conduit
