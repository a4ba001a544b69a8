#include "common/erasure_code.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "common/hex.h"
#include "tests/util/test_util.h"

namespace nova {
namespace {

// EncodeUneven's piece (erasure_code.cc); lengths around it exercise short last pieces.
constexpr size_t kPiece = 64 * 1024;

// GF(2^8) multiply by shift and add over ISA-L's polynomial x^8 + x^4 + x^3 + x^2 + 1,
// written out here so the golden vector is checked without ISA-L.
uint8_t GfMul(uint8_t a, uint8_t b) {
  uint8_t p = 0;
  for (int i = 0; i < 8; ++i) {
    if (b & 1) p ^= a;
    const bool carry = (a & 0x80) != 0;
    a = static_cast<uint8_t>(a << 1);
    if (carry) a ^= 0x1d;
    b >>= 1;
  }
  return p;
}

ErasureCode MakeCode(int k, int m) {
  auto code = ErasureCode::Make(k, m);
  EXPECT_TRUE(code.ok()) << code.status().ToString();
  return std::move(code).value();
}

const uint8_t* Bytes(const std::string& s) { return reinterpret_cast<const uint8_t*>(s.data()); }

std::string RandomBytes(std::mt19937_64* rng, size_t n) {
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>((*rng)() & 0xff);
  return s;
}

// The parity of {"Nova", "LSM!"} with k = 2, m = 1, pinned: a change of the code's matrix
// (which would make every stored parity fragment undecodable) fails here.
TEST(ErasureCodeTest, GoldenTwoPlusOne) {
  ErasureCode code = MakeCode(2, 1);
  std::vector<std::string> parity;
  code.EncodeUneven({"Nova", "LSM!"}, &parity);
  ASSERT_EQ(1u, parity.size());
  EXPECT_EQ("e88800a1", HexEncode(parity[0]));

  // Row 2 of gf_gen_cauchy1_matrix(3, 2) is (1 / (2 ^ 0), 1 / (2 ^ 1)) = (1/2, 1/3) in
  // GF(2^8): 0x8e and 0xf4. Parity is that linear combination, not the XOR of the data.
  ASSERT_EQ(1, GfMul(2, 0x8e));
  ASSERT_EQ(1, GfMul(3, 0xf4));
  const std::string d0 = "Nova", d1 = "LSM!";
  for (size_t i = 0; i < d0.size(); ++i) {
    const uint8_t want = GfMul(0x8e, static_cast<uint8_t>(d0[i])) ^
                         GfMul(0xf4, static_cast<uint8_t>(d1[i]));
    EXPECT_EQ(want, static_cast<uint8_t>(parity[0][i])) << "byte " << i;
    EXPECT_NE(static_cast<uint8_t>(d0[i] ^ d1[i]), static_cast<uint8_t>(parity[0][i]));
  }
}

// A wider golden vector: k = 3, m = 2, a short column (zero-padded) and an empty one.
TEST(ErasureCodeTest, GoldenThreePlusTwoUneven) {
  ErasureCode code = MakeCode(3, 2);
  std::vector<std::string> parity;
  code.EncodeUneven({"fragment-0", "frag1", ""}, &parity);
  ASSERT_EQ(2u, parity.size());
  EXPECT_EQ("11176a6b4623d12c1b10", HexEncode(parity[0]));
  EXPECT_EQ("89881369005e951d4c0c", HexEncode(parity[1]));
}

TEST(ErasureCodeTest, MakeRejectsBadShapes) {
  EXPECT_TRUE(ErasureCode::Make(0, 1).status().IsInvalidArgument());
  EXPECT_TRUE(ErasureCode::Make(1, 0).status().IsInvalidArgument());
  EXPECT_TRUE(ErasureCode::Make(-1, 2).status().IsInvalidArgument());
  EXPECT_TRUE(ErasureCode::Make(200, 56).status().IsInvalidArgument());
  EXPECT_TRUE(ErasureCode::Make(1, ErasureCode::kMaxColumns).status().IsInvalidArgument());
  auto widest = ErasureCode::Make(ErasureCode::kMaxColumns - 2, 2);
  ASSERT_TRUE(widest.ok()) << widest.status().ToString();
  EXPECT_EQ(ErasureCode::kMaxColumns - 2, widest->k());
  EXPECT_EQ(2, widest->m());
}

TEST(ErasureCodeTest, ReconstructRejectsBadArguments) {
  ErasureCode code = MakeCode(3, 2);
  std::string col(16, 'x');
  const uint8_t* rows[4] = {Bytes(col), Bytes(col), Bytes(col), Bytes(col)};
  uint8_t out[16];
  auto bad = [&](int want, const std::vector<int>& have) {
    Status s = code.Reconstruct(want, have, sizeof(out), rows, out);
    EXPECT_TRUE(s.IsInvalidArgument()) << "want " << want << ": " << s.ToString();
    EXPECT_FALSE(s.message().empty());
  };
  bad(0, {0, 1, 2});      // want among the sources
  bad(3, {0, 1, 1});      // a duplicate
  bad(3, {0, 1});         // too few
  bad(4, {0, 1, 2, 3});   // too many
  bad(3, {0, 1, 5});      // a source out of range
  bad(3, {-1, 1, 2});
  bad(5, {0, 1, 2});      // want out of range
  bad(-1, {0, 1, 2});
  // Zero bytes with valid arguments is fine.
  EXPECT_TRUE(code.Reconstruct(3, {0, 1, 2}, 0, rows, out).ok());
}

TEST(ErasureCodeTest, EncodeOfEqualColumnsMatchesEncodeUneven) {
  const uint64_t seed = test::TestSeed("EncodeOfEqualColumnsMatchesEncodeUneven");
  std::mt19937_64 rng(seed);
  for (int k : {1, 2, 3, 4, 6}) {
    for (int m : {1, 2}) {
      for (size_t len : {size_t{1}, size_t{31}, size_t{4096}, kPiece + 7}) {
        ErasureCode code = MakeCode(k, m);
        std::vector<std::string> data;
        std::vector<std::string_view> views;
        std::vector<const uint8_t*> ptrs;
        for (int i = 0; i < k; ++i) data.push_back(RandomBytes(&rng, len));
        for (const auto& d : data) {
          views.push_back(d);
          ptrs.push_back(Bytes(d));
        }
        std::vector<std::string> direct(m, std::string(len, '\0'));
        std::vector<uint8_t*> out;
        for (auto& p : direct) out.push_back(reinterpret_cast<uint8_t*>(p.data()));
        code.Encode(len, ptrs.data(), out.data());
        std::vector<std::string> uneven;
        code.EncodeUneven(views, &uneven);
        EXPECT_EQ(direct, uneven) << "k=" << k << " m=" << m << " len=" << len;
      }
    }
  }
}

TEST(ErasureCodeTest, EncodeUnevenOfEmptyColumns) {
  ErasureCode code = MakeCode(3, 2);
  std::vector<std::string> parity = {"stale"};
  code.EncodeUneven({"", "", ""}, &parity);
  EXPECT_EQ(std::vector<std::string>(2), parity);
}

// Column lengths of one stripe: short last pieces, empty columns, one long column, a column
// longer than one EncodeUneven piece.
std::vector<std::vector<size_t>> LengthCases(int k, std::mt19937_64* rng) {
  std::vector<std::vector<size_t>> cases;
  cases.push_back(std::vector<size_t>(k, 1000));                 // equal
  cases.push_back(std::vector<size_t>(k, 2 * kPiece + 33));     // equal, several pieces
  std::vector<size_t> one_long(k, 40);
  one_long[0] = 3 * kPiece + 17;  // much longer than the rest, ends in a short piece
  cases.push_back(one_long);
  std::vector<size_t> with_empty(k, 0);
  with_empty[k - 1] = 95;  // the others empty
  cases.push_back(with_empty);
  const size_t kOdd[] = {0, 1, 31, 33, 4095, kPiece - 1, kPiece, kPiece + 1, kPiece + 5000,
                         2 * kPiece, 2 * kPiece + 100};
  for (int r = 0; r < 3; ++r) {
    std::vector<size_t> lens(k);
    for (auto& l : lens) l = kOdd[(*rng)() % std::size(kOdd)];
    cases.push_back(lens);
  }
  return cases;
}

// Erasure sets to test: every single column, and with m = 2 every pair.
std::vector<std::vector<int>> Erasures(int n, int m) {
  std::vector<std::vector<int>> sets;
  for (int a = 0; a < n; ++a) sets.push_back({a});
  if (m >= 2) {
    for (int a = 0; a < n; ++a) {
      for (int b = a + 1; b < n; ++b) sets.push_back({a, b});
    }
  }
  return sets;
}

TEST(ErasureCodeTest, EveryErasureDecodesByteExact) {
  const uint64_t seed = test::TestSeed("EveryErasureDecodesByteExact");
  std::mt19937_64 rng(seed);
  for (int k : {1, 2, 3, 4, 6}) {
    for (int m : {1, 2}) {
      ErasureCode code = MakeCode(k, m);
      const int n = k + m;
      for (const auto& lens : LengthCases(k, &rng)) {
        std::vector<std::string> data;
        for (size_t l : lens) data.push_back(RandomBytes(&rng, l));
        std::vector<std::string_view> views(data.begin(), data.end());
        std::vector<std::string> parity;
        code.EncodeUneven(views, &parity);
        const size_t longest = *std::max_element(lens.begin(), lens.end());
        ASSERT_EQ(static_cast<size_t>(m), parity.size());
        // All columns, zero-padded to the longest: what a reader hands Reconstruct.
        std::vector<std::string> padded;
        for (const auto& d : data) padded.push_back(d + std::string(longest - d.size(), '\0'));
        for (const auto& p : parity) {
          ASSERT_EQ(longest, p.size());
          padded.push_back(p);
        }

        // Whole columns, a range across a short column's end, a range within one piece,
        // a range across a piece boundary, and a random range.
        std::vector<std::pair<size_t, size_t>> ranges = {{0, longest}};
        if (longest > 0) {
          const size_t shortest = *std::min_element(lens.begin(), lens.end());
          const size_t a = shortest > 3 ? shortest - 3 : 0;
          ranges.push_back({a, std::min<size_t>(longest - a, 10)});
          ranges.push_back({longest / 3, std::min<size_t>(longest - longest / 3, 37)});
          if (longest > kPiece + 50) ranges.push_back({kPiece - 50, 100});
          const size_t off = rng() % longest;
          ranges.push_back({off, 1 + rng() % (longest - off)});
        }

        for (const auto& lost : Erasures(n, m)) {
          // Sources: the first k survivors, or (alternately, if there is a choice) the last k.
          std::vector<int> survivors;
          for (int c = 0; c < n; ++c) {
            if (std::find(lost.begin(), lost.end(), c) == lost.end()) survivors.push_back(c);
          }
          std::vector<int> have(survivors.begin(), survivors.begin() + k);
          if (rng() % 2 == 1) have.assign(survivors.end() - k, survivors.end());
          for (const auto& [off, len] : ranges) {
            std::vector<const uint8_t*> rows;
            for (int c : have) rows.push_back(Bytes(padded[c]) + off);
            for (int want : lost) {
              std::string out(len, '\xAA');
              Status s = code.Reconstruct(want, have, len, rows.data(),
                                          reinterpret_cast<uint8_t*>(out.data()));
              ASSERT_TRUE(s.ok()) << s.ToString();
              ASSERT_TRUE(out == padded[want].substr(off, len))
                  << "k=" << k << " m=" << m << " column " << want << " bytes [" << off << ", "
                  << off + len << ") of " << longest << " (seed " << seed << ")";
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace nova
