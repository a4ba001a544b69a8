// Offloaded compactions against three real nova_stoc daemons (docs/ltc.md "Compaction
// offload", docs/stoc.md "Compaction service"):
//  - a job run by a StoC's compaction service gives exactly the outputs (keys, values,
//    metadata, statistics) the same job gives when run at the LTC, and ran at the StoC;
//  - a job that does not decode is refused with InvalidArgument and the StoC lives on;
//  - an engine offloading its compactions keeps matching a model when the StoC its jobs
//    go to is killed -9: the jobs fall back to the LTC and compaction finishes.
#include <gtest/gtest.h>
#include <leveldb/comparator.h>
#include <leveldb/filter_policy.h>

#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/lsm/compaction_job.h"
#include "common/rpc/rpc_endpoint.h"
#include "common/transport/transport.h"
#include "ltc/engine/compaction_offloader.h"
#include "ltc/engine/range_engine.h"
#include "stoc/client/stoc_client.h"
#include "stoc/client/stoc_protocol.h"
#include "stoc/client/stoc_table_store.h"
#include "tests/util/external_daemon.h"
#include "tests/util/stoc_connection.h"
#include "tests/util/test_util.h"

namespace nova::ltc {
namespace {

using namespace std::chrono_literals;

constexpr uint32_t kNumStocs = 3;
constexpr uint32_t kRange = 11;
constexpr auto kStocTimeout = 10s;

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

// Every entry of a table, in order.
std::vector<std::pair<std::string, std::string>> ReadAll(lsm::TableStore* store,
                                                         const lsm::InternalKeyComparator* icmp,
                                                         const lsm::TableMeta& meta) {
  std::vector<std::pair<std::string, std::string>> out;
  auto source = store->OpenTable(meta);
  EXPECT_TRUE(source.ok()) << source.status().ToString();
  if (!source.ok()) return out;
  std::unique_ptr<lsm::FragmentedTable> table;
  lsm::TableReadOptions ro;
  ro.comparator = icmp;
  Status s = lsm::OpenTable(ro, meta.layout, source.value().get(), &table);
  EXPECT_TRUE(s.ok()) << s.ToString();
  if (!s.ok()) return out;
  auto it = table->NewIterator(leveldb::ReadOptions());
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    out.emplace_back(it->key().ToString(), it->value().ToString());
  }
  EXPECT_TRUE(it->status().ok()) << it->status().ToString();
  return out;
}

class CompactionOffloadTest : public ::testing::Test {
 protected:
  CompactionOffloadTest() : icmp_(leveldb::BytewiseComparator()) {}

  void SetUp() override {
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    seed_ = test::TestSeed(info->name());
    dir_ = test::TestTempDir(std::string("compaction_offload_itest-") + info->name());
    auto secret = test::WriteClusterSecret(dir_);
    ASSERT_TRUE(secret.ok()) << secret.status().ToString();
    for (uint32_t id = 1; id <= kNumStocs; ++id) {
      auto d = std::make_unique<test::ExternalDaemon>(
          test::StocDaemonOptions(dir_, secret.value(), id,
                                  {"--stoc_memory_limit_mb=64", "--stoc_file_buffer_mb=64",
                                   "--stoc_compaction_threads=2"}));
      Status s = d->Start();
      ASSERT_TRUE(s.ok()) << s.ToString();
      stocs_[id] = std::move(d);
    }
    test::StocConnectionOptions co;
    co.node_name = "ltc-offload-itest";
    co.cluster_secret = ReadWholeFile(secret.value());
    co.stoc_timeout = kStocTimeout;
    co.reconnect_initial_backoff_ms = 20;
    co.reconnect_max_backoff_ms = 200;
    std::map<uint32_t, std::string> addresses;
    for (auto& [id, d] : stocs_) addresses[id] = d->address();
    Status cs = conn_.Init(co, addresses);
    ASSERT_TRUE(cs.ok()) << cs.ToString();
  }

  void TearDown() override {
    engine_.reset();
    offloader_.reset();
    store_.reset();
    conn_.Shutdown();
    stocs_.clear();
  }

