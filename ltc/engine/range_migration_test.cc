// Live migration, the engine's part (range_migration.h, range_engine_migration.cc): the wire
// encodings, the source's pre-copy and hand-off under concurrent writers, and the
// destination's Open with the copied memtables. Source and destination share one table store
// and one log, as two LTCs share the StoCs and LogCs; memtables travel through the chunk
// encoding, as between two LTCs.
#include "ltc/engine/range_migration.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/coding.h"
#include "common/lsm/memory_table_store.h"
#include "ltc/engine/memtable_log.h"
#include "ltc/engine/range_engine.h"
#include "tests/util/test_util.h"

namespace nova::ltc {
namespace {

// The destination's comparator: copied memtables keep it (it outlives every engine here).
const lsm::InternalKeyComparator* Icmp() {
  static const lsm::InternalKeyComparator icmp(leveldb::BytewiseComparator());
  return &icmp;
}

// Every entry of `mem` (internal key -> value), in order.
std::vector<std::pair<std::string, std::string>> Entries(const MemTable& mem) {
  std::vector<std::pair<std::string, std::string>> out;
  std::unique_ptr<leveldb::Iterator> it(mem.NewIterator());
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    out.emplace_back(it->key().ToString(), it->value().ToString());
  }
  return out;
}

// Copies `mem` chunk by chunk (as the destination fetches it); *chunks counts them.
std::shared_ptr<MemTable> CopyMemtable(const MemTable& mem, size_t chunk_bytes,
                                       int* chunks = nullptr) {
  auto copy = std::make_shared<MemTable>(Icmp(), mem.id());
  std::string after, chunk;
  bool done = false;
  int n = 0;
  while (!done) {
    std::string last;
    EncodeMemtableChunk(mem, after, chunk_bytes, &chunk, &last, &done);
    uint64_t entries = 0;
    EXPECT_TRUE(DecodeMemtableChunk(chunk, copy.get(), &entries).ok());
    if (!chunk.empty()) after = last;
    ++n;
  }
  if (chunks != nullptr) *chunks = n;
  return copy;
}

std::vector<MigratedMemtable> CopyAll(const std::vector<MigratedMemtable>& mems) {
  std::vector<MigratedMemtable> out;
  for (const auto& m : mems) out.push_back(MigratedMemtable{CopyMemtable(*m.mem, 4096)});
  return out;
}

// The MigratedState a destination opens with after a hand-off: the bookkeeping of `handoff`
// and a copy of each of its memtables, taken from `precopied` (fetched before the hand-off)
// when there is one with its id.
std::shared_ptr<const MigratedState> Destination(const MigratedState& handoff,
                                                 const std::vector<MigratedMemtable>& precopied) {
  auto state = std::make_shared<MigratedState>(handoff);
  state->memtables.clear();
  std::map<uint64_t, std::shared_ptr<MemTable>> have;
  for (const auto& m : precopied) have[m.mem->id()] = m.mem;
  for (const auto& m : handoff.memtables) {
    auto it = have.find(m.mem->id());
    state->memtables.push_back(
        MigratedMemtable{it != have.end() ? it->second : CopyMemtable(*m.mem, 4096)});
  }
  return state;
}

EngineOptions Options(MemtableLog* log) {
  EngineOptions o;
  o.memtable_bytes = 16 << 10;
  o.memtables = 8;
  o.dranges = 2;
  o.reorganize_every_writes = 2000;
  o.l0_compaction_trigger = 1000;
  o.log = log;
  return o;
}

std::string Key(int i) { return "key" + std::to_string(100000 + i); }
std::string Value(int i, int version = 0) {
  return "value" + std::to_string(i) + "." + std::to_string(version) + std::string(40, 'x');
}

void Load(RangeEngine* e, int first, int count, int version = 0) {
  for (int i = first; i < first + count; ++i) {
    ASSERT_TRUE(e->Put(Key(i), Value(i, version)).ok()) << i;
  }
}

void ExpectLoaded(RangeEngine* e, int first, int count, int version = 0) {
  for (int i = first; i < first + count; ++i) {
    std::string v;
    Status s = e->Get(Key(i), &v);
    ASSERT_TRUE(s.ok()) << Key(i) << ": " << s.ToString();
    ASSERT_EQ(v, Value(i, version)) << Key(i);
  }
}

// ---- Encodings ------------------------------------------------------------------------

TEST(MemtableChunkTest, RoundTripAcrossChunks) {
  auto mem = std::make_shared<MemTable>(Icmp(), 7);
  lsm::SequenceNumber seq = 1;
  for (int i = 0; i < 500; ++i) {
    mem->Add(seq++, lsm::kTypeValue, Key(i % 200), Value(i));  // several versions per key
    if (i % 7 == 0) mem->Add(seq++, lsm::kTypeDeletion, Key(i % 200), "");
  }
  mem->Add(seq++, lsm::kTypeValue, Key(1000), "");  // an empty value
  int chunks = 0;
  auto copy = CopyMemtable(*mem, 300, &chunks);
  EXPECT_GT(chunks, 10);
  EXPECT_EQ(Entries(*copy), Entries(*mem));
  EXPECT_EQ(copy->id(), 7u);
  EXPECT_EQ(copy->num_entries(), mem->num_entries());
  EXPECT_EQ(copy->largest_sequence(), seq - 1);
  std::string v;
  EXPECT_EQ(copy->Get(Key(0), lsm::kMaxSequenceNumber, &v),
            mem->Get(Key(0), lsm::kMaxSequenceNumber, &v));

  // One chunk holds at least one entry however small max_bytes is.
  std::string chunk, last;
  bool done = true;
  EncodeMemtableChunk(*mem, "", 0, &chunk, &last, &done);
  EXPECT_FALSE(done);
  EXPECT_FALSE(chunk.empty());
  // Resuming after the last entry: nothing left.
  const std::string final_key = Entries(*mem).back().first;
  EncodeMemtableChunk(*mem, final_key, 1 << 20, &chunk, &last, &done);
  EXPECT_TRUE(done);
  EXPECT_TRUE(chunk.empty());
  // An empty memtable is one empty, final chunk.
  auto held = std::make_shared<MemTable>(Icmp(), 8);
  EncodeMemtableChunk(*held, "", 100, &chunk, &last, &done);
  EXPECT_TRUE(done);
  EXPECT_TRUE(chunk.empty());
}

TEST(MemtableChunkTest, MalformedChunksAreCorruption) {
  auto mem = std::make_shared<MemTable>(Icmp(), 1);
  for (int i = 0; i < 20; ++i) mem->Add(i + 1, lsm::kTypeValue, Key(i), Value(i));
  std::string chunk, last;
  bool done;
  EncodeMemtableChunk(*mem, "", 1 << 20, &chunk, &last, &done);
  ASSERT_TRUE(done);
  uint64_t entries;
  // Every cut inside an entry is caught; what came before stays added.
  for (size_t cut = 1; cut < chunk.size(); cut += 7) {
    auto copy = std::make_shared<MemTable>(Icmp(), 1);
    Status s = DecodeMemtableChunk(std::string_view(chunk).substr(0, cut), copy.get(), &entries);
    if (s.ok()) {
      EXPECT_EQ(copy->num_entries(), entries);  // the cut fell between entries
    } else {
      EXPECT_TRUE(s.IsCorruption()) << s.ToString();
      EXPECT_EQ(copy->num_entries(), entries);
    }
  }
  // A chunk applied twice (or out of order) would add entries twice.
  auto copy = std::make_shared<MemTable>(Icmp(), 1);
  ASSERT_TRUE(DecodeMemtableChunk(chunk, copy.get(), &entries).ok());
  EXPECT_EQ(entries, 20u);
  EXPECT_TRUE(DecodeMemtableChunk(chunk, copy.get(), &entries).IsCorruption());
  EXPECT_EQ(copy->num_entries(), 20u);
  // An internal key of an unknown type, and one shorter than its trailer.
  std::string bad;
  std::string ikey = lsm::MakeInternalKey("k", 5, lsm::kTypeValue);
  ikey[ikey.size() - lsm::kInternalKeyTrailerBytes] = 9;  // the type: the trailer's low byte
  PutLengthPrefixed(&bad, ikey);
  PutLengthPrefixed(&bad, "v");
  auto fresh = std::make_shared<MemTable>(Icmp(), 2);
  EXPECT_TRUE(DecodeMemtableChunk(bad, fresh.get(), &entries).IsCorruption());
  bad.clear();
  PutLengthPrefixed(&bad, "short");
  PutLengthPrefixed(&bad, "v");
  EXPECT_TRUE(DecodeMemtableChunk(bad, fresh.get(), &entries).IsCorruption());
  EXPECT_EQ(fresh->num_entries(), 0u);
}

TEST(MigratedMetaTest, RoundTrip) {
  MigratedState s;
  for (uint64_t id : {3, 9, 12}) {
    s.memtables.push_back(MigratedMemtable{std::make_shared<MemTable>(Icmp(), id)});
  }
  s.complete = true;
  s.next_memtable_id = 1ull << 40;
  s.absorbed[9] = {4, 5};
  s.absorbed[12] = {};
  s.unrecorded_obsolete = {6, 7, 8};
  s.last_sequence = lsm::kMaxSequenceNumber;
  const std::string wire = EncodeMigratedMeta(s);
  MigratedState d;
  d.memtables.push_back(MigratedMemtable{});  // left empty by Decode
  std::vector<uint64_t> ids;
  ASSERT_TRUE(DecodeMigratedMeta(wire, &d, &ids).ok());
  EXPECT_EQ(ids, (std::vector<uint64_t>{3, 9, 12}));
  EXPECT_TRUE(d.memtables.empty());
  EXPECT_TRUE(d.complete);
  EXPECT_EQ(d.next_memtable_id, s.next_memtable_id);
  EXPECT_EQ(d.absorbed, s.absorbed);
  EXPECT_EQ(d.unrecorded_obsolete, s.unrecorded_obsolete);
  EXPECT_EQ(d.last_sequence, s.last_sequence);

  MigratedState empty;
  ASSERT_TRUE(DecodeMigratedMeta(EncodeMigratedMeta(empty), &d, &ids).ok());
  EXPECT_FALSE(d.complete);
  EXPECT_TRUE(ids.empty());
  EXPECT_TRUE(d.absorbed.empty());
}

TEST(MigratedMetaTest, MalformedInputIsCorruption) {
  MigratedState s;
  s.memtables.push_back(MigratedMemtable{std::make_shared<MemTable>(Icmp(), 300)});
  s.complete = true;
  s.next_memtable_id = 301;
  s.absorbed[300] = {200, 201};
  s.unrecorded_obsolete = {250};
  s.last_sequence = 99999;
  const std::string wire = EncodeMigratedMeta(s);
  MigratedState d;
  std::vector<uint64_t> ids;
  for (size_t n = 0; n < wire.size(); ++n) {
    EXPECT_TRUE(DecodeMigratedMeta(wire.substr(0, n), &d, &ids).IsCorruption()) << n;
  }
  EXPECT_TRUE(DecodeMigratedMeta(wire + "x", &d, &ids).IsCorruption());
  std::string bad = wire;
  bad[0] = 2;  // an unknown version
  EXPECT_TRUE(DecodeMigratedMeta(bad, &d, &ids).IsCorruption());
  bad = wire;
  bad[1] = 5;  // complete is 0 or 1
  EXPECT_TRUE(DecodeMigratedMeta(bad, &d, &ids).IsCorruption());
  // A count far beyond the input is refused before anything is allocated for it.
  std::string huge;
  huge.push_back(1);
  huge.push_back(0);
  PutVarint64(&huge, 1);
  PutVarint64(&huge, 1);
  PutVarint32(&huge, 0xffffffffu);
  EXPECT_TRUE(DecodeMigratedMeta(huge, &d, &ids).IsCorruption());
}

// ---- Source and destination -----------------------------------------------------------

// Writers on disjoint keys: each remembers the last value acknowledged per key, and whether
// a write that started after the hand-off returned succeeded.
class Writers {
 public:
  Writers(RangeEngine* e, int threads, int per_thread) : e_(e) {
    last_.resize(threads);
    for (int t = 0; t < threads; ++t) {
      threads_.emplace_back([this, t, per_thread] {
        for (int i = 0; i < per_thread; ++i) {
          const int key = t * 100 + i % 100;  // 100 keys per thread, rewritten
          const bool after = handed_off_.load();
          const std::string v = Value(key, i);
          Status s = e_->Put(Key(key), v);
          if (s.ok()) {
            last_[t][key] = v;
            acked_.fetch_add(1);
            if (after) wrong_.fetch_add(1);
          } else if (s.IsFenced()) {
            fenced_.fetch_add(1);
            return;
          } else {
            other_.fetch_add(1);
            return;
          }
        }
      });
    }
  }
  ~Writers() { Join(); }
  void Join() {
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  void MarkHandedOff() { handed_off_ = true; }
  uint64_t acked() const { return acked_.load(); }
  // After Join: every acknowledged value, by key.
  std::map<int, std::string> Expected() const {
    std::map<int, std::string> all;
    for (const auto& m : last_) all.insert(m.begin(), m.end());
    return all;
  }
  uint64_t wrong() const { return wrong_.load(); }
  uint64_t fenced() const { return fenced_.load(); }
  uint64_t other() const { return other_.load(); }

 private:
  RangeEngine* const e_;
  std::vector<std::map<int, std::string>> last_;  // per thread: only it writes its map
  std::atomic<bool> handed_off_{false};
  std::atomic<uint64_t> acked_{0}, wrong_{0}, fenced_{0}, other_{0};
  std::vector<std::thread> threads_;
};

void ExpectValues(RangeEngine* e, const std::map<int, std::string>& expected) {
  for (const auto& [key, value] : expected) {
    std::string v;
    Status s = e->Get(Key(key), &v);
    ASSERT_TRUE(s.ok()) << Key(key) << ": " << s.ToString();
    ASSERT_EQ(v, value) << Key(key);
  }
}

void RunConcurrentMigration(bool with_log) {
  lsm::MemoryTableStore store;
  InMemoryMemtableLog log;
  MemtableLog* const l = with_log ? &log : nullptr;
  auto source = std::make_unique<RangeEngine>(Options(l), &store);
  ASSERT_TRUE(source->Open().ok());
  Load(source.get(), 0, 300);  // some history in tables
  ASSERT_TRUE(source->FlushAll().ok());

  constexpr int kThreads = 4, kPerThread = 100000;  // far more than the test lets them write
  Writers writers(source.get(), kThreads, kPerThread);
  ASSERT_TRUE(test::WaitFor([&] { return writers.acked() >= 2000; }, std::chrono::seconds(30)));
  ASSERT_TRUE(source->BeginMigrationOut().ok());
  const uint64_t flushes_at_begin = source->GetStats().flushes;
  std::vector<MigratedMemtable> exported;
  ASSERT_TRUE(source->ExportImmutables(&exported).ok());
  // (Writers this fast stall at once, and the hold gives way to them: the export may even
  // find every immutable memtable flushed. The other tests export deterministically.)
  const std::vector<MigratedMemtable> precopied = CopyAll(exported);
  const uint64_t acked_at_export = writers.acked();
  ASSERT_TRUE(test::WaitFor([&] { return writers.acked() >= acked_at_export + 2000; },
                            std::chrono::seconds(30)));
  MigratedState handoff;
  ASSERT_TRUE(source->Handoff(&handoff).ok());
  writers.MarkHandedOff();
  EXPECT_TRUE(source->handed_off());
  writers.Join();
  EXPECT_EQ(writers.wrong(), 0u) << "a write that started after the hand-off succeeded";
  EXPECT_EQ(writers.other(), 0u);
  EXPECT_GT(writers.fenced(), 0u);  // the writers were still writing (kPerThread is large)
  // Nothing was written after the hand-off: the source's sequence did not move.
  EXPECT_EQ(source->GetStats().last_sequence, handoff.last_sequence);
  EXPECT_TRUE(handoff.complete);
  // With room for 4 memtables per Drange and writers that never stall for long, the hold
  // kept most immutables; a stalled writer may have released a few.
  std::cout << "flushes during the migration: " << source->GetStats().flushes - flushes_at_begin
            << ", exported " << exported.size() << ", handed off " << handoff.memtables.size()
            << std::endl;

  const uint64_t read_before = log.bytes_read();
  EngineOptions dest_options = Options(l);
  dest_options.migrated = Destination(handoff, precopied);
  RangeEngine dest(dest_options, &store);
  ASSERT_TRUE(dest.Open().ok());
  ExpectValues(&dest, writers.Expected());
  const EngineStats st = dest.GetStats();
  EXPECT_GT(st.migrated_memtables, 0u);
  EXPECT_GT(st.migrated_entries, 0u);
  EXPECT_EQ(st.recovered_log_bytes, 0u);  // every memtable was copied: no log was read
  EXPECT_EQ(log.bytes_read(), read_before);
  EXPECT_GT(st.last_sequence, handoff.last_sequence - 1);
  // The destination serves on, and its flushes drop the adopted memtables' logs.
  ASSERT_TRUE(dest.Put(Key(0), "new").ok());
  source.reset();  // handed off: closes without writing (or hanging)
  ASSERT_TRUE(dest.FlushAll().ok());
  if (with_log) {
    const auto logs = log.Snapshot();
    for (const auto& m : handoff.memtables) {
      EXPECT_EQ(logs.count(m.mem->id()), 0u) << "log of adopted memtable " << m.mem->id();
    }
  }
  // And a reopen (recovery of the destination) sees the same.
  std::map<int, std::string> expected = writers.Expected();
  expected[0] = "new";
  ExpectValues(&dest, expected);
}

TEST(RangeMigrationTest, ConcurrentWritersLoseNothingAndNoneSucceedsAfterHandoff) {
  RunConcurrentMigration(/*with_log=*/true);
}

TEST(RangeMigrationTest, WithoutLogsTheCopiesAreEverything) {
  RunConcurrentMigration(/*with_log=*/false);
}

// The hold gives way: a memtable flushed at the source after it was exported is marked
// obsolete by the flush's edit, and the destination drops its copy, which would otherwise
// shadow the newer version compacted below Level 0.
void RunFlushAfterExport(bool with_log, bool complete) {
  lsm::MemoryTableStore store;
  InMemoryMemtableLog log;
  MemtableLog* const l = with_log ? &log : nullptr;
  EngineOptions o = Options(l);
  o.dranges = 1;
  o.l0_compaction_trigger = 1;  // every Level-0 table moves down at once
  RangeEngine source(o, &store);
  ASSERT_TRUE(source.Open().ok());
  Load(&source, 0, 50, /*version=*/1);
  ASSERT_TRUE(source.BeginMigrationOut().ok());
  std::vector<MigratedMemtable> exported;
  ASSERT_TRUE(source.ExportImmutables(&exported).ok());
  ASSERT_EQ(exported.size(), 1u);
  const std::vector<MigratedMemtable> precopied = CopyAll(exported);
  // Held: nothing flushes on its own.
  EXPECT_EQ(source.GetStats().flushes, 0u);
  EXPECT_EQ(source.GetStats().immutable_memtables, 1);
  // FlushAll gives way to... itself: the exported memtable becomes a table, then version 2
  // too, and compaction moves both below Level 0.
  ASSERT_TRUE(source.FlushAll().ok());
  Load(&source, 0, 50, /*version=*/2);
  ASSERT_TRUE(source.FlushAll().ok());
  ASSERT_TRUE(source.WaitForCompactions().ok());
  EXPECT_EQ(source.GetStats().level_tables[0], 0u);

  std::shared_ptr<const MigratedState> state;
  if (complete) {
    MigratedState handoff;
    ASSERT_TRUE(source.Handoff(&handoff).ok());
    // The destination kept its early copy (say a flush ended during the hand-off).
    auto s = std::make_shared<MigratedState>(*Destination(handoff, precopied));
    s->memtables.insert(s->memtables.begin(), precopied.begin(), precopied.end());
    state = s;
  } else {
    auto s = std::make_shared<MigratedState>();
    s->memtables = precopied;  // the source died before the hand-off
    state = s;
  }
  EngineOptions dest_options = o;
  dest_options.migrated = state;
  RangeEngine dest(dest_options, &store);
  ASSERT_TRUE(dest.Open().ok());
  EXPECT_EQ(dest.GetStats().migrated_memtables, complete ? state->memtables.size() - 1 : 0u);
  ExpectLoaded(&dest, 0, 50, /*version=*/2);
}

TEST(RangeMigrationTest, FlushAfterExportDropsTheCopy) {
  RunFlushAfterExport(/*with_log=*/true, /*complete=*/false);
  RunFlushAfterExport(/*with_log=*/true, /*complete=*/true);
}

TEST(RangeMigrationTest, FlushAfterExportDropsTheCopyWithoutLogs) {
  RunFlushAfterExport(/*with_log=*/false, /*complete=*/false);
  RunFlushAfterExport(/*with_log=*/false, /*complete=*/true);
}

// No hand-off (the source died after the pre-copy): the copied immutables are adopted, the
// logs of the others replayed; logs of adopted memtables are not read but are dropped once
// the destination flushed them.
TEST(RangeMigrationTest, IncompleteStateReplaysTheOtherLogs) {
  lsm::MemoryTableStore store;
  InMemoryMemtableLog log;
  EngineOptions o = Options(&log);
  o.memtables = 64;  // no writer stalls: the hold keeps every exported memtable
  auto source = std::make_unique<RangeEngine>(o, &store);
  ASSERT_TRUE(source->Open().ok());
  Load(source.get(), 0, 400);
  ASSERT_TRUE(source->BeginMigrationOut().ok());
  std::vector<MigratedMemtable> exported;
  ASSERT_TRUE(source->ExportImmutables(&exported).ok());
  ASSERT_FALSE(exported.empty());
  Load(source.get(), 400, 200);               // into new active memtables: only in their logs
  Load(source.get(), 0, 100, /*version=*/3);  // newer versions of copied keys
  auto state = std::make_shared<MigratedState>();
  state->memtables = CopyAll(exported);
  std::set<uint64_t> adopted_ids;
  uint64_t adopted_log_bytes = 0, all_log_bytes = 0;
  for (const auto& m : state->memtables) adopted_ids.insert(m.mem->id());
  for (const auto& [id, bytes] : log.Snapshot()) {
    all_log_bytes += bytes.size();
    if (adopted_ids.count(id) != 0) adopted_log_bytes += bytes.size();
  }
  ASSERT_GT(adopted_log_bytes, 0u);
  source.reset();  // dies: no flush

  const uint64_t read_before = log.bytes_read();
  EngineOptions dest_options = o;
  dest_options.migrated = state;
  RangeEngine dest(dest_options, &store);
  ASSERT_TRUE(dest.Open().ok());
  ExpectLoaded(&dest, 0, 100, 3);
  ExpectLoaded(&dest, 100, 500);
  const EngineStats st = dest.GetStats();
  EXPECT_EQ(st.migrated_memtables, exported.size());
  EXPECT_GT(st.recovered_logs, 0u);
  EXPECT_EQ(st.recovered_log_bytes, all_log_bytes - adopted_log_bytes);
  EXPECT_EQ(log.bytes_read() - read_before, all_log_bytes - adopted_log_bytes);
  ASSERT_TRUE(dest.FlushAll().ok());
  for (uint64_t id : adopted_ids) EXPECT_EQ(log.Snapshot().count(id), 0u) << id;
  EXPECT_TRUE(log.Snapshot().empty());
}

// An abandoned move: the source resumes writes, flushes and merges after the hand-off.
TEST(RangeMigrationTest, EndMigrationOutResumes) {
  lsm::MemoryTableStore store;
  InMemoryMemtableLog log;
  RangeEngine engine(Options(&log), &store);
  ASSERT_TRUE(engine.Open().ok());
  Load(&engine, 0, 300);
  EXPECT_FALSE(engine.handed_off());
  ASSERT_TRUE(engine.BeginMigrationOut().ok());
  ASSERT_TRUE(engine.BeginMigrationOut().ok());  // restarts nothing
  MigratedState state;
  ASSERT_TRUE(engine.Handoff(&state).ok());
  EXPECT_TRUE(engine.handed_off());
  const uint64_t logs_before = log.Snapshot().size();
  const uint64_t flushes = engine.GetStats().flushes;
  Status s = engine.Put(Key(1), "refused");
  EXPECT_TRUE(s.IsFenced()) << s.ToString();
  // FlushAll and WaitForCompactions answer at once, and nothing is flushed.
  EXPECT_TRUE(engine.FlushAll().IsFenced());
  EXPECT_TRUE(engine.WaitForCompactions().IsFenced());
  EXPECT_EQ(engine.GetStats().flushes, flushes);
  EXPECT_EQ(log.Snapshot().size(), logs_before);
  ExpectLoaded(&engine, 0, 300);  // reads still work
  engine.EndMigrationOut();
  engine.EndMigrationOut();  // a no-op
  EXPECT_FALSE(engine.handed_off());
  Load(&engine, 300, 300);
  ASSERT_TRUE(engine.FlushAll().ok());
  EXPECT_GT(engine.GetStats().flushes, flushes);
  EXPECT_TRUE(log.Snapshot().empty());
  ExpectLoaded(&engine, 0, 600);
}

// Writers far beyond the memtable budget during a migration out: the hold gives way to a
// writer waiting for room, so they never hang.
// A source whose hand-off is undone (the destination died) serves on: writers refused
// while it was handed off retry, and after several begin/hand-off/undo cycles every
// acknowledged value is what the source reads (the sequence watermark, the lookup index and
// the held flushes all survive the cycles).
TEST(RangeMigrationTest, UndoneHandoffsServeEveryAcknowledgedWrite) {
  lsm::MemoryTableStore store;
  InMemoryMemtableLog log;
  auto engine = std::make_unique<RangeEngine>(Options(&log), &store);
  ASSERT_TRUE(engine->Open().ok());
  constexpr int kThreads = 4;
  std::vector<std::map<int, std::string>> last(kThreads);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> acked{0}, refused{0}, failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; !stop.load() && i < 1000000; ++i) {
        const int key = t * 100 + i % 100;
        const std::string v = Value(key, i);
        Status s = engine->Put(Key(key), v);
        if (s.ok()) {
          last[t][key] = v;
          acked.fetch_add(1);
        } else if (s.IsFenced()) {
          refused.fetch_add(1);
          std::this_thread::yield();
        } else {
          failed.fetch_add(1);
          return;
        }
      }
    });
  }
  for (int cycle = 0; cycle < 3; ++cycle) {
    const uint64_t start = acked.load();
    ASSERT_TRUE(test::WaitFor([&] { return acked.load() >= start + 2000; },
                              std::chrono::seconds(30)));
    // Begun several times before the hand-off (each destination that dies before it leaves
    // the migration begun), with writers stalling on the held flushes meanwhile.
    for (int begin = 0; begin < 3; ++begin) {
      ASSERT_TRUE(engine->BeginMigrationOut().ok());
      std::vector<MigratedMemtable> exported;
      ASSERT_TRUE(engine->ExportImmutables(&exported).ok());
      const uint64_t at = acked.load();
      ASSERT_TRUE(test::WaitFor([&] { return acked.load() >= at + 3000; },
                                std::chrono::seconds(30)));
    }
    MigratedState state;
    ASSERT_TRUE(engine->Handoff(&state).ok());
    const uint64_t refused_before = refused.load();
    ASSERT_TRUE(test::WaitFor([&] { return refused.load() > refused_before; },
                              std::chrono::seconds(30)));
    engine->EndMigrationOut();
  }
  const uint64_t start = acked.load();
  ASSERT_TRUE(test::WaitFor([&] { return acked.load() >= start + 2000; },
                            std::chrono::seconds(30)));
  stop = true;
  for (auto& t : threads) t.join();
  EXPECT_EQ(failed.load(), 0u);
  std::map<int, std::string> expected;
  for (const auto& m : last) expected.insert(m.begin(), m.end());
  ExpectValues(engine.get(), expected);
  ASSERT_TRUE(engine->FlushAll().ok());
  ExpectValues(engine.get(), expected);
  // And after a restart (recovery from the tables and the logs).
  engine.reset();
  RangeEngine reopened(Options(&log), &store);
  ASSERT_TRUE(reopened.Open().ok());
  ExpectValues(&reopened, expected);
}

