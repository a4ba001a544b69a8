// The engine under store failures: a failed flush is retried (writes go on, nothing is
// lost); a MANIFEST append that fails for good drops its edit into a new MANIFEST and
// deletes the edit's tables, or stops the range if even that fails; Open deletes the tables
// such failures leave behind.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>

#include "common/lsm/memory_table_store.h"
#include "ltc/engine/range_engine.h"
#include "tests/util/test_util.h"

namespace nova::ltc {
namespace {

EngineOptions SmallOptions() {
  EngineOptions o;
  o.memtable_bytes = 16 << 10;
  o.memtables = 4;
  o.drange_merge_threshold_keys = 0;  // every memtable becomes a table
  o.l0_compaction_trigger = 1000;
  return o;
}

void Load(RangeEngine* engine, int first, int count) {
  for (int i = first; i < first + count; ++i) {
    ASSERT_TRUE(engine->Put("key" + std::to_string(i), "value" + std::to_string(i)).ok()) << i;
  }
}

void ExpectLoaded(RangeEngine* engine, int first, int count) {
  for (int i = first; i < first + count; ++i) {
    std::string v;
    ASSERT_TRUE(engine->Get("key" + std::to_string(i), &v).ok()) << i;
    ASSERT_EQ(v, "value" + std::to_string(i));
  }
}

TEST(RangeEngineFailureTest, FailedFlushIsRetriedAndWritesGoOn) {
  lsm::MemoryTableStore store;
  RangeEngine engine(SmallOptions(), &store);
  ASSERT_TRUE(engine.Open().ok());
  Load(&engine, 0, 100);
  store.FailNextWrites(2);
  // FlushAll reports the first failure; the flush keeps being retried in the background.
  Status s = engine.FlushAll();
  EXPECT_FALSE(s.ok());
  ExpectLoaded(&engine, 0, 100);  // still in the immutable memtable
  Load(&engine, 100, 100);        // writes are not stopped
  ASSERT_TRUE(test::WaitFor([&] { return engine.FlushAll().ok(); }, std::chrono::seconds(20)));
  const EngineStats st = engine.GetStats();
  EXPECT_EQ(st.flush_failures, 2u);
  EXPECT_GE(st.level_tables[0], 1u);
  ExpectLoaded(&engine, 0, 200);
}

TEST(RangeEngineFailureTest, ManifestFailureDropsTheEditAndItsTables) {
  lsm::MemoryTableStore store;
  auto engine = std::make_unique<RangeEngine>(SmallOptions(), &store);
  ASSERT_TRUE(engine->Open().ok());
  Load(engine.get(), 0, 100);
  // Every append attempt of the flush's edit fails; the roll-over to a new MANIFEST works.
  const uint64_t rolls = store.manifest_rolls();
  store.FailNextManifestWrites(3);
  EXPECT_FALSE(engine->FlushAll().ok());
  EXPECT_EQ(store.manifest_rolls(), rolls + 1);
  EXPECT_EQ(engine->GetStats().manifest_failures, 1u);
  EXPECT_EQ(store.live_tables(), 0u);  // the failed edit's table was deleted
  // The retry lands, and the state survives a reopen.
  ASSERT_TRUE(test::WaitFor([&] { return engine->FlushAll().ok(); }, std::chrono::seconds(20)));
  EXPECT_EQ(store.live_tables(), 1u);
  engine.reset();
  engine = std::make_unique<RangeEngine>(SmallOptions(), &store);
  ASSERT_TRUE(engine->Open().ok());
  EXPECT_EQ(engine->GetStats().orphans_collected, 0u);
  ExpectLoaded(engine.get(), 0, 100);
}

TEST(RangeEngineFailureTest, UnrecoverableManifestStopsWritesAndOpenCollectsTheOrphan) {
  lsm::MemoryTableStore store;
  auto engine = std::make_unique<RangeEngine>(SmallOptions(), &store);
  ASSERT_TRUE(engine->Open().ok());
  Load(engine.get(), 0, 50);
  ASSERT_TRUE(engine->FlushAll().ok());
  Load(engine.get(), 50, 50);
  store.FailNextManifestWrites(4);  // three appends and the roll-over
  EXPECT_FALSE(engine->FlushAll().ok());
  Status s = engine->Put("more", "x");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("writes stopped"), std::string::npos) << s.ToString();
  EXPECT_EQ(store.live_tables(), 2u);  // the unrecorded table stays: its edit may exist
  // A restart finds the MANIFEST without the edit and deletes the table nobody references.
  engine.reset();
  engine = std::make_unique<RangeEngine>(SmallOptions(), &store);
  ASSERT_TRUE(engine->Open().ok());
  EXPECT_EQ(engine->GetStats().orphans_collected, 1u);
  EXPECT_EQ(store.tables_collected(), 1u);
  EXPECT_EQ(store.live_tables(), 1u);
  ExpectLoaded(engine.get(), 0, 50);
  // New tables never reuse the collected number.
  Load(engine.get(), 200, 50);
  ASSERT_TRUE(engine->FlushAll().ok());
  ExpectLoaded(engine.get(), 200, 50);
}

// Owner fencing (docs/coordinator.md): once the store says a newer owner has the range, the
// engine stops at the first refused write: on_fenced runs once, writes fail with Fenced, and
// nothing more is written, rolled or deleted (no retry, no closing flush).
TEST(RangeEngineFailureTest, FencedStoreStopsTheRangeAtTheFirstRefusedWrite) {
  lsm::MemoryTableStore store;
  EngineOptions o = SmallOptions();
  std::atomic<int> fenced_calls{0};
  o.on_fenced = [&] { fenced_calls.fetch_add(1); };
  o.owner_epoch = 3;
  auto engine = std::make_unique<RangeEngine>(o, &store);
  ASSERT_TRUE(engine->Open().ok());
  Load(engine.get(), 0, 50);
  ASSERT_TRUE(engine->FlushAll().ok());
  Load(engine.get(), 50, 50);
  const uint64_t appends = store.manifest_appends();
  const uint64_t rolls = store.manifest_rolls();
  const size_t tables = store.live_tables();
  const uint64_t written = store.tables_written();
  store.Fence();
  Status s = engine->FlushAll();
  EXPECT_TRUE(s.IsFenced()) << s.ToString();
  EXPECT_EQ(fenced_calls.load(), 1);
  s = engine->Put("more", "x");
  EXPECT_TRUE(s.IsFenced()) << s.ToString();
  EXPECT_TRUE(engine->FlushAll().IsFenced());
  EXPECT_EQ(fenced_calls.load(), 1) << "on_fenced runs once";
  EXPECT_EQ(store.manifest_appends(), appends);
  EXPECT_EQ(store.manifest_rolls(), rolls);
  EXPECT_EQ(store.live_tables(), tables);
  EXPECT_EQ(store.tables_deleted(), 0u);
  EXPECT_EQ(store.tables_written(), written);
  EXPECT_EQ(engine->GetStats().flush_failures, 0u) << "a fence is not a failure to retry";
  // Reads of what it held go on (the server stops answering for the range).
  ExpectLoaded(engine.get(), 0, 100);
  engine.reset();  // no closing flush reaches the store either
  EXPECT_EQ(store.manifest_appends(), appends);
}

TEST(RangeEngineFailureTest, NewOwnerSequencesStartFarAboveTheOldOnes) {
  lsm::MemoryTableStore store;
  auto engine = std::make_unique<RangeEngine>(SmallOptions(), &store);
  ASSERT_TRUE(engine->Open().ok());
  Load(engine.get(), 0, 50);
  ASSERT_TRUE(engine->FlushAll().ok());
  const uint64_t before = engine->GetStats().last_sequence;
  engine.reset();
  EngineOptions o = SmallOptions();
  o.owner_epoch = 2;
  engine = std::make_unique<RangeEngine>(o, &store);
  ASSERT_TRUE(engine->Open().ok());
  EXPECT_GE(engine->GetStats().last_sequence, before + (1ull << 32));
  ExpectLoaded(engine.get(), 0, 50);
  ASSERT_TRUE(engine->Put("key0", "newer").ok());
  std::string v;
  ASSERT_TRUE(engine->Get("key0", &v).ok());
  EXPECT_EQ(v, "newer");
}

}  // namespace
}  // namespace nova::ltc
