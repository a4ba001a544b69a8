// Recovery of memtables from their logs (range_engine_recovery.cc, docs/durability.md).
// A "crash" here is an engine destroyed without flushing its memtables and a new one opened
// over the same table store and log (tests/crash_itest.sh kills real processes).
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/lsm/memory_table_store.h"
#include "ltc/engine/engine_model_test_util.h"
#include "ltc/engine/log_record.h"
#include "ltc/engine/memtable_log.h"
#include "ltc/engine/range_engine.h"
#include "tests/util/test_util.h"

namespace nova::ltc {
namespace {

using engine_model_test::Case;
using engine_model_test::ModelDriver;
using engine_model_test::TinyOptions;

EngineOptions WithLog(EngineOptions o, MemtableLog* log) {
  o.log = log;
  o.recovery_threads = 2;
  return o;
}

class RecoveryModelTest : public ::testing::TestWithParam<Case> {};

// Random operations with crashes every few hundred of them: after each, the engine holds
// exactly what the model does (every acknowledged write, nothing else), including batches,
// deletions, merged memtables and reorganized Dranges.
TEST_P(RecoveryModelTest, CrashesLoseNoAcknowledgedWrite) {
  const Case c = GetParam();
  const uint64_t seed = test::TestSeed(c.name);
  lsm::MemoryTableStore store;
  InMemoryMemtableLog log;
  auto engine = std::make_unique<RangeEngine>(WithLog(TinyOptions(c), &log), &store);
  ASSERT_TRUE(engine->Open().ok());
  ModelDriver driver(seed, c.zipfian);
  driver.Attach(engine.get());
  uint64_t rebuilt = 0, entries = 0, flushes = 0, merges = 0;
  constexpr int kOps = 9000;
  for (int i = 0; i < kOps; ++i) {
    ModelDriver::Action action;
    driver.RandomOp(i, &action);
    if (HasFatalFailure()) return;
    if (action == ModelDriver::Action::kReopen || i % 1500 == 1499) {
      driver.ReleaseSnapshots();
      const EngineStats before = engine->GetStats();
      flushes += before.flushes;
      merges += before.memtable_merges;
      engine.reset();  // no FlushAll: the memtables die here
      engine = std::make_unique<RangeEngine>(WithLog(TinyOptions(c), &log), &store);
      Status s = engine->Open();
      ASSERT_TRUE(s.ok()) << "reopen at op " << i << ": " << s.ToString();
      const EngineStats after = engine->GetStats();
      rebuilt += after.recovered_logs;
      entries += after.recovered_entries;
      driver.Attach(engine.get());
      driver.CheckLatest("after crash at op " + std::to_string(i));
      if (HasFatalFailure()) return;
    }
  }
  driver.CheckLatest("at the end");
  ASSERT_TRUE(engine->FlushAll().ok());
  driver.CheckLatest("after flushing everything");
  std::printf("%s: rebuilt %llu memtables (%llu entries); %llu flushes, %llu merges\n", c.name,
              static_cast<unsigned long long>(rebuilt), static_cast<unsigned long long>(entries),
              static_cast<unsigned long long>(flushes), static_cast<unsigned long long>(merges));
  EXPECT_GT(rebuilt, 0u);
  EXPECT_GT(entries, 0u);
  EXPECT_GT(flushes, 0u);
  // Flushed memtables' logs are dropped: what is left is at most the live memtables'.
  engine.reset();
  EXPECT_LE(log.Snapshot().size(), static_cast<size_t>(TinyOptions(c).memtables) + 2);
}

INSTANTIATE_TEST_SUITE_P(OptionSets, RecoveryModelTest,
                         ::testing::Values(Case{"recovery_theta1_uniform", 1, 1, false},
                                           Case{"recovery_theta8_zipfian", 8, 1, true},
                                           Case{"recovery_theta8_uniform_no_indexes", 8, 1, false,
                                                false, false}),
                         [](const auto& info) { return std::string(info.param.name); });

EngineOptions BigMemtables(MemtableLog* log, int dranges = 1) {
  EngineOptions o;
  o.memtable_bytes = 4 << 20;  // nothing flushes unless asked
  o.dranges = dranges;
  o.memtables = 4 * dranges;
  o.reorganize_every_writes = 200;
  o.log = log;
  return o;
}

std::string Value(int i) { return "value-" + std::to_string(i); }

// A WRITE torn by the crash: the records before it come back, the torn one does not, and
// the range works on.
TEST(RecoveryTest, TornTailIsIgnored) {
  lsm::MemoryTableStore store;
  InMemoryMemtableLog log;
  {
    RangeEngine engine(BigMemtables(&log), &store);
    ASSERT_TRUE(engine.Open().ok());
    for (int i = 0; i < 100; ++i) ASSERT_TRUE(engine.Put("k" + std::to_string(i), Value(i)).ok());
  }
  auto logs = log.Snapshot();
  ASSERT_EQ(logs.size(), 1u);
  const uint64_t mem = logs.begin()->first;
  ASSERT_TRUE(log.TearTail(mem, 3));  // the last record (k99) is cut short
  RangeEngine engine(BigMemtables(&log), &store);
  ASSERT_TRUE(engine.Open().ok());
  std::string v;
  for (int i = 0; i < 99; ++i) {
    ASSERT_TRUE(engine.Get("k" + std::to_string(i), &v).ok()) << i;
    EXPECT_EQ(v, Value(i));
  }
  EXPECT_TRUE(engine.Get("k99", &v).IsNotFound());
  const EngineStats st = engine.GetStats();
  EXPECT_EQ(st.recovered_logs, 1u);
  EXPECT_EQ(st.recovered_entries, 99u);
  EXPECT_GT(st.recovery_ignored_bytes, 0u);
  ASSERT_TRUE(engine.Put("k99", "again").ok());
  ASSERT_TRUE(engine.Get("k99", &v).ok());
  EXPECT_EQ(v, "again");
}

// An offloaded compaction job outlives the LTC that started it and then creates its outputs
// under the numbers that LTC handed it, after the next incarnation listed the tables: the
// new incarnation never gives its own tables those numbers (they would replace each other's
// files; seen in ltc_server_itest BigEntryITest, a kill -9 during offloaded compactions).
TEST(RecoveryTest, NumbersAnEarlierIncarnationMayHaveHandedOutAreNotReused) {
  lsm::MemoryTableStore store;
  InMemoryMemtableLog log;
  uint64_t largest = 0;
  {
    RangeEngine engine(BigMemtables(&log), &store);
    ASSERT_TRUE(engine.Open().ok());
    ASSERT_TRUE(engine.Put("old", "1").ok());
    ASSERT_TRUE(engine.FlushAll().ok());
    ASSERT_FALSE(store.StoredTables().empty());
    largest = store.StoredTables().back();
  }  // a crash while a job holding numbers largest + 1... still runs on a StoC
  RangeEngine engine(BigMemtables(&log), &store);
  ASSERT_TRUE(engine.Open().ok());
  ASSERT_TRUE(engine.Put("new", "2").ok());
  ASSERT_TRUE(engine.FlushAll().ok());
  // The old job now writes its outputs.
  const lsm::InternalKeyComparator icmp(leveldb::BytewiseComparator());
  for (uint64_t n = largest + 1; n <= largest + 4; ++n) {
    lsm::FragmentedTableBuilder b(&icmp, lsm::TableBuildOptions());
    b.Add(lsm::MakeInternalKey("zombie", 1, lsm::kTypeValue), "z");
    lsm::BuiltTable built;
    ASSERT_TRUE(b.Finish(&built).ok());
    lsm::TableMeta meta;
    meta.number = n;
    meta.layout = built.layout;
    Status s = store.WriteTable(n, built, &meta);
    EXPECT_TRUE(s.ok()) << "table " << n << " was reused: " << s.ToString();
  }
  std::string v;
  ASSERT_TRUE(engine.Get("old", &v).ok());
  EXPECT_EQ(v, "1");
  ASSERT_TRUE(engine.Get("new", &v).ok());
  EXPECT_EQ(v, "2");
}

// The same, when the incarnation that handed the numbers out died before recording any
// edit of its own: its skip must already be in the MANIFEST, or the next incarnation hands
// out the very numbers the orphaned job is writing.
TEST(RecoveryTest, NumbersSkippedAtOpenAreRecordedBeforeTheFirstFlush) {
  constexpr uint64_t kSkipped = 1ull << 24;  // range_engine.cc's kFileNumbersSkippedAtOpen
  lsm::MemoryTableStore store;
  InMemoryMemtableLog log;
  uint64_t largest = 0;
  {
    RangeEngine engine(BigMemtables(&log), &store);
    ASSERT_TRUE(engine.Open().ok());
    ASSERT_TRUE(engine.Put("old", "1").ok());
    ASSERT_TRUE(engine.FlushAll().ok());
    largest = store.StoredTables().back();
  }
  {
    // Opens (handing numbers past largest + kSkipped to a job, say), then dies at once.
    RangeEngine engine(BigMemtables(&log), &store);
    ASSERT_TRUE(engine.Open().ok());
  }
  RangeEngine engine(BigMemtables(&log), &store);
  ASSERT_TRUE(engine.Open().ok());
  ASSERT_TRUE(engine.Put("new", "2").ok());
  ASSERT_TRUE(engine.FlushAll().ok());
  const uint64_t first = store.StoredTables().back();
  EXPECT_GT(first, largest + 2 * kSkipped)
      << "the third incarnation's first table " << first
      << " may be a number the second one handed out";
  std::string v;
  ASSERT_TRUE(engine.Get("old", &v).ok());
  EXPECT_EQ(v, "1");
}

// A damaged record stops the replay of its log there: earlier records come back, later
// ones do not (they were after a write whose bytes cannot be trusted).
TEST(RecoveryTest, CorruptedRecordStopsReplay) {
  lsm::MemoryTableStore store;
  InMemoryMemtableLog log;
  size_t record_bytes = 0;
  {
    RangeEngine engine(BigMemtables(&log), &store);
    ASSERT_TRUE(engine.Open().ok());
    for (int i = 0; i < 50; ++i) {
      ASSERT_TRUE(engine.Put("k" + std::to_string(100 + i), Value(i)).ok());
      if (i == 0) record_bytes = log.Snapshot().begin()->second.size();
    }
  }
  const uint64_t mem = log.Snapshot().begin()->first;
  // All records have the same size: damage the value of record 30.
  ASSERT_TRUE(log.Corrupt(mem, 30 * record_bytes + record_bytes - 2));
  RangeEngine engine(BigMemtables(&log), &store);
  ASSERT_TRUE(engine.Open().ok());
  std::string v;
  for (int i = 0; i < 50; ++i) {
    Status s = engine.Get("k" + std::to_string(100 + i), &v);
    if (i < 30) {
      ASSERT_TRUE(s.ok()) << i;
      EXPECT_EQ(v, Value(i));
    } else {
      EXPECT_TRUE(s.IsNotFound()) << i;
    }
  }
  EXPECT_EQ(engine.GetStats().recovered_entries, 30u);
}

// A log that outlives its memtable (its drop failed, or the crash came first) is never
// replayed: its versions are older than what Levels 1+ hold by now.
TEST(RecoveryTest, ObsoleteLogIsNotReplayed) {
  lsm::MemoryTableStore store;
  InMemoryMemtableLog log;
  std::map<uint64_t, std::string> stale;
  {
    RangeEngine engine(BigMemtables(&log), &store);
    ASSERT_TRUE(engine.Open().ok());
    for (int i = 0; i < 50; ++i) ASSERT_TRUE(engine.Put("k" + std::to_string(i), "old").ok());
    stale = log.Snapshot();
    ASSERT_EQ(stale.size(), 1u);
    ASSERT_TRUE(engine.FlushAll().ok());
    for (int i = 0; i < 50; ++i) ASSERT_TRUE(engine.Put("k" + std::to_string(i), "new").ok());
    ASSERT_TRUE(engine.FlushAll().ok());
    EXPECT_TRUE(log.Snapshot().empty()) << "flushed memtables' logs are dropped";
  }
  for (const auto& [mem, bytes] : stale) ASSERT_TRUE(log.Append(mem, bytes).ok());
  RangeEngine engine(BigMemtables(&log), &store);
  ASSERT_TRUE(engine.Open().ok());
  std::string v;
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(engine.Get("k" + std::to_string(i), &v).ok());
    EXPECT_EQ(v, "new") << i;
  }
  EXPECT_EQ(engine.GetStats().recovered_logs, 0u);
  EXPECT_EQ(engine.GetStats().recovery_obsolete_logs, 1u);
  EXPECT_TRUE(log.Snapshot().empty()) << "the obsolete log is dropped at Open";
}

// A write whose record reached no log (too few LogCs to send it to) fails and is not
// applied: no reader may see a write that a crash would lose and that was never
// acknowledged. One that may have reached a log is applied (the test above).
TEST(RecoveryTest, FailedAppendThatReachedNoLogIsNotApplied) {
  lsm::MemoryTableStore store;
  InMemoryMemtableLog log;
  RangeEngine engine(BigMemtables(&log), &store);
  ASSERT_TRUE(engine.Open().ok());
  ASSERT_TRUE(engine.Put("a", "1").ok());
  log.SetFailAppends(true, /*reached=*/false);
  Status s = engine.Put("a", "2");
  EXPECT_EQ(s.code(), Status::Code::kIOError) << s.ToString();
  EXPECT_NE(s.ToString().find("not applied"), std::string::npos) << s.ToString();
  s = engine.Put("b", "2");
  EXPECT_FALSE(s.ok());
  std::string v;
  ASSERT_TRUE(engine.Get("a", &v).ok());
  EXPECT_EQ(v, "1");
  EXPECT_TRUE(engine.Get("b", &v).IsNotFound());
  log.SetFailAppends(false);
  ASSERT_TRUE(engine.Put("c", "3").ok());
  ASSERT_TRUE(engine.Get("c", &v).ok());
  EXPECT_EQ(v, "3");
}

// A log that a recovery could not see (its LogCs were unreachable; by the recovery rule it
// held no acknowledged write) must never be replayed by a later recovery: its versions
// would shadow newer acknowledged ones, and its memtable id must not be handed out again.
TEST(RecoveryTest, LogUnseenByARecoveryIsNeverReplayedLater) {
  lsm::MemoryTableStore store;
  InMemoryMemtableLog log;
  std::map<uint64_t, std::string> unseen;
  {
    RangeEngine engine(BigMemtables(&log), &store);
    ASSERT_TRUE(engine.Open().ok());
    for (int i = 0; i < 50; ++i) ASSERT_TRUE(engine.Put("k" + std::to_string(i), "lost").ok());
    unseen = log.Snapshot();
    ASSERT_EQ(unseen.size(), 1u);
  }  // a crash
  std::vector<uint64_t> ids;
  for (const auto& [mem, bytes] : unseen) ids.push_back(mem);
  log.Drop(ids);  // the next recovery cannot list it
  {
    RangeEngine engine(BigMemtables(&log), &store);
    ASSERT_TRUE(engine.Open().ok());
    for (int i = 0; i < 50; ++i) ASSERT_TRUE(engine.Put("k" + std::to_string(i), "new").ok());
    for (const auto& [mem, bytes] : log.Snapshot()) {
      EXPECT_EQ(unseen.count(mem), 0u) << "memtable id " << mem << " handed out again";
    }
  }  // another crash, before any flush
  for (const auto& [mem, bytes] : unseen) ASSERT_TRUE(log.Append(mem, bytes).ok());  // it is back
  RangeEngine engine(BigMemtables(&log), &store);
  ASSERT_TRUE(engine.Open().ok());
  std::string v;
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(engine.Get("k" + std::to_string(i), &v).ok());
    EXPECT_EQ(v, "new") << i;
  }
  EXPECT_EQ(engine.GetStats().recovery_obsolete_logs, 1u);
}

