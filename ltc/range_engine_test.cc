// Randomized model test of the range engine (LevelDB db_test's ModelDB style): random puts,
// deletes, batches, snapshots, iterators and scans against a std::map, across option sets
// that flush, compact and reorganize Dranges constantly. Prints a replayable seed.
#include "ltc/range_engine.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

#include "common/zipfian.h"
#include "ltc/memory_table_store.h"
#include "tests/util/test_util.h"

namespace nova::ltc {
namespace {

using Model = std::map<std::string, std::string>;

struct Case {
  const char* name;
  int dranges;
  uint32_t rho;
  bool zipfian;
};

EngineOptions TinyOptions(const Case& c) {
  EngineOptions o;
  o.memtable_bytes = 16 << 10;  // flush constantly
  o.memtables = 4 * std::max(1, c.dranges);
  o.dranges = c.dranges;
  o.tranges_per_drange = 4;
  o.reorganize_every_writes = 700;
  o.sstable_bytes = 32 << 10;
  o.block_bytes = 1024;
  o.scatter_width = c.rho;
  o.l0_compaction_trigger = 2;
  o.level1_bytes = 64 << 10;
  o.compaction_threads = 2;
  return o;
}

class Workload {
 public:
  Workload(uint64_t seed, bool zipfian) : rng_(seed), zipf_(kKeys), zipfian_(zipfian) {}
  std::string Key() {
    const uint64_t k = zipfian_ ? zipf_.Next(&rng_) : rng_() % kKeys;
    if (k % 97 == 0) return std::string();  // the empty key is a key too
    return "k" + std::to_string(k) + std::string(k % 3, '\0');
  }
  std::string Value() {
    const size_t n = rng_() % 100 == 0 ? 20000 + rng_() % 20000 : rng_() % 200;
    std::string v(n, 'v');
    for (auto& ch : v) ch = static_cast<char>('a' + rng_() % 26);
    return v;
  }
  uint64_t Next() { return rng_(); }

