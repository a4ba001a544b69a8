// FlushJob against lsm::MemoryTableStore and a fake host: a memtable becomes one Level-0
// table with the versions readers need; an empty one is dropped; a small one is merged into
// its Drange's active memtable or its next immutable one (re-logged there, lookup index
// repointed), unless the rule does not apply; the job waits for writes sealed into the
// memtable; a failed write or install leaves the outcome unset.
#include "ltc/engine/flush_job.h"

#include <gtest/gtest.h>
#include <leveldb/comparator.h>
#include <leveldb/filter_policy.h>

#include <atomic>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/lsm/memory_table_store.h"
#include "common/lsm/scan_table.h"
#include "ltc/engine/log_record.h"

namespace nova::ltc {
namespace {

// Records what the job asked and told.
class FakeHost : public FlushJob::Host {
 public:
  std::vector<lsm::SequenceNumber> LiveSnapshots() override { return snapshots; }
  uint64_t NewFileNumber() override { return next_number++; }
  bool FlushForced() override { return forced; }
  std::shared_ptr<MemTable> MergeTarget(const ImmutableMemTable& imm) override {
    ++merge_target_calls;
    return merge_target;
  }
  void DropEmpty(const ImmutableMemTable& imm) override { ++dropped; }
  void FinishMerge(const ImmutableMemTable& imm, const std::shared_ptr<MemTable>& target,
                   uint64_t entries, bool relogged_ok) override {
    ++merges;
    merged_into = target;
    merged_entries = entries;
    relogged = relogged_ok;
  }
  Status InstallTables(const ImmutableMemTable& imm, std::vector<lsm::TableMeta> tables) override {
    ++installs;
    if (!install_status.ok()) return install_status;
    installed = std::move(tables);
    return Status::OK();
  }

  // What the job gets.
  std::vector<lsm::SequenceNumber> snapshots;
  uint64_t next_number = 100;
  bool forced = false;
  std::shared_ptr<MemTable> merge_target;
  Status install_status;
  // What the job did.
  int merge_target_calls = 0, dropped = 0, merges = 0, installs = 0;
  std::shared_ptr<MemTable> merged_into;
  uint64_t merged_entries = 0;
  bool relogged = false;
  std::vector<lsm::TableMeta> installed;
};

// A (user key, sequence, type, value) the tests compare.
struct KeyVersion {
  std::string key;
  lsm::SequenceNumber sequence;
  lsm::ValueType type;
  std::string value;
  bool operator==(const KeyVersion&) const = default;
};

std::vector<KeyVersion> Contents(leveldb::Iterator* it) {
  std::vector<KeyVersion> out;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    lsm::ParsedInternalKey p;
    EXPECT_TRUE(lsm::ParseInternalKey(it->key(), &p));
    out.push_back(KeyVersion{p.user_key.ToString(), p.sequence, p.type, it->value().ToString()});
  }
  return out;
}

std::string Key(int i) {
  char k[16];
  std::snprintf(k, sizeof k, "k%04d", i);
  return k;
}

class FlushJobTest : public ::testing::Test {
 protected:
  FlushJobTest() : icmp_(leveldb::BytewiseComparator()) {
    filter_.reset(leveldb::NewBloomFilterPolicy(10));
    options_.range_id = 7;
    options_.icmp = &icmp_;
    options_.store = &store_;
    options_.table.filter_policy = filter_.get();
    options_.merge_threshold_keys = 10;
    options_.memtable_bytes = 1 << 20;
    options_.lookup_index = &index_;
    options_.sequences = &sequences_;
    active_ = NewMemTable();
    state_ = std::make_shared<DrangeState>(active_);
  }

  std::shared_ptr<MemTable> NewMemTable() { return std::make_shared<MemTable>(&icmp_, next_id_++); }

  // Adds a write to `mem` with the next sequence (visible at once), indexed as the engine
  // does.
  lsm::SequenceNumber Write(const std::shared_ptr<MemTable>& mem, const std::string& key,
                            const std::string& value, lsm::ValueType type = lsm::kTypeValue) {
    const lsm::SequenceNumber s = sequences_.Assign(1);
    mem->Add(s, type, key, value);
    index_.Update(key, mem->id(), s);
    sequences_.Finish(s, 1);
    return s;
  }

