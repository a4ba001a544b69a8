// Write stalls and the Level-0 slow-down: both happen when they should and are counted.
#include <gtest/gtest.h>
#include <leveldb/write_batch.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <thread>

#include "common/fault_point.h"
#include "common/lsm/memory_table_store.h"
#include "ltc/engine/range_engine.h"
#include "tests/util/test_util.h"

namespace nova::ltc {
namespace {

EngineOptions Small() {
  EngineOptions o;
  o.memtable_bytes = 16 << 10;  // 20 puts of 200 B fit (two arenas of 4 KiB blocks)
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
  lsm::MemoryTableStore store;
  EngineOptions o = Small();
  o.l0_slowdown_writes_bytes = 1;  // any table in Level 0
  o.l0_stop_writes_bytes = 1ull << 40;
  o.l0_slowdown_micros = 2000;
  // Level 0 past the mark is compacted too; keep the table there by failing compactions'
  // reads (a move would take it down without reading it).
  o.table_moves = false;
  RangeEngine engine(o, &store);
  ASSERT_TRUE(engine.Open().ok());
  ASSERT_TRUE(Load(&engine, 0, 20).ok());
  EXPECT_EQ(engine.GetStats().slowdowns, 0u);  // Level 0 is empty
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
  lsm::MemoryTableStore store;
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
  lsm::MemoryTableStore store;
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
  EXPECT_GT(st.l0_stop_stalls, 0u);
  EXPECT_GT(st.l0_stop_stall_micros, 0u);
  EXPECT_GT(st.compactions, 0u);
  std::string v;
  EXPECT_TRUE(engine.Get("key0", &v).ok());
  EXPECT_TRUE(engine.Get("key1999", &v).ok());
}

// With every memtable of the Drange full and flushes failing, a write waits (counted as a
// memtable stall, not a Level-0 one) and completes once a flush succeeds again.
TEST(RangeEngineStallTest, WritesStallWithoutAFreeMemtableUntilAFlushFreesOne) {
  lsm::MemoryTableStore store;
  EngineOptions o = Small();  // one active and one immutable memtable
  RangeEngine engine(o, &store);
  ASSERT_TRUE(engine.Open().ok());
  store.FailNextWrites(1 << 30);  // every flush fails (and is retried after a backoff)
  // Far more than two memtables hold: the writer fills the active memtable, rotates it into
  // the one immutable slot, fills the next one and then has to wait.
  constexpr int kWrites = 200;
  std::atomic<bool> done{false};
  Status writer_status;
  std::thread writer([&] {
    writer_status = Load(&engine, 0, kWrites);
    done = true;
  });
  // Once a flush has failed, the writer cannot get a memtable until the store recovers.
  ASSERT_TRUE(test::WaitFor(
      [&] {
        const EngineStats st = engine.GetStats();
        return st.stalls > 0 && st.flush_failures > 0;
      },
      std::chrono::seconds(10)))
      << "no write stalled with every memtable full and the flush failing";
  EXPECT_FALSE(done.load());
  EXPECT_EQ(engine.GetStats().flushes, 0u);
  EXPECT_EQ(engine.GetStats().l0_stop_stalls, 0u);
  store.FailNextWrites(0);  // flushes succeed again
  writer.join();
  ASSERT_TRUE(writer_status.ok()) << writer_status.ToString();
  const EngineStats st = engine.GetStats();
  EXPECT_GT(st.flushes, 0u);
  EXPECT_GT(st.stall_micros, 0u);
  // Level 0 never reached its stop (256 MiB): every wait was for a memtable.
  EXPECT_EQ(st.l0_stop_stalls, 0u);
  EXPECT_EQ(st.l0_stop_stall_micros, 0u);
  std::string v;
  EXPECT_TRUE(engine.Get("key0", &v).ok());
  EXPECT_TRUE(engine.Get("key" + std::to_string(kWrites - 1), &v).ok());
}

// A write that took its sequence number but has not reached its memtable yet when a
// reorganization retires that (still empty) memtable: it must not be lost.
// Read-your-writes: a Put is acknowledged only once a Get sees it, even while a write with
// an earlier sequence number (another writer's) is still on its way into its memtable.
TEST(RangeEngineStallTest, PutReturnsOnlyOnceVisibleBehindAnEarlierWriteInFlight) {
  lsm::MemoryTableStore store;
  RangeEngine engine(Small(), &store);
  ASSERT_TRUE(engine.Open().ok());
  ASSERT_TRUE(FaultPoints::Arm("ltc.write.before_add=delay:300ms:once").ok());
  std::thread early([&] { EXPECT_TRUE(engine.Put("early", "1").ok()); });
  ASSERT_TRUE(test::WaitFor([] { return FaultPoints::FireCount("ltc.write.before_add") == 1; },
                            std::chrono::seconds(10)));
  // "early" holds the smaller sequence and sleeps before its memtable insert.
  ASSERT_TRUE(engine.Put("later", "2").ok());
  std::string v;
  EXPECT_TRUE(engine.Get("later", &v).ok()) << "a returned Put is not visible";
  EXPECT_EQ(v, "2");
  // ...which it can only be once the earlier write is visible too.
  EXPECT_TRUE(engine.Get("early", &v).ok());
  EXPECT_EQ(v, "1");
  early.join();
  FaultPoints::DisarmAll();
}

TEST(RangeEngineStallTest, WriteInFlightDuringAReorganizationIsKept) {
  lsm::MemoryTableStore store;
  EngineOptions o;
  o.dranges = 2;
  o.reorganize_every_writes = 100;
  o.drange_imbalance_threshold = 0;  // every check reorganizes
  RangeEngine engine(o, &store);
  ASSERT_TRUE(engine.Open().ok());
  for (int i = 0; i < 100; ++i) {
    char k[8];
    std::snprintf(k, sizeof k, "a%03d", i);
    ASSERT_TRUE(engine.Put(k, "v").ok());
  }
  const uint64_t reorgs = engine.GetStats().major_reorganizations;
  ASSERT_GE(reorgs, 1u);  // two Dranges, with new, empty memtables
  ASSERT_TRUE(FaultPoints::Arm("ltc.write.before_add=delay:300ms:once").ok());
  std::thread late([&] { EXPECT_TRUE(engine.Put("a000", "late").ok()); });
  ASSERT_TRUE(test::WaitFor([] { return FaultPoints::FireCount("ltc.write.before_add") == 1; },
                            std::chrono::seconds(10)));
  // One batch to the other Drange, large enough to trigger the next reorganization, which
  // retires a000's memtable while the late write is still in flight. (The batch is
  // acknowledged only once the late write, with its earlier sequence, is visible too.)
  std::vector<std::string> batch_keys;
  for (int i = 0; i < 200; ++i) {
    char k[8];
    std::snprintf(k, sizeof k, "z%03d", i);
    batch_keys.push_back(k);
  }
  std::vector<WriteOp> batch;
  for (const std::string& k : batch_keys) batch.push_back({lsm::kTypeValue, k, "v"});
  ASSERT_TRUE(engine.Write(batch).ok());
  EXPECT_GT(engine.GetStats().major_reorganizations, reorgs);
  late.join();
  FaultPoints::DisarmAll();
  std::string v;
  ASSERT_TRUE(engine.Get("a000", &v).ok());
  EXPECT_EQ(v, "late");
  ASSERT_TRUE(engine.FlushAll().ok());
  ASSERT_TRUE(engine.Get("a000", &v).ok());
  EXPECT_EQ(v, "late");
}

}  // namespace
}  // namespace nova::ltc
