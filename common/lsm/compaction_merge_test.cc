#include "common/lsm/compaction_merge.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/lsm/lsm_test_util.h"
#include "common/lsm/merging_iterator.h"
#include "common/lsm/user_iterator.h"
#include "tests/util/test_util.h"

namespace nova::lsm {
namespace {

using test::KV;
using test::VectorIterator;
using test::VersionModel;

// Records outputs in memory and checks the sink protocol (Start, Add..., Finish).
class RecordingSink : public CompactionOutputSink {
 public:
  Status StartOutput() override {
    if (open_) return Status::IllegalState("StartOutput with an open output");
    open_ = true;
    outputs.emplace_back();
    bytes_ = 0;
    return Status::OK();
  }
  Status Add(const leveldb::Slice& ikey, const leveldb::Slice& value) override {
    if (!open_) return Status::IllegalState("Add without an open output");
    if (fail_after_adds_ >= 0 && adds_++ >= fail_after_adds_) return Status::IOError("disk full");
    outputs.back().emplace_back(ikey.ToString(), value.ToString());
    bytes_ += ikey.size() + value.size();
    return Status::OK();
  }
  uint64_t CurrentBytes() const override { return bytes_; }
  Status FinishOutput() override {
    if (!open_) return Status::IllegalState("FinishOutput without an open output");
    open_ = false;
    return Status::OK();
  }

  void FailAfterAdds(int n) { fail_after_adds_ = n; }
  bool open() const { return open_; }

  std::vector<std::vector<KV>> outputs;

 private:
  bool open_ = false;
  uint64_t bytes_ = 0;
  int fail_after_adds_ = -1;
  int adds_ = 0;
};

class CompactionMergeTest : public ::testing::Test {
 protected:
  CompactionMergeOptions Options(std::vector<SequenceNumber> snapshots, bool bottommost) {
    CompactionMergeOptions o;
    o.icmp = &icmp_;
    o.snapshots = std::move(snapshots);
    o.smallest_snapshot_or_max = o.snapshots.empty() ? kMaxSequenceNumber : o.snapshots.front();
    o.bottommost = bottommost;
    return o;
  }

  Status Merge(const std::vector<KV>& input, const CompactionMergeOptions& o, RecordingSink* sink,
               CompactionStats* stats) {
    std::unique_ptr<leveldb::Iterator> it(new VectorIterator(&icmp_, input));
    return RunCompactionMerge(it.get(), o, sink, stats);
  }

  // The user's view at `snapshot` of the outputs plus the `lower` level.
  std::vector<KV> ReadBack(const std::vector<std::vector<KV>>& outputs,
                           const std::vector<KV>& lower, SequenceNumber snapshot) {
    std::vector<leveldb::Iterator*> iters;
    for (const auto& out : outputs) iters.push_back(new VectorIterator(&icmp_, out));
    iters.push_back(new VectorIterator(&icmp_, lower));
    std::unique_ptr<leveldb::Iterator> it(
        NewUserIterator(&icmp_, NewMergingIterator(&icmp_, std::move(iters)), snapshot));
    std::vector<KV> view = test::ReadAll(it.get());
    EXPECT_TRUE(it->status().ok()) << it->status().ToString();
    return view;
  }

  static std::string UserKey(const KV& entry) { return ExtractUserKey(entry.first).ToString(); }

