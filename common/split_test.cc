#include "common/split.h"

#include <gtest/gtest.h>

namespace nova {
namespace {

TEST(SplitTest, DropsEmptyPieces) {
  using V = std::vector<std::string>;
  EXPECT_EQ(SplitNonEmpty("", ','), V{});
  EXPECT_EQ(SplitNonEmpty(",", ','), V{});
  EXPECT_EQ(SplitNonEmpty("a", ','), V{"a"});
  EXPECT_EQ(SplitNonEmpty("a,,b,", ','), (V{"a", "b"}));
  EXPECT_EQ(SplitNonEmpty(",1@h:1,2@h:2", ','), (V{"1@h:1", "2@h:2"}));
  EXPECT_EQ(SplitNonEmpty("a b", ' '), (V{"a", "b"}));
}

}  // namespace
}  // namespace nova