  std::map<uint32_t, std::string> Addresses(const std::vector<uint32_t>& ids) {
    std::map<uint32_t, std::string> m;
    for (uint32_t id : ids) m[id] = stocs_[id]->address();
    return m;
  }

  void MakeStore(const std::vector<uint32_t>& ids, int replicas) {
    stoc::StocTableStoreOptions so;
    so.range_id = kRange;
    so.stocs = ids;
    so.fragment_replicas = replicas;
    so.seed = seed_;
    store_ = std::make_unique<stoc::StocTableStore>(conn_.client(), so);
    Status s = store_->Init();
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  // An input table of keys [first, first + n) at `seq`, every `del_every`-th a deletion.
  lsm::TableMeta WriteInput(uint64_t number, int first, int n, lsm::SequenceNumber seq,
                            int del_every) {
    std::unique_ptr<const leveldb::FilterPolicy> policy(leveldb::NewBloomFilterPolicy(10));
    lsm::TableBuildOptions o;
    o.block_size = 512;
    o.num_data_fragments = 2;
    o.filter_policy = policy.get();
    lsm::FragmentedTableBuilder b(&icmp_, o);
    std::mt19937_64 rng(seed_ + number);
    for (int i = first; i < first + n; ++i) {
      char key[16];
      std::snprintf(key, sizeof(key), "key%06d", i);
      const bool del = del_every > 0 && i % del_every == 0;
      const std::string value =
          del ? std::string() : std::string(20 + rng() % 200, static_cast<char>('a' + rng() % 26));
      b.Add(lsm::MakeInternalKey(key, seq, del ? lsm::kTypeDeletion : lsm::kTypeValue), value);
    }
    lsm::BuiltTable built;
    EXPECT_TRUE(b.Finish(&built).ok());
    lsm::TableMeta m;
    m.number = number;
    m.smallest = built.smallest;
    m.largest = built.largest;
    m.num_entries = built.num_entries;
    m.smallest_sequence = m.largest_sequence = seq;
    m.layout = built.layout;
    Status s = store_->WriteTable(number, built, &m);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return m;
  }

  uint64_t seed_ = 0;
  std::string dir_;
  const lsm::InternalKeyComparator icmp_;
  std::map<uint32_t, std::unique_ptr<test::ExternalDaemon>> stocs_;
  test::StocConnection conn_;
  // Destroyed in reverse: the engine, then the offloader and the store it uses.
  std::unique_ptr<stoc::StocTableStore> store_;
  std::unique_ptr<StocCompactionOffloader> offloader_;
  std::unique_ptr<RangeEngine> engine_;
};

TEST_F(CompactionOffloadTest, OffloadedJobEqualsLocalJob) {
  ASSERT_NO_FATAL_FAILURE(MakeStore({1, 2, 3}, 2));
  lsm::CompactionJob job;
  job.range_id = kRange;
  job.drange = 0;
  job.output_level = 1;
  job.comparator = leveldb::BytewiseComparator()->Name();
  job.inputs = {{0, WriteInput(1, 0, 3000, 30, 7)},
                {0, WriteInput(2, 1500, 3000, 20, 0)},
                {1, WriteInput(3, 0, 6000, 10, 0)}};
  job.snapshots = {15, 25};
  job.smallest_snapshot = 15;
  job.bottommost = true;
  job.max_output_bytes = 64 << 10;
  job.split_user_keys = {"key002000", "key004000"};
  job.block_bytes = 512;
  job.scatter_width = 2;
  job.bloom_bits_per_key = 10;
  job.fragment_replicas = 2;
  job.stocs = {};  // the offloader fills them in
  lsm::CompactionJob local = job;
  for (uint64_t n = 100; n < 200; ++n) job.output_numbers.push_back(n);
  for (uint64_t n = 200; n < 300; ++n) local.output_numbers.push_back(n);

  lsm::CompactionJobResult here;
  Status s = lsm::RunCompactionJob(local, &icmp_, store_.get(), &here);
  ASSERT_TRUE(s.ok()) << s.ToString();

  StocCompactionOffloaderOptions oo;
  oo.policy = OffloadPolicy::kRoundRobin;
  oo.stocs = Addresses({1, 2, 3});
  oo.fragment_replicas = 2;
  offloader_ = std::make_unique<StocCompactionOffloader>(conn_.client(), oo);
  ASSERT_TRUE(offloader_->Init().ok());
  const uint32_t chosen = offloader_->ChooseStoc();
  lsm::CompactionJobResult there;
  s = offloader_->RunAt(chosen, job, &there);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(there.executed_by, chosen);
  EXPECT_EQ(offloader_->GetStats().succeeded_by_stoc[chosen], 1u);

  EXPECT_GT(here.outputs.size(), 3u) << "the job should cut several outputs";
  ASSERT_EQ(there.outputs.size(), here.outputs.size());
  EXPECT_EQ(there.stats.input_entries, here.stats.input_entries);
  EXPECT_EQ(there.stats.output_entries, here.stats.output_entries);
  EXPECT_EQ(there.stats.dropped_entries, here.stats.dropped_entries);
  EXPECT_EQ(there.stats.dropped_deletions, here.stats.dropped_deletions);
  for (size_t i = 0; i < here.outputs.size(); ++i) {
    const lsm::TableMeta& a = here.outputs[i];
    const lsm::TableMeta& b = there.outputs[i];
    EXPECT_EQ(b.number, 100 + i);
    EXPECT_EQ(b.smallest, a.smallest) << "output " << i;
    EXPECT_EQ(b.largest, a.largest) << "output " << i;
    EXPECT_EQ(b.num_entries, a.num_entries) << "output " << i;
    EXPECT_EQ(b.smallest_sequence, a.smallest_sequence) << "output " << i;
    EXPECT_EQ(b.largest_sequence, a.largest_sequence) << "output " << i;
    EXPECT_EQ(b.layout, a.layout) << "output " << i;
    ASSERT_EQ(b.fragments.size(), a.fragments.size());
    for (const auto& replicas : b.fragments) {
      EXPECT_TRUE(replicas.empty() || replicas.size() == 2u) << "R = 2";
    }
    // The LTC reads what the StoC wrote, and it is what the LTC would have written.
    EXPECT_EQ(ReadAll(store_.get(), &icmp_, b), ReadAll(store_.get(), &icmp_, a)) << "output " << i;
    auto filter = store_->ReadFilter(b);
    ASSERT_TRUE(filter.ok()) << filter.status().ToString();
    auto local_filter = store_->ReadFilter(a);
    ASSERT_TRUE(local_filter.ok());
    EXPECT_EQ(filter.value(), local_filter.value());
  }
}

TEST_F(CompactionOffloadTest, BadJobsAreRefusedAndTheStocLivesOn) {
  auto r = conn_.client()->Call(1, stoc::kCompact, "not a compaction job", kStocTimeout);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidArgument) << r.status().ToString();
  // A well-formed job whose inputs do not exist fails cleanly too.
  ASSERT_NO_FATAL_FAILURE(MakeStore({1, 2, 3}, 1));
  lsm::CompactionJob job;
  job.range_id = kRange;
  job.comparator = leveldb::BytewiseComparator()->Name();
  job.inputs = {{0, WriteInput(1, 0, 100, 5, 0)}};
  ASSERT_TRUE(store_->DeleteTable(job.inputs[0].table).ok());
  job.output_numbers = {50};
  job.stocs = {{1, stocs_[1]->address()}, {2, stocs_[2]->address()}, {3, stocs_[3]->address()}};
  r = conn_.client()->Call(2, stoc::kCompact, lsm::EncodeCompactionJob(job), kStocTimeout);
  ASSERT_FALSE(r.ok());
  // An unknown comparator is not guessed at.
  job.comparator = "my.ReverseComparator";
  r = conn_.client()->Call(3, stoc::kCompact, lsm::EncodeCompactionJob(job), kStocTimeout);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kNotSupported) << r.status().ToString();
  for (uint32_t id = 1; id <= kNumStocs; ++id) {
    EXPECT_TRUE(stocs_[id]->IsRunning());
    EXPECT_TRUE(conn_.client()->Stats(id).ok());
  }
}

