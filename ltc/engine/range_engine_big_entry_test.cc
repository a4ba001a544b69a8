// Big entries through the engine (issue 19: LevelDB's practical sizes): a 64 KiB key and a
// 64 MiB value go through the log and a recovery from it, a flush, a compaction of the
// table holding them, a reopen from the MANIFEST, and a live migration's memtable copy.
// Memory stays at a few copies of the value (the log, the memtable, the tables).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "common/lsm/memory_table_store.h"
#include "ltc/engine/engine_model_test_util.h"
#include "ltc/engine/memtable.h"
#include "ltc/engine/memtable_log.h"
#include "ltc/engine/range_engine.h"
#include "ltc/engine/range_migration.h"

namespace nova::ltc {
namespace {

using engine_model_test::Case;
using engine_model_test::TinyOptions;

constexpr size_t kBigKeyBytes = 64 << 10;
constexpr size_t kBigValueBytes = 64 << 20;

// n bytes that differ from any shift of themselves (a misplaced piece shows).
std::string Pattern(size_t n, char first, uint32_t seed) {
  std::string s(n, '\0');
  s[0] = first;
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 1; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    s[i] = static_cast<char>(x >> 24);
  }
  return s;
}

// Reads `key` and compares without printing megabytes on a mismatch.
void ExpectValue(RangeEngine* engine, const std::string& key, const std::string& want,
                 const std::string& when) {
  std::string got;
  Status s = engine->Get(key, &got);
  ASSERT_TRUE(s.ok()) << when << ": " << s.ToString();
  ASSERT_EQ(got.size(), want.size()) << when;
  EXPECT_TRUE(got == want) << when << ": same size, different bytes";
}

EngineOptions BigOptions(MemtableLog* log) {
  EngineOptions o = TinyOptions(Case{"big", 1, 1, false});
  o.memtable_bytes = 1 << 20;
  o.log = log;
  o.recovery_threads = 2;
  return o;
}

TEST(RangeEngineBigEntryTest, BigKeyAndValueSurviveFlushCompactionAndRecovery) {
  const std::string big_key = Pattern(kBigKeyBytes, 'k', 1);
  const std::string big_value = Pattern(kBigValueBytes, 'v', 2);
  const std::string other_big_key = Pattern(kBigKeyBytes, 'm', 3);
  lsm::MemoryTableStore store;
  InMemoryMemtableLog log;
  {
    RangeEngine engine(BigOptions(&log), &store);
    ASSERT_TRUE(engine.Open().ok());
    // One batch: the big entry, a big key with a small value, a small entry.
    ASSERT_TRUE(engine
                    .Write({WriteOp{lsm::kTypeValue, big_key, big_value},
                            WriteOp{lsm::kTypeValue, other_big_key, "small"},
                            WriteOp{lsm::kTypeValue, "a", "1"}})
                    .ok());
    ExpectValue(&engine, big_key, big_value, "in the memtable");
    ExpectValue(&engine, other_big_key, "small", "in the memtable");
  }  // a crash: the memtable dies unflushed, its log stays
  RangeEngine engine(BigOptions(&log), &store);
  ASSERT_TRUE(engine.Open().ok());
  EXPECT_GE(engine.GetStats().recovered_entries, 3u);
  EXPECT_GE(engine.GetStats().recovered_log_bytes, kBigValueBytes);
  ExpectValue(&engine, big_key, big_value, "recovered from the log");
  ExpectValue(&engine, other_big_key, "small", "recovered from the log");
  ExpectValue(&engine, "a", "1", "recovered from the log");

  ASSERT_TRUE(engine.FlushAll().ok());
  const std::vector<uint64_t> flushed = store.StoredTables();
  ASSERT_FALSE(flushed.empty());
  EXPECT_GE(store.live_bytes(), kBigValueBytes);
  ExpectValue(&engine, big_key, big_value, "in a table");
  // Tables spanning the big keys on both sides, so a Level-0 compaction takes them all.
  for (int round = 0; round < 3; ++round) {
    ASSERT_TRUE(engine.Put("a", "r" + std::to_string(round)).ok());
    ASSERT_TRUE(engine.Put("z", "r" + std::to_string(round)).ok());
    ASSERT_TRUE(engine.FlushAll().ok());
  }
  ASSERT_TRUE(engine.WaitForCompactions().ok());
  EXPECT_GT(engine.GetStats().compactions, 0u);
  for (uint64_t number : flushed) {
    EXPECT_FALSE(store.HasTable(number)) << "table " << number << " was never compacted";
  }
  ExpectValue(&engine, big_key, big_value, "after the compaction");
  ExpectValue(&engine, other_big_key, "small", "after the compaction");
  ExpectValue(&engine, "z", "r2", "after the compaction");
  // An iterator walks over the big entry too.
  {
    std::unique_ptr<leveldb::Iterator> it(engine.NewIterator());
    it->Seek("k");
    ASSERT_TRUE(it->Valid()) << it->status().ToString();
    EXPECT_TRUE(it->key() == leveldb::Slice(big_key));
    EXPECT_EQ(it->value().size(), kBigValueBytes);
    it->Next();
    ASSERT_TRUE(it->Valid());
    EXPECT_TRUE(it->key() == leveldb::Slice(other_big_key));
  }
  RangeEngine reopened(BigOptions(&log), &store);
  ASSERT_TRUE(reopened.Open().ok());
  ExpectValue(&reopened, big_key, big_value, "after a reopen from the MANIFEST");
}

// A live migration copies a memtable in chunks of about max_bytes, each holding at least
// one entry: a big entry is copied whole in a chunk of its own.
TEST(RangeEngineBigEntryTest, MemtableChunksCarryABigEntryWhole) {
  const std::string big_key = Pattern(kBigKeyBytes, 'k', 4);
  const std::string big_value = Pattern(kBigValueBytes, 'v', 5);
  lsm::InternalKeyComparator icmp(leveldb::BytewiseComparator());
  // Memtables are shared (their iterators pin them).
  auto from = std::make_shared<MemTable>(&icmp, 1);
  from->Add(1, lsm::kTypeValue, "a", "1");
  from->Add(2, lsm::kTypeValue, big_key, big_value);
  from->Add(3, lsm::kTypeValue, "z", "2");
  auto to = std::make_shared<MemTable>(&icmp, 1);
  std::string after, chunk, last;
  bool done = false;
  int chunks = 0;
  uint64_t total = 0;
  while (!done) {
    EncodeMemtableChunk(*from, after, /*max_bytes=*/4 << 20, &chunk, &last, &done);
    uint64_t entries = 0;
    ASSERT_TRUE(DecodeMemtableChunk(chunk, to.get(), &entries).ok());
    ASSERT_GT(entries, 0u);
    total += entries;
    after = last;
    ++chunks;
  }
  EXPECT_EQ(total, 3u);
  EXPECT_GE(chunks, 2);
  std::string got;
  ASSERT_EQ(to->Get(big_key, lsm::kMaxSequenceNumber, &got), MemTable::GetResult::kFound);
  EXPECT_TRUE(got == big_value);
}

}  // namespace
}  // namespace nova::ltc
