// Large buffers (64 MiB and 256 MiB) through allreduce, broadcast and allgather: chunking,
// shared-buffer limits and memory use that small sizes never reach.
#include <gtest/gtest.h>

#include "coll_run.h"
#include "integration_env.h"

namespace conduit::it {
namespace {

constexpr auto kRunTimeout = std::chrono::seconds(400);

ClusterConfig LargeCluster() {
  ClusterConfig c;
  c.prefix = "lg";
  c.subnet = "10.231.14";
  c.hosts = 2;
  return c;
}

void RunOn(Cluster& cluster, CollLaunch launch) {
  auto procs = LaunchCollCheck(cluster, launch);
  std::string failure = WaitCollCheck(cluster, procs, kRunTimeout);
  EXPECT_TRUE(failure.empty()) << failure;
}

// allgather sizes are per rank: 2 ranks x 128 MiB gather a 256 MiB result.
TEST(LargeTest, OneRankPerHost) {
  CONDUIT_SKIP_UNLESS_CLUSTER();
  Cluster cluster(LargeCluster());
  CONDUIT_START_CLUSTER(cluster);
  RunOn(cluster, Ranks(1, {"--colls", "allreduce,broadcast", "--types", "float", "--ops", "sum", "--sizes",
                           "64MiB,256MiB", "--inplace", "no"}));
  RunOn(cluster, Ranks(1, {"--colls", "allgather", "--types", "float", "--sizes", "32MiB,128MiB", "--inplace", "no"}));
}

TEST(LargeTest, TwoRanksPerHost) {
  CONDUIT_SKIP_UNLESS_CLUSTER();
  Cluster cluster(LargeCluster());
  CONDUIT_START_CLUSTER(cluster);
  RunOn(cluster, Ranks(2, {"--colls", "allreduce,broadcast", "--types", "float", "--ops", "sum", "--sizes", "64MiB",
                           "--inplace", "both"}));
  RunOn(cluster, Ranks(2, {"--colls", "allgather", "--types", "float", "--sizes", "16MiB,64MiB", "--inplace", "no"}));
}

}  // namespace
}  // namespace conduit::it