// A write whose log append fails gets the error (its outcome is unknown to the client: it
// is applied, since its record may be in a log), and its memtable is retired: the next
// writes go to a new memtable with a new log.
TEST(RecoveryTest, FailedLogAppendRetiresTheMemtable) {
  lsm::MemoryTableStore store;
  InMemoryMemtableLog log;
  RangeEngine engine(BigMemtables(&log), &store);
  ASSERT_TRUE(engine.Open().ok());
  ASSERT_TRUE(engine.Put("a", "1").ok());
  ASSERT_EQ(log.Snapshot().size(), 1u);
  const uint64_t first = log.Snapshot().begin()->first;
  log.SetFailAppends(true);
  Status s = engine.Put("b", "2");
  EXPECT_EQ(s.code(), Status::Code::kIOError) << s.ToString();
  std::string v;
  ASSERT_TRUE(engine.Get("b", &v).ok());
  EXPECT_EQ(v, "2");
  log.SetFailAppends(false);
  ASSERT_TRUE(engine.Put("c", "3").ok());
  ASSERT_TRUE(engine.Get("c", &v).ok());
  // (The retired memtable may be flushed, and its log dropped, at any moment.)
  auto logs = log.Snapshot();
  ASSERT_FALSE(logs.empty());
  EXPECT_GT(logs.rbegin()->first, first) << "the next write went to a new memtable and log";
  EXPECT_EQ(engine.GetStats().log_failures, 1u);
}

