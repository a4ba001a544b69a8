// Writers, readers, scanners, flushes, compactions and Drange reorganizations at once, with
// and without a log (then the engine is also "crashed" and reopened from its log and tables).
// Run it under ThreadSanitizer too (NOVA_SANITIZE=thread).
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <memory>
#include <thread>

#include "common/lsm/memory_table_store.h"
#include "ltc/engine/memtable_log.h"
#include "ltc/engine/range_engine.h"
#include "tests/util/test_util.h"

namespace nova::ltc {
namespace {

std::string Key(int writer, int k) {
  return "w" + std::to_string(writer) + "-" + std::to_string(k);
}

class RangeEngineConcurrencyTest : public ::testing::TestWithParam<bool> {};

TEST_P(RangeEngineConcurrencyTest, WritersReadersScannersAndBackgroundWork) {
  const bool logged = GetParam();
  InMemoryMemtableLog log;
  EngineOptions o;
  o.memtable_bytes = 32 << 10;
  o.memtables = 16;
  o.dranges = 4;
  o.tranges_per_drange = 4;
  o.reorganize_every_writes = 2000;
  o.sstable_bytes = 64 << 10;
  o.l0_compaction_trigger = 2;
  o.level1_bytes = 128 << 10;
  o.compaction_threads = 2;
  if (logged) o.log = &log;
  lsm::MemoryTableStore store;
  auto owned = std::make_unique<RangeEngine>(o, &store);
  RangeEngine& engine = *owned;
  ASSERT_TRUE(engine.Open().ok());

  constexpr int kWriters = 4, kKeysPerWriter = 50, kRounds = 300;
  std::atomic<bool> done{false};
  std::atomic<int> errors{0};
  // Each writer writes round r of every key as value "r"; a key's value never goes back.
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      for (int r = 0; r < kRounds; ++r) {
        for (int k = 0; k < kKeysPerWriter; ++k) {
          Status s = (r % 7 == 6 && k % 5 == 0) ? engine.Delete(Key(w, k))
                                                : engine.Put(Key(w, k), std::to_string(r));
          if (!s.ok()) ++errors;
        }
      }
    });
  }
  std::vector<std::thread> readers;
  for (int t = 0; t < 2; ++t) {
    readers.emplace_back([&, t] {
      std::map<std::string, int> last_seen;
      for (int i = 0; !done && i < 200000; ++i) {
        const std::string k = Key(i % kWriters, (i * 7 + t) % kKeysPerWriter);
        std::string v;
        Status s = engine.Get(k, &v);
        if (s.ok()) {
          const int r = std::stoi(v);
          if (r < last_seen[k]) {
            ++errors;
            ADD_FAILURE() << k << " went back from round " << last_seen[k] << " to " << r;
          }
          last_seen[k] = r;
        } else if (!s.IsNotFound()) {
          ++errors;
          ADD_FAILURE() << s.ToString();
        }
      }
    });
  }
  std::thread scanner([&] {
    for (int i = 0; !done && i < 2000; ++i) {
      const EngineSnapshot* snap = engine.GetSnapshot();
      std::unique_ptr<leveldb::Iterator> it(engine.NewIterator(snap));
      std::string prev;
      int n = 0;
      for (it->SeekToFirst(); it->Valid(); it->Next(), ++n) {
        if (n > 0 && it->key().ToString() <= prev) {
          ++errors;
          ADD_FAILURE() << "scan out of order: " << prev << " then " << it->key().ToString();
        }
        prev = it->key().ToString();
      }
      if (!it->status().ok()) {
        ++errors;
        ADD_FAILURE() << it->status().ToString();
      }
      it.reset();
      engine.ReleaseSnapshot(snap);
    }
  });
  for (auto& t : threads) t.join();
  done = true;
  for (auto& t : readers) t.join();
  scanner.join();
  EXPECT_EQ(errors.load(), 0);

  auto check_final = [&](RangeEngine* e, const char* when) {
    for (int w = 0; w < kWriters; ++w) {
      for (int k = 0; k < kKeysPerWriter; ++k) {
        std::string v;
        Status s = e->Get(Key(w, k), &v);
        const bool deleted_last = ((kRounds - 1) % 7 == 6 && k % 5 == 0);
        if (deleted_last) {
          EXPECT_TRUE(s.IsNotFound()) << Key(w, k) << " " << when;
        } else {
          ASSERT_TRUE(s.ok()) << Key(w, k) << " " << when << ": " << s.ToString();
          EXPECT_EQ(v, std::to_string(kRounds - 1)) << Key(w, k) << " " << when;
        }
      }
    }
  };
  EngineStats st = engine.GetStats();
  if (logged) {
    owned.reset();  // a crash: the memtables are not flushed
    owned = std::make_unique<RangeEngine>(o, &store);
    ASSERT_TRUE(owned->Open().ok());
    check_final(owned.get(), "after the crash");
    std::fprintf(stderr, "after the crash: %llu memtables rebuilt from their logs\n",
                 (unsigned long long)owned->GetStats().recovered_logs);
  }
  ASSERT_TRUE(owned->FlushAll().ok());
  ASSERT_TRUE(owned->WaitForCompactions().ok());
  check_final(owned.get(), "after flushing everything");
  std::fprintf(stderr, "%llu flushes, %llu compactions, %llu stalls, %d Dranges\n",
               (unsigned long long)st.flushes, (unsigned long long)st.compactions,
               (unsigned long long)st.stalls, st.dranges);
  // The background work the test is about did run while the threads did.
  EXPECT_GT(st.flushes, 0u);
  EXPECT_GT(st.compactions, 0u);
  EXPECT_GT(st.major_reorganizations + st.minor_reorganizations, 0u);
  EXPECT_EQ(st.dranges, o.dranges);
}

INSTANTIATE_TEST_SUITE_P(Log, RangeEngineConcurrencyTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "logged" : "unlogged"; });

}  // namespace
}  // namespace nova::ltc
