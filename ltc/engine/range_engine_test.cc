// Randomized model test of the range engine (LevelDB db_test's ModelDB style): random puts,
// deletes, batches, snapshots, iterators and scans against a std::map, across option sets
// that flush, compact and reorganize Dranges constantly (the workload and model are in
// engine_model_test_util.h, shared with tests/ltc_engine_itest.cc). Prints a replayable
// seed. Also: a damaged MANIFEST record is Corruption at Open; a torn last one is ignored;
// a reopen gives back the same tables and Dranges; the MANIFEST rolls over across reopens.
#include "ltc/engine/range_engine.h"

#include <gtest/gtest.h>
#include <leveldb/cache.h>

#include <leveldb/comparator.h>

#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "common/coding.h"
#include "common/lsm/manifest_format.h"
#include "common/lsm/memory_table_store.h"
#include "common/zipfian.h"
#include "ltc/engine/engine_model_test_util.h"
#include "ltc/engine/manifest.h"
#include "tests/util/test_util.h"

namespace nova::ltc {
namespace {

using engine_model_test::Case;
using engine_model_test::Model;
using engine_model_test::ModelDriver;
using engine_model_test::TinyOptions;

class RangeEngineModelTest : public ::testing::TestWithParam<Case> {};

TEST_P(RangeEngineModelTest, RandomOperationsMatchTheModel) {
  const Case c = GetParam();
  const uint64_t seed = test::TestSeed(c.name);
  lsm::MemoryTableStore store;
  auto engine = std::make_unique<RangeEngine>(TinyOptions(c), &store);
  ASSERT_TRUE(engine->Open().ok());
  ModelDriver driver(seed, c.zipfian);
  driver.Attach(engine.get());
  EngineStats total;
  constexpr int kOps = 12000;
  for (int i = 0; i < kOps; ++i) {
    ModelDriver::Action action;
    driver.RandomOp(i, &action);
    if (HasFatalFailure()) return;
    if (action == ModelDriver::Action::kReopen) {
      // Clean restart from the MANIFEST (memtables are flushed first: logs come later).
      driver.ReleaseSnapshots();
      ASSERT_TRUE(engine->FlushAll().ok());
      engine_model_test::Accumulate(engine->GetStats(), &total);
      engine.reset();
      engine = std::make_unique<RangeEngine>(TinyOptions(c), &store);
      ASSERT_TRUE(engine->Open().ok());
      driver.Attach(engine.get());
      driver.CheckLatest("after reopen at op " + std::to_string(i));
      if (HasFatalFailure()) return;
    }
  }
  driver.CheckAndReleaseSnapshots("final snapshot");
  ASSERT_TRUE(engine->WaitForCompactions().ok());
  driver.CheckLatest("after compactions");
  engine_model_test::Accumulate(engine->GetStats(), &total);
  const EngineStats& st = total;
  engine_model_test::PrintStats(c.name, st);
  EXPECT_GT(st.flushes, 10u);
  EXPECT_GT(st.compactions, 0u);
  if (c.dranges > 1) {
    EXPECT_EQ(st.dranges, c.dranges);
    EXPECT_GT(st.major_reorganizations + st.minor_reorganizations, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(
    OptionSets, RangeEngineModelTest,
    ::testing::Values(
        Case{"theta1_rho1_uniform", 1, 1, false}, Case{"theta8_rho3_uniform", 8, 3, false},
        Case{"theta8_rho1_zipfian", 8, 1, true}, Case{"theta1_rho3_zipfian", 1, 3, true},
        // The range index off (every memtable and Level-0 table read), and on
        // without the lookup index (every Get searches its partition).
        Case{"theta8_rho1_zipfian_no_range_index", 8, 1, true, false},
        Case{"theta8_rho1_uniform_no_lookup_index", 8, 1, false, true, false},
        Case{"theta1_rho1_uniform_no_indexes", 1, 1, false, false, false},
        // Many Dranges: duplicated hot keys, small memtables merged back.
        Case{"theta64_rho3_zipfian", 64, 3, true}, Case{"theta64_rho1_uniform", 64, 1, false},
        // Reads fanned out over a pool (EngineOptions::read_pool): the same answers.
        Case{"theta8_rho3_uniform_parallel_reads", 8, 3, false, true, true, true},
        Case{"theta1_rho1_zipfian_no_indexes_parallel_reads", 1, 1, true, false, false, true}),
    [](const auto& info) { return std::string(info.param.name); });

// ---- MANIFEST damage at Open ----------------------------------------------------------

// Byte offsets of the records of a MANIFEST (manifest.h: each header holds its payload's
// length at bytes [4, 8)).
std::vector<size_t> RecordOffsets(const std::string& manifest) {
  std::vector<size_t> offsets;
  size_t at = 0;
  while (at + lsm::kManifestRecordHeaderBytes <= manifest.size()) {
    offsets.push_back(at);
    at += lsm::kManifestRecordHeaderBytes + DecodeFixed32(manifest.data() + at + 4);
  }
  EXPECT_EQ(at, manifest.size()) << "the MANIFEST does not end with a whole record";
  return offsets;
}

// A range with tables at several levels and a MANIFEST of many records, written by an
// engine that is gone again (as after a clean shutdown).
class RangeEngineManifestTest : public ::testing::Test {
 protected:
  static constexpr Case kCase{"manifest", 1, 1, false};

  void SetUp() override {
    const uint64_t seed =
        test::TestSeed(::testing::UnitTest::GetInstance()->current_test_info()->name());
    engine_model_test::Workload w(seed, kCase.zipfian);
    RangeEngine engine(TinyOptions(kCase), &store_);
    ASSERT_TRUE(engine.Open().ok());
    constexpr int kWrites = 3000;
    for (int i = 0; i < kWrites; ++i) {
      const std::string k = w.Key();
      if (w.Next() % 5 == 0) {
        ASSERT_TRUE(engine.Delete(k).ok());
        model_.erase(k);
      } else {
        const std::string v = w.Value();
        ASSERT_TRUE(engine.Put(k, v).ok());
        model_[k] = v;
      }
    }
    ASSERT_TRUE(engine.FlushAll().ok());
    ASSERT_TRUE(engine.WaitForCompactions().ok());
    last_sequence_ = engine.GetStats().last_sequence;
    manifest_ = *store_.mutable_manifest_for_testing();
    offsets_ = RecordOffsets(manifest_);
    ASSERT_GE(offsets_.size(), 4u) << "too few MANIFEST records to damage one in the middle";
  }

  // Opens a new engine over the store; *engine is set either way.
  Status OpenEngine(std::unique_ptr<RangeEngine>* engine) {
    *engine = std::make_unique<RangeEngine>(TinyOptions(kCase), &store_);
    return (*engine)->Open();
  }

  // Opens the range and checks it holds exactly the model.
  void ExpectOpensToTheModel(const std::string& when) {
    std::unique_ptr<RangeEngine> engine;
    Status s = OpenEngine(&engine);
    ASSERT_TRUE(s.ok()) << when << ": " << s.ToString();
    EXPECT_EQ(engine->GetStats().last_sequence, last_sequence_) << when;
    engine_model_test::ExpectSameAsModel(engine.get(), model_, nullptr, when);
  }

  lsm::MemoryTableStore store_;
  Model model_;
  lsm::SequenceNumber last_sequence_ = 0;
  std::string manifest_;         // as the engine left it
  std::vector<size_t> offsets_;  // of its records
};

TEST_F(RangeEngineManifestTest, DamagedRecordBeforeTheLastIsCorruptionAtOpen) {
  ASSERT_NO_FATAL_FAILURE(ExpectOpensToTheModel("undamaged"));
  manifest_ = *store_.mutable_manifest_for_testing();  // as the reopen left it
  offsets_ = RecordOffsets(manifest_);
  const size_t middle = offsets_[offsets_.size() / 2];
  const uint32_t middle_length = DecodeFixed32(manifest_.data() + middle + 4);
  struct Damage {
    const char* what;
    size_t record;  // offset of the damaged record
    size_t byte;    // offset of the damaged byte
  };
  const Damage damages[] = {
      {"payload of the first record (the snapshot)", 0, lsm::kManifestRecordHeaderBytes + 1},
      {"payload of a middle record", middle,
       middle + lsm::kManifestRecordHeaderBytes + middle_length / 2},
      {"payload checksum of a middle record", middle, middle},
      {"length of a middle record", middle, middle + 4},
      {"length checksum of a middle record", middle, middle + 8},
      {"payload of the last but one record", offsets_[offsets_.size() - 2], offsets_.back() - 1},
  };
  for (const Damage& d : damages) {
    SCOPED_TRACE(d.what);
    std::string damaged = manifest_;
    damaged[d.byte] = static_cast<char>(damaged[d.byte] ^ 0x40);
    *store_.mutable_manifest_for_testing() = damaged;
    const size_t tables = store_.live_tables();
    const uint64_t deleted = store_.tables_deleted();
    const uint64_t appends = store_.manifest_appends(), rolls = store_.manifest_rolls();
    std::unique_ptr<RangeEngine> engine;
    Status s = OpenEngine(&engine);
    EXPECT_TRUE(s.IsCorruption()) << s.ToString();
    EXPECT_NE(s.ToString().find("MANIFEST record at byte " + std::to_string(d.record)),
              std::string::npos)
        << s.ToString();
    engine.reset();
    // The failed Open wrote nothing and deleted nothing: the damage stays for an operator
    // to look at, and the tables are all still there.
    EXPECT_EQ(*store_.mutable_manifest_for_testing(), damaged);
    EXPECT_EQ(store_.manifest_appends(), appends);
    EXPECT_EQ(store_.manifest_rolls(), rolls);
    EXPECT_EQ(store_.live_tables(), tables);
    EXPECT_EQ(store_.tables_deleted(), deleted);
  }
  // Undone, the same MANIFEST opens to everything that was written.
  *store_.mutable_manifest_for_testing() = manifest_;
  ExpectOpensToTheModel("after undoing the damage");
}

// After a failed Open the engine serves nothing: every call fails instead of answering
// from an empty or partial state, and nothing is written.
TEST_F(RangeEngineManifestTest, NothingIsServedAfterAFailedOpen) {
  std::string damaged = manifest_;
  damaged[lsm::kManifestRecordHeaderBytes + 1] ^= 0x40;
  *store_.mutable_manifest_for_testing() = damaged;
  std::unique_ptr<RangeEngine> engine;
  ASSERT_TRUE(OpenEngine(&engine).IsCorruption());
  const std::string key = model_.begin()->first;
  std::string v;
  EXPECT_FALSE(engine->Get(key, &v).ok()) << "Get";
  EXPECT_FALSE(engine->Put(key, "v").ok()) << "Put";
  EXPECT_FALSE(engine->Delete(key).ok()) << "Delete";
  std::unique_ptr<leveldb::Iterator> it(engine->NewIterator());
  it->SeekToFirst();
  EXPECT_FALSE(it->Valid());
  EXPECT_FALSE(it->status().ok()) << "NewIterator";
  std::vector<std::pair<std::string, std::string>> out;
  EXPECT_FALSE(engine->Scan("", 10, &out).ok()) << "Scan";
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(*store_.mutable_manifest_for_testing(), damaged);
}

// ---- Large values and other comparators --------------------------------------------------

// Values of 4 MiB (the server's default limit) go through memtables, flushes, a compaction
// and a reopen intact.
TEST(RangeEngineTest, FourMiBValuesSurviveFlushCompactionAndReopen) {
  constexpr size_t kBig = 4 << 20;
  constexpr int kRounds = 3;
  EngineOptions o = TinyOptions(Case{"big", 1, 3, false});
  o.memtable_bytes = 1 << 20;
  lsm::MemoryTableStore store;
  Model model;
  auto big = [](int round, int key) {
    std::string v(kBig, '\0');
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = static_cast<char>((i * 31 + round * 7 + key) % 251);
    return v;
  };
  {
    RangeEngine engine(o, &store);
    ASSERT_TRUE(engine.Open().ok());
    for (int round = 0; round < kRounds; ++round) {
      for (int key = 0; key < 2; ++key) {
        const std::string k = "big" + std::to_string(key);
        model[k] = big(round, key);
        ASSERT_TRUE(engine.Put(k, model[k]).ok());
      }
      const std::string small = "small" + std::to_string(round);
      model[small] = "s";
      ASSERT_TRUE(engine.Put(small, "s").ok());
      ASSERT_TRUE(engine.FlushAll().ok());  // one Level-0 table per round
    }
    ASSERT_TRUE(engine.WaitForCompactions().ok());
    const EngineStats st = engine.GetStats();
    EXPECT_GE(st.flushes, static_cast<uint64_t>(kRounds));
    EXPECT_GT(st.compactions, 0u);
    for (const auto& [k, v] : model) {
      std::string got;
      ASSERT_TRUE(engine.Get(k, &got).ok()) << k;
      ASSERT_TRUE(got == v) << k << ": " << got.size() << " bytes, not the value written";
    }
  }
  RangeEngine engine(o, &store);
  ASSERT_TRUE(engine.Open().ok());
  engine_model_test::ExpectSameAsModel(&engine, model, nullptr, "4 MiB values after reopen");
}

// Keys written in order make tables that overlap nothing below them: compactions move them
// down a level by a MANIFEST edit (RangeEngine::MoveTableDown), none rewritten. Every key stays
// readable, also after random overwrites and deletes compacted through the moved tables,
// and after a reopen.
TEST(RangeEngineTest, OrderedWritesMoveTablesDownWithoutRewriting) {
  EngineOptions o = TinyOptions(Case{"ordered", 1, 1, false});
  o.l0_slowdown_writes_bytes = 128 << 10;  // Level 0 is due by bytes at 64 KiB
  o.l0_stop_writes_bytes = 1 << 20;
  lsm::MemoryTableStore store;
  Model model;
  const uint64_t seed = test::TestSeed("OrderedWritesMoveTablesDownWithoutRewriting");
  std::mt19937_64 rng(seed);
  auto key = [](int i) {
    char k[16];
    std::snprintf(k, sizeof(k), "key%07d", i);
    return std::string(k);
  };
  constexpr int kKeys = 8000;
  {
    RangeEngine engine(o, &store);
    ASSERT_TRUE(engine.Open().ok());
    for (int i = 0; i < kKeys; ++i) {
      model[key(i)] = std::string(100, static_cast<char>('a' + i % 26));
      ASSERT_TRUE(engine.Put(key(i), model[key(i)]).ok());
    }
    ASSERT_TRUE(engine.FlushAll().ok());
    ASSERT_TRUE(engine.WaitForCompactions().ok());
    const EngineStats ordered = engine.GetStats();
    std::printf("ordered: %llu flushes, %llu compactions, %llu moves, %llu tables written\n",
                (unsigned long long)ordered.flushes, (unsigned long long)ordered.compactions,
                (unsigned long long)ordered.table_moves,
                (unsigned long long)store.tables_written());
    EXPECT_GT(ordered.table_moves, 0u);
    // One Drange, keys in order: every table overlaps nothing below it, so nothing is merged
    // and the only tables written are the flushes' (with moves off: dozens of compactions).
    EXPECT_EQ(ordered.compactions, 0u);
    EXPECT_EQ(store.tables_written(), ordered.flushes);
    int below_level1 = 0;
    for (int l = 2; l < lsm::kNumLevels; ++l) below_level1 += ordered.level_tables[l];
    EXPECT_GT(below_level1, 0) << "moves go on down the levels";
    engine_model_test::ExpectSameAsModel(&engine, model, nullptr, "after the ordered writes");

    for (int i = 0; i < kKeys / 2; ++i) {
      const std::string k = key(static_cast<int>(rng() % kKeys));
      if (rng() % 4 == 0) {
        model.erase(k);
        ASSERT_TRUE(engine.Delete(k).ok());
      } else {
        model[k] = "new" + std::to_string(i);
        ASSERT_TRUE(engine.Put(k, model[k]).ok());
      }
    }
    ASSERT_TRUE(engine.FlushAll().ok());
    ASSERT_TRUE(engine.WaitForCompactions().ok());
    EXPECT_GT(engine.GetStats().compactions, ordered.compactions);
    engine_model_test::ExpectSameAsModel(&engine, model, nullptr,
                                         "after random writes (seed " + std::to_string(seed) + ")");
  }
  RangeEngine engine(o, &store);
  ASSERT_TRUE(engine.Open().ok());
  engine_model_test::ExpectSameAsModel(&engine, model, nullptr, "after reopen");
}

// Two ranges given one shared block cache (--ltc_shared_block_cache_mb) both fill it and
// both read their own data through it (block cache keys are per table, never per range).
TEST(RangeEngineTest, RangesShareOneBlockCache) {
  EngineOptions o = TinyOptions(Case{"shared-cache", 4, 3, false});
  o.shared_block_cache.reset(leveldb::NewLRUCache(8 << 20));
  lsm::MemoryTableStore store_a, store_b;
  RangeEngine a(o, &store_a), b(o, &store_b);
  ASSERT_TRUE(a.Open().ok());
  ASSERT_TRUE(b.Open().ok());
  for (int i = 0; i < 200; ++i) {
    const std::string k = "key" + std::to_string(1000 + i);
    ASSERT_TRUE(a.Put(k, "a" + std::to_string(i)).ok());
    ASSERT_TRUE(b.Put(k, "b" + std::to_string(i)).ok());
  }
  ASSERT_TRUE(a.FlushAll().ok());
  ASSERT_TRUE(b.FlushAll().ok());
  for (int i = 0; i < 200; ++i) {
    const std::string k = "key" + std::to_string(1000 + i);
    std::string va, vb;
    ASSERT_TRUE(a.Get(k, &va).ok()) << k;
    ASSERT_TRUE(b.Get(k, &vb).ok()) << k;
    EXPECT_EQ(va, "a" + std::to_string(i));
    EXPECT_EQ(vb, "b" + std::to_string(i));
  }
  // Both ranges' blocks are in the one cache, and each reports the shared total.
  const uint64_t charge = o.shared_block_cache->TotalCharge();
  EXPECT_GT(charge, 0u);
  EXPECT_EQ(a.GetStats().block_cache_bytes, charge);
  EXPECT_EQ(b.GetStats().block_cache_bytes, charge);
}

// Orders keys backwards: the engine must follow EngineOptions::comparator everywhere.
class ReverseComparator final : public leveldb::Comparator {
 public:
  int Compare(const leveldb::Slice& a, const leveldb::Slice& b) const override {
    return -leveldb::BytewiseComparator()->Compare(a, b);
  }
  const char* Name() const override { return "nova.test.ReverseBytewise"; }
  void FindShortestSeparator(std::string*, const leveldb::Slice&) const override {}
  void FindShortSuccessor(std::string*) const override {}
};

// A non-default comparator through the whole engine: memtables, Dranges, both indexes,
// flushes, compactions, scans, iterators, a reopen (a model in the comparator's order).
TEST(RangeEngineTest, ConfigurableComparatorOrdersEverything) {
  static const ReverseComparator kReverse;
  EngineOptions o = TinyOptions(Case{"reverse", 8, 3, false});
  o.comparator = &kReverse;
  lsm::MemoryTableStore store;
  std::map<std::string, std::string, bool (*)(const std::string&, const std::string&)> model(
      [](const std::string& a, const std::string& b) { return kReverse.Compare(a, b) < 0; });
  const uint64_t seed = test::TestSeed("RangeEngineTest.ConfigurableComparatorOrdersEverything");
  std::mt19937_64 rng(seed);
  auto check = [&](RangeEngine* engine, const std::string& when) {
    std::unique_ptr<leveldb::Iterator> it(engine->NewIterator());
    auto m = model.begin();
    for (it->SeekToFirst(); it->Valid(); it->Next(), ++m) {
      ASSERT_NE(m, model.end()) << when;
      ASSERT_EQ(it->key().ToString(), m->first) << when;
      ASSERT_EQ(it->value().ToString(), m->second) << when;
    }
    ASSERT_TRUE(it->status().ok()) << when;
    ASSERT_EQ(m, model.end()) << when;
    // A scan from the middle, in the comparator's order.
    const std::string start = "key" + std::to_string(500);
    std::vector<std::pair<std::string, std::string>> out;
    ASSERT_TRUE(engine->Scan(start, 20, &out).ok()) << when;
    auto from = model.lower_bound(start);
    for (const auto& [k, v] : out) {
      ASSERT_NE(from, model.end()) << when;
      ASSERT_EQ(k, from->first) << when;
      ASSERT_EQ(v, from->second) << when;
      ++from;
    }
    for (int i = 0; i < 200; ++i) {
      const std::string k = "key" + std::to_string(rng() % 1000);
      std::string v;
      Status s = engine->Get(k, &v);
      auto at = model.find(k);
      if (at == model.end()) {
        ASSERT_TRUE(s.IsNotFound()) << when << " " << k << ": " << s.ToString();
      } else {
        ASSERT_TRUE(s.ok()) << when << " " << k << ": " << s.ToString();
        ASSERT_EQ(v, at->second) << when << " " << k;
      }
    }
  };
  {
    RangeEngine engine(o, &store);
    ASSERT_TRUE(engine.Open().ok());
    for (int i = 0; i < 6000; ++i) {
      const std::string k = "key" + std::to_string(rng() % 1000);
      if (rng() % 6 == 0) {
        ASSERT_TRUE(engine.Delete(k).ok());
        model.erase(k);
      } else {
        const std::string v = std::string(rng() % 300, 'v') + std::to_string(i);
        ASSERT_TRUE(engine.Put(k, v).ok());
        model[k] = v;
      }
      if (i % 2000 == 1999) {
        ASSERT_NO_FATAL_FAILURE(check(&engine, "at write " + std::to_string(i)));
      }
    }
    ASSERT_TRUE(engine.FlushAll().ok());
    ASSERT_TRUE(engine.WaitForCompactions().ok());
    const EngineStats st = engine.GetStats();
    EXPECT_GT(st.compactions, 0u);
    EXPECT_GT(st.major_reorganizations, 0u);
    ASSERT_NO_FATAL_FAILURE(check(&engine, "after compactions"));
  }
  RangeEngine engine(o, &store);
  ASSERT_TRUE(engine.Open().ok());
  ASSERT_NO_FATAL_FAILURE(check(&engine, "after reopen"));
}

// ---- Dranges through the engine ----------------------------------------------------------

// Writes `kWrites` keys of 1,000,000 (zipfian 0.99, scrambled, or uniform) into a theta-64
// range whose Dranges the engine builds from what its memtables sampled; returns its
// imbalance (std. dev. of the Dranges' shares of writes) and, in *layout, its Dranges.
double EngineImbalance(bool zipfian, uint64_t seed, PersistedDrangeLayout* layout) {
  constexpr uint64_t kKeys = 1'000'000;
  constexpr int kWrites = 200'000;
  EngineOptions o;
  o.dranges = 64;
  o.tranges_per_drange = 16;
  o.memtables = 128;
  o.memtable_bytes = 1 << 20;
  o.reorganize_every_writes = 20'000;
  lsm::MemoryTableStore store;
  RangeEngine engine(o, &store);
  EXPECT_TRUE(engine.Open().ok());
  std::mt19937_64 rng(seed);
  ScrambledZipfianGenerator zipf(kKeys);
  char key[32];
  for (int i = 0; i < kWrites; ++i) {
    const uint64_t k = zipfian ? zipf.Next(&rng) : rng() % kKeys;
    std::snprintf(key, sizeof(key), "user%012llu", static_cast<unsigned long long>(k));
    Status s = engine.Put(key, "value");
    if (!s.ok()) {
      ADD_FAILURE() << s.ToString();
      return 0;
    }
  }
  const EngineStats st = engine.GetStats();
  EXPECT_GT(st.major_reorganizations, 0u);
  *layout = engine.GetShape().dranges;
  std::fprintf(stderr, "%s: %d Dranges, %llu major + %llu minor reorganizations, imbalance %.2e\n",
               zipfian ? "zipfian 0.99" : "uniform", st.dranges,
               static_cast<unsigned long long>(st.major_reorganizations),
               static_cast<unsigned long long>(st.minor_reorganizations), st.drange_imbalance);
  return st.drange_imbalance;
}

// Paper 4.4.1 through the engine's own sampling (drange_test checks the layout functions
// directly): zipfian keys get duplicated point Dranges for the hottest keys, and the
// Dranges' shares of writes stay within 10x as even as with uniform keys.
TEST(RangeEngineDrangeTest, ZipfianGetsDuplicatedPointDrangesAndStaysBalanced) {
  const uint64_t seed = test::TestSeed("RangeEngineDrangeTest.ZipfianGetsDuplicatedPointDranges");
  PersistedDrangeLayout zipf_layout, uniform_layout;
  const double zipf = EngineImbalance(true, seed, &zipf_layout);
  const double uniform = EngineImbalance(false, seed + 1, &uniform_layout);
  int duplicated = 0;  // point Dranges with the same key as the one before
  for (size_t d = 1; d < zipf_layout.dranges.size(); ++d) {
    const PersistedDrange& a = zipf_layout.dranges[d - 1];
    const PersistedDrange& b = zipf_layout.dranges[d];
    if (a.point && b.point && a.tranges.front() == b.tranges.front()) ++duplicated;
  }
  EXPECT_GT(duplicated, 0) << "no duplicated point Drange with zipfian keys";
  for (const PersistedDrange& d : uniform_layout.dranges) {
    EXPECT_FALSE(d.point) << "a point Drange with uniform keys";
  }
  EXPECT_GT(uniform, 0);
  EXPECT_LT(zipf, 10 * uniform);
}

// ---- Reopen and roll-over --------------------------------------------------------------

// Reopening a range gives back exactly the tables (every level, with their fragment
// locations) and the Drange/Trange layout it had, not just the same user-visible contents.
TEST(RangeEngineReopenTest, GivesBackTheSameTablesAndDranges) {
  const Case c{"reopen_shape", 8, 3, true};
  const uint64_t seed = test::TestSeed("RangeEngineReopenTest.GivesBackTheSameTablesAndDranges");
  engine_model_test::Workload w(seed, c.zipfian);
  lsm::MemoryTableStore store;
  Model model;
  EngineShape before;
  {
    RangeEngine engine(TinyOptions(c), &store);
    ASSERT_TRUE(engine.Open().ok());
    constexpr int kWrites = 4000;
    for (int i = 0; i < kWrites; ++i) {
      const std::string k = w.Key(), v = w.Value();
      ASSERT_TRUE(engine.Put(k, v).ok());
      model[k] = v;
    }
    ASSERT_TRUE(engine.FlushAll().ok());
    ASSERT_TRUE(engine.WaitForCompactions().ok());
    before = engine.GetShape();
  }
  // Something to compare: Dranges built by a reorganization, tables below Level 0.
  ASSERT_GT(before.dranges.dranges.size(), 1u);
  ASSERT_GT(before.dranges.generation, 0u);
  size_t deeper_tables = 0;
  for (int l = 1; l < lsm::kNumLevels; ++l) deeper_tables += before.levels[l].size();
  ASSERT_GT(deeper_tables, 0u);

  RangeEngine engine(TinyOptions(c), &store);
  ASSERT_TRUE(engine.Open().ok());
  const EngineShape after = engine.GetShape();
  for (int l = 0; l < lsm::kNumLevels; ++l) {
    EXPECT_EQ(after.levels[l], before.levels[l]) << "tables of level " << l;
  }
  EXPECT_EQ(after.dranges, before.dranges) << "Drange layout; now:\n" << engine.DrangeDebugString();
  engine_model_test::ExpectSameAsModel(&engine, model, nullptr, "after reopen");
}

// The MANIFEST rolls over to a snapshot once it passes EngineOptions::manifest_roll_bytes,
// counting the bytes an earlier Open left in it: a range reopened often (each time adding a
// few edits) must not grow its MANIFEST without bound.
TEST(RangeEngineManifestRollTest, StaysBoundedAcrossReopens) {
  EngineOptions o = TinyOptions(Case{"roll", 1, 1, false});
  o.manifest_roll_bytes = 4 << 10;
  lsm::MemoryTableStore store;
  Model model;
  constexpr int kReopens = 25, kWritesPerOpen = 150, kKeys = 2000;
  uint64_t written = 0;
  for (int round = 0; round < kReopens; ++round) {
    RangeEngine engine(o, &store);
    ASSERT_TRUE(engine.Open().ok()) << "round " << round;
    for (int i = 0; i < kWritesPerOpen; ++i, ++written) {
      const std::string k = "key" + std::to_string(written * 7919 % kKeys);
      const std::string v(100, static_cast<char>('a' + round % 26));
      ASSERT_TRUE(engine.Put(k, v).ok());
      model[k] = v;
    }
    ASSERT_TRUE(engine.FlushAll().ok());
    ASSERT_TRUE(engine.WaitForCompactions().ok());
    // Either the last append kept the MANIFEST within the limit, or it rolled over (and the
    // MANIFEST is one snapshot record).
    const auto manifest = store.ReadManifest();
    ASSERT_TRUE(manifest.ok());
    const size_t records = RecordOffsets(manifest.value()).size();
    ASSERT_TRUE(manifest->size() <= o.manifest_roll_bytes || records == 1)
        << "round " << round << ": MANIFEST of " << manifest->size() << " bytes in " << records
        << " records, limit " << o.manifest_roll_bytes;
  }
  EXPECT_GT(store.manifest_rolls(), 0u);
  RangeEngine engine(o, &store);
  ASSERT_TRUE(engine.Open().ok());
  engine_model_test::ExpectSameAsModel(&engine, model, nullptr, "after the last reopen");
}

// A torn last record: an append that was cut short and never acknowledged.
struct Torn {
  const char* name;
  // The record's bytes as they were left at the end of the MANIFEST.
  std::string (*tail)(const std::string& record);
};

void PrintTo(const Torn& t, std::ostream* os) { *os << t.name; }

class RangeEngineTornManifestTest : public RangeEngineManifestTest,
                                    public ::testing::WithParamInterface<Torn> {};

// Appends the torn record to the MANIFEST the fixture made: an edit that, if it were
// applied, would move the last sequence far ahead.
void AppendTornRecord(const Torn& torn, lsm::SequenceNumber last_sequence, std::string* manifest) {
  VersionEdit edit;
  edit.last_sequence = last_sequence + 1000000;
  *manifest += torn.tail(EncodeManifestRecord(edit));
}

TEST_P(RangeEngineTornManifestTest, IsIgnoredAtOpen) {
  AppendTornRecord(GetParam(), last_sequence_, store_.mutable_manifest_for_testing());
  ASSERT_NO_FATAL_FAILURE(ExpectOpensToTheModel("torn last record"));
  ASSERT_NO_FATAL_FAILURE(ExpectOpensToTheModel("torn last record, second open"));
}

// The range goes on after a torn last record: writes, a flush, another clean Open. The
// torn bytes must not end up in the middle of the MANIFEST, where they would be Corruption.
TEST_P(RangeEngineTornManifestTest, WritesAfterItSurviveTheNextOpen) {
  AppendTornRecord(GetParam(), last_sequence_, store_.mutable_manifest_for_testing());
  std::unique_ptr<RangeEngine> engine;
  ASSERT_TRUE(OpenEngine(&engine).ok());
  constexpr int kWrites = 50;
  for (int i = 0; i < kWrites; ++i) {
    const std::string k = "torn" + std::to_string(i);
    ASSERT_TRUE(engine->Put(k, GetParam().name).ok());
    model_[k] = GetParam().name;
  }
  ASSERT_TRUE(engine->FlushAll().ok());
  engine.reset();
  Status s = OpenEngine(&engine);
  ASSERT_TRUE(s.ok()) << "reopening after writes past a torn record: " << s.ToString();
  engine_model_test::ExpectSameAsModel(engine.get(), model_, nullptr, "after the writes");
}

INSTANTIATE_TEST_SUITE_P(
    Torn, RangeEngineTornManifestTest,
    ::testing::Values(
        Torn{"header_cut_short",
             [](const std::string& r) { return r.substr(0, lsm::kManifestRecordHeaderBytes - 3); }},
        Torn{"payload_cut_short", [](const std::string& r) { return r.substr(0, r.size() - 2); }},
        Torn{"whole_with_bad_payload_checksum",
             [](const std::string& r) {
               std::string bad = r;
               bad.back() = static_cast<char>(bad.back() ^ 0x40);
               return bad;
             }}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace nova::ltc
