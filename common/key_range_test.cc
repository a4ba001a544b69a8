#include "common/key_range.h"

#include <gtest/gtest.h>

namespace nova {
namespace {

TEST(KeyRangeTest, ContainsIsStartInclusiveEndExclusive) {
  KeyRange r{"b", "d"};
  EXPECT_FALSE(r.Contains("a"));
  EXPECT_TRUE(r.Contains("b"));
  EXPECT_TRUE(r.Contains("c\xff"));
  EXPECT_FALSE(r.Contains("d"));
  EXPECT_FALSE(r.Contains("e"));
}

TEST(KeyRangeTest, MissingEndIsUnbounded) {
  KeyRange r{"m", std::nullopt};
  EXPECT_TRUE(r.unbounded());
  EXPECT_FALSE(r.Contains("l"));
  EXPECT_TRUE(r.Contains("m"));
  EXPECT_TRUE(r.Contains(std::string(100, '\xff')));
  EXPECT_TRUE(KeyRange::All().Contains(""));
  EXPECT_TRUE(KeyRange::All().Contains("anything"));
}

TEST(KeyRangeTest, ValidNeedsAnEndAfterTheStart) {
  EXPECT_TRUE((KeyRange{"a", "b"}).Valid());
  EXPECT_TRUE((KeyRange{"a", std::nullopt}).Valid());
  EXPECT_FALSE((KeyRange{"b", "b"}).Valid());
  EXPECT_FALSE((KeyRange{"b", "a"}).Valid());
  EXPECT_FALSE((KeyRange{"", ""}).Valid());
}

TEST(KeyRangeTest, Overlaps) {
  const KeyRange ab{"a", "b"}, bc{"b", "c"}, ac{"a", "c"}, from_b{"b", std::nullopt};
  EXPECT_FALSE(ab.Overlaps(bc));  // adjacent: "b" is only in bc
  EXPECT_FALSE(bc.Overlaps(ab));
  EXPECT_TRUE(ac.Overlaps(bc));
  EXPECT_TRUE(bc.Overlaps(ac));
  EXPECT_TRUE(from_b.Overlaps(bc));
  EXPECT_FALSE(from_b.Overlaps(ab));
  EXPECT_TRUE(KeyRange::All().Overlaps(ab));
}

TEST(KeyRangeTest, ToStringShowsHexAndTheUnboundedEnd) {
  EXPECT_EQ((KeyRange{"a", std::string("\x01", 1)}).ToString(), "[61, 01)");
  EXPECT_EQ((KeyRange{"", std::nullopt}).ToString(), "[, end)");
}

}  // namespace
}  // namespace nova
