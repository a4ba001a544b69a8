// The randomized model test of RangeEngine (LevelDB db_test's ModelDB style), shared by
// ltc/engine/range_engine_test.cc (over a lsm::MemoryTableStore) and tests/ltc_engine_itest.cc
// (over real nova_stoc daemons): a workload of keys and values, the std::map model, and a driver
// that applies random puts, deletes, batches, snapshots, point reads, scans and iterators to an
// engine and the model and checks every read. Header-only; for tests.
//
//   ModelDriver driver(seed, /*zipfian=*/true);
//   driver.Attach(engine.get());
//   for (int i = 0; i < kOps; ++i) {
//     ModelDriver::Action action;
//     driver.RandomOp(i, &action);
//     if (::testing::Test::HasFatalFailure()) return;
//     if (action == ModelDriver::Action::kReopen) { ... FlushAll, new engine, Attach ... }
//   }
//
// Thread safety: none of these objects is thread-safe; one test thread drives them.
#pragma once

#include <gtest/gtest.h>
#include <leveldb/iterator.h>
#include <leveldb/write_batch.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/thread_pool.h"
#include "common/zipfian.h"
#include "ltc/engine/engine_options.h"
#include "ltc/engine/range_engine.h"

namespace nova::ltc::engine_model_test {

// What the engine should hold: user key -> value.
using Model = std::map<std::string, std::string>;

// One option set of the model test: theta, rho, the key distribution and the indexes.
struct Case {
  const char* name;
  int dranges;   // theta
  uint32_t rho;  // scatter width
  bool zipfian;  // else uniform keys
  bool range_index = true;   // EngineOptions::range_index
  bool lookup_index = true;  // EngineOptions::lookup_index
  bool parallel_reads = false;  // EngineOptions::read_pool: ReadPool()
};

// A pool for EngineOptions::read_pool, shared by every engine of the test binary (as by
// the ranges of an LTC) and never destroyed (engines of a test may outlive any scope).
inline ThreadPool* ReadPool() {
  static ThreadPool* pool = new ThreadPool("test-read", 3, 1024);
  return pool;
}

// Options that flush, compact and reorganize Dranges constantly.
inline EngineOptions TinyOptions(const Case& c) {
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
  o.range_index = c.range_index;
  o.lookup_index = c.lookup_index;
  if (c.parallel_reads) o.read_pool = ReadPool();
  return o;
}

// Keys from a small key space (zipfian or uniform; the empty key and keys with NULs
// included) and values of up to 200 bytes, 1% of them 20-40 KB.
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

// Checks that the engine's iterator at `snap` (null: latest) yields exactly `model`,
// forwards and backwards. `when` names the check in failure messages.
inline void ExpectSameAsModel(RangeEngine* engine, const Model& model, const EngineSnapshot* snap,
                              const std::string& when) {
  std::unique_ptr<leveldb::Iterator> it(engine->NewIterator(snap));
  auto m = model.begin();
  for (it->SeekToFirst(); it->Valid(); it->Next(), ++m) {
    ASSERT_NE(m, model.end()) << when << ": extra key " << it->key().ToString();
    ASSERT_EQ(it->key().ToString(), m->first) << when;
    ASSERT_EQ(it->value().ToString(), m->second) << when << " key " << m->first;
  }
  ASSERT_TRUE(it->status().ok()) << when << ": " << it->status().ToString();
  ASSERT_EQ(m, model.end()) << when << ": missing key " << m->first;
  // Backwards too.
  auto r = model.rbegin();
  for (it->SeekToLast(); it->Valid(); it->Prev(), ++r) {
    ASSERT_NE(r, model.rend()) << when;
    ASSERT_EQ(it->key().ToString(), r->first) << when;
  }
  ASSERT_TRUE(it->status().ok()) << when << ": " << it->status().ToString();
  ASSERT_EQ(r, model.rend()) << when;
}

// Sums what several engine instances (between reopens) did.
inline void Accumulate(const EngineStats& s, EngineStats* total) {
  total->flushes += s.flushes;
  total->compactions += s.compactions;
  total->compactions_offloaded += s.compactions_offloaded;
  total->compaction_offload_fallbacks += s.compaction_offload_fallbacks;
  total->major_reorganizations += s.major_reorganizations;
  total->minor_reorganizations += s.minor_reorganizations;
  total->dranges = std::max(total->dranges, s.dranges);
  for (int l = 0; l < lsm::kNumLevels; ++l) total->level_tables[l] = s.level_tables[l];
}

inline void PrintStats(const char* name, const EngineStats& st) {
  std::fprintf(stderr,
               "%s: %llu flushes, %llu compactions, %d Dranges, %llu major + %llu minor "
               "reorganizations, L0..L2 tables %llu/%llu/%llu\n",
               name, (unsigned long long)st.flushes, (unsigned long long)st.compactions, st.dranges,
               (unsigned long long)st.major_reorganizations,
               (unsigned long long)st.minor_reorganizations, (unsigned long long)st.level_tables[0],
               (unsigned long long)st.level_tables[1], (unsigned long long)st.level_tables[2]);
}

// Applies random operations to an engine and to the model, checking every read against
// the model (and reads at a snapshot against the model as it was). Holds up to
// kMaxSnapshots engine snapshots, which the caller releases (ReleaseSnapshots or
// CheckAndReleaseSnapshots) before it destroys the engine.
class ModelDriver {
 public:
  // What the caller does after RandomOp.
  enum class Action {
    kContinue,
    // The workload picked a clean restart: the caller releases the snapshots, flushes
    // everything, replaces the engine by a new one opened from the MANIFEST, Attach()es it
    // and checks it (CheckLatest).
    kReopen,
  };

