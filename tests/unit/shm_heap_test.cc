// ShmHeap: blocks never overlap, frees coalesce, and a release that names no live block
// (the other process is not trusted) changes nothing.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "common/shm_heap.h"

namespace conduit {
namespace {

TEST(ShmHeapTest, AllocatesFreesAndCoalesces) {
  ShmHeap heap(128, 1 << 20);
  uint64_t a, b, c;
  ASSERT_TRUE(heap.Allocate(1000, &a));
  ASSERT_TRUE(heap.Allocate(1000, &b));
  ASSERT_TRUE(heap.Allocate(1000, &c));
  EXPECT_GE(a, 128u);
  EXPECT_EQ(a % ShmHeap::kAlign, 0u);
  EXPECT_TRUE(heap.Free(b));
  EXPECT_TRUE(heap.Free(a));
  EXPECT_TRUE(heap.Free(c));
  EXPECT_EQ(heap.used(), 0u);
  // Everything merged back: one block as large as the heap fits again.
  uint64_t all;
  EXPECT_TRUE(heap.Allocate(heap.capacity(), &all));
  EXPECT_FALSE(heap.Fits(1));
}

TEST(ShmHeapTest, RefusesBogusReleases) {
  ShmHeap heap(0, 1 << 16);
  uint64_t a;
  ASSERT_TRUE(heap.Allocate(100, &a));
  EXPECT_FALSE(heap.Free(a + 64));
  EXPECT_FALSE(heap.Free(1 << 20));
  EXPECT_TRUE(heap.Free(a));
  EXPECT_FALSE(heap.Free(a)) << "double release accepted";
  EXPECT_EQ(heap.used(), 0u);
}

TEST(ShmHeapTest, RandomWorkloadKeepsBlocksDisjoint) {
  ShmHeap heap(0, 1 << 20);
  std::mt19937 rng(3);
  std::map<uint64_t, uint64_t> live;  // offset -> length
  for (int i = 0; i < 20000; ++i) {
    if (!live.empty() && (rng() % 3 == 0)) {
      auto it = live.begin();
      std::advance(it, rng() % live.size());
      ASSERT_TRUE(heap.Free(it->first));
      live.erase(it);
      continue;
    }
    uint64_t len = 1 + rng() % 20000, off;
    if (!heap.Allocate(len, &off)) continue;
    auto next = live.lower_bound(off);
    if (next != live.end()) {
      ASSERT_LE(off + len, next->first);
    }
    if (next != live.begin()) {
      --next;
      ASSERT_LE(next->first + next->second, off);
    }
    ASSERT_LE(off + len, 1u << 20);
    live[off] = len;
  }
}

// A live upgrade rebuilds a receive segment's heap in the new process from the blocks the
// program still holds: the same blocks are taken, the rest is free, and nothing that was
// not a free aligned range can be taken (a hostile state cannot overlap two blocks).
TEST(ShmHeapTest, ReserveRebuildsTheLiveBlocksOfAnotherHeap) {
  ShmHeap old_heap(0, 1 << 20);
  uint64_t a, b, c;
  ASSERT_TRUE(old_heap.Allocate(1000, &a));
  ASSERT_TRUE(old_heap.Allocate(5000, &b));
  ASSERT_TRUE(old_heap.Allocate(64, &c));
  ASSERT_TRUE(old_heap.Free(b));
  ShmHeap heap(0, 1 << 20);
  for (const auto& [offset, len] : old_heap.LiveBlocks()) ASSERT_TRUE(heap.Reserve(offset, len));
  EXPECT_EQ(heap.LiveBlocks(), old_heap.LiveBlocks());
  EXPECT_EQ(heap.used(), old_heap.used());
  EXPECT_FALSE(heap.Reserve(a, 64)) << "a block taken twice";
  EXPECT_FALSE(heap.Reserve(b + 1, 64)) << "unaligned";
  EXPECT_FALSE(heap.Reserve(b, 0));
  EXPECT_FALSE(heap.Reserve((1 << 20) - 64, 128)) << "past the end";
  EXPECT_TRUE(heap.Free(a));
  EXPECT_TRUE(heap.Free(c));
  EXPECT_EQ(heap.used(), 0u);
  uint64_t whole;
  EXPECT_TRUE(heap.Allocate(heap.capacity(), &whole)) << "the frees did not merge back into one range";
}

}  // namespace
}  // namespace conduit
