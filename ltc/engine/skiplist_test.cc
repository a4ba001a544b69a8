#include "ltc/engine/skiplist.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ltc/engine/arena.h"
#include "tests/util/test_util.h"

namespace nova::ltc {
namespace {

using Key = uint64_t;

struct KeyComparator {
  int operator()(const Key& a, const Key& b) const { return a < b ? -1 : (a > b ? 1 : 0); }
};
using List = SkipList<Key, KeyComparator>;
using Model = std::set<Key>;

// Everything the list shows, walking forward from the first key.
std::vector<Key> ScanForward(const List& list) {
  std::vector<Key> keys;
  List::Iterator it(&list);
  for (it.SeekToFirst(); it.Valid(); it.Next()) keys.push_back(it.key());
  return keys;
}

std::vector<Key> ScanBackward(const List& list) {
  std::vector<Key> keys;
  List::Iterator it(&list);
  for (it.SeekToLast(); it.Valid(); it.Prev()) keys.push_back(it.key());
  return keys;
}

TEST(SkipListTest, EmptyList) {
  Arena arena;
  List list(KeyComparator(), &arena, /*seed=*/1);
  EXPECT_FALSE(list.Contains(10));
  List::Iterator it(&list);
  EXPECT_FALSE(it.Valid());
  it.SeekToFirst();
  EXPECT_FALSE(it.Valid());
  it.SeekToLast();
  EXPECT_FALSE(it.Valid());
  it.Seek(100);
  EXPECT_FALSE(it.Valid());
}

TEST(SkipListTest, InsertReportsNeighbours) {
  Arena arena;
  List list(KeyComparator(), &arena, /*seed=*/2);
  List::Neighbors n = list.Insert(10);
  EXPECT_EQ(n.prev, nullptr);
  EXPECT_EQ(n.next, nullptr);
  n = list.Insert(30);
  ASSERT_NE(n.prev, nullptr);
  EXPECT_EQ(*n.prev, 10u);
  EXPECT_EQ(n.next, nullptr);
  n = list.Insert(20);
  ASSERT_NE(n.prev, nullptr);
  ASSERT_NE(n.next, nullptr);
  EXPECT_EQ(*n.prev, 10u);
  EXPECT_EQ(*n.next, 30u);
  n = list.Insert(5);
  EXPECT_EQ(n.prev, nullptr);
  ASSERT_NE(n.next, nullptr);
  EXPECT_EQ(*n.next, 10u);
  EXPECT_EQ(ScanForward(list), (std::vector<Key>{5, 10, 20, 30}));
}

// Keys whose bytes live in the list's nodes (InsertWithData): a C string each.
struct CStringComparator {
  int operator()(const char* a, const char* b) const { return std::strcmp(a, b); }
};
using CStringList = SkipList<const char*, CStringComparator>;

TEST(SkipListTest, InsertWithDataKeepsTheBytesInOrder) {
  const uint64_t seed = test::TestSeed("SkipListTest.InsertWithDataKeepsTheBytesInOrder");
  std::mt19937_64 rng(seed);
  Arena arena;
  CStringList list(CStringComparator(), &arena, seed);
  std::set<std::string> model;
  for (int i = 0; i < 2000; ++i) {
    // Lengths 1..300, so data sizes do not keep nodes aligned by themselves.
    std::string k(1 + rng() % 300, 'a');
    for (char& c : k) c = static_cast<char>('a' + rng() % 26);
    if (!model.insert(k).second) continue;
    const char* data = nullptr;
    const CStringList::Neighbors n = list.InsertWithData(k.size() + 1, [&](char* d) {
      std::memcpy(d, k.c_str(), k.size() + 1);
      data = d;
      return static_cast<const char*>(d);
    });
    ASSERT_EQ(reinterpret_cast<uintptr_t>(data) % Arena::kAlignment, 0u);
    auto pos = model.find(k);
    if (pos == model.begin()) {
      ASSERT_EQ(n.prev, nullptr);
    } else {
      ASSERT_NE(n.prev, nullptr);
      ASSERT_EQ(std::string(*n.prev), *std::prev(pos));
    }
    ASSERT_TRUE(list.Contains(k.c_str()));
  }
  std::vector<std::string> seen;
  CStringList::Iterator it(&list);
  for (it.SeekToFirst(); it.Valid(); it.Next()) seen.emplace_back(it.key());
  EXPECT_EQ(seen, std::vector<std::string>(model.begin(), model.end()));
}

TEST(SkipListTest, RandomizedAgainstStdSet) {
  const uint64_t seed = test::TestSeed("SkipListTest.RandomizedAgainstStdSet");
  std::mt19937_64 rng(seed);
  constexpr Key kKeySpace = 20000;
  Arena arena;
  List list(KeyComparator(), &arena, seed);
  Model model;

  for (int i = 0; i < 5000; ++i) {
    const Key k = rng() % kKeySpace;
    ASSERT_EQ(list.Contains(k), model.count(k) == 1) << "key " << k;
    if (model.count(k) == 1) continue;  // the list holds distinct keys, as the memtable's
    const List::Neighbors n = list.Insert(k);
    auto pos = model.insert(k).first;
    if (pos == model.begin()) {
      ASSERT_EQ(n.prev, nullptr);
    } else {
      ASSERT_NE(n.prev, nullptr);
      ASSERT_EQ(*n.prev, *std::prev(pos));
    }
    if (std::next(pos) == model.end()) {
      ASSERT_EQ(n.next, nullptr);
    } else {
      ASSERT_NE(n.next, nullptr);
      ASSERT_EQ(*n.next, *std::next(pos));
    }
  }

  EXPECT_EQ(ScanForward(list), std::vector<Key>(model.begin(), model.end()));
  EXPECT_EQ(ScanBackward(list), std::vector<Key>(model.rbegin(), model.rend()));

  List::Iterator it(&list);
  for (int i = 0; i < 2000; ++i) {
    const Key target = rng() % (kKeySpace + 10);
    it.Seek(target);
    auto pos = model.lower_bound(target);
    if (pos == model.end()) {
      ASSERT_FALSE(it.Valid()) << "seek " << target;
      continue;
    }
    ASSERT_TRUE(it.Valid()) << "seek " << target;
    ASSERT_EQ(it.key(), *pos);
    // A few steps either way from the seek position.
    const int steps = static_cast<int>(rng() % 4);
    if (rng() % 2 == 0) {
      for (int s = 0; s < steps && it.Valid(); ++s) {
        it.Next();
        ++pos;
        ASSERT_EQ(it.Valid(), pos != model.end());
        if (it.Valid()) {
          ASSERT_EQ(it.key(), *pos);
        }
      }
    } else {
      for (int s = 0; s < steps && it.Valid(); ++s) {
        const bool at_first = pos == model.begin();
        it.Prev();
        ASSERT_EQ(it.Valid(), !at_first);
        if (it.Valid()) {
          ASSERT_EQ(it.key(), *--pos);
        }
      }
    }
  }
  for (int i = 0; i < 2000; ++i) {
    const Key k = rng() % kKeySpace;
    ASSERT_EQ(list.Contains(k), model.count(k) == 1) << "key " << k;
  }
}

// Keys for the concurrency test carry a check byte, so a reader can tell a torn key.
constexpr int kCheckBits = 8;
Key MakeCheckedKey(uint64_t r) {
  const uint64_t body = r >> kCheckBits;
  return (body << kCheckBits) | ((body * 0x9e3779b97f4a7c15ull) >> 56);
}
bool KeyIsIntact(Key k) { return MakeCheckedKey(k) == k; }

// One reader pass over the list while the writer runs. Returns "" or what went wrong.
std::string CheckReaderPass(const List& list, const std::vector<Key>& keys,
                            const std::atomic<size_t>& published, std::mt19937_64* rng) {
  // Every key published before the pass must be seen by it (invariant 6).
  const size_t before = published.load(std::memory_order_acquire);
  std::set<Key> seen;
  List::Iterator it(&list);
  bool first = true;
  Key last = 0;
  for (it.SeekToFirst(); it.Valid(); it.Next()) {
    const Key k = it.key();
    std::ostringstream where;
    where << "key " << k << " after " << last << ": ";
    if (!KeyIsIntact(k)) return where.str() + "torn key";
    if (!first && k <= last) return where.str() + "out of order";
    seen.insert(k);
    first = false;
    last = k;
  }
  for (size_t i = 0; i < before; ++i) {
    if (seen.count(keys[i]) == 0) return "published key missing from scan";
  }
  // Backward, a short stretch from the end, must also be sorted.
  int steps = 0;
  for (it.SeekToLast(); it.Valid() && steps < 50; it.Prev(), ++steps) {
    if (steps > 0 && it.key() >= last) return "backward scan out of order";
    last = it.key();
  }
  if (before > 0) {
    const Key k = keys[(*rng)() % before];
    if (!list.Contains(k)) return "published key not found by Contains";
    it.Seek(k);
    if (!it.Valid() || it.key() != k) return "published key not found by Seek";
  }
  return "";
}

TEST(SkipListTest, ConcurrentReadersSeeSortedCompleteLists) {
  const uint64_t seed = test::TestSeed("SkipListTest.ConcurrentReadersSeeSortedCompleteLists");
  std::mt19937_64 rng(seed);
  constexpr size_t kKeys = 20000;
  constexpr int kReaders = 3;
  std::vector<Key> keys;
  std::set<Key> distinct;
  while (keys.size() < kKeys) {
    const Key k = MakeCheckedKey(rng());
    if (distinct.insert(k).second) keys.push_back(k);
  }

  Arena arena;
  List list(KeyComparator(), &arena, seed);
  std::atomic<size_t> published{0};  // keys[0, published) have been inserted
  std::atomic<bool> writer_done{false};
  std::vector<std::string> errors(kReaders);
  std::vector<int> passes(kReaders, 0);
  std::vector<std::thread> readers;
  for (int r = 0; r < kReaders; ++r) {
    readers.emplace_back([&, r] {
      std::mt19937_64 reader_rng(seed + r + 1);
      bool last_pass = false;
      while (!last_pass && errors[r].empty()) {
        // One more pass after the writer finished checks the complete list.
        last_pass = writer_done.load(std::memory_order_acquire);
        errors[r] = CheckReaderPass(list, keys, published, &reader_rng);
        ++passes[r];
      }
    });
  }
  for (size_t i = 0; i < kKeys; ++i) {
    list.Insert(keys[i]);
    published.store(i + 1, std::memory_order_release);
  }
  writer_done.store(true, std::memory_order_release);
  for (auto& t : readers) t.join();
  for (int r = 0; r < kReaders; ++r) {
    EXPECT_EQ(errors[r], "") << "reader " << r << " (seed " << seed << ")";
    EXPECT_GE(passes[r], 1);
  }
  EXPECT_EQ(ScanForward(list), std::vector<Key>(distinct.begin(), distinct.end()));
}

}  // namespace
}  // namespace nova::ltc
