// ResultArea (collectives/result_area.h): the one buffer a communicator's local ranks read
// their results from. It grows by replacement (a new number), keeps what holders map, stays
// within the daemon's limit, and only conduitd's own mapping may write it.
#include "collectives/result_area.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstring>

namespace conduit {
namespace {

constexpr uint64_t kLimit = 64 << 20;

TEST(ResultAreaTest, GrowsByReplacementAndKeepsTheOldOneForItsHolders) {
  ResultArea area;
  EXPECT_EQ(area.Current(), nullptr);
  UniqueFd fd;
  uint64_t size = 0, first = 0;
  ASSERT_TRUE(area.Attach(3 << 20, kLimit, &fd, &size, &first).ok());
  EXPECT_EQ(size, 4u << 20);  // geometric, from 1 MiB
  EXPECT_NE(first, 0u);
  std::shared_ptr<ResultArea::Area> held = area.Current();
  ASSERT_NE(held, nullptr);
  memset(held->segment.data(), 7, size);

  // Smaller or equal: the same area.
  UniqueFd again;
  uint64_t size2 = 0, number2 = 0;
  ASSERT_TRUE(area.Attach(1, kLimit, &again, &size2, &number2).ok());
  EXPECT_EQ(number2, first);
  EXPECT_EQ(size2, size);

  // Larger: a new one; the old stays mapped for whoever holds it.
  UniqueFd bigger;
  uint64_t size3 = 0, number3 = 0;
  ASSERT_TRUE(area.Attach(5 << 20, kLimit, &bigger, &size3, &number3).ok());
  EXPECT_EQ(size3, 8u << 20);
  EXPECT_NE(number3, first);
  EXPECT_EQ(area.Current()->number, number3);
  EXPECT_EQ(held->segment.data()[size - 1], 7);
}

TEST(ResultAreaTest, ProgramsMayMapItReadOnlyButNeverWritable) {
  ResultArea area;
  UniqueFd fd;
  uint64_t size = 0, number = 0;
  ASSERT_TRUE(area.Attach(1 << 20, kLimit, &fd, &size, &number).ok());
  void* w = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  EXPECT_EQ(w, MAP_FAILED) << "a writable mapping of the program's descriptor was allowed";
  if (w != MAP_FAILED) munmap(w, size);
  ShmSegment view;
  ASSERT_TRUE(view.Map(fd.get(), size, size, /*writable=*/false).ok());
  // What conduitd writes through its own mapping, the program reads.
  area.Current()->segment.data()[123] = 42;
  EXPECT_EQ(view.data()[123], 42);
  // Nor can the program shrink it under conduitd (or under the other ranks).
  EXPECT_NE(ftruncate(fd.get(), 4096), 0);
}

TEST(ResultAreaTest, RefusesNothingAndMoreThanTheLimit) {
  ResultArea area;
  UniqueFd fd;
  uint64_t size = 0, number = 0;
  EXPECT_EQ(area.Attach(0, kLimit, &fd, &size, &number).code(), ncclInvalidArgument);
  EXPECT_EQ(area.Attach(kLimit + 1, kLimit, &fd, &size, &number).code(), ncclInvalidArgument);
  EXPECT_EQ(area.Current(), nullptr);
  // Up to the limit, even where the next power of two is above it.
  ASSERT_TRUE(area.Attach(kLimit - 5, kLimit, &fd, &size, &number).ok());
  EXPECT_EQ(size, kLimit);
}

}  // namespace
}  // namespace conduit