// Every LogC down for a while: each write fails, the memtables do not pile up past the
// budget (a failing write retires its memtable only when there is room), and writes work
// again once the log is back.
TEST(RecoveryTest, LogDownForManyWritesKeepsTheMemtableBudget) {
  lsm::MemoryTableStore store;
  InMemoryMemtableLog log;
  EngineOptions o = BigMemtables(&log);
  RangeEngine engine(o, &store);
  ASSERT_TRUE(engine.Open().ok());
  log.SetFailAppends(true);
  for (int i = 0; i < 500; ++i) {
    EXPECT_FALSE(engine.Put("k" + std::to_string(i), "v").ok());
    ASSERT_LE(engine.GetStats().immutable_memtables, o.memtables) << "after " << i << " writes";
  }
  log.SetFailAppends(false);
  ASSERT_TRUE(test::WaitFor([&] { return engine.Put("after", "ok").ok(); }));
  std::string v;
  ASSERT_TRUE(engine.Get("after", &v).ok());
  EXPECT_EQ(engine.GetStats().log_failures, 500u);
}

// An entry may name a memtable that has no log of its own (a batch's copy reached one log
// before the crash, the other memtable's log never got created): that memtable id must not
// be handed out again, or its new log would be dropped when the adopting memtable flushes.
// Entries of a memtable that has no log of its own, found in another memtable's log, are
// replayed again by a second recovery before that memtable flushes (their id is not among
// those a recovery records obsolete).
TEST(RecoveryTest, AbsorbedEntriesSurviveASecondCrash) {
  lsm::MemoryTableStore store;
  InMemoryMemtableLog log;
  std::string record;
  ltc::AppendLogRecord(&record,
                       {ltc::LogEntry{5, 1, 1, "a", "1"}, ltc::LogEntry{9, 2, 1, "b", "2"}});
  ASSERT_TRUE(log.Append(5, record).ok());
  for (int crash = 0; crash < 2; ++crash) {
    RangeEngine engine(BigMemtables(&log), &store);
    ASSERT_TRUE(engine.Open().ok());
    std::string v;
    ASSERT_TRUE(engine.Get("b", &v).ok()) << "after recovery " << crash + 1;
    EXPECT_EQ(v, "2");
  }
}

