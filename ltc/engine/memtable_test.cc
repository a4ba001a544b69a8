#include "ltc/engine/memtable.h"

#include <gtest/gtest.h>
#include <leveldb/comparator.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdint>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "tests/util/test_util.h"

namespace nova::ltc {
namespace {

using lsm::SequenceNumber;
using lsm::ValueType;
using GetResult = MemTable::GetResult;

constexpr SequenceNumber kReadAll = lsm::kMaxSequenceNumber;

// The model: user key -> sequence -> entry. Independent of internal-key encoding.
struct ModelEntry {
  ValueType type;
  std::string value;
};
using Model = std::map<std::string, std::map<SequenceNumber, ModelEntry>>;

// What Get should return, from the model.
GetResult ModelGet(const Model& model, const std::string& user_key, SequenceNumber snapshot,
                   std::string* value) {
  auto k = model.find(user_key);
  if (k == model.end()) return GetResult::kNotFound;
  auto v = k->second.upper_bound(snapshot);  // first version newer than the snapshot
  if (v == k->second.begin()) return GetResult::kNotFound;
  --v;
  if (v->second.type == lsm::kTypeDeletion) return GetResult::kDeleted;
  *value = v->second.value;
  return GetResult::kFound;
}

// The entries in iteration order: user key ascending, sequence descending.
std::vector<std::pair<std::string, std::string>> ModelEntries(const Model& model) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [user_key, versions] : model) {
    for (auto v = versions.rbegin(); v != versions.rend(); ++v) {
      out.emplace_back(lsm::MakeInternalKey(user_key, v->first, v->second.type), v->second.value);
    }
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> ScanForward(leveldb::Iterator* it) {
  std::vector<std::pair<std::string, std::string>> out;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    out.emplace_back(it->key().ToString(), it->value().ToString());
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> ScanBackward(leveldb::Iterator* it) {
  std::vector<std::pair<std::string, std::string>> out;
  for (it->SeekToLast(); it->Valid(); it->Prev()) {
    out.emplace_back(it->key().ToString(), it->value().ToString());
  }
  std::reverse(out.begin(), out.end());
  return out;
}

class MemTableTest : public ::testing::Test {
 protected:
  std::shared_ptr<MemTable> NewMemTable(uint64_t id = 1) {
    return std::make_shared<MemTable>(&icmp_, id);
  }

  lsm::InternalKeyComparator icmp_{leveldb::BytewiseComparator()};
};

TEST_F(MemTableTest, EmptyMemTable) {
  auto mem = NewMemTable(42);
  EXPECT_EQ(mem->id(), 42u);
  EXPECT_EQ(mem->num_entries(), 0u);
  EXPECT_EQ(mem->num_unique_keys(), 0u);
  EXPECT_EQ(mem->data_bytes(), 0u);
  EXPECT_EQ(mem->smallest_sequence(), lsm::kMaxSequenceNumber);
  EXPECT_EQ(mem->largest_sequence(), 0u);
  std::string value = "untouched";
  EXPECT_EQ(mem->Get("k", kReadAll, &value), GetResult::kNotFound);
  EXPECT_EQ(mem->Get("", kReadAll, &value), GetResult::kNotFound);
  EXPECT_EQ(value, "untouched");
  std::unique_ptr<leveldb::Iterator> it(mem->NewIterator());
  EXPECT_FALSE(it->Valid());
  it->SeekToFirst();
  EXPECT_FALSE(it->Valid());
  it->SeekToLast();
  EXPECT_FALSE(it->Valid());
  it->Seek(lsm::MakeInternalKey("k", 5, lsm::kTypeForSeek));
  EXPECT_FALSE(it->Valid());
  EXPECT_TRUE(it->status().ok());
}

TEST_F(MemTableTest, SnapshotReadsAndDeletes) {
  auto mem = NewMemTable();
  mem->Add(3, lsm::kTypeValue, "k", "v3");
  mem->Add(1, lsm::kTypeValue, "k", "v1");  // an older version arriving later
  mem->Add(5, lsm::kTypeDeletion, "k", "ignored");
  mem->Add(7, lsm::kTypeValue, "k", "v7");
  mem->Add(2, lsm::kTypeValue, "other", "o2");

  const std::vector<std::pair<SequenceNumber, const char*>> expected = {
      {0, nullptr}, {1, "v1"}, {2, "v1"}, {3, "v3"},   {4, "v3"},
      {5, "-"},     {6, "-"},  {7, "v7"}, {100, "v7"}, {kReadAll, "v7"}};
  for (const auto& [snapshot, want] : expected) {
    std::string value = "untouched";
    const GetResult r = mem->Get("k", snapshot, &value);
    if (want == nullptr) {
      EXPECT_EQ(r, GetResult::kNotFound) << "snapshot " << snapshot;
      EXPECT_EQ(value, "untouched");
    } else if (std::string(want) == "-") {
      EXPECT_EQ(r, GetResult::kDeleted) << "snapshot " << snapshot;
      EXPECT_EQ(value, "untouched");
    } else {
      EXPECT_EQ(r, GetResult::kFound) << "snapshot " << snapshot;
      EXPECT_EQ(value, want) << "snapshot " << snapshot;
    }
  }
  std::string value;
  // A snapshot above the 56-bit range reads everything.
  EXPECT_EQ(mem->Get("k", ~SequenceNumber{0}, &value), GetResult::kFound);
  EXPECT_EQ(value, "v7");
  EXPECT_EQ(mem->Get("other", 1, &value), GetResult::kNotFound);
  EXPECT_EQ(mem->Get("other", 2, &value), GetResult::kFound);
  EXPECT_EQ(value, "o2");
  // Keys next to existing ones are not found.
  EXPECT_EQ(mem->Get("j", kReadAll, &value), GetResult::kNotFound);
  EXPECT_EQ(mem->Get(leveldb::Slice("k\0", 2), kReadAll, &value), GetResult::kNotFound);
  EXPECT_EQ(mem->Get("kk", kReadAll, &value), GetResult::kNotFound);
  EXPECT_EQ(mem->Get("", kReadAll, &value), GetResult::kNotFound);

  EXPECT_EQ(mem->num_entries(), 5u);
  EXPECT_EQ(mem->num_unique_keys(), 2u);
  EXPECT_EQ(mem->data_bytes(), (1u + 2) * 3 + 1 + (5u + 2));  // deletion stores no value
  EXPECT_EQ(mem->smallest_sequence(), 1u);
  EXPECT_EQ(mem->largest_sequence(), 7u);

  // The deletion's value is stored empty.
  std::unique_ptr<leveldb::Iterator> it(mem->NewIterator());
  it->Seek(lsm::MakeInternalKey("k", 5, lsm::kTypeForSeek));
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->key().ToString(), lsm::MakeInternalKey("k", 5, lsm::kTypeDeletion));
  EXPECT_EQ(it->value().ToString(), "");
}

TEST_F(MemTableTest, EmptyAndBinaryKeysAndLargeValues) {
  auto mem = NewMemTable();
  const std::string big(4 << 20, 'b');      // 4 MiB
  std::string bigger((5 << 20) + 3, '\0');  // 5 MiB of varied bytes
  for (size_t i = 0; i < bigger.size(); ++i) bigger[i] = static_cast<char>(i * 13);
  const std::string nul_key("\0", 1);
  const std::string ff_key("\xff\xff", 2);
  mem->Add(1, lsm::kTypeValue, "", "empty-key");
  mem->Add(2, lsm::kTypeValue, nul_key, big);
  mem->Add(3, lsm::kTypeValue, ff_key, bigger);
  mem->Add(4, lsm::kTypeValue, "a", "");
  EXPECT_EQ(mem->num_unique_keys(), 4u);
  EXPECT_GE(mem->ApproximateMemoryUsage(), big.size() + bigger.size());

  std::string value;
  ASSERT_EQ(mem->Get("", kReadAll, &value), GetResult::kFound);
  EXPECT_EQ(value, "empty-key");
  ASSERT_EQ(mem->Get(nul_key, kReadAll, &value), GetResult::kFound);
  EXPECT_EQ(value, big);
  ASSERT_EQ(mem->Get(ff_key, kReadAll, &value), GetResult::kFound);
  EXPECT_EQ(value, bigger);
  ASSERT_EQ(mem->Get("a", kReadAll, &value), GetResult::kFound);
  EXPECT_EQ(value, "");

  std::unique_ptr<leveldb::Iterator> it(mem->NewIterator());
  std::vector<std::string> user_keys;
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    user_keys.push_back(lsm::ExtractUserKey(it->key()).ToString());
  }
  EXPECT_EQ(user_keys, (std::vector<std::string>{"", nul_key, "a", ff_key}));
}

TEST_F(MemTableTest, UniqueKeysCountedWithOutOfOrderSequences) {
  auto mem = NewMemTable();
  // Prefixes and near neighbours ("", "a", "a\0", "ab") must not be taken for one key.
  const std::string a0("a\0", 2);
  const std::vector<std::tuple<SequenceNumber, std::string, uint64_t>> steps = {
      {50, "a", 1},  {10, "a", 1}, {90, "a", 1},  // versions of "a" in every order
      {30, "ab", 2}, {20, a0, 3},  {60, a0, 3},  {5, "", 4},  {95, "", 4},
      {70, "a", 4},  {1, "ab", 4}, {99, "b", 5}, {40, a0, 5}, {2, "ab", 5},
  };
  for (const auto& [seq, key, unique_after] : steps) {
    mem->Add(seq, seq % 3 == 0 ? lsm::kTypeDeletion : lsm::kTypeValue, key, "v");
    EXPECT_EQ(mem->num_unique_keys(), unique_after) << "after adding " << key << "@" << seq;
  }
  EXPECT_EQ(mem->num_entries(), steps.size());
  EXPECT_EQ(mem->smallest_sequence(), 1u);
  EXPECT_EQ(mem->largest_sequence(), 99u);
}

TEST_F(MemTableTest, IteratorKeepsMemTableAlive) {
  auto mem = NewMemTable();
  mem->Add(1, lsm::kTypeValue, "k", "v");
  std::weak_ptr<MemTable> weak = mem;
  std::unique_ptr<leveldb::Iterator> it(mem->NewIterator());
  mem.reset();
  EXPECT_FALSE(weak.expired());
  it->SeekToFirst();
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(it->key().ToString(), lsm::MakeInternalKey("k", 1, lsm::kTypeValue));
  EXPECT_EQ(it->value().ToString(), "v");
  it.reset();
  EXPECT_TRUE(weak.expired());
}

// A random user key: often from a small pool (many versions, shared prefixes), sometimes
// fresh; bytes cover the whole range, the empty key included.
std::string RandomUserKey(std::mt19937_64* rng, const std::vector<std::string>& pool) {
  if ((*rng)() % 4 != 0) return pool[(*rng)() % pool.size()];
  std::string k((*rng)() % 12, '\0');
  for (char& c : k) c = static_cast<char>((*rng)() % 4 == 0 ? (*rng)() : 'a' + (*rng)() % 3);
  return k;
}

TEST_F(MemTableTest, RandomizedAgainstModel) {
  const uint64_t seed = test::TestSeed("MemTableTest.RandomizedAgainstModel");
  std::mt19937_64 rng(seed);
  constexpr size_t kOps = 4000;
  constexpr size_t kCheckEvery = 500;
  std::vector<std::string> pool = {"", std::string("\0", 1), "a", "ab", "abc", "b", "\xff"};
  for (int i = 0; i < 40; ++i) pool.push_back(RandomUserKey(&rng, {"x"}));

  // Sequences are unique but arrive shuffled, as from concurrent writers.
  std::vector<SequenceNumber> seqs(kOps);
  std::iota(seqs.begin(), seqs.end(), 1);
  std::shuffle(seqs.begin(), seqs.end(), rng);

  auto mem = NewMemTable(seed);
  Model model;
  uint64_t data_bytes = 0;
  for (size_t op = 0; op < kOps; ++op) {
    const std::string key = RandomUserKey(&rng, pool);
    const SequenceNumber seq = seqs[op];
    const ValueType type = rng() % 5 == 0 ? lsm::kTypeDeletion : lsm::kTypeValue;
    std::string value;
    if (type == lsm::kTypeValue) {
      value.assign(rng() % 50 == 0 ? rng() % 6000 : rng() % 40, '\0');
      for (char& c : value) c = static_cast<char>(rng());
    }
    mem->Add(seq, type, key, type == lsm::kTypeValue ? leveldb::Slice(value) : "dropped");
    model[key][seq] = ModelEntry{type, value};
    data_bytes += key.size() + value.size();
    if ((op + 1) % kCheckEvery != 0) continue;

    SCOPED_TRACE("after op " + std::to_string(op) + ", seed " + std::to_string(seed));
    ASSERT_EQ(mem->num_entries(), op + 1);
    ASSERT_EQ(mem->num_unique_keys(), model.size());
    ASSERT_EQ(mem->data_bytes(), data_bytes);
    ASSERT_EQ(mem->smallest_sequence(), *std::min_element(seqs.begin(), seqs.begin() + op + 1));
    ASSERT_EQ(mem->largest_sequence(), *std::max_element(seqs.begin(), seqs.begin() + op + 1));

    // Point reads at random snapshots, for present and absent keys.
    for (int i = 0; i < 300; ++i) {
      const std::string k = RandomUserKey(&rng, pool);
      const SequenceNumber snapshot =
          i % 10 == 0 ? kReadAll : (i % 10 == 1 ? 0 : rng() % (kOps + 2));
      std::string got = "none", want = "none";
      ASSERT_EQ(mem->Get(k, snapshot, &got), ModelGet(model, k, snapshot, &want))
          << "key '" << k << "' snapshot " << snapshot;
      ASSERT_EQ(got, want);
    }

    // Full scans both ways.
    const auto entries = ModelEntries(model);
    std::unique_ptr<leveldb::Iterator> it(mem->NewIterator());
    ASSERT_EQ(ScanForward(it.get()), entries);
    ASSERT_EQ(ScanBackward(it.get()), entries);

    // Seeks to random internal keys, then a few steps either way.
    for (int i = 0; i < 200; ++i) {
      const std::string target =
          lsm::MakeInternalKey(RandomUserKey(&rng, pool), rng() % (kOps + 2),
                               rng() % 2 == 0 ? lsm::kTypeValue : lsm::kTypeDeletion);
      auto pos = std::lower_bound(
          entries.begin(), entries.end(), target,
          [&](const auto& e, const std::string& t) { return icmp_.Compare(e.first, t) < 0; });
      it->Seek(target);
      size_t idx = pos - entries.begin();
      ASSERT_EQ(it->Valid(), idx < entries.size());
      const bool forward = rng() % 2 == 0;
      for (int s = 0; s < 4 && it->Valid(); ++s) {
        ASSERT_EQ(it->key().ToString(), entries[idx].first);
        ASSERT_EQ(it->value().ToString(), entries[idx].second);
        if (forward) {
          it->Next();
          ++idx;
          ASSERT_EQ(it->Valid(), idx < entries.size());
        } else {
          it->Prev();
          ASSERT_EQ(it->Valid(), idx > 0);
          --idx;
        }
      }
    }
  }
}

// The value the concurrency test writes for (key, seq): a reader recomputes it, so a torn
// or misattributed entry shows up. Its length varies with seq.
std::string ValueFor(const std::string& key, SequenceNumber seq) {
  return key + "@" + std::to_string(seq) + "#" + std::string(seq % 97, 'a' + seq % 26);
}

// Parses the sequence out of ValueFor(key, seq); false if `value` is not such a value.
bool SequenceOfValue(const std::string& key, const std::string& value, SequenceNumber* seq) {
  const size_t at = key.size();
  const size_t hash = value.find('#', at);
  if (value.compare(0, at, key) != 0 || value.size() <= at || value[at] != '@' ||
      hash == std::string::npos) {
    return false;
  }
  const char* digits = value.data() + at + 1;
  const auto [end, ec] = std::from_chars(digits, value.data() + hash, *seq);
  return ec == std::errc() && end == value.data() + hash && value == ValueFor(key, *seq);
}

// One reader pass: a full scan checked for order and intact entries, then point reads.
// Returns "" or what went wrong.
std::string CheckReaderPass(const MemTable& mem, const lsm::InternalKeyComparator& icmp,
                            const std::vector<std::string>& keys,
                            const std::atomic<SequenceNumber>& next_seq,
                            std::map<std::string, SequenceNumber>* newest_seen,
                            std::mt19937_64* rng) {
  const uint64_t counted = mem.num_entries();
  std::unique_ptr<leveldb::Iterator> it(mem.NewIterator());
  std::string prev;
  uint64_t seen = 0;
  for (it->SeekToFirst(); it->Valid(); it->Next(), ++seen) {
    const std::string ikey = it->key().ToString();
    lsm::ParsedInternalKey p;
    if (!lsm::ParseInternalKey(ikey, &p)) return "malformed internal key";
    if (seen > 0 && icmp.Compare(prev, ikey) >= 0) return "scan out of order";
    const std::string user_key = p.user_key.ToString();
    const std::string value = it->value().ToString();
    const std::string want = p.type == lsm::kTypeValue ? ValueFor(user_key, p.sequence) : "";
    if (value != want) return "torn entry: key '" + user_key + "' value '" + value + "'";
    prev = ikey;
  }
  if (seen < counted) return "scan missed counted entries";

  for (int i = 0; i < 50; ++i) {
    const std::string& key = keys[(*rng)() % keys.size()];
    // Newest version: never older than one this reader saw before (entries only arrive).
    std::string value;
    SequenceNumber seq = 0;
    const GetResult r = mem.Get(key, kReadAll, &value);
    if (r == GetResult::kFound) {
      if (!SequenceOfValue(key, value, &seq)) return "Get returned a torn value";
      SequenceNumber& newest = (*newest_seen)[key];
      if (seq < newest) return "Get went back in time for '" + key + "'";
      newest = seq;
    }
    // Snapshot read: never newer than the snapshot.
    const SequenceNumber snapshot = (*rng)() % next_seq.load(std::memory_order_relaxed);
    if (mem.Get(key, snapshot, &value) == GetResult::kFound) {
      if (!SequenceOfValue(key, value, &seq)) return "snapshot Get returned a torn value";
      if (seq > snapshot) return "snapshot Get returned a newer version";
    }
  }
  return "";
}

TEST_F(MemTableTest, ConcurrentWritersAndReaders) {
  const uint64_t seed = test::TestSeed("MemTableTest.ConcurrentWritersAndReaders");
  constexpr int kWriters = 4;
  constexpr int kReaders = 2;
  constexpr int kOpsPerWriter = 5000;
  constexpr int kKeys = 200;
  std::mt19937_64 rng(seed);
  std::vector<std::string> keys = {""};
  while (keys.size() < kKeys) keys.push_back("key" + std::to_string(rng() % 100000));

  auto mem = NewMemTable(seed);
  std::atomic<SequenceNumber> next_seq{1};
  struct Write {
    std::string key;
    SequenceNumber seq;
    ValueType type;
  };
  std::vector<std::vector<Write>> logs(kWriters);
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([&, w] {
      std::mt19937_64 wrng(seed * 31 + w);
      for (int i = 0; i < kOpsPerWriter; ++i) {
        // Taking the sequence before the mutex lets versions arrive out of order.
        const SequenceNumber seq = next_seq.fetch_add(1);
        const std::string& key = keys[wrng() % keys.size()];
        const ValueType type = wrng() % 5 == 0 ? lsm::kTypeDeletion : lsm::kTypeValue;
        mem->Add(seq, type, key, ValueFor(key, seq));
        logs[w].push_back(Write{key, seq, type});
      }
    });
  }
  std::atomic<int> writers_left{kWriters};
  std::vector<std::string> errors(kReaders);
  std::vector<int> passes(kReaders, 0);
  std::vector<std::thread> readers;
  for (int r = 0; r < kReaders; ++r) {
    readers.emplace_back([&, r] {
      std::mt19937_64 rrng(seed * 17 + r);
      std::map<std::string, SequenceNumber> newest_seen;
      bool last_pass = false;
      while (!last_pass && errors[r].empty()) {
        // One more pass after the writers finished sees the complete memtable.
        last_pass = writers_left.load(std::memory_order_acquire) == 0;
        errors[r] = CheckReaderPass(*mem, icmp_, keys, next_seq, &newest_seen, &rrng);
        ++passes[r];
      }
    });
  }
  for (auto& t : writers) {
    t.join();
    writers_left.fetch_sub(1, std::memory_order_release);
  }
  for (auto& t : readers) t.join();
  for (int r = 0; r < kReaders; ++r) {
    EXPECT_EQ(errors[r], "") << "reader " << r << " (seed " << seed << ")";
    EXPECT_GE(passes[r], 1);
  }

  // The final memtable holds exactly what the writers wrote.
  Model model;
  for (const auto& log : logs) {
    for (const Write& w : log) {
      model[w.key][w.seq] =
          ModelEntry{w.type, w.type == lsm::kTypeValue ? ValueFor(w.key, w.seq) : ""};
    }
  }
  EXPECT_EQ(mem->num_entries(), static_cast<uint64_t>(kWriters * kOpsPerWriter));
  EXPECT_EQ(mem->num_unique_keys(), model.size());
  EXPECT_EQ(mem->smallest_sequence(), 1u);
  EXPECT_EQ(mem->largest_sequence(), static_cast<SequenceNumber>(kWriters * kOpsPerWriter));
  std::unique_ptr<leveldb::Iterator> it(mem->NewIterator());
  EXPECT_EQ(ScanForward(it.get()), ModelEntries(model));
  for (const std::string& key : keys) {
    std::string got = "none", want = "none";
    EXPECT_EQ(mem->Get(key, kReadAll, &got), ModelGet(model, key, kReadAll, &want));
    EXPECT_EQ(got, want);
  }
}

}  // namespace
}  // namespace nova::ltc