 private:
  static constexpr uint64_t kKeys = 400;
  std::mt19937_64 rng_;
  ScrambledZipfianGenerator zipf_;
  bool zipfian_;
};

void ExpectSameAsModel(RangeEngine* engine, const Model& model, const EngineSnapshot* snap,
                       const std::string& when) {
  std::unique_ptr<leveldb::Iterator> it(engine->NewIterator(snap));
  auto m = model.begin();
  for (it->SeekToFirst(); it->Valid(); it->Next(), ++m) {
    ASSERT_NE(m, model.end()) << when << ": extra key " << it->key().ToString();
    ASSERT_EQ(it->key().ToString(), m->first) << when;
    ASSERT_EQ(it->value().ToString(), m->second) << when << " key " << m->first;
  }
  ASSERT_TRUE(it->status().ok()) << it->status().ToString();
  ASSERT_EQ(m, model.end()) << when << ": missing key " << m->first;
  // Backwards too.
  auto r = model.rbegin();
  for (it->SeekToLast(); it->Valid(); it->Prev(), ++r) {
    ASSERT_NE(r, model.rend()) << when;
    ASSERT_EQ(it->key().ToString(), r->first) << when;
  }
  ASSERT_EQ(r, model.rend()) << when;
}

// Sums what several engine instances (between reopens) did.
void Accumulate(const EngineStats& s, EngineStats* total) {
  total->flushes += s.flushes;
  total->compactions += s.compactions;
  total->major_reorganizations += s.major_reorganizations;
  total->minor_reorganizations += s.minor_reorganizations;
  total->dranges = std::max(total->dranges, s.dranges);
  for (int l = 0; l < kNumLevels; ++l) total->level_tables[l] = s.level_tables[l];
}

class RangeEngineModelTest : public ::testing::TestWithParam<Case> {};

TEST_P(RangeEngineModelTest, RandomOperationsMatchTheModel) {
  const Case c = GetParam();
  const uint64_t seed = test::TestSeed(c.name);
  MemoryTableStore store;
  auto engine = std::make_unique<RangeEngine>(TinyOptions(c), &store);
  ASSERT_TRUE(engine->Open().ok());
  Workload w(seed, c.zipfian);
  Model model;
  struct Snap {
    const EngineSnapshot* snap;
    Model model;
  };
  std::vector<Snap> snaps;
  EngineStats total;
  constexpr int kOps = 12000;
  for (int i = 0; i < kOps; ++i) {
    const uint64_t op = w.Next() % 100;
    if (op < 50) {
      const std::string k = w.Key(), v = w.Value();
      ASSERT_TRUE(engine->Put(k, v).ok());
      model[k] = v;
    } else if (op < 60) {
      const std::string k = w.Key();
      ASSERT_TRUE(engine->Delete(k).ok());
      model.erase(k);
    } else if (op < 65) {
      leveldb::WriteBatch batch;
      Model next = model;
      for (int j = 0; j < 1 + static_cast<int>(w.Next() % 8); ++j) {
        const std::string k = w.Key();
        if (w.Next() % 4 == 0) {
          batch.Delete(k);
          next.erase(k);
        } else {
          const std::string v = w.Value();
          batch.Put(k, v);
          next[k] = v;
        }
      }
      ASSERT_TRUE(engine->Write(&batch).ok());
      model = std::move(next);
    } else if (op < 88) {
      const std::string k = w.Key();
      std::string v;
      Status s = engine->Get(k, &v);
      auto m = model.find(k);
      if (m == model.end()) {
        ASSERT_TRUE(s.IsNotFound()) << "op " << i << " key " << k << ": " << s.ToString();
      } else {
        ASSERT_TRUE(s.ok()) << "op " << i << " key " << k << ": " << s.ToString();
        ASSERT_EQ(v, m->second) << "op " << i << " key " << k;
      }
    } else if (op < 90) {
      if (snaps.size() < 4) {
        snaps.push_back({engine->GetSnapshot(), model});
      } else {
        const size_t victim = w.Next() % snaps.size();
        engine->ReleaseSnapshot(snaps[victim].snap);
        snaps.erase(snaps.begin() + victim);
      }
    } else if (op < 95) {
      // Reads at a snapshot see exactly the state when it was taken.
      if (!snaps.empty()) {
        const Snap& s = snaps[w.Next() % snaps.size()];
        const std::string k = w.Key();
        std::string v;
        Status st = engine->Get(k, &v, s.snap);
        auto m = s.model.find(k);
        if (m == s.model.end()) {
          ASSERT_TRUE(st.IsNotFound()) << "snapshot read of " << k;
        } else {
          ASSERT_TRUE(st.ok()) << st.ToString();
          ASSERT_EQ(v, m->second) << "snapshot read of " << k;
        }
      }
    } else if (op < 97) {
      std::vector<std::pair<std::string, std::string>> got;
      const std::string start = w.Key();
      ASSERT_TRUE(engine->Scan(start, 10, &got).ok());
      auto m = model.lower_bound(start);
      for (const auto& [k, v] : got) {
        ASSERT_NE(m, model.end());
        ASSERT_EQ(k, m->first);
        ASSERT_EQ(v, m->second);
        ++m;
      }
      ASSERT_TRUE(got.size() == 10 || m == model.end());
    } else if (op < 99 || w.Next() % 20 != 0) {
      ExpectSameAsModel(engine.get(), model, nullptr, "op " + std::to_string(i));
    } else {
      // Clean restart from the MANIFEST (memtables are flushed first: logs come later).
      for (auto& s : snaps) engine->ReleaseSnapshot(s.snap);
      snaps.clear();
      ASSERT_TRUE(engine->FlushAll().ok());
      Accumulate(engine->GetStats(), &total);
      engine.reset();
      engine = std::make_unique<RangeEngine>(TinyOptions(c), &store);
      ASSERT_TRUE(engine->Open().ok());
      ExpectSameAsModel(engine.get(), model, nullptr, "after reopen at op " + std::to_string(i));
    }
    if (HasFatalFailure()) return;
  }
  for (auto& s : snaps) {
    ExpectSameAsModel(engine.get(), s.model, s.snap, "final snapshot");
    engine->ReleaseSnapshot(s.snap);
  }
  ASSERT_TRUE(engine->WaitForCompactions().ok());
  ExpectSameAsModel(engine.get(), model, nullptr, "after compactions");
  Accumulate(engine->GetStats(), &total);
  const EngineStats& st = total;
  std::fprintf(stderr, "%s: %llu flushes, %llu compactions, %d Dranges, %llu major + %llu minor reorganizations, L0..L2 tables %llu/%llu/%llu\n",
               c.name, (unsigned long long)st.flushes, (unsigned long long)st.compactions, st.dranges,
               (unsigned long long)st.major_reorganizations, (unsigned long long)st.minor_reorganizations,
               (unsigned long long)st.level_tables[0], (unsigned long long)st.level_tables[1],
               (unsigned long long)st.level_tables[2]);
  EXPECT_GT(st.flushes, 10u);
  EXPECT_GT(st.compactions, 0u);
  if (c.dranges > 1) {
    EXPECT_EQ(st.dranges, c.dranges);
    EXPECT_GT(st.major_reorganizations + st.minor_reorganizations, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(
    OptionSets, RangeEngineModelTest,
    ::testing::Values(Case{"theta1_rho1_uniform", 1, 1, false}, Case{"theta8_rho3_uniform", 8, 3, false},
                      Case{"theta8_rho1_zipfian", 8, 1, true}, Case{"theta1_rho3_zipfian", 1, 3, true}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace nova::ltc