TEST(RecoveryTest, MemtableIdsNamedOnlyByEntriesAreNotReused) {
  lsm::MemoryTableStore store;
  InMemoryMemtableLog log;
  std::string record;
  ltc::AppendLogRecord(&record,
                       {ltc::LogEntry{5, 1, 1, "a", "1"}, ltc::LogEntry{9, 2, 1, "b", "2"}});
  ASSERT_TRUE(log.Append(5, record).ok());
  RangeEngine engine(BigMemtables(&log), &store);
  ASSERT_TRUE(engine.Open().ok());
  std::string v;
  ASSERT_TRUE(engine.Get("a", &v).ok());
  ASSERT_TRUE(engine.Get("b", &v).ok());
  EXPECT_EQ(v, "2");
  ASSERT_TRUE(engine.Put("c", "3").ok());
  for (const auto& [mem, bytes] : log.Snapshot()) {
    EXPECT_TRUE(mem == 5 || mem > 9) << "memtable id " << mem << " handed out again";
  }
  ASSERT_TRUE(engine.FlushAll().ok());
  EXPECT_TRUE(log.Snapshot().empty());
  ASSERT_TRUE(engine.Get("c", &v).ok());
}

// A batch spanning Dranges is appended whole to each memtable's log; if one copy is torn,
// the other gives back all of it: a batch is recovered entirely or not at all.
TEST(RecoveryTest, BatchAcrossDrangesSurvivesOneTornCopy) {
  lsm::MemoryTableStore store;
  InMemoryMemtableLog log;
  std::vector<std::string> keys;
  for (char c = 'a'; c <= 'z'; ++c) keys.push_back(std::string(1, c) + "-key");
  {
    RangeEngine engine(BigMemtables(&log, /*dranges=*/4), &store);
    ASSERT_TRUE(engine.Open().ok());
    for (int round = 0; round < 20; ++round) {  // enough writes to build 4 Dranges
      for (const auto& k : keys) ASSERT_TRUE(engine.Put(k, "v0").ok());
    }
    ASSERT_EQ(engine.GetStats().dranges, 4);
    ASSERT_TRUE(engine.Write({{lsm::kTypeValue, keys.front(), "batched"},
                              {lsm::kTypeValue, keys.back(), "batched"}})
                    .ok());
  }
  // The batch is the last record of two logs (one per Drange it touched).
  std::vector<uint64_t> holders;
  for (const auto& [mem, bytes] : log.Snapshot()) {
    std::vector<ltc::LogEntry> entries;
    ltc::ParseLogRecords(bytes, &entries);
    if (!entries.empty() && entries.back().value == "batched") holders.push_back(mem);
  }
  ASSERT_EQ(holders.size(), 2u);
  ASSERT_TRUE(log.TearTail(holders[0], 1));
  RangeEngine engine(BigMemtables(&log, 4), &store);
  ASSERT_TRUE(engine.Open().ok());
  std::string v;
  ASSERT_TRUE(engine.Get(keys.front(), &v).ok());
  EXPECT_EQ(v, "batched");
  ASSERT_TRUE(engine.Get(keys.back(), &v).ok());
  EXPECT_EQ(v, "batched");
}

