#include "common/coding.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstdlib>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace nova {
namespace {

// Values around every 7-bit boundary, where varint lengths change.
std::vector<uint64_t> BoundaryValues() {
  std::vector<uint64_t> v = {0, 1, UINT8_MAX, UINT16_MAX, UINT32_MAX, UINT64_MAX};
  for (int bits = 7; bits < 64; bits += 7) {
    const uint64_t p = 1ull << bits;
    v.insert(v.end(), {p - 1, p, p + 1});
  }
  for (int bits = 0; bits < 64; ++bits) v.push_back(1ull << bits);
  return v;
}

TEST(CodingTest, FixedLayoutIsLittleEndian) {
  std::string s;
  PutFixed16(&s, 0x0102);
  PutFixed32(&s, 0x03040506);
  PutFixed64(&s, 0x0708090a0b0c0d0eull);
  EXPECT_EQ(std::string("\x02\x01\x06\x05\x04\x03\x0e\x0d\x0c\x0b\x0a\x09\x08\x07"), s);
}

TEST(CodingTest, FixedRoundTrip) {
  std::string s;
  for (uint64_t v : BoundaryValues()) {
    PutFixed16(&s, static_cast<uint16_t>(v));
    PutFixed32(&s, static_cast<uint32_t>(v));
    PutFixed64(&s, v);
  }
  std::string_view in(s);
  for (uint64_t v : BoundaryValues()) {
    uint16_t a;
    uint32_t b;
    uint64_t c;
    ASSERT_TRUE(GetFixed16(&in, &a));
    ASSERT_TRUE(GetFixed32(&in, &b));
    ASSERT_TRUE(GetFixed64(&in, &c));
    EXPECT_EQ(static_cast<uint16_t>(v), a);
    EXPECT_EQ(static_cast<uint32_t>(v), b);
    EXPECT_EQ(v, c);
  }
  EXPECT_TRUE(in.empty());
}

TEST(CodingTest, FixedTruncatedIsRejected) {
  const std::string s(7, '\xab');
  for (size_t len = 0; len < 8; ++len) {
    std::string_view in(s.data(), len);
    uint16_t a = 1;
    uint32_t b = 2;
    uint64_t c = 3;
    EXPECT_EQ(len >= 2, GetFixed16(&in, &a));
    in = std::string_view(s.data(), len);
    EXPECT_EQ(len >= 4, GetFixed32(&in, &b));
    in = std::string_view(s.data(), len);
    EXPECT_FALSE(GetFixed64(&in, &c));
    EXPECT_EQ(len, in.size()) << "cursor unchanged on failure";
    EXPECT_EQ(3u, c);
  }
}

TEST(CodingTest, VarintRoundTripAtBoundaries) {
  for (uint64_t v : BoundaryValues()) {
    std::string s = "x";
    PutVarint64(&s, v);
    EXPECT_EQ(static_cast<size_t>(VarintLength(v)) + 1, s.size()) << v;
    char buf[kMaxVarint64Bytes];
    EXPECT_EQ(VarintLength(v), EncodeVarint64(buf, v));
    EXPECT_EQ(std::string_view(buf, VarintLength(v)), std::string_view(s).substr(1));
    std::string_view in(s);
    in.remove_prefix(1);
    uint64_t got;
    ASSERT_TRUE(GetVarint64(&in, &got)) << v;
    EXPECT_EQ(v, got);
    EXPECT_TRUE(in.empty());

    if (v <= UINT32_MAX) {
      std::string s32;
      PutVarint32(&s32, static_cast<uint32_t>(v));
      EXPECT_EQ(s.substr(1), s32);
      std::string_view in32(s32);
      uint32_t got32;
      ASSERT_TRUE(GetVarint32(&in32, &got32)) << v;
      EXPECT_EQ(v, got32);
      EXPECT_TRUE(in32.empty());
    }
  }
  EXPECT_EQ(1, VarintLength(0));
  EXPECT_EQ(1, VarintLength(127));
  EXPECT_EQ(2, VarintLength(128));
  EXPECT_EQ(kMaxVarint32Bytes, VarintLength(UINT32_MAX));
  EXPECT_EQ(kMaxVarint64Bytes, VarintLength(UINT64_MAX));
}

TEST(CodingTest, TruncatedVarintsAreRejected) {
  for (uint64_t v : BoundaryValues()) {
    std::string s;
    PutVarint64(&s, v);
    for (size_t len = 0; len < s.size(); ++len) {
      std::string_view in(s.data(), len);
      uint64_t got = 99;
      EXPECT_FALSE(GetVarint64(&in, &got)) << v << " cut at " << len;
      EXPECT_EQ(len, in.size());
      EXPECT_EQ(99u, got);
      uint32_t got32 = 99;
      EXPECT_FALSE(GetVarint32(&in, &got32));
      EXPECT_EQ(len, in.size());
    }
  }
}

TEST(CodingTest, OverlongVarintsAreRejected) {
  struct Case {
    std::string bytes;
    bool valid32, valid64;
  };
  const Case cases[] = {
      // The largest values: the last byte carries only the bits that fit.
      {"\xff\xff\xff\xff\x0f", true, true},
      {"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", false, true},
      // One bit too many.
      {"\xff\xff\xff\xff\x1f", false, true},
      {"\x80\x80\x80\x80\x10", false, true},
      {"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02", false, false},
      {"\x80\x80\x80\x80\x80\x80\x80\x80\x80\x7f", false, false},
      // More bytes than the type allows.
      {"\x80\x80\x80\x80\x80\x01", false, true},
      {"\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01", false, false},
      {std::string(20, '\xff'), false, false},
  };
  for (const Case& c : cases) {
    std::string_view in(c.bytes);
    uint32_t v32;
    EXPECT_EQ(c.valid32, GetVarint32(&in, &v32)) << c.bytes.size();
    if (!c.valid32) {
      EXPECT_EQ(c.bytes.size(), in.size());
    }
    in = c.bytes;
    uint64_t v64;
    EXPECT_EQ(c.valid64, GetVarint64(&in, &v64)) << c.bytes.size();
    if (!c.valid64) {
      EXPECT_EQ(c.bytes.size(), in.size());
    }
  }
}

TEST(CodingTest, VarintFromInputOfTwoGiB) {
  // Input sizes are size_t: a view of 2 GiB or more must decode like any other.
  constexpr size_t kBig = size_t{1} << 31;
  void* p = mmap(nullptr, kBig, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  if (p == MAP_FAILED) GTEST_SKIP() << "cannot map 2 GiB of address space";
  char* base = static_cast<char*>(p);
  base[0] = '\x05';  // only the first page is ever touched
  std::string_view in(base, kBig);
  uint32_t v32 = 0;
  EXPECT_TRUE(GetVarint32(&in, &v32));
  EXPECT_EQ(5u, v32);
  EXPECT_EQ(kBig - 1, in.size());
  in = std::string_view(base, kBig);
  uint64_t v64 = 0;
  EXPECT_TRUE(GetVarint64(&in, &v64));
  EXPECT_EQ(5u, v64);
  munmap(p, kBig);
}

TEST(CodingTest, LengthPrefixedRoundTrip) {
  std::string s;
  const std::vector<std::string> values = {"",
                                           "a",
                                           std::string(127, 'b'),
                                           std::string(128, 'c'),
                                           std::string(70000, 'd'),
                                           std::string("\0\0", 2)};
  for (const std::string& v : values) PutLengthPrefixed(&s, v);
  std::string_view in(s);
  for (const std::string& v : values) {
    std::string_view got;
    ASSERT_TRUE(GetLengthPrefixed(&in, &got));
    EXPECT_EQ(v, got);
    EXPECT_TRUE(got.data() >= s.data() && got.data() + got.size() <= s.data() + s.size())
        << "the value aliases the input";
  }
  EXPECT_TRUE(in.empty());
}

TEST(CodingTest, LengthPrefixedNeverOverReads) {
  std::string s;
  PutLengthPrefixed(&s, "hello world");
  // Every truncation fails and leaves the cursor alone.
  for (size_t len = 0; len < s.size(); ++len) {
    std::string_view in(s.data(), len);
    std::string_view got = "untouched";
    EXPECT_FALSE(GetLengthPrefixed(&in, &got)) << len;
    EXPECT_EQ(len, in.size());
    EXPECT_EQ("untouched", got);
  }
  // A length far beyond the buffer, including ones that would wrap a pointer.
  for (const std::string& bad : {std::string("\005abcd"), std::string("\xff\xff\xff\xff\x0f"),
                                 std::string("\377\377\377\377\037abc")}) {
    std::string_view in(bad);
    std::string_view got;
    EXPECT_FALSE(GetLengthPrefixed(&in, &got));
    EXPECT_EQ(bad.size(), in.size());
  }
}

TEST(CodingTest, GetBytes) {
  std::string_view in("abcdef");
  std::string_view got;
  EXPECT_FALSE(GetBytes(&in, 7, &got));
  EXPECT_EQ(6u, in.size());
  ASSERT_TRUE(GetBytes(&in, 2, &got));
  EXPECT_EQ("ab", got);
  ASSERT_TRUE(GetBytes(&in, 0, &got));
  EXPECT_EQ("", got);
  ASSERT_TRUE(GetBytes(&in, 4, &got));
  EXPECT_EQ("cdef", got);
  EXPECT_TRUE(in.empty());
  EXPECT_FALSE(GetBytes(&in, std::numeric_limits<size_t>::max(), &got));
}

TEST(CodingTest, RandomizedMixedSequence) {
  const char* env = std::getenv("NOVA_TEST_SEED");
  const uint64_t seed = env != nullptr ? std::strtoull(env, nullptr, 10) : std::random_device{}();
  std::cout << "seed=" << seed << " (replay with NOVA_TEST_SEED=" << seed << ")" << std::endl;
  std::mt19937_64 rng(seed);
  for (int iter = 0; iter < 200; ++iter) {
    std::vector<std::pair<int, uint64_t>> model;
    std::string s;
    for (int i = 0, n = static_cast<int>(rng() % 50); i < n; ++i) {
      const int kind = static_cast<int>(rng() % 4);
      const uint64_t v = rng() >> (rng() % 64);
      switch (kind) {
        case 0:
          PutFixed32(&s, static_cast<uint32_t>(v));
          model.emplace_back(0, static_cast<uint32_t>(v));
          break;
        case 1:
          PutFixed64(&s, v);
          model.emplace_back(1, v);
          break;
        case 2:
          PutVarint32(&s, static_cast<uint32_t>(v));
          model.emplace_back(2, static_cast<uint32_t>(v));
          break;
        default:
          PutVarint64(&s, v);
          model.emplace_back(3, v);
          break;
      }
    }
    std::string_view in(s);
    for (const auto& [kind, want] : model) {
      uint32_t v32 = 0;
      uint64_t v64 = 0;
      bool ok = false;
      switch (kind) {
        case 0:
          ok = GetFixed32(&in, &v32);
          v64 = v32;
          break;
        case 1:
          ok = GetFixed64(&in, &v64);
          break;
        case 2:
          ok = GetVarint32(&in, &v32);
          v64 = v32;
          break;
        default:
          ok = GetVarint64(&in, &v64);
          break;
      }
      ASSERT_TRUE(ok);
      ASSERT_EQ(want, v64);
    }
    ASSERT_TRUE(in.empty());
  }
}

}  // namespace
}  // namespace nova
