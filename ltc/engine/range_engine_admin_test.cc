// RangeEngine administration (range_engine_admin.cc): ApproximateSize grows with the data
// and counts memtables, and is roughly proportional to the keys a span holds;
// CompactRange leaves a span's data in one level, every key readable, and keeps writes
// made while it runs.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <thread>

#include "common/lsm/memory_table_store.h"
#include "ltc/engine/range_engine.h"
#include "tests/util/test_util.h"

namespace nova::ltc {
namespace {

std::string Key(int i) {
  char key[16];
  std::snprintf(key, sizeof(key), "k%06d", i);
  return key;
}

// Small memtables and tables; background compaction off unless `background`, so the test
// decides the shape.
EngineOptions SmallOptions(bool background) {
  EngineOptions o;
  o.memtable_bytes = 32 << 10;
  o.memtables = 4;
  o.sstable_bytes = 16 << 10;
  o.block_bytes = 1024;
  o.drange_merge_threshold_keys = 0;  // every flush makes a table
  o.l0_compaction_trigger = background ? 2 : 1000;
  o.level1_bytes = background ? 64 << 10 : 1ull << 40;
  return o;
}

// Puts keys [first, first + count) in a scattered order (so flushed tables overlap).
Status Load(RangeEngine* e, int first, int count, const std::string& value) {
  constexpr int kStride = 7919;  // a prime: visits every i once
  for (int j = 0; j < count; ++j) {
    const int i = first + static_cast<int>((static_cast<int64_t>(j) * kStride) % count);
    NOVA_RETURN_NOT_OK(e->Put(Key(i), value));
  }
  return Status::OK();
}

uint64_t Size(RangeEngine* e, const KeyRange& span) {
  Result<uint64_t> r = e->ApproximateSize(span);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? r.value() : 0;
}

int LevelsWithTables(const EngineStats& st) {
  int n = 0;
  for (int l = 0; l < lsm::kNumLevels; ++l) n += st.level_tables[l] > 0 ? 1 : 0;
  return n;
}

TEST(RangeEngineAdminTest, ApproximateSizeGrowsWithDataAndCountsMemtables) {
  lsm::MemoryTableStore store;
  RangeEngine e(SmallOptions(false), &store);
  ASSERT_TRUE(e.Open().ok());
  EXPECT_EQ(Size(&e, KeyRange::All()), 0u);

  // In memtables only: counted.
  ASSERT_TRUE(Load(&e, 0, 50, std::string(100, 'v')).ok());
  const uint64_t in_memory = Size(&e, KeyRange::All());
  EXPECT_GE(in_memory, 50u * 100);
  EXPECT_LT(in_memory, 50u * 200);

  // Tables and memtables: grows, and a span counts about its share of the keys.
  ASSERT_TRUE(Load(&e, 0, 4000, std::string(100, 'v')).ok());
  ASSERT_TRUE(e.FlushAll().ok());
  ASSERT_TRUE(Load(&e, 4000, 100, std::string(100, 'v')).ok());  // some in memtables
  ASSERT_GT(e.GetStats().level_tables[0], 2u);
  const uint64_t all = Size(&e, KeyRange::All());
  EXPECT_GT(all, 4100u * 100);
  EXPECT_LT(all, 4100u * 200);
  const uint64_t half = Size(&e, KeyRange{Key(0), Key(2050)});
  EXPECT_GT(half, all * 4 / 10) << half << " of " << all;
  EXPECT_LT(half, all * 6 / 10) << half << " of " << all;
  const uint64_t tail = Size(&e, KeyRange{Key(4000), std::nullopt});  // the memtable keys
  EXPECT_GT(tail, 100u * 100);
  EXPECT_LT(tail, all / 10);
  EXPECT_EQ(Size(&e, KeyRange{"z", std::nullopt}), 0u);
  EXPECT_EQ(Size(&e, KeyRange{"", "a"}), 0u);
  // Sizes hold across a compaction (the same data, in other tables).
  ASSERT_TRUE(e.CompactRange(KeyRange::All()).ok());
  const uint64_t after = Size(&e, KeyRange::All());
  EXPECT_GT(after, all * 7 / 10);
  EXPECT_LT(after, all * 13 / 10);
}

TEST(RangeEngineAdminTest, CompactRangeLeavesTheSpanInOneLevelAndEverythingReadable) {
  lsm::MemoryTableStore store;
  RangeEngine e(SmallOptions(false), &store);
  ASSERT_TRUE(e.Open().ok());
  ASSERT_TRUE(Load(&e, 0, 3000, std::string(100, 'a')).ok());
  ASSERT_TRUE(Load(&e, 0, 1000, std::string(100, 'b')).ok());  // newer versions
  ASSERT_TRUE(e.Delete(Key(7)).ok());
  ASSERT_TRUE(e.FlushAll().ok());
  const EngineStats before = e.GetStats();
  ASSERT_GT(before.level_tables[0], 4u);
  ASSERT_EQ(LevelsWithTables(before), 1);

  // A part of the key space: its Level-0 tables move down with every table overlapping them.
  ASSERT_TRUE(e.CompactRange(KeyRange{Key(100), Key(200)}).ok());
  EXPECT_GT(e.GetStats().level_tables[1], 0u);

  // Everything: one level, fewer tables (the older versions are gone), all readable.
  ASSERT_TRUE(e.CompactRange(KeyRange::All()).ok());
  const EngineStats after = e.GetStats();
  EXPECT_EQ(after.level_tables[0], 0u);
  EXPECT_EQ(LevelsWithTables(after), 1);
  EXPECT_LT(after.level_bytes[1], before.level_bytes[0]);
  EXPECT_GT(after.level_write_bytes[1], 0u);
  EXPECT_GT(after.level_read_bytes[1], 0u);
  EXPECT_GT(after.level_write_bytes[0], 0u);  // the flushes
  for (int i = 0; i < 3000; ++i) {
    std::string v;
    Status s = e.Get(Key(i), &v);
    if (i == 7) {
      EXPECT_TRUE(s.IsNotFound()) << s.ToString();
      continue;
    }
    ASSERT_TRUE(s.ok()) << Key(i) << ": " << s.ToString();
    EXPECT_EQ(v, std::string(100, i < 1000 ? 'b' : 'a')) << Key(i);
  }

  // New data lands in Level 0 above it; compacting again brings it down to Level 1 too
  // (the deepest level holding the span).
  ASSERT_TRUE(Load(&e, 2000, 2000, std::string(100, 'c')).ok());
  ASSERT_TRUE(e.CompactRange(KeyRange{Key(2500), std::nullopt}).ok());
  const EngineStats again = e.GetStats();
  EXPECT_EQ(again.level_tables[0], 0u);
  EXPECT_EQ(LevelsWithTables(again), 1);
  std::string v;
  ASSERT_TRUE(e.Get(Key(3999), &v).ok());
  EXPECT_EQ(v, std::string(100, 'c'));
  ASSERT_TRUE(e.Get(Key(1999), &v).ok());
  EXPECT_EQ(v, std::string(100, 'a'));
}

TEST(RangeEngineAdminTest, WritesDuringCompactRangeAreKept) {
  const uint64_t seed = test::TestSeed("WritesDuringCompactRangeAreKept");
  lsm::MemoryTableStore store;
  RangeEngine e(SmallOptions(/*background=*/true), &store);
  ASSERT_TRUE(e.Open().ok());
  ASSERT_TRUE(Load(&e, 0, 3000, std::string(100, 'a')).ok());
  std::map<std::string, std::string> model;
  for (int i = 0; i < 3000; ++i) model[Key(i)] = std::string(100, 'a');

  std::atomic<bool> stop{false};
  std::map<std::string, std::string> written;  // by the writer, read after it joined
  Status writer_status;
  std::thread writer([&] {
    std::mt19937_64 rng(seed);
    for (int n = 0; !stop.load() || n < 500; ++n) {
      const std::string k = Key(static_cast<int>(rng() % 4000));
      const std::string v = "w" + std::to_string(n) + std::string(rng() % 200, 'x');
      writer_status = e.Put(k, v);
      if (!writer_status.ok()) return;
      written[k] = v;
    }
  });
  for (int round = 0; round < 3; ++round) {
    ASSERT_TRUE(e.CompactRange(KeyRange{Key(round * 1000), Key(round * 1000 + 1500)}).ok());
  }
  ASSERT_TRUE(e.CompactRange(KeyRange::All()).ok());
  stop = true;
  writer.join();
  ASSERT_TRUE(writer_status.ok()) << writer_status.ToString();
  for (const auto& [k, v] : written) model[k] = v;
  ASSERT_TRUE(e.WaitForCompactions().ok());
  for (const auto& [k, v] : model) {
    std::string got;
    ASSERT_TRUE(e.Get(k, &got).ok()) << k;
    ASSERT_EQ(got, v) << k;
  }
  std::unique_ptr<leveldb::Iterator> it(e.NewIterator());
  size_t n = 0;
  for (it->SeekToFirst(); it->Valid(); it->Next()) ++n;
  EXPECT_EQ(n, model.size());
}

TEST(RangeEngineAdminTest, RefusedBeforeOpen) {
  lsm::MemoryTableStore store;
  RangeEngine e(SmallOptions(false), &store);
  EXPECT_EQ(e.ApproximateSize(KeyRange::All()).status().code(), Status::Code::kIllegalState);
  EXPECT_FALSE(e.CompactRange(KeyRange::All()).ok());
}

}  // namespace
}  // namespace nova::ltc
