// Write stalls and the Level-0 slow-down: both happen when they should and are counted.
#include <gtest/gtest.h>

#include <string>

#include "ltc/memory_table_store.h"
#include "ltc/range_engine.h"

namespace nova::ltc {
namespace {

EngineOptions Small() {
  EngineOptions o;
  o.memtable_bytes = 8 << 10;
  o.memtables = 2;  // one active, one immutable
  o.drange_merge_threshold_keys = 0;
  return o;
}

Status Load(RangeEngine* engine, int first, int count) {
  for (int i = first; i < first + count; ++i) {
    NOVA_RETURN_NOT_OK(engine->Put("key" + std::to_string(i), std::string(200, 'v')));
  }
  return Status::OK();
}

TEST(RangeEngineStallTest, SlowDownStartsAtTheMarkAndGrowsTowardsTheStop) {
  MemoryTableStore store;
  EngineOptions o = Small();
  o.l0_slowdown_writes_bytes = 1;  // any table in Level 0
  o.l0_stop_writes_bytes = 1ull << 40;
  o.l0_slowdown_micros = 2000;
  RangeEngine engine(o, &store);
  ASSERT_TRUE(engine.Open().ok());
  ASSERT_TRUE(Load(&engine, 0, 20).ok());
  EXPECT_EQ(engine.GetStats().slowdowns, 0u);  // Level 0 is empty
  // Level 0 past the mark is compacted too; keep the table there by failing compactions'
  // reads.
  store.FailNextReads(1 << 30);
  ASSERT_TRUE(engine.FlushAll().ok());
  ASSERT_GT(engine.GetStats().level_bytes[0], 0u);
  ASSERT_TRUE(Load(&engine, 20, 50).ok());
  const EngineStats st = engine.GetStats();
  ASSERT_GT(st.level_bytes[0], 0u);
  EXPECT_EQ(st.slowdowns, 50u);  // each write once
  EXPECT_GE(st.slowdown_micros, 50u);
  // Far below the stop the delay is a small share of l0_slowdown_micros.
  EXPECT_LT(st.slowdown_micros, 50u * 2000u / 2);
}

TEST(RangeEngineStallTest, ZeroMicrosTurnsTheSlowDownOff) {
  MemoryTableStore store;
  EngineOptions o = Small();
  o.l0_slowdown_writes_bytes = 1;
  o.l0_slowdown_micros = 0;
  RangeEngine engine(o, &store);
  ASSERT_TRUE(engine.Open().ok());
  ASSERT_TRUE(Load(&engine, 0, 20).ok());
  ASSERT_TRUE(engine.FlushAll().ok());
  ASSERT_TRUE(Load(&engine, 20, 50).ok());
  EXPECT_EQ(engine.GetStats().slowdowns, 0u);
}

TEST(RangeEngineStallTest, WritesStallAtTheStopUntilCompactionCatchesUp) {
  MemoryTableStore store;
  EngineOptions o = Small();
  o.l0_compaction_trigger = 2;
  o.l0_stop_writes_bytes = 1;  // any table in Level 0 stops rotations
  o.l0_slowdown_micros = 0;
  RangeEngine engine(o, &store);
  ASSERT_TRUE(engine.Open().ok());
  // Enough writes to fill many memtables: each rotation waits until Level 0 is compacted
  // away again, and the writes still all complete.
  ASSERT_TRUE(Load(&engine, 0, 2000).ok());
  const EngineStats st = engine.GetStats();
  EXPECT_GT(st.stalls, 0u);
  EXPECT_GT(st.stall_micros, 0u);
  EXPECT_GT(st.compactions, 0u);
  std::string v;
  EXPECT_TRUE(engine.Get("key0", &v).ok());
  EXPECT_TRUE(engine.Get("key1999", &v).ok());
}

}  // namespace
}  // namespace nova::ltc
