// ShmSegment::Map (common/shm_segment.h): which descriptors from a program it maps. Every
// page a program shares with conduitd goes through it (the staging segment, host regions,
// the call pages, an RPC program's control region).
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "common/fd_io.h"
#include "common/shm_segment.h"

namespace conduit {
namespace {

constexpr uint64_t kPage = 4096;

UniqueFd Memfd(unsigned flags, uint64_t size, int seals) {
  UniqueFd fd(memfd_create("shm-segment-test", MFD_CLOEXEC | MFD_ALLOW_SEALING | flags));
  if (!fd.valid()) return fd;
  if (ftruncate(fd.get(), static_cast<off_t>(size)) != 0) return UniqueFd();
  if (seals != 0 && fcntl(fd.get(), F_ADD_SEALS, seals) != 0) return UniqueFd();
  return fd;
}

TEST(ShmSegmentTest, MapsASealedMemfdAndSharesItsBytes) {
  UniqueFd fd = Memfd(0, kPage, F_SEAL_SHRINK);
  ASSERT_TRUE(fd.valid());
  ShmSegment a, b;
  ASSERT_TRUE(a.Map(fd.get(), kPage, kPage).ok());
  ASSERT_TRUE(b.Map(fd.get(), kPage, kPage).ok());
  a.data()[kPage - 1] = 42;
  EXPECT_EQ(b.data()[kPage - 1], 42);
}

TEST(ShmSegmentTest, RefusesUnsealedShortAndOversizedSegments) {
  ShmSegment s;
  UniqueFd unsealed = Memfd(0, kPage, 0);
  ASSERT_TRUE(unsealed.valid());
  EXPECT_FALSE(s.Map(unsealed.get(), kPage, kPage).ok());
  UniqueFd sealed = Memfd(0, kPage, F_SEAL_SHRINK);
  ASSERT_TRUE(sealed.valid());
  EXPECT_FALSE(s.Map(sealed.get(), 2 * kPage, 4 * kPage).ok()) << "larger than the file";
  EXPECT_FALSE(s.Map(sealed.get(), kPage, kPage - 1).ok()) << "over the caller's limit";
  EXPECT_FALSE(s.Map(sealed.get(), 0, kPage).ok());
  EXPECT_EQ(s.data(), nullptr);
}

// A hugetlbfs memfd takes seals as well, but the program can punch a hole in it and empty
// the huge page pool, after which the daemon's next store there is a SIGBUS: refused by
// its file system, whether or not this host has huge pages configured (without a pool the
// mapping itself would fail, for another reason: the message says which).
TEST(ShmSegmentTest, RefusesHugetlbfsMemfds) {
  UniqueFd fd(memfd_create("shm-segment-test-huge", MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_HUGETLB));
  if (!fd.valid()) GTEST_SKIP() << "no hugetlbfs memfd on this kernel: " << strerror(errno);
  const uint64_t huge = 2u << 20;
  if (ftruncate(fd.get(), static_cast<off_t>(huge)) != 0) GTEST_SKIP() << "cannot size it: " << strerror(errno);
  ASSERT_EQ(fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0) << strerror(errno);
  ShmSegment s;
  const Status st = s.Map(fd.get(), kPage, huge);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("hugetlbfs"), std::string::npos) << st.message();
  EXPECT_EQ(s.data(), nullptr);
}

}  // namespace
}  // namespace conduit