TEST(RangeMigrationTest, HoldGivesWayToStalledWriters) {
  lsm::MemoryTableStore store;
  InMemoryMemtableLog log;
  EngineOptions o = Options(&log);
  o.memtables = 4;
  o.drange_merge_threshold_keys = 1 << 20;  // without a migration every memtable merges
  RangeEngine engine(o, &store);
  ASSERT_TRUE(engine.Open().ok());
  Load(&engine, 0, 200);
  ASSERT_TRUE(engine.BeginMigrationOut().ok());
  // (A merge already under way may finish: the export waits for it.)
  std::vector<MigratedMemtable> exported;
  ASSERT_TRUE(engine.ExportImmutables(&exported).ok());
  const EngineStats begin = engine.GetStats();
  Load(&engine, 0, 5000, /*version=*/1);  // ~20 memtables' worth
  const EngineStats end = engine.GetStats();
  EXPECT_GT(end.stalls, begin.stalls);
  EXPECT_GT(end.flushes, begin.flushes);
  EXPECT_EQ(end.memtable_merges, begin.memtable_merges);  // no merge during a migration
  ExpectLoaded(&engine, 0, 5000, 1);
  // Closing in the middle of a migration does not hang either.
}

// Handed off with held memtables and without: the destructor returns.
TEST(RangeMigrationTest, DestructorDoesNotHang) {
  lsm::MemoryTableStore store;
  InMemoryMemtableLog log;
  {
    RangeEngine engine(Options(&log), &store);
    ASSERT_TRUE(engine.Open().ok());
    Load(&engine, 0, 500);
    ASSERT_TRUE(engine.BeginMigrationOut().ok());
  }
  {
    RangeEngine engine(Options(&log), &store);
    ASSERT_TRUE(engine.Open().ok());
    Load(&engine, 500, 500);
    MigratedState state;
    ASSERT_TRUE(engine.Handoff(&state).ok());
  }
  RangeEngine engine(Options(&log), &store);
  ASSERT_TRUE(engine.Open().ok());
  ExpectLoaded(&engine, 0, 1000);
}

TEST(RangeMigrationTest, MigrationNeedsAnOpenRange) {
  lsm::MemoryTableStore store;
  RangeEngine engine(Options(nullptr), &store);
  EXPECT_FALSE(engine.BeginMigrationOut().ok());
  std::vector<MigratedMemtable> out;
  EXPECT_EQ(engine.ExportImmutables(&out).code(), Status::Code::kIllegalState);
  ASSERT_TRUE(engine.Open().ok());
  EXPECT_EQ(engine.ExportImmutables(&out).code(), Status::Code::kIllegalState);  // not begun
}

}  // namespace
}  // namespace nova::ltc