  InternalKeyComparator icmp_{leveldb::BytewiseComparator()};
};

// Stripe of `seq`: index of the first snapshot >= seq (snapshots.size() for "latest").
size_t Stripe(const std::vector<SequenceNumber>& snapshots, SequenceNumber seq) {
  return std::lower_bound(snapshots.begin(), snapshots.end(), seq) - snapshots.begin();
}

// Index of the split interval holding `user_key`: the number of split keys <= it.
size_t Interval(const std::vector<std::string>& splits, const std::string& user_key) {
  return std::upper_bound(splits.begin(), splits.end(), user_key) - splits.begin();
}

// Random inputs, snapshots, split keys and sizes; checks every property in the header.
TEST_F(CompactionMergeTest, RandomizedAgainstModel) {
  std::mt19937_64 rng(nova::test::TestSeed("CompactionMergeTest.RandomizedAgainstModel"));
  constexpr int kRounds = 1500;
  for (int round = 0; round < kRounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const bool bottommost = rng() % 2 == 0;
    // Not bottommost: a lower level holds older versions, which kept deletions must go on
    // hiding. Its sequence numbers are below the input's (the LSM invariant).
    VersionModel lower_model;
    const SequenceNumber lower_writes = bottommost ? 0 : rng() % 30;
    for (SequenceNumber seq = 1; seq <= lower_writes; ++seq) {
      lower_model[{test::RandomKey(&rng, 4, 2), seq}] = {kTypeValue, "lower" + std::to_string(seq)};
    }
    VersionModel model;  // the input
    const SequenceNumber writes = rng() % 150;
    for (SequenceNumber seq = lower_writes + 1; seq <= lower_writes + writes; ++seq) {
      const ValueType type = rng() % 3 == 0 ? kTypeDeletion : kTypeValue;
      std::string value =
          type == kTypeValue ? std::string(rng() % 20, 'v') + std::to_string(seq) : "";
      model[{test::RandomKey(&rng, 4, 2), seq}] = {type, value};
    }
    const SequenceNumber last_seq = lower_writes + writes;
    std::vector<SequenceNumber> snapshots(rng() % 6);
    for (auto& s : snapshots) s = rng() % (last_seq + 2);
    std::sort(snapshots.begin(), snapshots.end());
    CompactionMergeOptions o = Options(snapshots, bottommost);
    o.max_output_bytes = 1 + rng() % 300;
    for (int i = static_cast<int>(rng() % 4); i > 0; --i) {
      o.split_user_keys.push_back(test::RandomKey(&rng, 5, 2));
    }
    std::sort(o.split_user_keys.begin(), o.split_user_keys.end());
    o.split_user_keys.erase(std::unique(o.split_user_keys.begin(), o.split_user_keys.end()),
                            o.split_user_keys.end());

    const std::vector<KV> input = test::InternalEntries(model);
    const std::vector<KV> lower = test::InternalEntries(lower_model);
    RecordingSink sink;
    CompactionStats stats;
    Status s = Merge(input, o, &sink, &stats);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_FALSE(sink.open());

    // 1. Every snapshot, and the latest, reads the same before and after.
    VersionModel before = model;
    before.insert(lower_model.begin(), lower_model.end());
    std::vector<SequenceNumber> read_points = snapshots;
    read_points.push_back(kMaxSequenceNumber);
    for (SequenceNumber snap : read_points) {
      ASSERT_EQ(test::ModelView(before, snap), ReadBack(sink.outputs, lower, snap))
          << "snapshot " << snap;
    }

    // 2. The output is exactly the newest version per stripe, minus (bottommost only) the
    //    deletions whose next older kept version is not a value.
    std::vector<KV> stripe_newest;
    std::vector<ValueType> types;
    for (auto it = model.begin(); it != model.end(); ++it) {
      if (it != model.begin()) {
        auto prev = std::prev(it);
        if (prev->first.first == it->first.first &&
            Stripe(snapshots, prev->first.second) == Stripe(snapshots, it->first.second)) {
          continue;
        }
      }
      stripe_newest.emplace_back(
          MakeInternalKey(it->first.first, it->first.second, it->second.type), it->second.value);
      types.push_back(it->second.type);
    }
    std::vector<KV> expected;
    for (size_t i = 0; i < stripe_newest.size(); ++i) {
      if (bottommost && types[i] == kTypeDeletion) {
        const bool value_below = i + 1 < stripe_newest.size() &&
                                 UserKey(stripe_newest[i + 1]) == UserKey(stripe_newest[i]) &&
                                 types[i + 1] == kTypeValue;
        if (!value_below) continue;
      }
      expected.push_back(stripe_newest[i]);
    }
    std::vector<KV> all;
    for (const auto& out : sink.outputs) all.insert(all.end(), out.begin(), out.end());
    ASSERT_EQ(expected, all);

    // 3. Outputs: non-empty, never share a user key, never straddle a split key, and a
    //    new output starts only when the size limit or a split key says so.
    for (size_t i = 0; i < sink.outputs.size(); ++i) {
      const auto& out = sink.outputs[i];
      ASSERT_FALSE(out.empty());
      const std::string first = UserKey(out.front());
      const std::string last = UserKey(out.back());
      EXPECT_EQ(Interval(o.split_user_keys, first), Interval(o.split_user_keys, last))
          << "output " << i << " straddles a split key: " << first << ".." << last;
      uint64_t bytes_before_last_key = 0;
      for (const KV& kv : out) {
        if (UserKey(kv) != last) bytes_before_last_key += kv.first.size() + kv.second.size();
      }
      EXPECT_LT(bytes_before_last_key, o.max_output_bytes) << "output " << i;
      if (i + 1 < sink.outputs.size()) {
        const std::string next_first = UserKey(sink.outputs[i + 1].front());
        EXPECT_NE(last, next_first) << "user key split across outputs " << i << ", " << i + 1;
        uint64_t bytes = 0;
        for (const KV& kv : out) bytes += kv.first.size() + kv.second.size();
        EXPECT_TRUE(bytes >= o.max_output_bytes ||
                    Interval(o.split_user_keys, last) != Interval(o.split_user_keys, next_first))
            << "needless cut after output " << i;
      }
    }

    // 4. Stats add up.
    EXPECT_EQ(input.size(), stats.input_entries);
    EXPECT_EQ(all.size(), stats.output_entries);
    EXPECT_EQ(input.size() - all.size(), stats.dropped_entries);
    EXPECT_EQ(sink.outputs.size(), stats.outputs);
    if (!bottommost) {
      EXPECT_EQ(0u, stats.dropped_deletions);
    }
  }
}

// Snapshots pin old versions; shadowed ones go.
TEST_F(CompactionMergeTest, SnapshotsKeepTheVersionsTheySee) {
  const std::vector<KV> input = {{MakeInternalKey("k", 9, kTypeValue), "v9"},
                                 {MakeInternalKey("k", 7, kTypeValue), "v7"},
                                 {MakeInternalKey("k", 5, kTypeDeletion), ""},
                                 {MakeInternalKey("k", 4, kTypeValue), "v4"},
                                 {MakeInternalKey("k", 2, kTypeValue), "v2"}};
  RecordingSink sink;
  CompactionStats stats;
  // Snapshot 6 sees del@5, snapshot 4 sees v4; latest sees v9.
  ASSERT_TRUE(Merge(input, Options({4, 6}, false), &sink, &stats).ok());
  ASSERT_EQ(1u, sink.outputs.size());
  EXPECT_EQ((std::vector<KV>{input[0], input[2], input[3]}), sink.outputs[0]);
  EXPECT_EQ(2u, stats.dropped_entries);
  EXPECT_EQ(1u, stats.outputs);
}

// Bottommost: a deletion that hides nothing goes, one that hides a snapshot's value stays.
TEST_F(CompactionMergeTest, BottommostDropsOnlyUnneededDeletions) {
  const std::vector<KV> input = {
      {MakeInternalKey("a", 8, kTypeDeletion), ""}, {MakeInternalKey("a", 3, kTypeValue), "a3"},
      {MakeInternalKey("b", 9, kTypeDeletion), ""}, {MakeInternalKey("b", 6, kTypeDeletion), ""},
      {MakeInternalKey("b", 2, kTypeValue), "b2"},  {MakeInternalKey("c", 7, kTypeDeletion), ""}};
  {
    RecordingSink sink;
    CompactionStats stats;
    // Snapshot 5 sees a3 and b2: a@8 and b@6 hide them from the latest; b@9 is redundant
    // (b@6 already hides b2); c@7 hides nothing.
    ASSERT_TRUE(Merge(input, Options({5, 7}, true), &sink, &stats).ok());
    ASSERT_EQ(1u, sink.outputs.size());
    EXPECT_EQ((std::vector<KV>{input[0], input[1], input[3], input[4]}), sink.outputs[0]);
    EXPECT_EQ(2u, stats.dropped_deletions);
  }
  {
    RecordingSink sink;
    CompactionStats stats;
    // No snapshot: every deletion shadows all older versions and is itself dropped.
    ASSERT_TRUE(Merge(input, Options({}, true), &sink, &stats).ok());
    EXPECT_TRUE(sink.outputs.empty());
    EXPECT_EQ(0u, stats.outputs);
    EXPECT_EQ(3u, stats.dropped_deletions);
    EXPECT_EQ(input.size(), stats.dropped_entries);
  }
  {
    RecordingSink sink;
    CompactionStats stats;
    // Not bottommost: every newest-per-stripe deletion stays.
    ASSERT_TRUE(Merge(input, Options({}, false), &sink, &stats).ok());
    ASSERT_EQ(1u, sink.outputs.size());
    EXPECT_EQ((std::vector<KV>{input[0], input[2], input[5]}), sink.outputs[0]);
    EXPECT_EQ(0u, stats.dropped_deletions);
  }
}

TEST_F(CompactionMergeTest, SplitKeysCutOutputs) {
  std::vector<KV> input;
  for (char c = 'a'; c <= 'h'; ++c)
    input.emplace_back(MakeInternalKey(std::string(1, c), 1, kTypeValue), "v");
  CompactionMergeOptions o = Options({}, false);
  o.split_user_keys = {"c", "c2", "f"};  // nothing lies in [c2, f) but d, e
  RecordingSink sink;
  CompactionStats stats;
  ASSERT_TRUE(Merge(input, o, &sink, &stats).ok());
  std::vector<std::vector<std::string>> keys;
  for (const auto& out : sink.outputs) {
    keys.emplace_back();
    for (const KV& kv : out) keys.back().push_back(UserKey(kv));
  }
  EXPECT_EQ((std::vector<std::vector<std::string>>{{"a", "b"}, {"c"}, {"d", "e"}, {"f", "g", "h"}}),
            keys);
  EXPECT_EQ(4u, stats.outputs);
}

TEST_F(CompactionMergeTest, SizeCutsOutputsButNeverAUserKey) {
  constexpr int kKeys = 100;
  constexpr size_t kValueBytes = 100;
  std::vector<KV> input;
  for (int i = 0; i < kKeys; ++i) {
    char key[8];
    std::snprintf(key, sizeof(key), "k%03d", i);
    input.emplace_back(MakeInternalKey(key, 1, kTypeValue), std::string(kValueBytes, 'x'));
  }
  // 50 versions of one key, all pinned by snapshots, at the front.
  std::vector<KV> versions;
  std::vector<SequenceNumber> snapshots;
  for (SequenceNumber s = 100; s > 50; --s) {
    versions.emplace_back(MakeInternalKey("a", s, kTypeValue), std::string(kValueBytes, 'y'));
    snapshots.push_back(s);
  }
  std::sort(snapshots.begin(), snapshots.end());
  versions.insert(versions.end(), input.begin(), input.end());
  CompactionMergeOptions o = Options(snapshots, false);
  o.max_output_bytes = 1000;
  RecordingSink sink;
  CompactionStats stats;
  ASSERT_TRUE(Merge(versions, o, &sink, &stats).ok());
  ASSERT_GE(sink.outputs.size(), 2u);
  // The first output holds all 50 versions of "a" (far over the limit) and nothing else.
  ASSERT_EQ(50u, sink.outputs[0].size());
  for (const KV& kv : sink.outputs[0]) EXPECT_EQ("a", UserKey(kv));
  // The rest: 9 entries of 112 bytes reach 1000 bytes; 100 keys make 12 outputs.
  for (size_t i = 1; i + 1 < sink.outputs.size(); ++i) EXPECT_EQ(9u, sink.outputs[i].size());
  EXPECT_EQ(13u, sink.outputs.size());
  EXPECT_EQ(versions.size(), stats.output_entries);
}

TEST_F(CompactionMergeTest, EmptyInputMakesNoOutput) {
  RecordingSink sink;
  CompactionStats stats;
  ASSERT_TRUE(Merge({}, Options({}, true), &sink, &stats).ok());
  EXPECT_TRUE(sink.outputs.empty());
  EXPECT_EQ(0u, stats.outputs);
}

TEST_F(CompactionMergeTest, CorruptInputIsAnError) {
  const std::string a = MakeInternalKey("a", 5, kTypeValue);
  const std::string b = MakeInternalKey("b", 5, kTypeValue);
  std::string bad_type = MakeInternalKey("c", 3, kTypeValue);
  bad_type[bad_type.size() - kInternalKeyTrailerBytes] = 9;
  const std::vector<std::vector<KV>> cases = {
      {{a, "1"}, {"short", "2"}, {b, "3"}},                    // malformed
      {{a, "1"}, {bad_type, "2"}},                             // unknown type
      {{b, "1"}, {a, "2"}},                                    // user keys out of order
      {{MakeInternalKey("a", 3, kTypeValue), "1"}, {a, "2"}},  // sequences out of order
      {{a, "1"}, {a, "2"}},                                    // duplicate
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    RecordingSink sink;
    CompactionStats stats;
    Status s = Merge(cases[i], Options({}, true), &sink, &stats);
    EXPECT_TRUE(s.IsCorruption()) << "case " << i << ": " << s.ToString();
  }
}

TEST_F(CompactionMergeTest, InputAndSinkErrorsPropagate) {
  const std::vector<KV> input = {{MakeInternalKey("a", 2, kTypeValue), "1"},
                                 {MakeInternalKey("b", 1, kTypeValue), "2"}};
  {
    auto* it = new VectorIterator(&icmp_, input);
    it->FailAt(1);
    std::unique_ptr<leveldb::Iterator> owner(it);
    RecordingSink sink;
    Status s = RunCompactionMerge(it, Options({}, true), &sink, nullptr);
    EXPECT_EQ(Status::Code::kIOError, s.code()) << s.ToString();
  }
  {
    RecordingSink sink;
    sink.FailAfterAdds(1);
    CompactionStats stats;
    Status s = Merge(input, Options({}, true), &sink, &stats);
    EXPECT_EQ(Status::Code::kIOError, s.code()) << s.ToString();
    EXPECT_EQ(1u, stats.output_entries);
  }
}

TEST_F(CompactionMergeTest, BadOptionsAreInvalidArgument) {
  RecordingSink sink;
  std::vector<CompactionMergeOptions> bad(5, Options({}, true));
  bad[0].icmp = nullptr;
  bad[1].snapshots = {5, 3};
  bad[1].smallest_snapshot_or_max = 5;
  bad[2].snapshots = {4};  // smallest_snapshot_or_max left at kMaxSequenceNumber
  bad[3].max_output_bytes = 0;
  bad[4].split_user_keys = {"b", "b"};
  for (size_t i = 0; i < bad.size(); ++i) {
    Status s = Merge({}, bad[i], &sink, nullptr);
    EXPECT_EQ(Status::Code::kInvalidArgument, s.code()) << "case " << i << ": " << s.ToString();
  }
}

}  // namespace
}  // namespace nova::lsm
