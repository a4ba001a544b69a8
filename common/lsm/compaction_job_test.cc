// CompactionJob codec (round trips; truncated, damaged and out-of-range input is refused
// with InvalidArgument, never a crash) and RunCompactionJob over a MemoryTableStore
// (outputs under the reserved numbers; running out of them fails and leaves nothing).
#include "common/lsm/compaction_job.h"

#include <gtest/gtest.h>
#include <leveldb/comparator.h>
#include <leveldb/filter_policy.h>

#include <map>
#include <memory>
#include <random>
#include <string>

#include "common/lsm/fragmented_table.h"
#include "common/lsm/memory_table_store.h"
#include "tests/util/test_util.h"

namespace nova::lsm {
namespace {

TableMeta SampleMeta(uint64_t number) {
  TableMeta m;
  m.number = number;
  m.smallest = MakeInternalKey("a", 5, kTypeValue);
  m.largest = MakeInternalKey("z", 9, kTypeDeletion);
  m.num_entries = 12;
  m.smallest_sequence = 5;
  m.largest_sequence = 9;
  m.drange = 3;
  m.layout.file_size = 300;
  m.layout.data_end = 200;
  m.layout.fragment_starts = {0, 100};
  m.fragments = {{{1, 10, 0, 100}, {2, 11, 0, 100}}, {{3, 12, 8, 100}}, {{1, 13, 0, 100}}};
  m.filter = {{1, 13, 108, 40}};
  return m;
}

CompactionJob SampleJob() {
  CompactionJob j;
  j.range_id = 7;
  j.drange = 3;
  j.output_level = 2;
  j.comparator = leveldb::BytewiseComparator()->Name();
  j.inputs = {{1, SampleMeta(40)}, {2, SampleMeta(41)}};
  j.snapshots = {3, 3, 10};
  j.smallest_snapshot = 3;
  j.bottommost = true;
  j.max_output_bytes = 1 << 20;
  j.split_user_keys = {"b", std::string("c\0d", 3)};
  j.block_bytes = 1024;
  j.scatter_width = 2;
  j.bloom_bits_per_key = 10;
  j.fragment_replicas = 2;
  j.output_numbers = {100, 101, 105};
  j.stocs = {{1, "127.0.0.1:1"}, {2, "127.0.0.1:2"}, {3, "127.0.0.1:3"}};
  j.placement = PlacementPolicy::kRandom;  // not the default, so a round trip shows it
  return j;
}

TEST(CompactionJobTest, JobRoundTrips) {
  const CompactionJob job = SampleJob();
  CompactionJob back;
  ASSERT_TRUE(DecodeCompactionJob(EncodeCompactionJob(job), &back).ok());
  EXPECT_EQ(back, job);
}

TEST(CompactionJobTest, PlacementRoundTrips) {
  for (auto policy : {PlacementPolicy::kRandom, PlacementPolicy::kPowerOfD}) {
    CompactionJob job = SampleJob();
    job.placement = policy;
    CompactionJob back;
    ASSERT_TRUE(DecodeCompactionJob(EncodeCompactionJob(job), &back).ok());
    EXPECT_EQ(back.placement, policy);
  }
}

TEST(CompactionJobTest, VersionOneJobsPlaceByPowerOfD) {
  // A version 1 request is a version 2 one without the trailing placement byte.
  std::string v1 = EncodeCompactionJob(SampleJob());
  ASSERT_EQ(v1[0], 2);
  v1[0] = 1;
  v1.pop_back();
  CompactionJob back;
  ASSERT_TRUE(DecodeCompactionJob(v1, &back).ok());
  EXPECT_EQ(back.placement, PlacementPolicy::kPowerOfD);
  CompactionJob expected = SampleJob();
  expected.placement = PlacementPolicy::kPowerOfD;
  EXPECT_EQ(back, expected);
}

TEST(CompactionJobTest, UnknownPlacementOrVersionIsInvalidArgument) {
  std::string bad = EncodeCompactionJob(SampleJob());
  bad.back() = 7;
  CompactionJob out;
  Status s = DecodeCompactionJob(bad, &out);
  EXPECT_TRUE(s.code() == Status::Code::kInvalidArgument) << s.ToString();
  EXPECT_NE(s.message().find("placement"), std::string::npos) << s.ToString();
  bad = EncodeCompactionJob(SampleJob());
  bad[0] = 5;
  s = DecodeCompactionJob(bad, &out);
  EXPECT_TRUE(s.code() == Status::Code::kInvalidArgument) << s.ToString();
}

TEST(CompactionJobTest, OwnerEpochRoundTripsAsVersionThree) {
  CompactionJob job = SampleJob();
  job.owner_epoch = 7;
  const std::string v3 = EncodeCompactionJob(job);
  EXPECT_EQ(v3[0], 3);
  CompactionJob back;
  ASSERT_TRUE(DecodeCompactionJob(v3, &back).ok());
  EXPECT_EQ(back, job);
  // Without an epoch the job stays version 2, which executors before owner fencing accept.
  EXPECT_EQ(EncodeCompactionJob(SampleJob())[0], 2);
  // Version 3 without its epoch is malformed.
  std::string truncated = EncodeCompactionJob(SampleJob());
  truncated[0] = 3;
  Status s = DecodeCompactionJob(truncated, &back);
  EXPECT_TRUE(s.code() == Status::Code::kInvalidArgument) << s.ToString();
}

TEST(CompactionJobTest, ParityAndDrainingStocsRoundTripAsVersionFour) {
  CompactionJob job = SampleJob();
  // An input with parity (hybrid: meta replicated, data striped) and one covering its meta.
  job.inputs[0].table.parity = {{3, 20, 0, 100}, {2, 21, 0, 100}};
  job.inputs[1].table.parity = {{2, 22, 0, 140}};
  job.inputs[1].table.parity_covers_meta = true;
  for (auto mode : {TableAvailability::kParity, TableAvailability::kHybrid}) {
    job.availability = mode;
    job.parity_fragments = 2;
    job.no_new_data = {3};
    const std::string v4 = EncodeCompactionJob(job);
    EXPECT_EQ(v4[0], 4);
    CompactionJob back;
    Status s = DecodeCompactionJob(v4, &back);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(back, job);
    // Truncated anywhere in the new fields: InvalidArgument.
    for (size_t cut = 1; cut <= 4; ++cut) {
      s = DecodeCompactionJob(v4.substr(0, v4.size() - cut), &back);
      EXPECT_TRUE(s.code() == Status::Code::kInvalidArgument) << s.ToString();
    }
  }
  // Replicas with a draining StoC needs version 4 too; without one it stays older.
  job.availability = TableAvailability::kReplicas;
  CompactionJob back;
  ASSERT_TRUE(DecodeCompactionJob(EncodeCompactionJob(job), &back).ok());
  EXPECT_EQ(back, job);
  job.no_new_data.clear();
  EXPECT_EQ(EncodeCompactionJob(job)[0], 2);
  // None travels as one replica.
  job.availability = TableAvailability::kNone;
  ASSERT_TRUE(DecodeCompactionJob(EncodeCompactionJob(job), &back).ok());
  EXPECT_EQ(back.fragment_replicas, 1u);
  // Out of range: m = 0 or an unknown mode.
  job.availability = TableAvailability::kHybrid;
  job.parity_fragments = 0;
  EXPECT_FALSE(DecodeCompactionJob(EncodeCompactionJob(job), &back).ok());
}

TEST(CompactionJobTest, ResultRoundTrips) {
  CompactionJobResult r;
  r.executed_by = 2;
  r.outputs = {SampleMeta(100), SampleMeta(101)};
  r.stats.input_entries = 50;
  r.stats.output_entries = 30;
  r.stats.dropped_entries = 20;
  r.stats.dropped_deletions = 4;
  CompactionJobResult back;
  ASSERT_TRUE(DecodeCompactionJobResult(EncodeCompactionJobResult(r), &back).ok());
  EXPECT_EQ(back.executed_by, 2u);
  EXPECT_EQ(back.outputs, r.outputs);
  EXPECT_EQ(back.stats.input_entries, 50u);
  EXPECT_EQ(back.stats.output_entries, 30u);
  EXPECT_EQ(back.stats.dropped_entries, 20u);
  EXPECT_EQ(back.stats.dropped_deletions, 4u);
  EXPECT_EQ(back.stats.outputs, 2u);
}

TEST(CompactionJobTest, TruncatedOrDamagedJobsAreInvalidArgument) {
  const std::string good = EncodeCompactionJob(SampleJob());
  const CompactionJob untouched = SampleJob();
  for (size_t n = 0; n < good.size(); ++n) {
    CompactionJob out = untouched;
    Status s = DecodeCompactionJob(good.substr(0, n), &out);
    ASSERT_TRUE(s.code() == Status::Code::kInvalidArgument)
        << "prefix of " << n << " bytes: " << s.ToString();
    EXPECT_EQ(out, untouched) << "changed by a failed decode";
  }
  CompactionJob out;
  EXPECT_TRUE(DecodeCompactionJob(good + "x", &out).code() == Status::Code::kInvalidArgument);
  // Random damage: any outcome but a crash; a failure is InvalidArgument.
  std::mt19937_64 rng(test::TestSeed("CompactionJobTest.Damage"));
  for (int i = 0; i < 5000; ++i) {
    std::string bad = good;
    for (int k = 0; k < 3; ++k) bad[rng() % bad.size()] = static_cast<char>(rng());
    Status s = DecodeCompactionJob(bad, &out);
    EXPECT_TRUE(s.ok() || s.code() == Status::Code::kInvalidArgument) << s.ToString();
  }
  for (int i = 0; i < 2000; ++i) {
    std::string junk(rng() % 200, '\0');
    for (auto& c : junk) c = static_cast<char>(rng());
    Status s = DecodeCompactionJob(junk, &out);
    EXPECT_TRUE(s.ok() || s.code() == Status::Code::kInvalidArgument) << s.ToString();
  }
}

TEST(CompactionJobTest, OutOfRangeValuesAreInvalidArgument) {
  auto refused = [](CompactionJob j, const char* what) {
    CompactionJob out;
    Status s = DecodeCompactionJob(EncodeCompactionJob(j), &out);
    EXPECT_TRUE(s.code() == Status::Code::kInvalidArgument) << what << ": " << s.ToString();
  };
  CompactionJob j = SampleJob();
  j.inputs.clear();
  refused(j, "no inputs");
  j = SampleJob();
  j.output_numbers.clear();
  refused(j, "no numbers");
  j = SampleJob();
  j.stocs.clear();
  refused(j, "no StoCs");
  j = SampleJob();
  j.output_level = 0;
  refused(j, "output level 0");
  j = SampleJob();
  j.output_level = kNumLevels;
  refused(j, "output level past the last");
  j = SampleJob();
  j.inputs[0].level = kNumLevels;
  refused(j, "input level");
  j = SampleJob();
  j.scatter_width = 0;
  refused(j, "rho 0");
  j = SampleJob();
  j.max_output_bytes = 0;
  refused(j, "max output 0");
  j = SampleJob();
  j.fragment_replicas = 4;
  refused(j, "R above the StoCs");
  j = SampleJob();
  j.block_bytes = 0;
  refused(j, "block size 0");
}

TEST(CompactionJobTest, DamagedResultsAreCorruption) {
  CompactionJobResult r;
  r.outputs = {SampleMeta(100)};
  const std::string good = EncodeCompactionJobResult(r);
  for (size_t n = 0; n < good.size(); ++n) {
    CompactionJobResult out;
    EXPECT_TRUE(DecodeCompactionJobResult(good.substr(0, n), &out).IsCorruption()) << n;
  }
}

// ---- RunCompactionJob ------------------------------------------------------------------

class RunCompactionJobTest : public ::testing::Test {
 protected:
  RunCompactionJobTest()
      : icmp_(leveldb::BytewiseComparator()), policy_(leveldb::NewBloomFilterPolicy(10)) {}

