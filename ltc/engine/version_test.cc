// Version's level search: GetBelowLevel0 (one table per level by binary search, the first
// level with an entry wins, snapshots, deletions) and FindLevel0, over tables written to a
// MemoryTableStore.
#include "ltc/engine/version.h"

#include <gtest/gtest.h>
#include <leveldb/comparator.h>

#include <string>
#include <vector>

#include "ltc/engine/version_test_util.h"

namespace nova::ltc {
namespace {

using version_test::Entry;

class VersionTest : public ::testing::Test {
 protected:
  TableRef Table(uint64_t number, const std::vector<Entry>& entries) {
    return tables_.Table(number, entries);
  }

  LookupHit Get(const Version& v, const std::string& key, lsm::SequenceNumber snapshot) {
    LookupHit hit;
    const Status s = v.GetBelowLevel0(leveldb::BytewiseComparator(), key, snapshot, &hit);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return hit;
  }

  version_test::TestTables tables_;
};

TEST_F(VersionTest, FirstLevelWithTheKeyWins) {
  Version v;
  // Level 1: two tables [a..c] and [m..p]; level 2 holds older versions of b and n.
  v.levels[1] = {Table(1, {{"a", "a1", 10}, {"b", "b1", 11}, {"c", "c1", 12}}),
                 Table(2, {{"m", "m1", 13}, {"p", "p1", 14}})};
  v.levels[2] = {Table(3, {{"b", "b2", 2}, {"n", "n2", 3}, {"z", "z2", 4}})};
  LookupHit hit = Get(v, "b", lsm::kMaxSequenceNumber);
  ASSERT_TRUE(hit.found);
  EXPECT_EQ(hit.value, "b1");
  EXPECT_EQ(hit.sequence, 11u);
  // n falls between level 1's tables' keys (in [m, p], not there) and is found at level 2.
  hit = Get(v, "n", lsm::kMaxSequenceNumber);
  ASSERT_TRUE(hit.found);
  EXPECT_EQ(hit.value, "n2");
  // Past every table of level 1.
  hit = Get(v, "z", lsm::kMaxSequenceNumber);
  ASSERT_TRUE(hit.found);
  EXPECT_EQ(hit.value, "z2");
  EXPECT_FALSE(Get(v, "d", lsm::kMaxSequenceNumber).found);
  EXPECT_FALSE(Get(v, "0", lsm::kMaxSequenceNumber).found);
}

TEST_F(VersionTest, SnapshotAndDeletion) {
  Version v;
  v.levels[1] = {Table(1, {{"k", "", 20, lsm::kTypeDeletion}})};
  v.levels[3] = {Table(2, {{"k", "old", 5}})};
  // The deletion is the newest entry: found, as a deletion (the caller reports NotFound).
  LookupHit hit = Get(v, "k", lsm::kMaxSequenceNumber);
  ASSERT_TRUE(hit.found);
  EXPECT_EQ(hit.type, lsm::kTypeDeletion);
  // A snapshot older than the deletion sees the value below it.
  hit = Get(v, "k", 19);
  ASSERT_TRUE(hit.found);
  EXPECT_EQ(hit.type, lsm::kTypeValue);
  EXPECT_EQ(hit.value, "old");
  // And one older than both sees nothing.
  EXPECT_FALSE(Get(v, "k", 4).found);
}

TEST_F(VersionTest, LevelZeroIsNotSearchedAndFindLevel0) {
  Version v;
  v.levels[0] = {Table(7, {{"k", "l0", 30}}), Table(9, {{"k", "l0b", 31}})};
  EXPECT_FALSE(Get(v, "k", lsm::kMaxSequenceNumber).found);
  ASSERT_NE(v.FindLevel0(9), nullptr);
  EXPECT_EQ(v.FindLevel0(9)->meta().number, 9u);
  EXPECT_EQ(v.FindLevel0(8), nullptr);
}

}  // namespace
}  // namespace nova::ltc
