// HostRegions::Resolve: a program's RegionOpRefs become pointers only when every op is one
// served in regions, small enough for them, and lies inside an attached region; the
// daemon's refusal of an oversized Reduce or ReduceScatter is the same predicate the shim
// asks before it places one there (shimproto::InputFitsRegions).
#include "session/host_regions.h"

#include <gtest/gtest.h>

#include <vector>

#include "common/shm_segment.h"

namespace conduit {
namespace {

constexpr uint8_t kFloat32 = 7;  // ncclFloat32
constexpr uint64_t kRegionBytes = 1 << 20;

shimproto::OpDesc RegionOp(uint8_t kind, uint64_t count, int peer = 0) {
  shimproto::OpDesc op{};
  op.kind = kind;
  op.dtype = kFloat32;
  op.redop = 0;
  op.flags = shimproto::kOpRegion;
  op.peer = peer;
  op.count = count;
  return op;
}

class HostRegionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ShmSegment program_side;
    UniqueFd fd;
    ASSERT_TRUE(program_side.Create("host-regions-test", kRegionBytes, &fd).ok());
    ASSERT_TRUE(regions_.Attach(1, std::move(fd), kRegionBytes).ok());
  }

  Status Resolve(const shimproto::OpDesc& op, const shimproto::RegionOpRef& ref, int rank = 0, int nranks = 2) {
    std::vector<HostOpBuffers> out;
    int failed = 0;
    Status st = regions_.Resolve({op}, {ref}, rank, nranks, &out, &failed);
    EXPECT_EQ(failed, st.ok() ? -1 : 0);
    if (st.ok()) resolved_ = out[0];
    return st;
  }

  HostRegions regions_{uint64_t{1} << 30};
  HostOpBuffers resolved_{};
};

TEST_F(HostRegionsTest, OpsInsideTheRegionResolveToItsBytes) {
  ASSERT_TRUE(Resolve(RegionOp(shimproto::kAllReduce, 1024), {1, 0, 1, 4096}).ok());
  EXPECT_NE(resolved_.send, nullptr);
  EXPECT_EQ(resolved_.recv, resolved_.send + 4096);
  EXPECT_TRUE(regions_.Holds(resolved_.recv, 4096));
  // A reduce-scatter's input is nranks blocks; its output one.
  EXPECT_TRUE(Resolve(RegionOp(shimproto::kReduceScatter, 1024), {1, 0, 1, 8192}).ok());
  // A reduce's non-root has no output, a broadcast's non-root no input.
  EXPECT_TRUE(Resolve(RegionOp(shimproto::kReduce, 1024, /*peer=*/1), {1, 0, 0, 0}).ok());
  EXPECT_EQ(resolved_.recv, nullptr);
  EXPECT_TRUE(Resolve(RegionOp(shimproto::kBroadcast, 1024, /*peer=*/1), {0, 0, 1, 0}).ok());
  EXPECT_EQ(resolved_.send, nullptr);
}

TEST_F(HostRegionsTest, RangesPastTheRegionAndUnknownRegionsAreRefused) {
  EXPECT_FALSE(Resolve(RegionOp(shimproto::kAllReduce, kRegionBytes / 4), {1, 4, 1, 0}).ok());
  EXPECT_FALSE(Resolve(RegionOp(shimproto::kAllReduce, 1), {1, ~uint64_t{0}, 1, 0}).ok());
  EXPECT_FALSE(Resolve(RegionOp(shimproto::kAllReduce, 1), {2, 0, 1, 0}).ok());
  // The reduce-scatter's input is two blocks: half the region each fits, and one more doesn't.
  EXPECT_TRUE(Resolve(RegionOp(shimproto::kReduceScatter, kRegionBytes / 8), {1, 0, 1, 0}).ok());
  EXPECT_FALSE(Resolve(RegionOp(shimproto::kReduceScatter, kRegionBytes / 8 + 1), {1, 0, 1, 0}).ok());
  // Buffers an op does not use must not be named.
  EXPECT_FALSE(Resolve(RegionOp(shimproto::kReduce, 16, /*peer=*/1), {1, 0, 1, 0}).ok());
  EXPECT_FALSE(Resolve(RegionOp(shimproto::kBroadcast, 16, /*peer=*/1), {1, 0, 1, 0}).ok());
}

TEST_F(HostRegionsTest, PreMulSumIsNotServed) {
  shimproto::OpDesc op = RegionOp(shimproto::kAllReduce, 16);
  op.redop = shimproto::kRedOpPreMulSum;
  Status st = Resolve(op, {1, 0, 1, 0});
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("not served"), std::string::npos) << st.message();
}

// A Reduce or ReduceScatter past the limit is refused for its size before any range is
// looked at; an AllReduce of the same size is refused only because the region is smaller.
TEST_F(HostRegionsTest, ReductionsWorkingInDaemonMemoryHaveASizeLimit) {
  const uint64_t limit_count = shimproto::kMaxReduceInRegionsBytes / 4;
  Status reduce = Resolve(RegionOp(shimproto::kReduce, limit_count + 1), {1, 0, 1, 0});
  EXPECT_FALSE(reduce.ok());
  EXPECT_NE(reduce.message().find("larger ones are staged"), std::string::npos) << reduce.message();
  // nranks blocks of input: the limit counts them all.
  Status rs = Resolve(RegionOp(shimproto::kReduceScatter, limit_count / 2 + 1), {1, 0, 1, 0});
  EXPECT_NE(rs.message().find("larger ones are staged"), std::string::npos) << rs.message();
  Status all_reduce = Resolve(RegionOp(shimproto::kAllReduce, limit_count + 1), {1, 0, 1, 0});
  EXPECT_FALSE(all_reduce.ok());
  EXPECT_NE(all_reduce.message().find("outside host region"), std::string::npos) << all_reduce.message();

  EXPECT_TRUE(shimproto::InputFitsRegions(shimproto::kReduce, shimproto::kMaxReduceInRegionsBytes));
  EXPECT_FALSE(shimproto::InputFitsRegions(shimproto::kReduce, shimproto::kMaxReduceInRegionsBytes + 1));
  EXPECT_FALSE(shimproto::InputFitsRegions(shimproto::kReduceScatter, shimproto::kMaxReduceInRegionsBytes + 1));
  EXPECT_TRUE(shimproto::InputFitsRegions(shimproto::kAllReduce, ~uint64_t{0}));
  EXPECT_TRUE(shimproto::InputFitsRegions(shimproto::kSend, ~uint64_t{0}));
}

}  // namespace
}  // namespace conduit