// The range's tables live on StoCs 1 and 2; its compactions go to StoC 3, which is killed
// halfway through the writes. Jobs then fall back to the LTC; nothing is lost.
TEST_F(CompactionOffloadTest, EngineFallsBackWhenItsStocDies) {
  ASSERT_NO_FATAL_FAILURE(MakeStore({1, 2}, 1));
  StocCompactionOffloaderOptions oo;
  oo.policy = OffloadPolicy::kLeastLoaded;
  oo.stocs = Addresses({3});
  oo.storage_stocs = Addresses({1, 2});
  oo.timeout = 20s;
  offloader_ = std::make_unique<StocCompactionOffloader>(conn_.client(), oo);
  ASSERT_TRUE(offloader_->Init().ok());
  EngineOptions eo;
  eo.range_id = kRange;
  eo.memtable_bytes = 16 << 10;
  eo.memtables = 4;
  eo.sstable_bytes = 32 << 10;
  eo.block_bytes = 1024;
  eo.l0_compaction_trigger = 2;
  eo.level1_bytes = 64 << 10;
  eo.compaction_offloader = offloader_.get();
  engine_ = std::make_unique<RangeEngine>(eo, store_.get());
  ASSERT_TRUE(engine_->Open().ok());

  std::map<std::string, std::string> model;
  std::mt19937_64 rng(seed_);
  constexpr int kWrites = 6000;
  for (int i = 0; i < kWrites; ++i) {
    if (i == kWrites / 2) {
      ASSERT_TRUE(engine_->FlushAll().ok());
      ASSERT_TRUE(engine_->WaitForCompactions().ok());
      ASSERT_GT(engine_->GetStats().compactions_offloaded, 0u) << "nothing was offloaded";
      std::fprintf(stderr, "killing stoc-3 after %llu offloaded compactions\n",
                   (unsigned long long)engine_->GetStats().compactions_offloaded);
      stocs_[3]->Kill();
    }
    const std::string key = "k" + std::to_string(rng() % 2000);
    if (rng() % 10 == 0) {
      ASSERT_TRUE(engine_->Delete(key).ok());
      model.erase(key);
    } else {
      const std::string value(rng() % 100, static_cast<char>('a' + rng() % 26));
      ASSERT_TRUE(engine_->Put(key, value).ok());
      model[key] = value;
    }
  }
  ASSERT_TRUE(engine_->FlushAll().ok());
  ASSERT_TRUE(engine_->WaitForCompactions().ok());
  const EngineStats st = engine_->GetStats();
  std::fprintf(stderr, "%llu compactions, %llu offloaded, %llu fell back\n",
               (unsigned long long)st.compactions, (unsigned long long)st.compactions_offloaded,
               (unsigned long long)st.compaction_offload_fallbacks);
  EXPECT_GT(st.compaction_offload_fallbacks, 0u) << "no job fell back after the kill";
  // Each compaction ran at the StoC or here after a fallback (a local run that failed is
  // retried, after another fallback).
  EXPECT_LE(st.compactions, st.compactions_offloaded + st.compaction_offload_fallbacks);
  EXPECT_GT(offloader_->GetStats().jobs_failed, 0u);
  for (int k = 0; k < 2000; ++k) {
    const std::string key = "k" + std::to_string(k);
    std::string value;
    Status s = engine_->Get(key, &value);
    auto it = model.find(key);
    if (it == model.end()) {
      EXPECT_TRUE(s.IsNotFound()) << key << ": " << s.ToString();
    } else {
      ASSERT_TRUE(s.ok()) << key << ": " << s.ToString();
      EXPECT_EQ(value, it->second) << key;
    }
  }
}

}  // namespace
}  // namespace nova::ltc