  struct Less {
    const InternalKeyComparator* icmp;
    bool operator()(const std::string& a, const std::string& b) const {
      return icmp->Compare(a, b) < 0;
    }
  };

  // Writes a table of `entries` (internal key -> value, in order) as table `number`.
  TableMeta Write(uint64_t number, const std::map<std::string, std::string, Less>& entries) {
    TableBuildOptions o;
    o.block_size = 256;
    o.filter_policy = policy_.get();
    FragmentedTableBuilder b(&icmp_, o);
    for (const auto& [k, v] : entries) b.Add(k, v);
    BuiltTable built;
    EXPECT_TRUE(b.Finish(&built).ok());
    TableMeta m;
    m.number = number;
    m.smallest = built.smallest;
    m.largest = built.largest;
    m.num_entries = built.num_entries;
    m.layout = built.layout;
    EXPECT_TRUE(store_.WriteTable(number, built, &m).ok());
    return m;
  }

  CompactionJob TwoTableJob(int keys, uint64_t max_output_bytes) {
    std::map<std::string, std::string, Less> newer(Less{&icmp_}), older(Less{&icmp_});
    for (int i = 0; i < keys; ++i) {
      const std::string key = "key" + std::to_string(1000 + i);
      older[MakeInternalKey(key, 1, kTypeValue)] = std::string(50, 'o');
      if (i % 2 == 0) newer[MakeInternalKey(key, 2, kTypeValue)] = std::string(50, 'n');
      if (i % 5 == 0) newer[MakeInternalKey(key, 3, kTypeDeletion)] = "";
    }
    CompactionJob j;
    j.comparator = leveldb::BytewiseComparator()->Name();
    j.output_level = 1;
    j.inputs = {{0, Write(1, newer)}, {1, Write(2, older)}};
    j.bottommost = true;
    j.max_output_bytes = max_output_bytes;
    j.block_bytes = 256;
    j.output_numbers = {10, 11, 12};
    j.stocs = {{kMemoryStoreStocId, "memory"}};
    return j;
  }

