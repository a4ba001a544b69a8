#include "common/crc32c.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>

namespace nova::crc32c {
namespace {

TEST(Crc32cTest, StandardCheckValue) {
  // The CRC-32C "check" value from the catalogue of parametrised CRC algorithms.
  EXPECT_EQ(0xE3069283u, Value("123456789"));
}

TEST(Crc32cTest, KnownVectors) {
  // RFC 3720 (iSCSI), appendix B.4.
  EXPECT_EQ(0x8A9136AAu, Value(std::string(32, '\0')));
  EXPECT_EQ(0x62A8AB43u, Value(std::string(32, '\xff')));

  std::string ascending(32, '\0');
  std::string descending(32, '\0');
  for (int i = 0; i < 32; ++i) {
    ascending[i] = static_cast<char>(i);
    descending[i] = static_cast<char>(31 - i);
  }
  EXPECT_EQ(0x46DD794Eu, Value(ascending));
  EXPECT_EQ(0x113FDB5Cu, Value(descending));

  // An iSCSI read command PDU.
  const unsigned char kPdu[48] = {
      0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00,
      0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18, 0x28, 0x00, 0x00, 0x00,
      0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
  };
  EXPECT_EQ(0xD9963A56u, Value(reinterpret_cast<const char*>(kPdu), sizeof(kPdu)));
}

TEST(Crc32cTest, EmptyInput) {
  EXPECT_EQ(0u, Value(""));
  EXPECT_EQ(0u, Value(nullptr, 0));
  EXPECT_EQ(Value("abc"), Extend(Value("abc"), "", 0));
}

TEST(Crc32cTest, ExtendEqualsValueOfConcatenation) {
  const std::string data = "hello world, this is a longer string crossing a few words";
  for (size_t split = 0; split <= data.size(); ++split) {
    const std::string a = data.substr(0, split);
    const std::string b = data.substr(split);
    EXPECT_EQ(Value(data), Extend(Value(a), b.data(), b.size())) << "split at " << split;
  }
}

// Bit-at-a-time CRC-32C (reflected polynomial 0x82F63B78): slow but obviously right.
uint32_t ReferenceCrc32c(const std::string& s) {
  constexpr uint32_t kReflectedPolynomial = 0x82F63B78u;
  uint32_t crc = 0xffffffffu;
  for (unsigned char c : s) {
    crc ^= c;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (kReflectedPolynomial & (0u - (crc & 1)));
  }
  return ~crc;
}

TEST(Crc32cTest, MatchesReferenceAtEveryLengthAndAlignment) {
  // ISA-L takes different (SIMD) paths by length and alignment; all must agree.
  std::mt19937 rng(301);
  std::string buf(4096 + 64, '\0');
  for (char& c : buf) c = static_cast<char>(rng());
  for (size_t align = 0; align < 16; ++align) {
    for (size_t len : {0, 1, 2, 3, 7, 8, 15, 16, 31, 32, 63, 64, 255, 256, 257, 1023, 1024, 4096}) {
      const std::string piece = buf.substr(align, len);
      ASSERT_EQ(ReferenceCrc32c(piece), Value(buf.data() + align, len))
          << "align " << align << " len " << len;
    }
  }
}

TEST(Crc32cTest, DifferentInputsDiffer) {
  EXPECT_NE(Value("a"), Value("foo"));
  EXPECT_NE(Value("foo"), Value("bar"));
}

TEST(Crc32cTest, MaskChangesValueAndUnmaskRestoresIt) {
  const uint32_t crc = Value("foo");
  EXPECT_NE(crc, Mask(crc));
  EXPECT_NE(crc, Mask(Mask(crc)));
  EXPECT_EQ(crc, Unmask(Mask(crc)));
  EXPECT_EQ(crc, Unmask(Unmask(Mask(Mask(crc)))));
  for (uint32_t v : {0u, 1u, 0x7fffffffu, 0x80000000u, 0xffffffffu, kMaskDelta}) {
    EXPECT_EQ(v, Unmask(Mask(v))) << v;
  }
}

}  // namespace
}  // namespace nova::crc32c
