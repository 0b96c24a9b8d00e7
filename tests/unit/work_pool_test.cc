// WorkPool (daemon/collectives/work_pool.h): the daemon memory host-region reductions work
// in stays under its caps, kept or in use, and a refusal says why instead of taking more.
#include "collectives/work_pool.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace conduit {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

TEST(WorkPoolTest, AnOpPastTheTotalIsRefusedAndTheOthersGoOn) {
  ASSERT_EQ(WorkPool::total_bytes(), 0u);
  WorkPool a, b;
  uint8_t* p = nullptr;
  // Address space only: nothing here touches the pages.
  ASSERT_TRUE(a.Acquire(WorkPool::kTotalBytes - 512 * kMiB, &p).ok());
  ASSERT_NE(p, nullptr);
  Status st = b.Acquire(1024 * kMiB, &p);
  EXPECT_EQ(st.canonical(), StatusCode::kResourceExhausted);
  EXPECT_NE(st.message().find("hold"), std::string::npos) << st.message();
  EXPECT_TRUE(b.Acquire(256 * kMiB, &p).ok()) << "within what is left";
  b.Release();
  a.Release();  // larger than kKeepBytes: freed
  EXPECT_EQ(WorkPool::total_bytes(), 256 * kMiB) << "b keeps its 256 MiB";
  EXPECT_TRUE(b.Acquire(1024 * kMiB, &p).ok()) << "room again";
  b.Release();
  EXPECT_EQ(WorkPool::total_bytes(), 0u);
}

TEST(WorkPoolTest, ABufferIsKeptForTheNextOpWhileAllPoolsKeepLittle) {
  {
    WorkPool pool;
    uint8_t* first = nullptr;
    uint8_t* again = nullptr;
    ASSERT_TRUE(pool.Acquire(100 * kMiB, &first).ok());
    pool.Release();
    EXPECT_EQ(WorkPool::kept_bytes(), 100 * kMiB);
    ASSERT_TRUE(pool.Acquire(50 * kMiB, &again).ok());
    EXPECT_EQ(again, first) << "the kept buffer is reused";
    EXPECT_EQ(WorkPool::kept_bytes(), 0u) << "in use again";
    pool.Release();
  }
  EXPECT_EQ(WorkPool::total_bytes(), 0u);
  EXPECT_EQ(WorkPool::kept_bytes(), 0u);
  // Many communicators' pools: together they keep at most kKeepTotalBytes.
  std::vector<std::unique_ptr<WorkPool>> pools;
  const size_t each = 200 * kMiB;
  for (uint64_t i = 0; i < WorkPool::kKeepTotalBytes / each + 3; ++i) {
    pools.push_back(std::make_unique<WorkPool>());
    uint8_t* p = nullptr;
    ASSERT_TRUE(pools.back()->Acquire(each, &p).ok()) << i;
  }
  for (auto& pool : pools) pool->Release();
  EXPECT_LE(WorkPool::kept_bytes(), WorkPool::kKeepTotalBytes);
  EXPECT_EQ(WorkPool::total_bytes(), WorkPool::kept_bytes());
  pools.clear();
  EXPECT_EQ(WorkPool::total_bytes(), 0u);
}

}  // namespace
}  // namespace conduit
