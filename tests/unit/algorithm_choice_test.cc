// The all-reduce algorithm choice: recursive doubling where its fewer steps outweigh the
// extra bytes it moves, the ring elsewhere.
#include <gtest/gtest.h>

#include "collectives/algorithms.h"

namespace conduit {
namespace {

constexpr size_t kLatencyBytes = 4096;

TEST(AlgorithmChoiceTest, TwoHostsAlwaysPreferRecursiveDoubling) {
  EXPECT_TRUE(RecursiveDoublingIsFaster(1, 2, kLatencyBytes));
  EXPECT_TRUE(RecursiveDoublingIsFaster(1 << 20, 2, kLatencyBytes));
}

TEST(AlgorithmChoiceTest, CrossoverShrinksWithMoreHosts) {
  // 4 hosts: RD moves 0.5 x bytes more in 4 fewer steps: wins below 8 x latency_bytes.
  EXPECT_TRUE(RecursiveDoublingIsFaster(32 * 1024, 4, kLatencyBytes));
  EXPECT_FALSE(RecursiveDoublingIsFaster(33 * 1024, 4, kLatencyBytes));
  // 8 hosts: 1.25 x bytes more in 11 fewer steps.
  EXPECT_TRUE(RecursiveDoublingIsFaster(35 * 1024, 8, kLatencyBytes));
  EXPECT_FALSE(RecursiveDoublingIsFaster(64 * 1024, 8, kLatencyBytes));
}

TEST(AlgorithmChoiceTest, FoldingHostsMakeRecursiveDoublingCostly) {
  // 3 hosts: 3 steps of the whole buffer against the ring's 4 steps of 2/3 of it.
  EXPECT_TRUE(RecursiveDoublingIsFaster(1024, 3, kLatencyBytes));
  EXPECT_FALSE(RecursiveDoublingIsFaster(4096, 3, kLatencyBytes));
}

// Recursive doubling up to 1 MiB on 2 hosts only where every daemon of the communicator
// speaks protocol 6 (daemons of 5 run the ring above 64 KiB, and the hosts must agree);
// 64 KiB elsewhere, where the cost model stops it earlier anyway.
TEST(AlgorithmChoiceTest, RecursiveDoublingsDefaultRangeFollowsTheHostsAndTheProtocol) {
  EXPECT_EQ(RecursiveDoublingMaxBytes(std::nullopt, 2, 6), 1u << 20);
  EXPECT_EQ(RecursiveDoublingMaxBytes(std::nullopt, 2, 7), 1u << 20);
  EXPECT_EQ(RecursiveDoublingMaxBytes(std::nullopt, 2, 5), 64u << 10);
  EXPECT_EQ(RecursiveDoublingMaxBytes(std::nullopt, 2, 3), 64u << 10);
  for (int hosts : {3, 4, 8}) EXPECT_EQ(RecursiveDoublingMaxBytes(std::nullopt, hosts, 6), 64u << 10) << hosts;
}

TEST(AlgorithmChoiceTest, TheOperatorsRecursiveDoublingLimitHoldsEverywhere) {
  EXPECT_EQ(RecursiveDoublingMaxBytes(65536, 2, 6), 65536u);
  EXPECT_EQ(RecursiveDoublingMaxBytes(0, 2, 6), 0u);
  EXPECT_EQ(RecursiveDoublingMaxBytes(4u << 20, 4, 5), 4u << 20);
}

// Halving-doubling by default only where every daemon of the communicator speaks protocol 4,
// up to 1 MiB there and up to 2 MiB where every one speaks 5: a daemon of an earlier release
// runs the ring above its own limit, and the hosts must agree.
TEST(AlgorithmChoiceTest, HalvingDoublingsDefaultRangeFollowsTheProtocol) {
  EXPECT_EQ(HalvingDoublingMaxBytes(std::nullopt, 3), 0u);
  EXPECT_EQ(HalvingDoublingMaxBytes(std::nullopt, 4), 1u << 20);
  EXPECT_EQ(HalvingDoublingMaxBytes(std::nullopt, 5), 2u << 20);
  EXPECT_EQ(HalvingDoublingMaxBytes(std::nullopt, 6), 2u << 20);
}

TEST(AlgorithmChoiceTest, TheOperatorsHalvingDoublingLimitHoldsAtEveryVersion) {
  EXPECT_EQ(HalvingDoublingMaxBytes(0, 4), 0u);
  EXPECT_EQ(HalvingDoublingMaxBytes(8u << 20, 3), 8u << 20);
  EXPECT_EQ(HalvingDoublingMaxBytes(4096, 4), 4096u);
  EXPECT_EQ(HalvingDoublingMaxBytes(512, 5), 512u);
}

}  // namespace
}  // namespace conduit