  ImmutableMemTable Sealed(std::shared_ptr<MemTable> mem) {
    return ImmutableMemTable{std::move(mem), /*drange=*/3, sequences_.last_assigned(), state_};
  }

  std::vector<KeyVersion> TableContents(const lsm::TableMeta& meta) {
    auto table = lsm::ScanTable::Open(&store_, meta, &icmp_);
    EXPECT_TRUE(table.ok()) << table.status().ToString();
    if (!table.ok()) return {};
    return Contents(table.value()->NewIterator().get());
  }
  std::vector<KeyVersion> MemContents(const std::shared_ptr<MemTable>& mem) {
    std::unique_ptr<leveldb::Iterator> it(mem->NewIterator());
    return Contents(it.get());
  }

  lsm::InternalKeyComparator icmp_;
  std::unique_ptr<const leveldb::FilterPolicy> filter_;
  lsm::MemoryTableStore store_;
  LookupIndex index_;
  SequenceWatermark sequences_;
  FlushJobOptions options_;
  FakeHost host_;
  uint64_t next_id_ = 1;
  std::shared_ptr<MemTable> active_;  // the Drange's active memtable
  std::shared_ptr<DrangeState> state_;
};

TEST_F(FlushJobTest, WritesOneLevel0TableWithTheNewestVersions) {
  auto mem = NewMemTable();
  std::vector<KeyVersion> newest;
  for (int i = 0; i < 50; ++i) Write(mem, Key(i), "old");  // overwritten below
  for (int i = 0; i < 50; ++i) {
    const bool del = i % 10 == 0;
    const lsm::SequenceNumber s = Write(mem, Key(i), del ? "" : "new" + std::to_string(i),
                                        del ? lsm::kTypeDeletion : lsm::kTypeValue);
    newest.push_back(KeyVersion{Key(i), s, del ? lsm::kTypeDeletion : lsm::kTypeValue,
                                del ? "" : "new" + std::to_string(i)});
  }
  FlushJob job(options_, &host_, Sealed(mem));
  ASSERT_TRUE(job.Run().ok());
  EXPECT_EQ(job.outcome(), FlushJob::Outcome::kFlushed);
  EXPECT_EQ(host_.merges + host_.dropped, 0);
  ASSERT_EQ(host_.installs, 1);
  ASSERT_EQ(host_.installed.size(), 1u) << "a memtable becomes one table";
  const lsm::TableMeta& meta = host_.installed[0];
  EXPECT_EQ(meta.number, 100u) << "numbered by the host";
  EXPECT_EQ(meta.drange, 3u);
  EXPECT_EQ(meta.largest_sequence, newest.back().sequence);
  EXPECT_EQ(store_.live_tables(), 1u);
  // No snapshot: only the newest version of each key (deletions stay: older versions may
  // be in tables below).
  EXPECT_EQ(TableContents(meta), newest);
  EXPECT_EQ(MemContents(active_).size(), 0u) << "the active memtable is not touched";
}

TEST_F(FlushJobTest, KeepsTheVersionsLiveSnapshotsNeed) {
  auto mem = NewMemTable();
  for (int i = 0; i < 20; ++i) Write(mem, Key(i), "a");
  const lsm::SequenceNumber snap = sequences_.last_assigned();
  Write(mem, Key(5), "b");
  host_.snapshots = {snap};
  FlushJob job(options_, &host_, Sealed(mem));
  ASSERT_TRUE(job.Run().ok());
  ASSERT_EQ(host_.installed.size(), 1u);
  const std::vector<KeyVersion> got = TableContents(host_.installed[0]);
  ASSERT_EQ(got.size(), 21u) << "key 5's version at the snapshot is kept";
  EXPECT_EQ(got[5].value, "b");
  EXPECT_EQ(got[6].value, "a");
  EXPECT_EQ(got[6].key, Key(5));
}

TEST_F(FlushJobTest, DropsAnEmptyMemtable) {
  FlushJob job(options_, &host_, Sealed(NewMemTable()));
  ASSERT_TRUE(job.Run().ok());
  EXPECT_EQ(job.outcome(), FlushJob::Outcome::kDropped);
  EXPECT_EQ(host_.dropped, 1);
  EXPECT_EQ(host_.installs + host_.merges, 0);
  EXPECT_EQ(store_.tables_written(), 0u);
}

TEST_F(FlushJobTest, MergesASmallMemtableIntoTheActiveOne) {
  auto mem = NewMemTable();
  for (int round = 0; round < 5; ++round) {
    for (int i = 0; i < 3; ++i) Write(mem, Key(i), "v" + std::to_string(round));
  }
  const std::vector<KeyVersion> before = MemContents(mem);
  // Key 9 was written to the active memtable later: its index entry must stay.
  Write(active_, Key(9), "x");
  FlushJob job(options_, &host_, Sealed(mem));
  ASSERT_TRUE(job.Run().ok());
  EXPECT_EQ(job.outcome(), FlushJob::Outcome::kMerged);
  EXPECT_EQ(host_.merge_target_calls, 1);
  ASSERT_EQ(host_.merges, 1);
  EXPECT_EQ(host_.merged_into, active_);
  EXPECT_EQ(host_.merged_entries, 3u);
  EXPECT_TRUE(host_.relogged) << "no log: nothing to keep";
  EXPECT_EQ(host_.installs, 0);
  EXPECT_EQ(store_.tables_written(), 0u);
  // The newest version of each key, with its sequence number, is in the active memtable.
  const std::vector<KeyVersion> moved = MemContents(active_);
  ASSERT_EQ(moved.size(), 4u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(moved[i].key, Key(i));
    EXPECT_EQ(moved[i].value, "v4");
    EXPECT_EQ(moved[i].sequence, before[i * 5].sequence);
  }
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(index_.Lookup(Key(i))->memtable_id, active_->id()) << "repointed";
  }
  EXPECT_EQ(index_.Lookup(Key(9))->memtable_id, active_->id());
}

