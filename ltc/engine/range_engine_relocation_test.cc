// Relocation of table copies off evacuated StoCs and sweeps of garbage table files
// (RangeEngine::SetEvacuatedStocs, RequestSweep; range_engine_relocation.cc), over a
// MemoryTableStore in StoC mode (fake StoC ids 1..4).
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "common/lsm/compaction_job.h"
#include "common/lsm/memory_table_store.h"
#include "common/lsm/table_meta.h"
#include "ltc/engine/compaction_offloader.h"
#include "ltc/engine/range_engine.h"
#include "tests/util/test_util.h"

namespace nova::ltc {
namespace {

const std::vector<uint32_t> kStocs = {1, 2, 3, 4};
constexpr uint32_t kEvacuated = 3;

std::string Key(int k) {
  char buf[16];
  snprintf(buf, sizeof(buf), "k%06d", k);
  return buf;
}

EngineOptions SmallOptions() {
  EngineOptions o;
  o.memtable_bytes = 16 << 10;
  o.memtables = 8;
  o.dranges = 2;
  o.sstable_bytes = 32 << 10;
  o.l0_compaction_trigger = 2;
  o.level1_bytes = 64 << 10;
  o.compaction_threads = 2;
  o.scatter_width = 3;
  o.relocation_bytes_per_sec = 0;
  o.sweep_interval = std::chrono::milliseconds(0);
  return o;
}

// Every copy of every table in the shape.
uint64_t CopiesInShape(const EngineShape& shape, const std::function<bool(uint32_t)>& on) {
  uint64_t n = 0;
  for (const auto& level : shape.levels) {
    for (const lsm::TableMeta& t : level) n += lsm::CopiesOn(t, on);
  }
  return n;
}

std::set<uint64_t> NumbersInShape(const EngineShape& shape) {
  std::set<uint64_t> out;
  for (const auto& level : shape.levels) {
    for (const lsm::TableMeta& t : level) out.insert(t.number);
  }
  return out;
}

auto OnEvacuated = [](uint32_t s) { return s == kEvacuated; };
auto OnAny = [](uint32_t) { return true; };

// Writes keys [0, n) with value "v<round>-<k>".
void WriteRound(RangeEngine* e, int n, int round) {
  for (int k = 0; k < n; ++k) {
    ASSERT_TRUE(e->Put(Key(k), "v" + std::to_string(round) + "-" + std::to_string(k) +
                                   std::string(100, 'x'))
                    .ok());
  }
}

void ExpectRound(RangeEngine* e, int n, int round) {
  for (int k = 0; k < n; ++k) {
    std::string v;
    Status s = e->Get(Key(k), &v);
    ASSERT_TRUE(s.ok()) << Key(k) << ": " << s.ToString();
    ASSERT_EQ(v.substr(0, v.find('x')), "v" + std::to_string(round) + "-" + std::to_string(k));
  }
}

bool Relocated(RangeEngine* e) {
  RelocationProgress p = e->GetRelocationProgress();
  return p.copies_at_risk == 0 && p.idle;
}

// A relocation hook that holds the first relocation until released.
class Gate {
 public:
  void Enter(uint64_t number) {
    std::unique_lock<std::mutex> l(mu_);
    if (used_) return;
    used_ = true;
    held_ = number;
    entered_ = true;
    cv_.notify_all();
    cv_.wait(l, [&] { return open_; });
  }
  void Open() {
    std::lock_guard<std::mutex> l(mu_);
    open_ = true;
    cv_.notify_all();
  }
  bool entered() {
    std::lock_guard<std::mutex> l(mu_);
    return entered_;
  }
  uint64_t held() {
    std::lock_guard<std::mutex> l(mu_);
    return held_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool used_ = false, entered_ = false, open_ = false;
  uint64_t held_ = 0;
};

// Runs offloaded compaction jobs at once, on the same store (as a StoC would).
class InlineOffloader final : public CompactionOffloader {
 public:
  explicit InlineOffloader(lsm::TableStore* store) : store_(store) {}
  Status Run(lsm::CompactionJob job, lsm::CompactionJobResult* result) override {
    return lsm::RunCompactionJob(job, &icmp_, store_, result);
  }

