#include "common/lsm/user_iterator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/lsm/lsm_test_util.h"
#include "common/lsm/merging_iterator.h"
#include "tests/util/test_util.h"

namespace nova::lsm {
namespace {

using test::KV;
using test::VectorIterator;
using test::VersionModel;

class UserIteratorTest : public ::testing::Test {
 protected:
  // An internal iterator over `entries` (internal key order), spread over `children`
  // children merged together so the merge is exercised too.
  leveldb::Iterator* Internal(const std::vector<KV>& entries, size_t children,
                              std::mt19937_64* rng) {
    std::vector<std::vector<KV>> parts(children);
    for (const KV& kv : entries) parts[(*rng)() % children].push_back(kv);
    std::vector<leveldb::Iterator*> iters;
    for (auto& p : parts) iters.push_back(new VectorIterator(&icmp_, std::move(p)));
    return NewMergingIterator(&icmp_, std::move(iters));
  }

  leveldb::Iterator* User(std::vector<KV> internal, SequenceNumber snapshot) {
    return NewUserIterator(&icmp_, new VectorIterator(&icmp_, std::move(internal)), snapshot);
  }

  static KV Current(leveldb::Iterator* it) {
    return {it->key().ToString(), it->value().ToString()};
  }

  InternalKeyComparator icmp_{leveldb::BytewiseComparator()};
};

// Random versions of random keys, read at several snapshots with random Seek/Next/Prev
// sequences, against the model's view.
TEST_F(UserIteratorTest, RandomizedAgainstModel) {
  std::mt19937_64 rng(nova::test::TestSeed("UserIteratorTest.RandomizedAgainstModel"));
  constexpr int kRounds = 200;
  constexpr int kOpsPerSnapshot = 200;
  for (int round = 0; round < kRounds; ++round) {
    VersionModel model;
    const SequenceNumber writes = rng() % 120;
    for (SequenceNumber seq = 1; seq <= writes; ++seq) {
      const ValueType type = rng() % 3 == 0 ? kTypeDeletion : kTypeValue;
      model[{test::RandomKey(&rng, 4, 3), seq}] = {
          type, type == kTypeValue ? "v" + std::to_string(seq) : ""};
    }
    const std::vector<KV> entries = test::InternalEntries(model);
    std::vector<SequenceNumber> snapshots = {0, kMaxSequenceNumber, writes / 2};
    for (int i = 0; i < 3; ++i) snapshots.push_back(rng() % (writes + 1));

    for (SequenceNumber snapshot : snapshots) {
      const std::vector<KV> view = test::ModelView(model, snapshot);
      std::unique_ptr<leveldb::Iterator> it(
          NewUserIterator(&icmp_, Internal(entries, 1 + rng() % 4, &rng), snapshot));
      size_t pos = view.size();  // view.size(): not valid
      std::string trace;
      for (int op = 0; op < kOpsPerSnapshot; ++op) {
        const bool valid = pos < view.size();
        switch (rng() % 6) {
          case 0:
            trace += " first";
            it->SeekToFirst();
            pos = 0;
            break;
          case 1:
            trace += " last";
            it->SeekToLast();
            pos = view.empty() ? 0 : view.size() - 1;
            break;
          case 2: {
            const std::string target = test::RandomKey(&rng, 5, 3);
            trace += " seek(" + target + ")";
            it->Seek(target);
            pos = 0;
            while (pos < view.size() && view[pos].first < target) ++pos;
            break;
          }
          case 3:
          case 4:
            if (!valid) continue;
            trace += " next";
            it->Next();
            ++pos;
            break;
          default:
            if (!valid) continue;
            trace += " prev";
            it->Prev();
            pos = pos == 0 ? view.size() : pos - 1;
            break;
        }
        const std::string where = "round " + std::to_string(round) + " snapshot " +
                                  std::to_string(snapshot) + ":" + trace;
        ASSERT_EQ(pos < view.size(), it->Valid()) << where;
        if (pos < view.size()) {
          ASSERT_EQ(view[pos], Current(it.get())) << where;
        }
      }
      ASSERT_TRUE(it->status().ok()) << it->status().ToString();
    }
  }
}

TEST_F(UserIteratorTest, VersionsAtSnapshots) {
  // k: v1@1, del@3, v5@5; m: v2@2 only; z: del@4 only.
  VersionModel model;
  model[{"k", 1}] = {kTypeValue, "v1"};
  model[{"m", 2}] = {kTypeValue, "v2"};
  model[{"k", 3}] = {kTypeDeletion, ""};
  model[{"z", 4}] = {kTypeDeletion, ""};
  model[{"k", 5}] = {kTypeValue, "v5"};
  const std::vector<KV> entries = test::InternalEntries(model);
  auto read = [&](SequenceNumber s) {
    std::unique_ptr<leveldb::Iterator> it(User(entries, s));
    return test::ReadAll(it.get());
  };
  EXPECT_EQ(std::vector<KV>{}, read(0));
  EXPECT_EQ((std::vector<KV>{{"k", "v1"}}), read(1));
  EXPECT_EQ((std::vector<KV>{{"k", "v1"}, {"m", "v2"}}), read(2));
  EXPECT_EQ((std::vector<KV>{{"m", "v2"}}), read(3));
  EXPECT_EQ((std::vector<KV>{{"k", "v5"}, {"m", "v2"}}), read(5));
  EXPECT_EQ((std::vector<KV>{{"k", "v5"}, {"m", "v2"}}), read(kMaxSequenceNumber));

  // Backward at snapshot 2 and a switch in the middle.
  std::unique_ptr<leveldb::Iterator> it(User(entries, 2));
  it->SeekToLast();
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(KV("m", "v2"), Current(it.get()));
  it->Prev();
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(KV("k", "v1"), Current(it.get()));
  it->Next();
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(KV("m", "v2"), Current(it.get()));
  it->Next();
  EXPECT_FALSE(it->Valid());
  it->Seek("l");
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(KV("m", "v2"), Current(it.get()));
  it->Prev();
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(KV("k", "v1"), Current(it.get()));
  it->Prev();
  EXPECT_FALSE(it->Valid());
}

TEST_F(UserIteratorTest, EmptyUserKeyAndBinaryKeys) {
  VersionModel model;
  model[{"", 1}] = {kTypeValue, "empty"};
  model[{std::string("\0", 1), 2}] = {kTypeValue, "nul"};
  model[{"\xff\xff", 3}] = {kTypeValue, "ff"};
  std::unique_ptr<leveldb::Iterator> it(User(test::InternalEntries(model), kMaxSequenceNumber));
  EXPECT_EQ(test::ModelView(model, kMaxSequenceNumber), test::ReadAll(it.get()));
  it->Seek("");
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ("empty", it->value().ToString());
  it->SeekToLast();
  it->Prev();
  it->Prev();
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ("", it->key().ToString());
}

// Malformed internal keys surface as Corruption in both directions, never a crash or a
// silently skipped entry.
TEST_F(UserIteratorTest, CorruptKeysAreReported) {
  std::string bad_type = MakeInternalKey("c", 3, kTypeValue);
  bad_type[bad_type.size() - kInternalKeyTrailerBytes] = 7;  // unknown type
  for (const std::string& bad : {std::string("short"), bad_type}) {
    const std::vector<KV> entries = {{MakeInternalKey("a", 1, kTypeValue), "va"},
                                     {bad, "?"},
                                     {MakeInternalKey("e", 2, kTypeValue), "ve"}};
    std::unique_ptr<leveldb::Iterator> it(User(entries, kMaxSequenceNumber));
    it->SeekToFirst();
    ASSERT_TRUE(it->Valid());
    EXPECT_EQ("a", it->key().ToString());
    it->Next();
    EXPECT_FALSE(it->Valid());
    EXPECT_TRUE(it->status().IsCorruption()) << it->status().ToString();
    it->SeekToFirst();  // sticky
    EXPECT_FALSE(it->Valid());

    // Backward, "e" cannot be yielded: the malformed entry before it might have been a
    // newer version of "e".
    std::unique_ptr<leveldb::Iterator> back(User(entries, kMaxSequenceNumber));
    back->SeekToLast();
    EXPECT_FALSE(back->Valid());
    EXPECT_TRUE(back->status().IsCorruption()) << back->status().ToString();
  }
}

// An error of the internal iterator in the middle of a key's versions, met backward
// (oldest first), must not yield the older version as if it were the newest.
TEST_F(UserIteratorTest, InternalErrorNeverYieldsAPartlyReadKey) {
  const std::vector<KV> entries = {{MakeInternalKey("k", 5, kTypeValue), "new"},
                                   {MakeInternalKey("k", 3, kTypeValue), "old"}};
  auto* internal = new VectorIterator(&icmp_, entries);
  internal->FailAt(0);
  std::unique_ptr<leveldb::Iterator> it(NewUserIterator(&icmp_, internal, kMaxSequenceNumber));
  it->SeekToLast();
  EXPECT_FALSE(it->Valid());
  EXPECT_TRUE(it->status().IsIOError()) << it->status().ToString();
}

// Versions newer than the snapshot before the current entry are passed over when turning
// back, and hidden keys between visible ones are skipped both ways.
TEST_F(UserIteratorTest, DirectionSwitchOverHiddenVersions) {
  VersionModel model;
  model[{"a", 1}] = {kTypeValue, "a1"};
  model[{"b", 9}] = {kTypeValue, "b9"};  // newer than the snapshot
  model[{"b", 8}] = {kTypeValue, "b8"};  // newer than the snapshot
  model[{"b", 2}] = {kTypeValue, "b2"};
  model[{"c", 4}] = {kTypeDeletion, ""};
  model[{"c", 3}] = {kTypeValue, "c3"};
  model[{"d", 5}] = {kTypeValue, "d5"};
  std::unique_ptr<leveldb::Iterator> it(User(test::InternalEntries(model), 6));
  it->Seek("b");
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(KV("b", "b2"), Current(it.get()));
  it->Prev();
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(KV("a", "a1"), Current(it.get()));
  it->Next();
  EXPECT_EQ(KV("b", "b2"), Current(it.get()));
  it->Next();
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(KV("d", "d5"), Current(it.get()));
  it->Prev();
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(KV("b", "b2"), Current(it.get()));
}

}  // namespace
}  // namespace nova::lsm