TEST_F(FlushJobTest, MergesIntoTheDrangesNextImmutableMemtable) {
  auto mem = NewMemTable();
  Write(mem, Key(1), "a");
  auto next = NewMemTable();
  Write(next, Key(2), "b");
  host_.merge_target = next;
  FlushJob job(options_, &host_, Sealed(mem));
  ASSERT_TRUE(job.Run().ok());
  EXPECT_EQ(job.outcome(), FlushJob::Outcome::kMerged);
  EXPECT_EQ(host_.merged_into, next);
  EXPECT_EQ(MemContents(next).size(), 2u);
  EXPECT_TRUE(MemContents(active_).empty()) << "the active memtable is not touched";
  EXPECT_EQ(index_.Lookup(Key(1))->memtable_id, next->id());
}

TEST_F(FlushJobTest, FlushesWhenTheSmallMemtableRuleDoesNotApply) {
  struct Case {
    const char* name;
    std::function<void(ImmutableMemTable*)> set_up;
  };
  const std::vector<Case> cases = {
      {"forced", [this](ImmutableMemTable*) { host_.forced = true; }},
      {"no_merge", [](ImmutableMemTable* imm) { imm->no_merge = true; }},
      {"rule off", [this](ImmutableMemTable*) { options_.merge_threshold_keys = 0; }},
      {"enough keys", [this](ImmutableMemTable*) { options_.merge_threshold_keys = 2; }},
      {"no Drange", [](ImmutableMemTable* imm) { imm->state = nullptr; }},
      {"large values", [this](ImmutableMemTable*) { options_.memtable_bytes = 64; }},
      {"retired Drange",
       [](ImmutableMemTable* imm) {
         DrangeState* ds = imm->state.get();
         MutexLock lock(&ds->mu);
         ds->retired = true;
       }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const FlushJobOptions saved = options_;
    host_ = FakeHost();
    host_.next_number += store_.tables_written();  // a table number is never reused
    state_ = std::make_shared<DrangeState>(active_);
    auto mem = NewMemTable();
    Write(mem, Key(1), std::string(40, 'x'));
    Write(mem, Key(2), std::string(40, 'y'));
    ImmutableMemTable imm = Sealed(mem);
    c.set_up(&imm);
    FlushJob job(options_, &host_, imm);
    const Status s = job.Run();
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(job.outcome(), FlushJob::Outcome::kFlushed);
    EXPECT_EQ(host_.merges, 0);
    EXPECT_EQ(host_.installs, 1);
    EXPECT_TRUE(MemContents(active_).empty());
    options_ = saved;
  }
}

TEST_F(FlushJobTest, MergedVersionsAreLoggedInTheTargetsLog) {
  InMemoryMemtableLog log;
  options_.log = &log;
  auto mem = NewMemTable();
  const lsm::SequenceNumber s1 = Write(mem, Key(1), "a");
  const lsm::SequenceNumber s2 = Write(mem, Key(2), "b", lsm::kTypeDeletion);
  FlushJob job(options_, &host_, Sealed(mem));
  ASSERT_TRUE(job.Run().ok());
  EXPECT_EQ(job.outcome(), FlushJob::Outcome::kMerged);
  EXPECT_TRUE(host_.relogged);
  const auto logs = log.Snapshot();
  ASSERT_EQ(logs.count(active_->id()), 1u);
  std::vector<LogEntry> entries;
  const LogParseResult r = ParseLogRecords(logs.at(active_->id()), &entries);
  EXPECT_EQ(r.records, 1u) << "one record";
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].memtable, active_->id());
  EXPECT_EQ(entries[0].sequence, s1);
  EXPECT_EQ(entries[0].key, Key(1));
  EXPECT_EQ(entries[0].value, "a");
  EXPECT_EQ(entries[1].sequence, s2);
  EXPECT_EQ(entries[1].type, lsm::kTypeDeletion);

  // A failed re-log still merges (part of it may be in the log), but says so.
  log.SetFailAppends(true);
  host_ = FakeHost();
  auto other = NewMemTable();
  Write(other, Key(3), "c");
  FlushJob failing(options_, &host_, Sealed(other));
  ASSERT_TRUE(failing.Run().ok());
  EXPECT_EQ(failing.outcome(), FlushJob::Outcome::kMerged);
  EXPECT_FALSE(host_.relogged);
  EXPECT_EQ(MemContents(active_).size(), 3u);
}

