#include "common/lsm/merging_iterator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "common/lsm/lsm_test_util.h"
#include "common/mutex.h"
#include "common/thread_pool.h"
#include "tests/util/test_util.h"

namespace nova::lsm {
namespace {

using test::KV;
using test::VectorIterator;

// Bytewise order reversed: checks the merge follows the comparator it is given.
class ReverseBytewise : public leveldb::Comparator {
 public:
  const char* Name() const override { return "nova.test.ReverseBytewise"; }
  int Compare(const leveldb::Slice& a, const leveldb::Slice& b) const override {
    return -a.compare(b);
  }
  void FindShortestSeparator(std::string*, const leveldb::Slice&) const override {}
  void FindShortSuccessor(std::string*) const override {}
};

// One entry of the model: the merged order is (key, child) under the comparator.
struct ModelEntry {
  std::string key;
  size_t child;
  std::string value;
};

// Random children with distinct keys within a child and repeated keys across children.
std::vector<std::vector<KV>> RandomChildren(std::mt19937_64* rng, const leveldb::Comparator* cmp,
                                            size_t n) {
  std::vector<std::vector<KV>> children(n);
  for (size_t c = 0; c < n; ++c) {
    const size_t count = (*rng)() % 4 == 0 ? 0 : (*rng)() % 30;
    std::set<std::string> keys;
    for (size_t i = 0; i < count; ++i) keys.insert(test::RandomKey(rng, 3, 3));
    for (const std::string& k : keys) {
      children[c].emplace_back(k, "c" + std::to_string(c) + ":" + k);
    }
    std::sort(children[c].begin(), children[c].end(),
              [cmp](const KV& a, const KV& b) { return cmp->Compare(a.first, b.first) < 0; });
  }
  return children;
}

void RunRandomized(const leveldb::Comparator* cmp, const char* name,
                   ThreadPool* seek_pool = nullptr, int rounds = 300) {
  std::mt19937_64 rng(nova::test::TestSeed(name));
  constexpr int kOpsPerRound = 300;
  for (int round = 0; round < rounds; ++round) {
    const size_t n = rng() % 3 == 0 ? rng() % 3 : rng() % 64;
    const auto children = RandomChildren(&rng, cmp, n);
    std::vector<ModelEntry> model;
    std::vector<leveldb::Iterator*> iters;
    for (size_t c = 0; c < n; ++c) {
      for (const KV& kv : children[c]) model.push_back({kv.first, c, kv.second});
      iters.push_back(new VectorIterator(cmp, children[c]));
    }
    std::sort(model.begin(), model.end(), [cmp](const ModelEntry& a, const ModelEntry& b) {
      const int r = cmp->Compare(a.key, b.key);
      return r < 0 || (r == 0 && a.child < b.child);
    });
    std::unique_ptr<leveldb::Iterator> it(NewMergingIterator(cmp, iters, seek_pool));

    // pos indexes model; model.size() means not valid.
    size_t pos = model.size();
    std::string trace;
    for (int op = 0; op < kOpsPerRound; ++op) {
      const bool valid = pos < model.size();
      switch (rng() % 6) {
        case 0:
          trace += " first";
          it->SeekToFirst();
          pos = 0;
          break;
        case 1:
          trace += " last";
          it->SeekToLast();
          pos = model.empty() ? 0 : model.size() - 1;
          break;
        case 2: {
          const std::string target = test::RandomKey(&rng, 4, 3);
          trace += " seek(" + target + ")";
          it->Seek(target);
          pos = 0;
          while (pos < model.size() && cmp->Compare(model[pos].key, target) < 0) ++pos;
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
          pos = pos == 0 ? model.size() : pos - 1;
          break;
      }
      ASSERT_EQ(pos < model.size(), it->Valid()) << "round " << round << ":" << trace;
      if (pos < model.size()) {
        ASSERT_EQ(model[pos].key, it->key().ToString()) << "round " << round << ":" << trace;
        ASSERT_EQ(model[pos].value, it->value().ToString()) << "round " << round << ":" << trace;
      }
    }
    ASSERT_TRUE(it->status().ok());
  }
}

TEST(MergingIteratorTest, RandomizedBytewise) {
  RunRandomized(leveldb::BytewiseComparator(), "MergingIteratorTest.RandomizedBytewise");
}

TEST(MergingIteratorTest, RandomizedReverseComparator) {
  ReverseBytewise cmp;
  RunRandomized(&cmp, "MergingIteratorTest.RandomizedReverseComparator");
}

// The randomized test with the children positioned concurrently on a pool.
TEST(MergingIteratorTest, RandomizedWithASeekPool) {
  ThreadPool pool("test-seek", 3, 1024);
  // Fewer rounds: every seek wakes the pool's threads (slow under the sanitizers).
  RunRandomized(leveldb::BytewiseComparator(), "RandomizedWithASeekPool", &pool, 40);
}

// A child whose seeks wait until every child of the merge is seeking at the same time (or
// a deadline passes): only concurrent seeks all see the others.
class RendezvousIterator final : public VectorIterator {
 public:
  struct Meeting {
    Mutex mu;
    CondVar cv;
    size_t arrived GUARDED_BY(mu) = 0;
  };
  RendezvousIterator(const leveldb::Comparator* cmp, std::vector<KV> entries, Meeting* meeting,
                     size_t everyone, std::atomic<size_t>* met)
      : VectorIterator(cmp, std::move(entries)), meeting_(meeting), everyone_(everyone),
        met_(met) {}
  void Seek(const leveldb::Slice& target) override {
    {
      MutexLock lock(&meeting_->mu);
      ++meeting_->arrived;
      meeting_->cv.NotifyAll();
      if (meeting_->cv.WaitUntil(&lock, std::chrono::steady_clock::now() + std::chrono::seconds(5),
                                 [&]() REQUIRES(meeting_->mu) {
                                   return meeting_->arrived >= everyone_;
                                 })) {
        met_->fetch_add(1);
      }
    }
    VectorIterator::Seek(target);
  }

 private:
  Meeting* const meeting_;
  const size_t everyone_;
  std::atomic<size_t>* const met_;
};

TEST(MergingIteratorTest, ASeekPoolSeeksTheChildrenConcurrently) {
  constexpr size_t kChildren = 4;
  ThreadPool pool("test-seek", kChildren - 1, 16);  // the caller seeks one child itself
  RendezvousIterator::Meeting meeting;
  std::atomic<size_t> met{0};
  std::vector<leveldb::Iterator*> children;
  for (size_t c = 0; c < kChildren; ++c) {
    children.push_back(new RendezvousIterator(leveldb::BytewiseComparator(),
                                              {{"k" + std::to_string(c), "v"}}, &meeting,
                                              kChildren, &met));
  }
  std::unique_ptr<leveldb::Iterator> it(
      NewMergingIterator(leveldb::BytewiseComparator(), children, &pool));
  it->Seek("k");
  EXPECT_EQ(met.load(), kChildren) << "the children were not all seeking at once";
  for (size_t c = 0; c < kChildren; ++c) {
    ASSERT_TRUE(it->Valid());
    EXPECT_EQ(it->key().ToString(), "k" + std::to_string(c));
    it->Next();
  }
  EXPECT_FALSE(it->Valid());
}

// Every key in every child: full scans both ways visit all entries in order, and a
// direction switch at every step retraces exactly.
TEST(MergingIteratorTest, EqualKeysAcrossManyChildren) {
  const leveldb::Comparator* cmp = leveldb::BytewiseComparator();
  constexpr size_t kChildren = 100;
  std::vector<leveldb::Iterator*> iters;
  for (size_t c = 0; c < kChildren; ++c) {
    iters.push_back(new VectorIterator(cmp, {{"a", std::to_string(c)}, {"b", std::to_string(c)}}));
  }
  std::unique_ptr<leveldb::Iterator> it(NewMergingIterator(cmp, iters));
  std::vector<KV> forward = test::ReadAll(it.get());
  ASSERT_EQ(2 * kChildren, forward.size());
  for (size_t i = 0; i < forward.size(); ++i) {
    EXPECT_EQ(i < kChildren ? "a" : "b", forward[i].first);
    EXPECT_EQ(std::to_string(i % kChildren), forward[i].second);
  }
  size_t i = forward.size();
  for (it->SeekToLast(); it->Valid(); it->Prev()) {
    ASSERT_GT(i, 0u);
    --i;
    EXPECT_EQ(forward[i], KV(it->key().ToString(), it->value().ToString()));
  }
  EXPECT_EQ(0u, i);
  // Zig-zag: Next, Prev, Next from every position.
  it->SeekToFirst();
  for (size_t p = 0; p + 1 < forward.size(); ++p) {
    it->Next();
    it->Prev();
    ASSERT_TRUE(it->Valid());
    ASSERT_EQ(forward[p], KV(it->key().ToString(), it->value().ToString()));
    it->Next();
  }
}

TEST(MergingIteratorTest, NoChildrenAndOneChild) {
  const leveldb::Comparator* cmp = leveldb::BytewiseComparator();
  std::unique_ptr<leveldb::Iterator> empty(NewMergingIterator(cmp, {}));
  empty->SeekToFirst();
  EXPECT_FALSE(empty->Valid());
  EXPECT_TRUE(empty->status().ok());
  std::unique_ptr<leveldb::Iterator> one(
      NewMergingIterator(cmp, {new VectorIterator(cmp, {{"a", "1"}, {"b", "2"}})}));
  EXPECT_EQ((std::vector<KV>{{"a", "1"}, {"b", "2"}}), test::ReadAll(one.get()));
}

// A failing child ends the merged stream (no partial view) and its error is reported; with
// several failing children the first in child order is.
TEST(MergingIteratorTest, ChildErrorEndsTheStream) {
  const leveldb::Comparator* cmp = leveldb::BytewiseComparator();
  auto* bad = new VectorIterator(cmp, {{"b", "x"}, {"d", "x"}, {"f", "x"}});
  bad->FailAt(1);  // "d"
  std::unique_ptr<leveldb::Iterator> it(NewMergingIterator(
      cmp, {new VectorIterator(cmp, {{"a", "1"}, {"c", "1"}, {"e", "1"}, {"g", "1"}}), bad}));
  std::vector<std::string> seen;
  for (it->SeekToFirst(); it->Valid(); it->Next()) seen.push_back(it->key().ToString());
  // Moving "bad" off "b" fails: "c" (from the healthy child) is not yielded either.
  EXPECT_EQ((std::vector<std::string>{"a", "b"}), seen);
  EXPECT_TRUE(it->status().IsIOError()) << it->status().ToString();
  // Still failed on a new seek: the child's error is sticky.
  it->SeekToLast();
  EXPECT_FALSE(it->Valid());

  auto* bad0 = new VectorIterator(cmp, {{"a", "x"}});
  bad0->FailAt(0);
  std::unique_ptr<leveldb::Iterator> it2(NewMergingIterator(
      cmp, {new VectorIterator(cmp, {{"b", "1"}}),
            leveldb::NewErrorIterator(leveldb::Status::Corruption("first")), bad0}));
  it2->SeekToFirst();
  EXPECT_FALSE(it2->Valid());
  EXPECT_TRUE(it2->status().IsCorruption()) << it2->status().ToString();
}

// A child failing during a direction switch also ends the stream.
TEST(MergingIteratorTest, ChildErrorDuringDirectionSwitch) {
  const leveldb::Comparator* cmp = leveldb::BytewiseComparator();
  auto* bad = new VectorIterator(cmp, {{"a", "x"}, {"c", "x"}});
  std::unique_ptr<leveldb::Iterator> it(
      NewMergingIterator(cmp, {new VectorIterator(cmp, {{"b", "1"}, {"d", "1"}}), bad}));
  it->Seek("b");
  ASSERT_TRUE(it->Valid());
  bad->FailAt(0);  // switching to reverse must step back onto "a"
  it->Prev();
  EXPECT_FALSE(it->Valid());
  EXPECT_TRUE(it->status().IsIOError());
}

}  // namespace
}  // namespace nova::lsm
