// DrangeReorganizer: when a check is due, one check at a time, a major reorganization from
// the keys in memory when the layout has fewer Dranges than theta or is imbalanced, and none
// for a balanced layout (its window starts over).
#include "ltc/engine/drange_reorganizer.h"

#include <gtest/gtest.h>
#include <leveldb/comparator.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace nova::ltc {
namespace {

class DrangeReorganizerTest : public ::testing::Test {
 protected:
  DrangeReorganizerTest() : icmp_(leveldb::BytewiseComparator()) {
    options_.comparator = leveldb::BytewiseComparator();
    options_.dranges = 4;
    options_.tranges_per_drange = 2;
    options_.every_writes = 10;
  }

  // A memtable holding keys k00..k<n-1>.
  std::shared_ptr<MemTable> Memtable(int n) {
    auto m = std::make_shared<MemTable>(&icmp_, 1);
    for (int i = 0; i < n; ++i) {
      char k[8];
      std::snprintf(k, sizeof k, "k%02d", i);
      m->Add(i + 1, lsm::kTypeValue, k, "v");
    }
    return m;
  }

  lsm::InternalKeyComparator icmp_;
  DrangeReorganizerOptions options_;
};

TEST_F(DrangeReorganizerTest, ChecksAreCountedAndOneAtATime) {
  DrangeReorganizer r(options_);
  EXPECT_FALSE(r.CountWrites(4));
  EXPECT_TRUE(r.CountWrites(6));
  ASSERT_TRUE(r.TryBegin());
  EXPECT_FALSE(r.TryBegin()) << "one check at a time";
  EXPECT_FALSE(r.CountWrites(9)) << "the count starts over with a check";
  r.End();
  EXPECT_TRUE(r.TryBegin());
  r.End();

  options_.dranges = 1;
  DrangeReorganizer single(options_);
  EXPECT_FALSE(single.TryBegin()) << "one Drange: nothing to reorganize";
}

TEST_F(DrangeReorganizerTest, TooFewDrangesGetNewBoundariesFromMemory) {
  DrangeReorganizer r(options_);
  DrangeLayout one(leveldb::BytewiseComparator(), 0);
  ASSERT_TRUE(r.TryBegin());
  bool major = false;
  std::unique_ptr<DrangeLayout> next = r.Plan(one, {Memtable(40)}, &major);
  r.End();
  EXPECT_TRUE(major);
  ASSERT_NE(next, nullptr);
  EXPECT_EQ(next->size(), 4);
  EXPECT_EQ(next->generation(), 1u);
  // The keys in memory spread over the new Dranges.
  std::vector<int> hits(4, 0);
  for (int i = 0; i < 40; ++i) {
    char k[8];
    std::snprintf(k, sizeof k, "k%02d", i);
    ++hits[next->Find(k).first];
  }
  for (int d = 0; d < 4; ++d) EXPECT_GT(hits[d], 0) << "Drange " << d;
}

TEST_F(DrangeReorganizerTest, BalancedLayoutIsKept) {
  DrangeReorganizer r(options_);
  EXPECT_TRUE(std::isnan(r.last_window_imbalance()));
  ASSERT_TRUE(r.TryBegin());
  bool major = false;
  std::unique_ptr<DrangeLayout> four =
      r.Plan(DrangeLayout(leveldb::BytewiseComparator(), 0), {Memtable(40)}, &major);
  r.End();
  ASSERT_NE(four, nullptr);
  // Even writes over the four Dranges.
  for (int round = 0; round < 10; ++round) {
    for (int i = 0; i < 40; ++i) {
      char k[8];
      std::snprintf(k, sizeof k, "k%02d", i);
      four->Route(k);
    }
  }
  ASSERT_TRUE(r.TryBegin());
  std::unique_ptr<DrangeLayout> next = r.Plan(*four, {Memtable(40)}, &major);
  r.End();
  EXPECT_FALSE(major);
  EXPECT_EQ(next, nullptr);
  EXPECT_LT(r.last_window_imbalance(), options_.imbalance_threshold / options_.dranges);
  EXPECT_EQ(four->Load().total, 0u) << "the window starts over";
}

}  // namespace
}  // namespace nova::ltc
