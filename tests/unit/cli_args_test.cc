// The bench tools' argument parsers (tools/cli/size_arg.h, tools/cli/number_arg.h): what
// they take whole and what they refuse rather than read a prefix of.
#include <gtest/gtest.h>

#include <cstdint>

#include "cli/number_arg.h"
#include "cli/size_arg.h"

namespace conduit::tools {
namespace {

TEST(SizeArg, TakesNcclTestsForms) {
  size_t v = 0;
  ASSERT_TRUE(ParseSizeArg("1024", &v));
  EXPECT_EQ(v, 1024u);
  ASSERT_TRUE(ParseSizeArg("4K", &v));
  EXPECT_EQ(v, 4096u);
  ASSERT_TRUE(ParseSizeArg("1.5m", &v));
  EXPECT_EQ(v, 1536u * 1024);
  ASSERT_TRUE(ParseSizeArg("128MB", &v));
  EXPECT_EQ(v, 128u << 20);
  ASSERT_TRUE(ParseSizeArg("2G", &v));
  EXPECT_EQ(v, size_t{2} << 30);
}

TEST(SizeArg, RefusesWhatIsNotASize) {
  size_t v = 7;
  for (const char* bad : {"", "K", "-1K", "4X", "4KK", "1e300", "nan", "inf", "4 K junk", "0x", "1G2"}) {
    EXPECT_FALSE(ParseSizeArg(bad, &v)) << bad;
  }
  EXPECT_EQ(v, 7u);  // untouched by a refusal
}

TEST(IntArg, TakesWholeNumbersInRange) {
  int64_t v = 0;
  ASSERT_TRUE(ParseIntArg("0", 0, 10, &v));
  EXPECT_EQ(v, 0);
  ASSERT_TRUE(ParseIntArg("10", 0, 10, &v));
  EXPECT_EQ(v, 10);
  ASSERT_TRUE(ParseIntArg("-3", -5, 5, &v));
  EXPECT_EQ(v, -3);
}

TEST(IntArg, RefusesPrefixesSignsAndRange) {
  int64_t v = 42;
  EXPECT_FALSE(ParseIntArg("11", 0, 10, &v));
  EXPECT_FALSE(ParseIntArg("-1", 0, 10, &v));
  EXPECT_FALSE(ParseIntArg("12x", 0, 100, &v));
  EXPECT_FALSE(ParseIntArg("", 0, 100, &v));
  EXPECT_FALSE(ParseIntArg(" 5", 0, 100, &v));
  EXPECT_FALSE(ParseIntArg("+5", 0, 100, &v));
  EXPECT_FALSE(ParseIntArg("5.0", 0, 100, &v));
  EXPECT_FALSE(ParseIntArg("99999999999999999999999", 0, INT64_MAX, &v));  // overflows strtoll
  EXPECT_FALSE(ParseIntArg(nullptr, 0, 100, &v));
  EXPECT_EQ(v, 42);
}

TEST(RealArg, OpenAndClosedLowerBounds) {
  double v = 0;
  ASSERT_TRUE(ParseRealArg("0.25", 0, 60, true, &v));
  EXPECT_DOUBLE_EQ(v, 0.25);
  ASSERT_TRUE(ParseRealArg("60", 0, 60, true, &v));
  EXPECT_DOUBLE_EQ(v, 60);
  EXPECT_FALSE(ParseRealArg("0", 0, 60, true, &v));
  ASSERT_TRUE(ParseRealArg("0", 0, 60, false, &v));
  EXPECT_DOUBLE_EQ(v, 0);
}

TEST(RealArg, RefusesJunkAndNonFinite) {
  double v = 1.5;
  for (const char* bad : {"", "x", "1s", "nan", "inf", "1e400", " 1", "60.5", "-0.5"}) {
    EXPECT_FALSE(ParseRealArg(bad, 0, 60, true, &v)) << bad;
  }
  EXPECT_DOUBLE_EQ(v, 1.5);
}

}  // namespace
}  // namespace conduit::tools
