// Compaction picking for levels >= 1: picks go round-robin over the key space (LevelDB's
// compaction pointer), so a level whose front keeps receiving data still moves its back down.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <set>
#include <string>

#include "common/lsm/internal_key.h"
#include "common/lsm/memory_table_store.h"
#include "common/mutex.h"
#include "ltc/engine/range_engine.h"
#include "tests/util/test_util.h"

namespace nova::ltc {
namespace {

// A lsm::MemoryTableStore that remembers the first byte of the smallest key of every table opened
// for reading since the last Reset (compactions open each input).
class OpenRecordingStore final : public lsm::TableStore {
 public:
  Status WriteTable(uint64_t number, const lsm::BuiltTable& table, lsm::TableMeta* meta) override {
    return base_.WriteTable(number, table, meta);
  }
  Result<std::unique_ptr<lsm::FragmentSource>> OpenTable(const lsm::TableMeta& meta) override {
    {
      MutexLock lock(&mu_);
      const leveldb::Slice k = lsm::ExtractUserKey(meta.smallest);
      if (!k.empty()) opened_prefixes_.insert(k[0]);
    }
    return base_.OpenTable(meta);
  }
  Result<std::string> ReadFilter(const lsm::TableMeta& meta) override {
    return base_.ReadFilter(meta);
  }
  Status DeleteTable(const lsm::TableMeta& meta) override { return base_.DeleteTable(meta); }
  Result<std::vector<uint64_t>> ListTables() override { return base_.ListTables(); }
  Status DeleteTableFiles(uint64_t number) override { return base_.DeleteTableFiles(number); }
  Status AppendManifest(const std::string& record) override {
    return base_.AppendManifest(record);
  }
  Status RollManifest(const std::string& snapshot_record) override {
    return base_.RollManifest(snapshot_record);
  }
  Result<std::string> ReadManifest() override { return base_.ReadManifest(); }

  void Reset() {
    MutexLock lock(&mu_);
    opened_prefixes_.clear();
  }
  bool Opened(char prefix) const {
    MutexLock lock(&mu_);
    return opened_prefixes_.count(prefix) == 1;
  }

 private:
  lsm::MemoryTableStore base_;
  mutable Mutex mu_;
  std::set<char> opened_prefixes_ GUARDED_BY(mu_);
};

// Puts keys prefix + first .. first + count - 1 in a scattered order, so the tables flushed
// overlap and Level 0 is compacted at its table-count trigger.
Status Load(RangeEngine* engine, char prefix, int first, int count) {
  constexpr int kStride = 7919;  // a prime: i * kStride mod count visits every i once
  for (int j = 0; j < count; ++j) {
    const int i = first + static_cast<int>((static_cast<int64_t>(j) * kStride) % count);
    char key[16];
    std::snprintf(key, sizeof(key), "%c%06d", prefix, i);
    NOVA_RETURN_NOT_OK(engine->Put(key, std::string(200, 'v')));
  }
  return Status::OK();
}

TEST(RangeEnginePickerTest, LevelOnePicksGoRoundRobinOverTheKeySpace) {
  OpenRecordingStore store;
  EngineOptions o;
  o.memtable_bytes = 16 << 10;
  o.memtables = 2;
  o.sstable_bytes = 4 << 10;  // several tables per flush's worth of Level 1
  o.level1_bytes = 32 << 10;
  o.l0_compaction_trigger = 2;
  o.compaction_threads = 1;  // one job at a time: no pick skips a busy table
  o.drange_merge_threshold_keys = 0;
  RangeEngine engine(o, &store);
  ASSERT_TRUE(engine.Open().ok());

  // The back of the key space ('b' keys): Level 1 at its target, the rest below it.
  ASSERT_TRUE(Load(&engine, 'b', 0, 600).ok());
  ASSERT_TRUE(engine.FlushAll().ok());
  ASSERT_TRUE(engine.WaitForCompactions().ok());
  ASSERT_GT(engine.GetStats().level_tables[1], 0u);

  // New data keeps arriving at the front ('a' keys) and pushes Level 1 over its target
  // again and again. Always picking the first tables would move only 'a' tables down and
  // leave the 'b' tables in Level 1 for good (no 'a' job overlaps them); round-robin
  // reaches them.
  store.Reset();
  for (int round = 0; round < 10 && !store.Opened('b'); ++round) {
    ASSERT_TRUE(Load(&engine, 'a', round * 200, 200).ok());
    ASSERT_TRUE(engine.FlushAll().ok());
    ASSERT_TRUE(engine.WaitForCompactions().ok());
  }
  EXPECT_TRUE(store.Opened('b')) << "no compaction read a table of the back of the key space";
  EXPECT_TRUE(store.Opened('a'));
}

}  // namespace
}  // namespace nova::ltc