  ModelDriver(uint64_t seed, bool zipfian) : w_(seed, zipfian) {}
  ModelDriver(const ModelDriver&) = delete;
  ModelDriver& operator=(const ModelDriver&) = delete;

  // The engine the next operations go to; it must outlive their calls.
  // REQUIRES: no snapshot is held (they belong to the previous engine).
  void Attach(RangeEngine* engine) {
    EXPECT_TRUE(snaps_.empty()) << "snapshots of the previous engine are still held";
    engine_ = engine;
  }

  // One random operation: 50% puts, 10% deletes, 5% batches, 23% point reads, 2% taking or
  // releasing a snapshot, 5% reads at a snapshot, 2% scans, 3% full iterator checks, of
  // which 1 in 20 is a reopen instead (1 in 2,000 operations). `i` names the operation in
  // messages. Failures are gtest failures: the caller stops on HasFatalFailure().
  void RandomOp(int i, Action* action) {
    *action = Action::kContinue;
    const uint64_t op = w_.Next() % 100;
    if (op < 50) {
      const std::string k = w_.Key(), v = w_.Value();
      Status s = engine_->Put(k, v);
      ASSERT_TRUE(s.ok()) << "op " << i << " put " << k << ": " << s.ToString();
      model_[k] = v;
    } else if (op < 60) {
      const std::string k = w_.Key();
      Status s = engine_->Delete(k);
      ASSERT_TRUE(s.ok()) << "op " << i << " delete " << k << ": " << s.ToString();
      model_.erase(k);
    } else if (op < 65) {
      std::vector<WriteOp> batch;
      std::deque<std::string> bytes;  // what the batch's slices point into
      Model next = model_;
      // The bound is drawn again before every iteration (so 1 to 8 operations, most often
      // few); kept as it is so that recorded seeds replay the same operations.
      for (int j = 0; j < 1 + static_cast<int>(w_.Next() % 8); ++j) {
        const std::string k = w_.Key();
        if (w_.Next() % 4 == 0) {
          batch.push_back({lsm::kTypeDeletion, bytes.emplace_back(k), {}});
          next.erase(k);
        } else {
          const std::string v = w_.Value();
          batch.push_back({lsm::kTypeValue, bytes.emplace_back(k), bytes.emplace_back(v)});
          next[k] = v;
        }
      }
      Status s = engine_->Write(batch);
      ASSERT_TRUE(s.ok()) << "op " << i << " batch: " << s.ToString();
      model_ = std::move(next);
    } else if (op < 88) {
      CheckGet(i);
    } else if (op < 90) {
      if (snaps_.size() < kMaxSnapshots) {
        snaps_.push_back({engine_->GetSnapshot(), model_});
      } else {
        const size_t victim = w_.Next() % snaps_.size();
        engine_->ReleaseSnapshot(snaps_[victim].snap);
        snaps_.erase(snaps_.begin() + victim);
      }
    } else if (op < 95) {
      CheckSnapshotGet();
    } else if (op < 97) {
      CheckScan();
    } else if (op < 99 || w_.Next() % 20 != 0) {
      CheckLatest("op " + std::to_string(i));
    } else {
      *action = Action::kReopen;
    }
  }

