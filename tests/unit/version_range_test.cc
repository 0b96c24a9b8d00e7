// common/version_range.h: what two daemons of different releases agree on.
#include "common/version_range.h"

#include <gtest/gtest.h>

namespace conduit {
namespace {

TEST(VersionRangeTest, TheNewestSharedVersionWins) {
  uint32_t v = 0;
  ASSERT_TRUE(NegotiateVersion({3, 3}, {3, 3}, &v));
  EXPECT_EQ(v, 3u);
  ASSERT_TRUE(NegotiateVersion({3, 4}, {3, 3}, &v));  // a newer release meets this one
  EXPECT_EQ(v, 3u);
  ASSERT_TRUE(NegotiateVersion({3, 3}, {2, 5}, &v));
  EXPECT_EQ(v, 3u);
  ASSERT_TRUE(NegotiateVersion({3, 5}, {4, 6}, &v));
  EXPECT_EQ(v, 5u);
}

TEST(VersionRangeTest, RangesThatDoNotMeetOrAreEmptyAreRefused) {
  uint32_t v = 7;
  EXPECT_FALSE(NegotiateVersion({3, 3}, {4, 9}, &v));  // only newer ones
  EXPECT_FALSE(NegotiateVersion({3, 3}, {1, 2}, &v));  // only older ones
  EXPECT_FALSE(NegotiateVersion({3, 3}, {5, 4}, &v));  // a hello with newest < oldest
  EXPECT_FALSE(NegotiateVersion({4, 3}, {3, 4}, &v));
  EXPECT_EQ(v, 7u);  // untouched on refusal
  EXPECT_EQ(DescribeVersions({3, 3}), "3");
  EXPECT_EQ(DescribeVersions({3, 4}), "3-4");
}

}  // namespace
}  // namespace conduit