TEST_F(FlushJobTest, WaitsForWritesSealedIntoTheMemtable) {
  auto mem = NewMemTable();
  // A writer took its sequence before the memtable was sealed but has not added its entry.
  const lsm::SequenceNumber s = sequences_.Assign(1);
  ImmutableMemTable imm = Sealed(mem);
  ASSERT_EQ(imm.sealed, s);
  options_.merge_threshold_keys = 0;
  Status result;
  std::thread flusher([&] {
    FlushJob job(options_, &host_, imm);
    result = job.Run();
  });
  mem->Add(s, lsm::kTypeValue, Key(1), "late");
  sequences_.Finish(s, 1);
  flusher.join();
  ASSERT_TRUE(result.ok()) << result.ToString();
  EXPECT_EQ(host_.dropped, 0) << "the job looked before the write was in";
  ASSERT_EQ(host_.installed.size(), 1u);
  EXPECT_EQ(TableContents(host_.installed[0]),
            (std::vector<KeyVersion>{{Key(1), s, lsm::kTypeValue, "late"}}));
}

TEST_F(FlushJobTest, AFailedTableWriteChangesNothing) {
  auto mem = NewMemTable();
  for (int i = 0; i < 20; ++i) Write(mem, Key(i), "v");
  store_.FailNextWrites(1);
  FlushJob job(options_, &host_, Sealed(mem));
  const Status s = job.Run();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("flushing memtable " + std::to_string(mem->id())), std::string::npos)
      << s.ToString();
  EXPECT_EQ(job.outcome(), FlushJob::Outcome::kNone);
  EXPECT_EQ(host_.installs, 0);
  EXPECT_EQ(store_.live_tables(), 0u);
}

TEST_F(FlushJobTest, AFailedInstallIsReturned) {
  auto mem = NewMemTable();
  for (int i = 0; i < 20; ++i) Write(mem, Key(i), "v");
  host_.install_status = Status::IOError("MANIFEST append failed");
  FlushJob job(options_, &host_, Sealed(mem));
  const Status s = job.Run();
  EXPECT_EQ(s.code(), Status::Code::kIOError) << s.ToString();
  EXPECT_EQ(job.outcome(), FlushJob::Outcome::kNone);
  EXPECT_EQ(host_.installs, 1);
}

}  // namespace
}  // namespace nova::ltc
