// Collectives across 4 emulated hosts (1 and 2 ranks per host, everything at small sizes),
// and 8 ranks per host on 2 of them for a representative subset.
#include <gtest/gtest.h>

#include "coll_run.h"
#include "integration_env.h"

namespace conduit::it {
namespace {

constexpr auto kRunTimeout = std::chrono::seconds(300);

class FourHostTest : public ClusterSuiteTest<FourHostTest> {
 public:
  static ClusterConfig Config() {
    ClusterConfig c;
    c.prefix = "c4";
    c.subnet = "10.231.13";
    c.hosts = 4;
    return c;
  }

 protected:
  void RunOn(CollLaunch launch) {
    auto procs = LaunchCollCheck(*cluster_, launch);
    std::string failure = WaitCollCheck(*cluster_, procs, kRunTimeout);
    EXPECT_TRUE(failure.empty()) << failure;
  }
};

const std::vector<std::string> kAllSmall = {"--types", "all", "--ops", "all", "--sizes", "0,1,7,1000,65539"};
// Two ranks per host changes how local ranks are combined, not the element arithmetic, which
// OneRankPerHost checks for every type and op: every op with an element of each width and kind
// (as coll_2host_test's layouts).
const std::vector<std::string> kLayoutSmall = {"--types", "int8,uint64,half,bfloat16,float", "--ops", "all",
                                               "--sizes", "0,1,7,1000,65539"};

TEST_F(FourHostTest, OneRankPerHost) { RunOn(Ranks(1, kAllSmall)); }
TEST_F(FourHostTest, TwoRanksPerHost) { RunOn(Ranks(2, kLayoutSmall)); }

// 16 ranks on 2 hosts: many local ranks sharing one daemon; a subset keeps it affordable.
TEST_F(FourHostTest, EightRanksPerHostOnTwoHosts) {
  RunOn(Ranks(8, {"--colls", "allreduce,broadcast,allgather,reducescatter,sendrecv,alltoall,split", "--types",
                  "float,int32,half,bfloat16,uint8", "--ops", "sum,max,avg,premulsum", "--sizes", "0,1,7,1000,65539"})
            .OnHosts(2));
}

}  // namespace
}  // namespace conduit::it
