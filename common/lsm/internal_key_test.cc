#include "common/lsm/internal_key.h"

#include <gtest/gtest.h>

namespace nova::lsm {
namespace {

TEST(InternalKeyTest, EncodeParseRoundTrip) {
  for (std::string user : {std::string(), std::string("a"), std::string("\0\xff", 2)}) {
    for (SequenceNumber seq : {SequenceNumber{0}, SequenceNumber{1}, SequenceNumber{1000}, kMaxSequenceNumber}) {
      for (ValueType t : {kTypeValue, kTypeDeletion}) {
        std::string k = MakeInternalKey(user, seq, t);
        ParsedInternalKey p;
        ASSERT_TRUE(ParseInternalKey(k, &p));
        EXPECT_EQ(p.user_key.ToString(), user);
        EXPECT_EQ(p.sequence, seq);
        EXPECT_EQ(p.type, t);
      }
    }
  }
  ParsedInternalKey p;
  EXPECT_FALSE(ParseInternalKey("short", &p));
  std::string bad = MakeInternalKey("k", 5, kTypeValue);
  bad[bad.size() - 8] = 7;  // unknown type
  EXPECT_FALSE(ParseInternalKey(bad, &p));
}

TEST(InternalKeyTest, OrderIsUserKeyThenNewestFirst) {
  InternalKeyComparator cmp(leveldb::BytewiseComparator());
  auto k = [](const char* u, SequenceNumber s, ValueType t) { return MakeInternalKey(u, s, t); };
  EXPECT_LT(cmp.Compare(k("a", 1, kTypeValue), k("b", 100, kTypeValue)), 0);
  EXPECT_LT(cmp.Compare(k("a", 100, kTypeValue), k("a", 1, kTypeValue)), 0);
  EXPECT_LT(cmp.Compare(k("a", 5, kTypeValue), k("a", 5, kTypeDeletion)), 0);
  EXPECT_EQ(cmp.Compare(k("a", 5, kTypeValue), k("a", 5, kTypeValue)), 0);
  EXPECT_LT(cmp.Compare(k("", 1, kTypeValue), k("a", 1, kTypeValue)), 0);
  // A seek key at sequence s finds entries with sequence <= s.
  EXPECT_LE(cmp.Compare(k("a", 5, kTypeForSeek), k("a", 5, kTypeDeletion)), 0);
  EXPECT_LT(cmp.Compare(k("a", 5, kTypeForSeek), k("a", 4, kTypeValue)), 0);
  EXPECT_GT(cmp.Compare(k("a", 5, kTypeForSeek), k("a", 6, kTypeValue)), 0);
  // Malformed keys never crash and sort first.
  EXPECT_LT(cmp.Compare("x", k("a", 1, kTypeValue)), 0);
}

TEST(InternalKeyTest, SeparatorsStayBetween) {
  InternalKeyComparator cmp(leveldb::BytewiseComparator());
  std::string start = MakeInternalKey("abcdefg", 7, kTypeValue);
  const std::string limit = MakeInternalKey("abzz", 3, kTypeValue);
  const std::string orig = start;
  cmp.FindShortestSeparator(&start, limit);
  EXPECT_LE(cmp.Compare(orig, start), 0);
  EXPECT_LT(cmp.Compare(start, limit), 0);
  EXPECT_LT(start.size(), orig.size());
  std::string succ = MakeInternalKey("abc", 1, kTypeValue);
  const std::string before = succ;
  cmp.FindShortSuccessor(&succ);
  EXPECT_LE(cmp.Compare(before, succ), 0);
}

}  // namespace
}  // namespace nova::lsm