  // One random read that changes nothing (for phases in which writes are expected to
  // fail): 80% point reads, 10% reads at a snapshot, 5% scans, 5% full iterator checks.
  void RandomRead(int i) {
    const uint64_t op = w_.Next() % 100;
    if (op < 80) {
      CheckGet(i);
    } else if (op < 90) {
      CheckSnapshotGet();
    } else if (op < 95) {
      CheckScan();
    } else {
      CheckLatest("read " + std::to_string(i));
    }
  }

  // The engine's latest state against the model.
  void CheckLatest(const std::string& when) { ExpectSameAsModel(engine_, model_, nullptr, when); }

  // Every held snapshot against the model as it was, then releases them all.
  void CheckAndReleaseSnapshots(const std::string& when) {
    for (auto& s : snaps_) {
      ExpectSameAsModel(engine_, s.model, s.snap, when);
      if (::testing::Test::HasFatalFailure()) break;
    }
    ReleaseSnapshots();
  }

  void ReleaseSnapshots() {
    for (auto& s : snaps_) engine_->ReleaseSnapshot(s.snap);
    snaps_.clear();
  }

  const Model& model() const { return model_; }

 private:
  static constexpr size_t kMaxSnapshots = 4;  // enough to keep several versions alive

  struct Snap {
    const EngineSnapshot* snap;
    Model model;  // the model when it was taken
  };

  void CheckGet(int i) {
    const std::string k = w_.Key();
    std::string v;
    Status s = engine_->Get(k, &v);
    auto m = model_.find(k);
    if (m == model_.end()) {
      ASSERT_TRUE(s.IsNotFound()) << "op " << i << " key " << k << ": " << s.ToString();
    } else {
      ASSERT_TRUE(s.ok()) << "op " << i << " key " << k << ": " << s.ToString();
      ASSERT_EQ(v, m->second) << "op " << i << " key " << k;
    }
  }

  // Reads at a snapshot see exactly the state when it was taken.
  void CheckSnapshotGet() {
    if (snaps_.empty()) return;
    const Snap& s = snaps_[w_.Next() % snaps_.size()];
    const std::string k = w_.Key();
    std::string v;
    Status st = engine_->Get(k, &v, s.snap);
    auto m = s.model.find(k);
    if (m == s.model.end()) {
      ASSERT_TRUE(st.IsNotFound()) << "snapshot read of " << k << ": " << st.ToString();
    } else {
      ASSERT_TRUE(st.ok()) << "snapshot read of " << k << ": " << st.ToString();
      ASSERT_EQ(v, m->second) << "snapshot read of " << k;
    }
  }

  void CheckScan() {
    constexpr size_t kScanPairs = 10;
    std::vector<std::pair<std::string, std::string>> got;
    const std::string start = w_.Key();
    Status s = engine_->Scan(start, kScanPairs, &got);
    ASSERT_TRUE(s.ok()) << "scan from " << start << ": " << s.ToString();
    auto m = model_.lower_bound(start);
    for (const auto& [k, v] : got) {
      ASSERT_NE(m, model_.end());
      ASSERT_EQ(k, m->first);
      ASSERT_EQ(v, m->second);
      ++m;
    }
    ASSERT_TRUE(got.size() == kScanPairs || m == model_.end());
  }

  Workload w_;
  Model model_;
  std::vector<Snap> snaps_;
  RangeEngine* engine_ = nullptr;  // must outlive the calls using it (see Attach)
};

}  // namespace nova::ltc::engine_model_test
