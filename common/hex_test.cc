#include "common/hex.h"

#include <gtest/gtest.h>

namespace nova {
namespace {

TEST(HexTest, RoundTripsAnyBytes) {
  std::string all;
  for (int c = 0; c < 256; ++c) all.push_back(static_cast<char>(c));
  const std::string hex = HexEncode(all);
  EXPECT_EQ(hex.size(), 512u);
  EXPECT_EQ(hex.substr(0, 6), "000102");
  EXPECT_EQ(hex.substr(506), "fdfeff");
  auto back = HexDecode(hex);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back.value(), all);
  EXPECT_EQ(HexDecode("00FFaB").value(), std::string("\x00\xff\xab", 3));
  EXPECT_EQ(HexDecode("").value(), "");
}

TEST(HexTest, BadHexIsInvalidArgument) {
  EXPECT_EQ(HexDecode("abc").status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(HexDecode("0g").status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(HexDecode("zz").status().ToString().find("'zz'"), std::string::npos);
}

TEST(HexTest, EscapeBytesKeepsPrintableAndCuts) {
  EXPECT_EQ(EscapeBytes(std::string("a\\b\x00\x7f~", 6)), "a\\x5cb\\x00\\x7f~");
  EXPECT_EQ(EscapeBytes("abcdef", 3), "abc...");
  EXPECT_EQ(EscapeBytes("abc", 3), "abc");
}

}  // namespace
}  // namespace nova