// Writes after recovery get sequence numbers above every replayed one and new memtable ids
// (a second crash brings back both generations).
TEST(RecoveryTest, TwoCrashesInARow) {
  lsm::MemoryTableStore store;
  InMemoryMemtableLog log;
  for (int gen = 0; gen < 3; ++gen) {
    RangeEngine engine(BigMemtables(&log), &store);
    ASSERT_TRUE(engine.Open().ok());
    std::string v;
    for (int g = 0; g < gen; ++g) {
      ASSERT_TRUE(engine.Get("gen" + std::to_string(g), &v).ok()) << g;
      ASSERT_TRUE(engine.Get("shared", &v).ok());
      EXPECT_EQ(v, std::to_string(gen - 1));
    }
    ASSERT_TRUE(engine.Put("gen" + std::to_string(gen), "x").ok());
    ASSERT_TRUE(engine.Put("shared", std::to_string(gen)).ok());
  }
}

// A log whose recovery is refused unless the range has nothing to miss: LogCs that restarted
// without their memory copies and so cannot vouch for their listings (docs/durability.md).
class UnvouchedLog final : public MemtableLog {
 public:
  explicit UnvouchedLog(MemtableLog* base) : base_(base) {}
  using MemtableLog::Append;
  Status Append(uint64_t memtable, std::string_view records, bool* reached) override {
    return base_->Append(memtable, records, reached);
  }
  void Drop(const std::vector<uint64_t>& memtables) override { base_->Drop(memtables); }
  using MemtableLog::ReadAll;
  Status ReadAll(int threads, bool new_range, const ReadFilter& read,
                 std::vector<Recovered>* logs) override {
    if (refuse && !new_range) return Status::Unavailable("no LogC can vouch for its logs");
    return base_->ReadAll(threads, new_range, read, logs);
  }
  bool refuse = false;  // set by the test thread between engines only