  InternalKeyComparator icmp_;
  std::unique_ptr<const leveldb::FilterPolicy> policy_;
  MemoryTableStore store_;
};

TEST_F(RunCompactionJobTest, MergesIntoReservedNumbers) {
  const CompactionJob job = TwoTableJob(100, 1 << 20);
  CompactionJobResult r;
  ASSERT_TRUE(RunCompactionJob(job, &icmp_, &store_, &r).ok());
  ASSERT_EQ(r.outputs.size(), 1u);
  EXPECT_EQ(r.outputs[0].number, 10u);
  // 100 keys; 20 deleted (every 5th), the deletions dropped at the bottom.
  EXPECT_EQ(r.outputs[0].num_entries, 80u);
  EXPECT_EQ(r.stats.input_entries, 100u + 50u + 20u);
  EXPECT_EQ(r.stats.dropped_deletions, 20u);
  EXPECT_TRUE(store_.HasTable(10));
}

TEST_F(RunCompactionJobTest, RunningOutOfNumbersFailsAndCleansUp) {
  // Tiny outputs: far more than the three reserved numbers are needed.
  const CompactionJob job = TwoTableJob(200, 512);
  const size_t before = store_.live_tables();
  CompactionJobResult r;
  Status s = RunCompactionJob(job, &icmp_, &store_, &r);
  EXPECT_TRUE(s.IsResourceExhausted()) << s.ToString();
  EXPECT_EQ(store_.live_tables(), before) << "outputs of the failed job were left behind";
}

TEST_F(RunCompactionJobTest, UnreadableInputFails) {
  CompactionJob job = TwoTableJob(10, 1 << 20);
  job.inputs[1].table.number = 99;  // not stored
  CompactionJobResult r;
  EXPECT_FALSE(RunCompactionJob(job, &icmp_, &store_, &r).ok());
  EXPECT_FALSE(store_.HasTable(10));
}

}  // namespace
}  // namespace nova::lsm