 private:
  lsm::TableStore* const store_;
  const lsm::InternalKeyComparator icmp_{leveldb::BytewiseComparator()};
};

// Parameter: compactions are offloaded.
class RelocationLoadTest : public ::testing::TestWithParam<bool> {};

TEST(CopiesOnTest, CountsReplicasFilterAndParityWithBytes) {
  lsm::TableMeta t;
  t.fragments = {{{1, 10, 0, 5}, {2, 11, 0, 5}}, {}, {{3, 12, 0, 7}}};
  t.filter = {{3, 13, 0, 4}, {4, 14, 0, 0}};  // the second holds no bytes
  t.parity = {{4, 15, 0, 7}};
  EXPECT_EQ(lsm::CopiesOn(t, [](uint32_t s) { return s == 3; }), 2u);
  EXPECT_EQ(lsm::CopiesOn(t, [](uint32_t s) { return s == 4; }), 1u);
  EXPECT_EQ(lsm::CopiesOn(t, [](uint32_t s) { return s == 9; }), 0u);
  EXPECT_EQ(lsm::CopiesOn(t, OnAny), 5u);
}

TEST_P(RelocationLoadTest, MovesEveryCopyOffWhileWritesFlushesAndCompactionsRun) {
  const uint64_t seed = test::TestSeed("RelocationUnderLoad");
  lsm::MemoryTableStore store(kStocs);
  InlineOffloader offloader(&store);
  EngineOptions o = SmallOptions();
  if (GetParam()) o.compaction_offloader = &offloader;
  o.level1_bytes = 1 << 20;  // Level 1 holds the cold tables below
  RangeEngine engine(o, &store);
  ASSERT_TRUE(engine.Open().ok());
  // Keys [0, kKeys) are rewritten throughout; [kKeys, 2 kKeys) only now, so their tables
  // stay (no compaction touches them) and must be relocated, not rewritten.
  constexpr int kKeys = 400;
  WriteRound(&engine, 2 * kKeys, 0);
  ASSERT_TRUE(engine.FlushAll().ok());
  ASSERT_TRUE(engine.WaitForCompactions().ok());
  ASSERT_GT(CopiesInShape(engine.GetShape(), OnEvacuated), 0u);

  std::atomic<bool> done{false};
  std::atomic<int> errors{0};
  std::thread writer([&] {
    std::mt19937_64 rnd(seed);
    for (int r = 1; r <= 40; ++r) {
      for (int i = 0; i < kKeys; ++i) {
        const int k = static_cast<int>(rnd() % kKeys);
        if (!engine.Put(Key(k), "v" + std::to_string(r) + "-" + std::to_string(k)).ok()) ++errors;
      }
      if (r % 3 == 0 && !engine.FlushAll().ok()) ++errors;
    }
    done = true;
  });
  std::thread reader([&] {
    std::mt19937_64 rnd(seed + 1);
    while (!done) {
      const int k = static_cast<int>(rnd() % (2 * kKeys));
      std::string v;
      Status s = engine.Get(Key(k), &v);
      if (!s.ok() || v.rfind("v", 0) != 0) {
        ++errors;
        ADD_FAILURE() << Key(k) << ": " << s.ToString();
      }
    }
    std::unique_ptr<leveldb::Iterator> it(engine.NewIterator());
    int n = 0;
    for (it->SeekToFirst(); it->Valid(); it->Next()) ++n;
    if (!it->status().ok() || n != 2 * kKeys) {
      ++errors;
      ADD_FAILURE() << "scan saw " << n << " keys: " << it->status().ToString();
    }
  });
  // New copies avoid the StoC from now on; the old ones move.
  store.SetStocs({1, 2, 4});
  engine.SetEvacuatedStocs({kEvacuated});
  writer.join();
  reader.join();
  EXPECT_EQ(errors.load(), 0) << "seed " << seed;
  ASSERT_TRUE(engine.FlushAll().ok());
  ASSERT_TRUE(engine.WaitForCompactions().ok());
  ASSERT_TRUE(test::WaitFor([&] { return Relocated(&engine); }));
  EXPECT_EQ(CopiesInShape(engine.GetShape(), OnEvacuated), 0u);
  // Every old copy went with its old metadata's last reader.
  ASSERT_TRUE(test::WaitFor([&] { return store.CopiesOnStoc(kEvacuated) == 0; }))
      << store.CopiesOnStoc(kEvacuated);
  const RelocationProgress p = engine.GetRelocationProgress();
  EXPECT_GT(p.tables_relocated, 0u);
  EXPECT_GT(p.bytes_relocated, 0u);
  EXPECT_EQ(p.tables_at_risk, 0u);
  const EngineStats stats = engine.GetStats();
  EXPECT_EQ(stats.relocated_tables, p.tables_relocated);
  EXPECT_EQ(stats.relocation_copies_at_risk, 0u);
  EXPECT_EQ(stats.compactions_offloaded > 0, GetParam());
  // Nothing leaked: the store holds exactly the copies the current tables name.
  EXPECT_EQ(store.total_copies(), CopiesInShape(engine.GetShape(), OnAny));
  std::unique_ptr<leveldb::Iterator> it(engine.NewIterator());
  int n = 0;
  for (it->SeekToFirst(); it->Valid(); it->Next()) ++n;
  EXPECT_TRUE(it->status().ok());
  EXPECT_EQ(n, 2 * kKeys);
}

TEST(RangeEngineRelocationTest, AnIteratorOpenedBeforeKeepsReadingTheOldCopies) {
  lsm::MemoryTableStore store(kStocs);
  RangeEngine engine(SmallOptions(), &store);
  ASSERT_TRUE(engine.Open().ok());
  constexpr int kKeys = 300;
  WriteRound(&engine, kKeys, 1);
  ASSERT_TRUE(engine.FlushAll().ok());
  ASSERT_TRUE(engine.WaitForCompactions().ok());
  std::unique_ptr<leveldb::Iterator> old(engine.NewIterator());
  store.SetStocs({1, 2, 4});
  engine.SetEvacuatedStocs({kEvacuated});
  ASSERT_TRUE(test::WaitFor([&] { return Relocated(&engine); }));
  // The old version's handles still name the old copies: kept while it is read.
  EXPECT_GT(store.CopiesOnStoc(kEvacuated), 0u);
  int n = 0;
  for (old->SeekToFirst(); old->Valid(); old->Next()) ++n;
  EXPECT_TRUE(old->status().ok()) << old->status().ToString();
  EXPECT_EQ(n, kKeys);
  old.reset();
  ASSERT_TRUE(test::WaitFor([&] { return store.CopiesOnStoc(kEvacuated) == 0; }));
  ExpectRound(&engine, kKeys, 1);
}

TEST(RangeEngineRelocationTest, ATableCompactedAwayMeanwhileIsNotBroughtBack) {
  lsm::MemoryTableStore store(kStocs);
  Gate gate;
  store.SetRelocateHook([&](uint64_t n) { gate.Enter(n); });
  EngineOptions o = SmallOptions();
  o.dranges = 1;
  RangeEngine engine(o, &store);
  ASSERT_TRUE(engine.Open().ok());
  constexpr int kKeys = 50;
  WriteRound(&engine, kKeys, 1);
  ASSERT_TRUE(engine.FlushAll().ok());
  ASSERT_EQ(engine.GetShape().levels[0].size(), 1u);
  const uint64_t first = engine.GetShape().levels[0][0].number;
  store.SetStocs({1, 2, 4});
  engine.SetEvacuatedStocs({kEvacuated});
  ASSERT_TRUE(test::WaitFor([&] { return gate.entered(); }));
  EXPECT_EQ(gate.held(), first);
  // A second Level-0 table: the two compact into Level 1 while the relocation is held.
  WriteRound(&engine, kKeys, 2);
  ASSERT_TRUE(engine.FlushAll().ok());
  ASSERT_TRUE(engine.WaitForCompactions().ok());
  ASSERT_EQ(NumbersInShape(engine.GetShape()).count(first), 0u);
  gate.Open();
  ASSERT_TRUE(test::WaitFor([&] { return Relocated(&engine); }));
  EXPECT_EQ(NumbersInShape(engine.GetShape()).count(first), 0u);
  // Its new copies were deleted with it: nothing of the table is left.
  ASSERT_TRUE(test::WaitFor([&] { return !store.HasTable(first); }));
  EXPECT_EQ(store.total_copies(), CopiesInShape(engine.GetShape(), OnAny));
  ExpectRound(&engine, kKeys, 2);
}

TEST(RangeEngineRelocationTest, RelocationSurvivesReopening) {
  lsm::MemoryTableStore store(kStocs);
  constexpr int kKeys = 300;
  EngineShape before;
  {
    RangeEngine engine(SmallOptions(), &store);
    ASSERT_TRUE(engine.Open().ok());
    WriteRound(&engine, kKeys, 3);
    ASSERT_TRUE(engine.FlushAll().ok());
    ASSERT_TRUE(engine.WaitForCompactions().ok());
    store.SetStocs({1, 2, 4});
    engine.SetEvacuatedStocs({kEvacuated});
    ASSERT_TRUE(test::WaitFor([&] { return Relocated(&engine); }));
    before = engine.GetShape();
  }
  EXPECT_EQ(CopiesInShape(before, OnEvacuated), 0u);
  RangeEngine engine(SmallOptions(), &store);
  ASSERT_TRUE(engine.Open().ok());
  // Recovery read the replaced metadata.
  EXPECT_TRUE(engine.GetShape() == before);
  EXPECT_EQ(store.CopiesOnStoc(kEvacuated), 0u);
  ExpectRound(&engine, kKeys, 3);
}

TEST(RangeEngineRelocationTest, FailedRelocationsAreRetried) {
  lsm::MemoryTableStore store(kStocs);
  RangeEngine engine(SmallOptions(), &store);
  ASSERT_TRUE(engine.Open().ok());
  constexpr int kKeys = 200;
  WriteRound(&engine, kKeys, 4);
  ASSERT_TRUE(engine.FlushAll().ok());
  ASSERT_TRUE(engine.WaitForCompactions().ok());
  // Injected faults, then no StoC to place on (only the evacuated one is left).
  store.FailNextRelocations(2);
  store.SetStocs({kEvacuated});
  engine.SetEvacuatedStocs({kEvacuated});
  ASSERT_TRUE(test::WaitFor([&] { return engine.GetRelocationProgress().failures >= 3; }));
  RelocationProgress p = engine.GetRelocationProgress();
  EXPECT_GT(p.copies_at_risk, 0u);
  EXPECT_FALSE(p.idle);
  EXPECT_EQ(p.tables_relocated, 0u);
  ExpectRound(&engine, kKeys, 4);  // the range serves on
  store.SetStocs({1, 2});
  ASSERT_TRUE(test::WaitFor([&] { return Relocated(&engine); }, std::chrono::seconds(30)));
  EXPECT_GT(engine.GetRelocationProgress().tables_relocated, 0u);
  ExpectRound(&engine, kKeys, 4);
}

TEST(RangeEngineRelocationTest, SweepDeletesCopiesLeftOnAStocThatWasDown) {
  lsm::MemoryTableStore store(kStocs);
  RangeEngine engine(SmallOptions(), &store);
  ASSERT_TRUE(engine.Open().ok());
  constexpr int kKeys = 300;
  WriteRound(&engine, kKeys, 5);
  ASSERT_TRUE(engine.FlushAll().ok());
  // StoC 2 goes down: tables compacted away meanwhile keep their copies there (garbage
  // numbered below every table written since), and the copies moved off StoC 3 while it is
  // down stay there too.
  store.SetDownStocs({2, kEvacuated});
  store.SetStocs({1, 4});
  WriteRound(&engine, kKeys, 6);
  ASSERT_TRUE(engine.FlushAll().ok());
  ASSERT_TRUE(engine.WaitForCompactions().ok());
  engine.SetEvacuatedStocs({kEvacuated});
  ASSERT_TRUE(test::WaitFor([&] { return Relocated(&engine); }));
  EXPECT_GT(store.CopiesOnStoc(kEvacuated), 0u);
  const std::set<uint64_t> live = NumbersInShape(engine.GetShape());
  bool garbage = false;
  for (uint64_t n : store.StoredTables()) garbage = garbage || live.count(n) == 0;
  EXPECT_TRUE(garbage);
  // They come back: one sweep takes both kinds.
  store.SetDownStocs({});
  const uint64_t sweeps = engine.GetRelocationProgress().sweeps;
  engine.RequestSweep();
  ASSERT_TRUE(test::WaitFor([&] { return engine.GetRelocationProgress().sweeps > sweeps; }));
  EXPECT_EQ(store.CopiesOnStoc(kEvacuated), 0u);
  const std::vector<uint64_t> stored = store.StoredTables();
  EXPECT_EQ(std::set<uint64_t>(stored.begin(), stored.end()),
            NumbersInShape(engine.GetShape()));
  EXPECT_EQ(store.total_copies(), CopiesInShape(engine.GetShape(), OnAny));
  EXPECT_GT(engine.GetRelocationProgress().files_swept, 0u);
  EXPECT_EQ(engine.GetStats().swept_files, engine.GetRelocationProgress().files_swept);
  ExpectRound(&engine, kKeys, 6);
}

TEST_P(RelocationLoadTest, SweepsRacingFlushesAndCompactionsDeleteNothingLive) {
  const uint64_t seed = test::TestSeed("SweepRace");
  lsm::MemoryTableStore store(kStocs);
  InlineOffloader offloader(&store);
  EngineOptions o = SmallOptions();
  if (GetParam()) o.compaction_offloader = &offloader;
  o.sweep_interval = std::chrono::milliseconds(1);  // sweeps back to back
  RangeEngine engine(o, &store);
  ASSERT_TRUE(engine.Open().ok());
  constexpr int kKeys = 500;
  std::map<std::string, std::string> model;
  std::mt19937_64 rnd(seed);
  std::atomic<bool> done{false};
  std::atomic<int> errors{0};
  std::thread scanner([&] {
    while (!done) {
      std::unique_ptr<leveldb::Iterator> it(engine.NewIterator());
      for (it->SeekToFirst(); it->Valid(); it->Next()) {
      }
      if (!it->status().ok()) {
        ++errors;
        ADD_FAILURE() << it->status().ToString();
      }
    }
  });
  for (int i = 0; i < 20000; ++i) {
    const std::string k = Key(static_cast<int>(rnd() % kKeys));
    const std::string v = std::to_string(rnd()) + std::string(60, 'y');
    ASSERT_TRUE(engine.Put(k, v).ok());
    model[k] = v;
    if (i % 2000 == 0) {
      for (const auto& [mk, mv] : model) {
        std::string got;
        Status s = engine.Get(mk, &got);
        ASSERT_TRUE(s.ok()) << mk << ": " << s.ToString() << " (seed " << seed << ")";
        ASSERT_EQ(got, mv) << mk << " (seed " << seed << ")";
      }
    }
  }
  done = true;
  scanner.join();
  EXPECT_EQ(errors.load(), 0) << "seed " << seed;
  ASSERT_TRUE(engine.FlushAll().ok());
  ASSERT_TRUE(engine.WaitForCompactions().ok());
  EXPECT_GT(engine.GetRelocationProgress().sweeps, 0u);
  EXPECT_EQ(engine.GetStats().compactions_offloaded > 0, GetParam());
  for (const auto& [mk, mv] : model) {
    std::string got;
    ASSERT_TRUE(engine.Get(mk, &got).ok()) << mk << " (seed " << seed << ")";
    ASSERT_EQ(got, mv);
  }
  // Every table still stored is live, and every live table is whole.
  const std::vector<uint64_t> stored = store.StoredTables();
  EXPECT_EQ(std::set<uint64_t>(stored.begin(), stored.end()),
            NumbersInShape(engine.GetShape()));
  EXPECT_EQ(store.total_copies(), CopiesInShape(engine.GetShape(), OnAny));
}

TEST(RangeEngineRelocationTest, CloseWhileARelocationRuns) {
  lsm::MemoryTableStore store(kStocs);
  Gate gate;
  constexpr int kKeys = 200;
  {
    auto engine = std::make_unique<RangeEngine>(SmallOptions(), &store);
    ASSERT_TRUE(engine->Open().ok());
    WriteRound(engine.get(), kKeys, 7);
    ASSERT_TRUE(engine->FlushAll().ok());
    store.SetRelocateHook([&](uint64_t n) { gate.Enter(n); });
    store.SetStocs({1, 2, 4});
    engine->SetEvacuatedStocs({kEvacuated});
    ASSERT_TRUE(test::WaitFor([&] { return gate.entered(); }));
    std::thread closer([&] { engine.reset(); });
    gate.Open();
    closer.join();
  }
  store.SetRelocateHook(nullptr);
  // Whether the held relocation was installed or dropped, no copy leaked.
  RangeEngine engine(SmallOptions(), &store);
  ASSERT_TRUE(engine.Open().ok());
  EXPECT_EQ(store.total_copies(), CopiesInShape(engine.GetShape(), OnAny));
  ExpectRound(&engine, kKeys, 7);
}

TEST(RangeEngineRelocationTest, NothingIsInstalledWhileAMigrationOutLasts) {
  lsm::MemoryTableStore store(kStocs);
  Gate gate;
  RangeEngine engine(SmallOptions(), &store);
  ASSERT_TRUE(engine.Open().ok());
  constexpr int kKeys = 200;
  WriteRound(&engine, kKeys, 9);
  ASSERT_TRUE(engine.FlushAll().ok());
  ASSERT_TRUE(engine.WaitForCompactions().ok());
  const EngineShape before = engine.GetShape();
  store.SetRelocateHook([&](uint64_t n) { gate.Enter(n); });
  store.SetStocs({1, 2, 4});
  engine.SetEvacuatedStocs({kEvacuated});
  ASSERT_TRUE(test::WaitFor([&] { return gate.entered(); }));
  // The migration begins while a relocation copies: it must not be installed, and the
  // hand-off waits until it has let go.
  ASSERT_TRUE(engine.BeginMigrationOut().ok());
  std::thread opener([&] { gate.Open(); });
  MigratedState state;
  ASSERT_TRUE(engine.Handoff(&state).ok());
  opener.join();
  EXPECT_EQ(engine.GetRelocationProgress().tables_relocated, 0u);
  EXPECT_TRUE(engine.GetShape() == before);
  // Its new copies are gone again: the store holds what the MANIFEST names, nothing more.
  EXPECT_EQ(store.total_copies(), CopiesInShape(before, OnAny));
  // The move is abandoned: relocation resumes.
  engine.EndMigrationOut();
  ASSERT_TRUE(test::WaitFor([&] { return Relocated(&engine); }));
  EXPECT_GT(engine.GetRelocationProgress().tables_relocated, 0u);
  ExpectRound(&engine, kKeys, 9);
}

TEST(RangeEngineRelocationTest, RelocationsKeepToTheBandwidthLimit) {
  lsm::MemoryTableStore store(kStocs);
  EngineOptions o = SmallOptions();
  uint64_t total = 0, largest = 0;  // bytes to copy, in all and of the largest table
  {
    RangeEngine engine(o, &store);
    ASSERT_TRUE(engine.Open().ok());
    WriteRound(&engine, 600, 10);
    ASSERT_TRUE(engine.FlushAll().ok());
    ASSERT_TRUE(engine.WaitForCompactions().ok());
    for (const auto& level : engine.GetShape().levels) {
      for (const lsm::TableMeta& t : level) {
        uint64_t b = 0;
        for (const auto& r : t.fragments) {
          for (const auto& l : r) b += l.stoc_id == kEvacuated ? l.size : 0;
        }
        for (const auto& l : t.filter) b += l.stoc_id == kEvacuated ? l.size : 0;
        total += b;
        largest = std::max(largest, b);
      }
    }
  }
  ASSERT_GT(total, 3 * largest) << "needs several tables to relocate";
  // A bucket of one second's worth, then a quarter of the bytes per second: every table
  // but the last waits for what the ones before it copied beyond the first second's worth.
  o.relocation_bytes_per_sec = total / 4;
  RangeEngine engine(o, &store);
  ASSERT_TRUE(engine.Open().ok());
  store.SetStocs({1, 2, 4});
  const auto start = std::chrono::steady_clock::now();
  engine.SetEvacuatedStocs({kEvacuated});
  ASSERT_TRUE(test::WaitFor([&] { return Relocated(&engine); }, std::chrono::seconds(30)));
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double at_least = static_cast<double>(total - largest - o.relocation_bytes_per_sec) /
                          static_cast<double>(o.relocation_bytes_per_sec);
  EXPECT_GE(elapsed, 0.9 * at_least) << total << " bytes at " << o.relocation_bytes_per_sec
                                     << " B/s";
  EXPECT_EQ(engine.GetRelocationProgress().bytes_relocated, total);
  ExpectRound(&engine, 600, 10);
}

TEST(RangeEngineRelocationTest, AFencedStoreStopsTheWorkQuietly) {
  lsm::MemoryTableStore store(kStocs);
  RangeEngine engine(SmallOptions(), &store);
  ASSERT_TRUE(engine.Open().ok());
  WriteRound(&engine, 100, 8);
  ASSERT_TRUE(engine.FlushAll().ok());
  store.Fence();
  engine.SetEvacuatedStocs({kEvacuated});
  ASSERT_TRUE(test::WaitFor([&] { return engine.Put("a", "b").IsFenced(); }));
  EXPECT_EQ(engine.GetRelocationProgress().failures, 0u);
  EXPECT_EQ(engine.GetRelocationProgress().tables_relocated, 0u);
}

INSTANTIATE_TEST_SUITE_P(LocalAndOffloadedCompactions, RelocationLoadTest, ::testing::Bool());

}  // namespace
}  // namespace nova::ltc
