#include "ltc/server/ltc_assignment.h"

#include <gtest/gtest.h>

namespace nova::ltc {
namespace {

TEST(LtcAssignmentTest, SplitsAndParsing) {
  auto r = EqualRanges(4);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r.value().size(), 4u);
  EXPECT_EQ(r.value()[1].keys.start, "@");
  EXPECT_TRUE(r.value()[3].keys.unbounded());
  EXPECT_FALSE(EqualRanges(0).ok());
  auto b = RangesFromBounds("40,80");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b.value().size(), 3u);
  EXPECT_FALSE(RangesFromBounds("80,40").ok());
  EXPECT_FALSE(RangesFromBounds("4g").ok());
  auto sel = SelectRanges(r.value(), "1,3");
  ASSERT_TRUE(sel.ok());
  EXPECT_EQ(sel.value().size(), 2u);
  EXPECT_FALSE(SelectRanges(r.value(), "9").ok());
  auto st = ParseStocList("1@127.0.0.1:5,2@h:6");
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st.value().at(2), "h:6");
  EXPECT_FALSE(ParseStocList("x@h:1").ok());
  LtcAssignment a;
  a.ranges = {{0, {"", "b"}}, {1, {"a", std::nullopt}}};
  EXPECT_FALSE(a.Validate().ok());
}

}  // namespace
}  // namespace nova::ltc
