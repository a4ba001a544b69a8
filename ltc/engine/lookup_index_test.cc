#include "ltc/engine/lookup_index.h"

#include <gtest/gtest.h>

#include <string>

#include "common/lsm/memory_table_store.h"
#include "ltc/engine/range_engine.h"

namespace nova::ltc {
namespace {

TEST(LookupIndexTest, KeepsTheNewestAndErasesOnlyItsOwnEntry) {
  LookupIndex index;
  EXPECT_FALSE(index.Lookup("a").has_value());
  index.Update("a", 1, 10);
  index.Update("a", 2, 7);  // an older version finishing late does not win
  ASSERT_TRUE(index.Lookup("a").has_value());
  EXPECT_EQ(index.Lookup("a")->memtable_id, 1u);
  EXPECT_EQ(index.Lookup("a")->sequence, 10u);
  index.Update("a", 3, 11);
  EXPECT_EQ(index.Lookup("a")->memtable_id, 3u);
  index.EraseIf("a", 1);  // no longer points at memtable 1
  EXPECT_TRUE(index.Lookup("a").has_value());
  index.EraseIf("a", 3);
  EXPECT_FALSE(index.Lookup("a").has_value());
  index.Update(std::string("\0b", 2), 1, 1);
  EXPECT_FALSE(index.Lookup("b").has_value());
  EXPECT_EQ(index.size(), 1u);
}

// Gets through the index give the same answers as without it, in memory, in Level 0 and
// after Level 0 was compacted away.
class EngineLookupIndexTest : public ::testing::TestWithParam<bool> {};

TEST_P(EngineLookupIndexTest, SameAnswersWithAndWithoutTheIndex) {
  EngineOptions o;
  o.lookup_index = GetParam();
  o.memtable_bytes = 8 << 10;
  o.l0_compaction_trigger = 3;
  o.level1_bytes = 32 << 10;
  lsm::MemoryTableStore store;
  RangeEngine engine(o, &store);
  ASSERT_TRUE(engine.Open().ok());
  auto check = [&](int round) {
    for (int k = 0; k < 200; ++k) {
      std::string v;
      Status s = engine.Get("key" + std::to_string(k), &v);
      if (k % 10 == round % 10) {
        ASSERT_TRUE(s.IsNotFound()) << k;
      } else {
        ASSERT_TRUE(s.ok()) << k << ": " << s.ToString();
        ASSERT_EQ(v, "v" + std::to_string(round) + "-" + std::to_string(k));
      }
    }
  };
  for (int round = 0; round < 20; ++round) {
    for (int k = 0; k < 200; ++k) {
      const std::string key = "key" + std::to_string(k);
      if (k % 10 == round % 10) {
        ASSERT_TRUE(engine.Delete(key).ok());
      } else {
        ASSERT_TRUE(engine.Put(key, "v" + std::to_string(round) + "-" + std::to_string(k)).ok());
      }
    }
    check(round);
    if (round % 5 == 4) {
      ASSERT_TRUE(engine.FlushAll().ok());
      check(round);
      ASSERT_TRUE(engine.WaitForCompactions().ok());
      check(round);
    }
  }
  const EngineStats st = engine.GetStats();
  if (GetParam()) {
    EXPECT_GT(st.lookup_index_hits, 0u);
    EXPECT_LE(st.lookup_index_entries, 200u);
  } else {
    EXPECT_EQ(st.lookup_index_hits, 0u);
    EXPECT_EQ(st.lookup_index_entries, 0u);
  }
  EXPECT_GT(st.compactions, 0u);
}

// Once Level 0 is compacted away, no index entry is left: the clean-up erased the entries
// of every compacted table's keys (learnt while merging), and the Gets still find them.
TEST(EngineLookupIndexCleanupTest, CompactingLevelZeroErasesItsEntries) {
  EngineOptions o;
  o.memtable_bytes = 8 << 10;
  o.memtables = 4;
  o.l0_compaction_trigger = 1;  // every Level-0 cluster goes down
  o.level1_bytes = 32 << 10;
  o.drange_merge_threshold_keys = 0;
  lsm::MemoryTableStore store;
  RangeEngine engine(o, &store);
  ASSERT_TRUE(engine.Open().ok());
  constexpr int kKeys = 300;
  for (int round = 0; round < 3; ++round) {
    for (int j = 0; j < kKeys; ++j) {
      const int k = (j * 7) % kKeys;  // scattered, so flushed tables overlap
      ASSERT_TRUE(engine.Put("key" + std::to_string(k), "v" + std::to_string(round)).ok());
    }
  }
  ASSERT_GT(engine.GetStats().lookup_index_entries, 0u);
  ASSERT_TRUE(engine.FlushAll().ok());
  ASSERT_TRUE(engine.WaitForCompactions().ok());
  const EngineStats st = engine.GetStats();
  ASSERT_EQ(st.level_tables[0], 0u);
  EXPECT_GT(st.compactions, 0u);
  EXPECT_EQ(st.lookup_index_entries, 0u);
  for (int k = 0; k < kKeys; ++k) {
    std::string v;
    ASSERT_TRUE(engine.Get("key" + std::to_string(k), &v).ok()) << k;
    EXPECT_EQ(v, "v2");
  }
}

INSTANTIATE_TEST_SUITE_P(IndexOnOff, EngineLookupIndexTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "on" : "off"; });

}  // namespace
}  // namespace nova::ltc