 private:
  MemtableLog* const base_;  // must outlive this
};

// A range closed cleanly reopens without reading any log (the LogCs need not vouch), with
// every write; writes after CloseCleanly are refused. Once it served again, a crash makes
// the next Open need its logs again.
TEST(RecoveryTest, CleanlyClosedRangeReopensWithoutItsLogs) {
  lsm::MemoryTableStore store;
  InMemoryMemtableLog memory;
  UnvouchedLog log(&memory);
  {
    RangeEngine engine(BigMemtables(&log, 2), &store);
    ASSERT_TRUE(engine.Open().ok());
    for (int i = 0; i < 50; ++i) ASSERT_TRUE(engine.Put("k" + std::to_string(i), "v1").ok());
    Status s = engine.CloseCleanly();
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(engine.Put("late", "x").code(), Status::Code::kAborted);
    std::string v;
    ASSERT_TRUE(engine.Get("k7", &v).ok());  // reads go on
    EXPECT_EQ(v, "v1");
  }
  log.refuse = true;
  {
    RangeEngine engine(BigMemtables(&log, 2), &store);
    Status s = engine.Open();
    ASSERT_TRUE(s.ok()) << s.ToString();
    std::string v;
    for (int i = 0; i < 50; ++i) {
      ASSERT_TRUE(engine.Get("k" + std::to_string(i), &v).ok()) << i;
      EXPECT_EQ(v, "v1");
    }
    EXPECT_TRUE(engine.Get("late", &v).IsNotFound());
    ASSERT_TRUE(engine.Put("k3", "v2").ok());
  }  // a crash: k3's v2 is only in a log
  {
    RangeEngine engine(BigMemtables(&log, 2), &store);
    EXPECT_TRUE(engine.Open().IsUnavailable()) << "a crash after a clean reopen must need the logs";
  }
  log.refuse = false;
  RangeEngine engine(BigMemtables(&log, 2), &store);
  ASSERT_TRUE(engine.Open().ok());
  std::string v;
  ASSERT_TRUE(engine.Get("k3", &v).ok());
  EXPECT_EQ(v, "v2");
}

}  // namespace
}  // namespace nova::ltc
