// The small-memtable rule (paper 4.4.2): an immutable memtable with fewer unique keys than
// drange_merge_threshold_keys goes back into its Drange's active memtable instead of
// becoming a table; reads (latest and at snapshots) are unaffected.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "common/lsm/memory_table_store.h"
#include "ltc/engine/range_engine.h"

namespace nova::ltc {
namespace {

EngineOptions HotKeyOptions(uint64_t threshold) {
  EngineOptions o;
  o.memtable_bytes = 4 << 10;  // a few dozen writes fill one
  o.memtables = 4;
  o.dranges = 1;
  o.drange_merge_threshold_keys = threshold;
  o.l0_compaction_trigger = 1000;  // keep Level 0 as flushed
  return o;
}

std::string ValueOf(int key, int round) {
  return "v" + std::to_string(key) + "-" + std::to_string(round) + std::string(80, 'x');
}

// Five hot keys, overwritten many times.
void WriteHotKeys(RangeEngine* engine, int first_round, int rounds) {
  for (int r = first_round; r < first_round + rounds; ++r) {
    for (int k = 0; k < 5; ++k) {
      ASSERT_TRUE(engine->Put("hot" + std::to_string(k), ValueOf(k, r)).ok());
    }
  }
}

void ExpectRound(RangeEngine* engine, int round, const EngineSnapshot* snap = nullptr) {
  for (int k = 0; k < 5; ++k) {
    std::string v;
    ASSERT_TRUE(engine->Get("hot" + std::to_string(k), &v, snap).ok()) << k;
    EXPECT_EQ(v, ValueOf(k, round)) << "key " << k;
  }
  auto* it = engine->NewIterator(snap);
  int n = 0;
  for (it->SeekToFirst(); it->Valid(); it->Next(), ++n) {
    EXPECT_EQ(it->value().ToString(), ValueOf(n, round));
  }
  EXPECT_EQ(n, 5);
  delete it;
}

TEST(RangeEngineMergeTest, FewKeysAreMergedNotFlushed) {
  for (bool index : {true, false}) {
    SCOPED_TRACE(index ? "lookup index on" : "lookup index off");
    lsm::MemoryTableStore store;
    EngineOptions o = HotKeyOptions(100);
    o.lookup_index = index;
    RangeEngine engine(o, &store);
    ASSERT_TRUE(engine.Open().ok());
    WriteHotKeys(&engine, 0, 200);
    // Let the background work catch up: every immutable memtable is merged or flushed.
    ASSERT_TRUE(engine.WaitForCompactions().ok());
    const EngineStats s = engine.GetStats();
    EXPECT_GT(s.memtable_merges, 5u);
    EXPECT_EQ(s.flushes, 0u);
    EXPECT_EQ(s.level_tables[0], 0u);
    ExpectRound(&engine, 199);
    // FlushAll still writes everything out.
    ASSERT_TRUE(engine.FlushAll().ok());
    EXPECT_GE(engine.GetStats().level_tables[0], 1u);
    ExpectRound(&engine, 199);
  }
}

TEST(RangeEngineMergeTest, ThresholdZeroFlushesEveryMemtable) {
  lsm::MemoryTableStore store;
  RangeEngine engine(HotKeyOptions(0), &store);
  ASSERT_TRUE(engine.Open().ok());
  WriteHotKeys(&engine, 0, 200);
  ASSERT_TRUE(engine.WaitForCompactions().ok());
  const EngineStats s = engine.GetStats();
  EXPECT_EQ(s.memtable_merges, 0u);
  EXPECT_GT(s.flushes, 5u);
  ExpectRound(&engine, 199);
}

TEST(RangeEngineMergeTest, MergeKeepsWhatSnapshotsNeed) {
  lsm::MemoryTableStore store;
  RangeEngine engine(HotKeyOptions(100), &store);
  ASSERT_TRUE(engine.Open().ok());
  WriteHotKeys(&engine, 0, 10);
  const EngineSnapshot* snap = engine.GetSnapshot();
  WriteHotKeys(&engine, 10, 300);  // many merges while the snapshot lives
  ASSERT_TRUE(engine.WaitForCompactions().ok());
  EXPECT_GT(engine.GetStats().memtable_merges, 5u);
  ExpectRound(&engine, 9, snap);
  ExpectRound(&engine, 309);
  engine.ReleaseSnapshot(snap);
  // A deletion merged along is kept (the key may have older versions elsewhere).
  ASSERT_TRUE(engine.Delete("hot0").ok());
  WriteHotKeys(&engine, 400, 0);
  for (int r = 0; r < 100; ++r) ASSERT_TRUE(engine.Put("hot1", ValueOf(1, 500 + r)).ok());
  ASSERT_TRUE(engine.WaitForCompactions().ok());
  std::string v;
  EXPECT_TRUE(engine.Get("hot0", &v).IsNotFound());
  ASSERT_TRUE(engine.FlushAll().ok());
  EXPECT_TRUE(engine.Get("hot0", &v).IsNotFound());
  ASSERT_TRUE(engine.Get("hot1", &v).ok());
  EXPECT_EQ(v, ValueOf(1, 599));
}

}  // namespace
}  // namespace nova::ltc
