// Tests of the range index (ltc/engine/range_index.h) and of the iterators over it
// (ltc/engine/range_index_iterator.h, ltc/engine/concatenating_iterator.h): partition building,
// splits and merges, sources per partition, and, randomized against a sorted model of every
// internal entry, the partitioned iterator forwards, backwards and after seeks across
// partition boundaries, with point Dranges (duplicated too) and "just after" bounds.
#include "ltc/engine/range_index.h"

#include <gtest/gtest.h>
#include <leveldb/cache.h>
#include <leveldb/filter_policy.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/lsm/memory_table_store.h"
#include "common/lsm/table_sink.h"
#include "ltc/engine/concatenating_iterator.h"
#include "ltc/engine/range_index_iterator.h"
#include "tests/util/test_util.h"

namespace nova::ltc {
namespace {

const leveldb::Comparator* Bytewise() { return leveldb::BytewiseComparator(); }

std::string Key(int i) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "k%03d", i);
  return buf;
}

// A layout from (lower bound, point) pairs; each Drange gets one Trange.
std::unique_ptr<DrangeLayout> Layout(const std::vector<std::pair<KeyBound, bool>>& lowers,
                                     uint64_t generation = 1) {
  std::vector<Drange> ds;
  for (const auto& [b, point] : lowers) {
    Drange d;
    d.lower = b;
    d.point = point;
    d.tranges.emplace_back(b);
    ds.push_back(std::move(d));
  }
  return std::make_unique<DrangeLayout>(Bytewise(), generation, std::move(ds));
}

class RangeIndexTest : public ::testing::Test {
 protected:
  RangeIndexTest()
      : icmp_(Bytewise()),
        filter_(leveldb::NewBloomFilterPolicy(10)),
        cache_(leveldb::NewLRUCache(1 << 20)) {
    ctx_.store = &store_;
    ctx_.icmp = &icmp_;
    ctx_.block_cache = cache_.get();
    ctx_.filter_policy = filter_.get();
  }

  // Orders internal keys for the model.
  struct ByIcmp {
    const lsm::InternalKeyComparator* icmp;
    bool operator()(const std::string& a, const std::string& b) const {
      return icmp->Compare(a, b) < 0;
    }
  };

  std::shared_ptr<MemTable> Mem() { return std::make_shared<MemTable>(&icmp_, next_id_++); }

  // A Level-0 table holding `entries` (internal key -> value, in order).
  TableRef Table(const std::map<std::string, std::string, ByIcmp>& entries) {
    lsm::TableBuildOptions opts;
    opts.block_size = 256;  // several blocks
    opts.filter_policy = filter_.get();
    lsm::TableSink sink(&icmp_, opts, &store_, [this] { return next_table_++; }, 0);
    EXPECT_TRUE(sink.StartOutput().ok());
    for (const auto& [k, v] : entries) EXPECT_TRUE(sink.Add(k, v).ok());
    EXPECT_TRUE(sink.FinishOutput().ok());
    return std::make_shared<TableHandle>(sink.outputs().front(), &ctx_);
  }

  lsm::InternalKeyComparator icmp_;
  std::unique_ptr<const leveldb::FilterPolicy> filter_;
  std::unique_ptr<leveldb::Cache> cache_;
  lsm::MemoryTableStore store_;
  TableContext ctx_;
  uint64_t next_id_ = 1;
  uint64_t next_table_ = 1;
};

TEST_F(RangeIndexTest, DrangeIntervals) {
  // [-inf, k010) [k010, k010] x2 (duplicated point) [after k010, k050) [k050, +inf)
  auto l = Layout({{KeyBound::Min(), false},
                   {KeyBound::At(Key(10)), true},
                   {KeyBound::At(Key(10)), true},
                   {KeyBound::After(Key(10)), false},
                   {KeyBound::At(Key(50)), false}});
  KeyInterval first = KeyInterval::OfDrange(*l, 0);
  EXPECT_TRUE(first.lower.min);
  ASSERT_TRUE(first.upper.has_value());
  EXPECT_EQ(CompareBounds(Bytewise(), *first.upper, KeyBound::At(Key(10))), 0);
  for (int d : {1, 2}) {  // both duplicates cover exactly k010
    KeyInterval p = KeyInterval::OfDrange(*l, d);
    EXPECT_EQ(CompareBounds(Bytewise(), p.lower, KeyBound::At(Key(10))), 0);
    ASSERT_TRUE(p.upper.has_value());
    EXPECT_EQ(CompareBounds(Bytewise(), *p.upper, KeyBound::After(Key(10))), 0);
  }
  EXPECT_FALSE(KeyInterval::OfDrange(*l, 4).upper.has_value());
}

TEST_F(RangeIndexTest, PartitionsAndSources) {
  auto l = Layout({{KeyBound::Min(), false},
                   {KeyBound::At(Key(10)), true},
                   {KeyBound::After(Key(10)), false},
                   {KeyBound::At(Key(50)), false}});
  RangeIndexSources src;
  std::vector<std::shared_ptr<MemTable>> mems;
  for (int d = 0; d < l->size(); ++d) {
    mems.push_back(Mem());
    src.memtables.push_back({mems.back(), KeyInterval::OfDrange(*l, d)});
  }
  // An older memtable over everything; a table [k005, k010] (touches the point).
  auto old = Mem();
  src.memtables.push_back({old, KeyInterval::All()});
  std::map<std::string, std::string, ByIcmp> entries(ByIcmp{&icmp_});
  entries[lsm::MakeInternalKey(Key(5), 1, lsm::kTypeValue)] = "a";
  entries[lsm::MakeInternalKey(Key(10), 2, lsm::kTypeValue)] = "b";
  TableRef t = Table(entries);
  src.level0.push_back(t);

  std::vector<KeyBound> bounds;
  for (int d = 0; d < l->size(); ++d) bounds.push_back(l->drange(d).lower);
  auto index = RangeIndex::Build(Bytewise(), bounds, src);
  ASSERT_EQ(index->size(), 4) << index->DebugString();
  EXPECT_EQ(index->Find(""), 0);
  EXPECT_EQ(index->Find(Key(9)), 0);
  EXPECT_EQ(index->Find(Key(10)), 1);
  EXPECT_EQ(index->Find(Key(10) + std::string(1, '\0')), 2);  // just after k010
  EXPECT_EQ(index->Find(Key(49)), 2);
  EXPECT_EQ(index->Find(Key(50)), 3);
  EXPECT_EQ(index->Find("z"), 3);
  EXPECT_TRUE(index->Contains(1, Key(10)));
  EXPECT_FALSE(index->Contains(1, Key(11)));
  EXPECT_FALSE(index->Contains(2, Key(10)));
  // Each partition: its Drange's memtable, the old memtable; the table in 0 and 1.
  auto names = [&](int p) {
    std::vector<uint64_t> out;
    for (uint32_t m : index->partition(p).memtables) out.push_back(index->memtables()[m]->id());
    for (uint32_t x : index->partition(p).tables)
      out.push_back(1000 + index->tables()[x]->meta().number);
    return out;
  };
  const uint64_t tn = 1000 + t->meta().number;
  EXPECT_EQ(names(0), (std::vector<uint64_t>{mems[0]->id(), old->id(), tn}));
  EXPECT_EQ(names(1), (std::vector<uint64_t>{mems[1]->id(), old->id(), tn}));
  EXPECT_EQ(names(2), (std::vector<uint64_t>{mems[2]->id(), old->id()}));
  EXPECT_EQ(names(3), (std::vector<uint64_t>{mems[3]->id(), old->id()}));
  EXPECT_EQ(index->entries(), 10u);
}

TEST_F(RangeIndexTest, NeighboursWithTheSameSourcesMerge) {
  // Boundaries at k010, k020, k030 but one memtable over [k010, k030): partitions
  // [-inf, k010) {}, [k010, k030) {m}, [k030, +inf) {}.
  RangeIndexSources src;
  auto m = Mem();
  src.memtables.push_back({m, KeyInterval{KeyBound::At(Key(10)), KeyBound::At(Key(30))}});
  auto index = RangeIndex::Build(
      Bytewise(),
      {KeyBound::At(Key(30)), KeyBound::At(Key(10)), KeyBound::At(Key(20)), KeyBound::At(Key(20))},
      src);
  ASSERT_EQ(index->size(), 3) << index->DebugString();
  EXPECT_EQ(index->partition(1).memtables.size(), 1u);
  EXPECT_TRUE(index->partition(0).memtables.empty());
  EXPECT_TRUE(index->partition(2).memtables.empty());
  EXPECT_EQ(index->Find(Key(25)), 1);
  // No boundaries at all: one partition.
  auto one = RangeIndex::Build(Bytewise(), {}, RangeIndexSources{});
  EXPECT_EQ(one->size(), 1);
  EXPECT_EQ(one->Find("anything"), 0);
}

// ---- Randomized: the partitioned iterator against a model of every entry -------------

constexpr int kKeys = 120;

// Random Drange lowers over keys 0..kKeys: some points (maybe duplicated, then "after"),
// some "after" bounds.
std::unique_ptr<DrangeLayout> RandomLayout(std::mt19937_64* rng, uint64_t generation) {
  std::vector<std::pair<KeyBound, bool>> lowers = {{KeyBound::Min(), false}};
  int k = static_cast<int>((*rng)() % 10);
  while (k < kKeys) {
    const uint64_t kind = (*rng)() % 4;
    if (kind == 0) {
      const int copies = 1 + static_cast<int>((*rng)() % 2);
      for (int c = 0; c < copies; ++c) lowers.push_back({KeyBound::At(Key(k)), true});
      lowers.push_back({KeyBound::After(Key(k)), false});
    } else if (kind == 1) {
      lowers.push_back({KeyBound::After(Key(k)), false});
    } else {
      lowers.push_back({KeyBound::At(Key(k)), false});
    }
    k += 1 + static_cast<int>((*rng)() % 15);
  }
  return Layout(lowers, generation);
}

TEST_F(RangeIndexTest, RandomizedIteratorMatchesModel) {
  const uint64_t seed = test::TestSeed("RangeIndexTest.RandomizedIteratorMatchesModel");
  std::mt19937_64 rng(seed);
  constexpr int kRounds = 30;
  for (int round = 0; round < kRounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    std::map<std::string, std::string, ByIcmp> model(ByIcmp{&icmp_});
    lsm::SequenceNumber seq = 1;
    RangeIndexSources src;
    // Two generations of Dranges: the older one's memtables partly flushed into tables.
    std::vector<std::unique_ptr<DrangeLayout>> layouts;
    layouts.push_back(RandomLayout(&rng, 1));
    layouts.push_back(RandomLayout(&rng, 2));
    for (size_t g = 0; g < layouts.size(); ++g) {
      const DrangeLayout& l = *layouts[g];
      std::vector<std::shared_ptr<MemTable>> mems;
      for (int d = 0; d < l.size(); ++d) mems.push_back(Mem());
      const int writes = 50 + static_cast<int>(rng() % 300);
      std::vector<std::map<std::string, std::string, ByIcmp>> per_mem(
          mems.size(), std::map<std::string, std::string, ByIcmp>(ByIcmp{&icmp_}));
      for (int w = 0; w < writes; ++w) {
        const std::string k =
            rng() % 50 == 0 ? std::string() : Key(static_cast<int>(rng() % kKeys));
        const int d = l.Route(k);
        const auto type = rng() % 5 == 0 ? lsm::kTypeDeletion : lsm::kTypeValue;
        const std::string v = type == lsm::kTypeValue ? "v" + std::to_string(seq) : "";
        mems[d]->Add(seq, type, k, v);
        const std::string ik = lsm::MakeInternalKey(k, seq, type);
        model[ik] = v;
        per_mem[d][ik] = v;
        ++seq;
      }
      for (int d = 0; d < l.size(); ++d) {
        if (g == 0 && !per_mem[d].empty() && rng() % 2 == 0) {
          src.level0.push_back(Table(per_mem[d]));  // flushed
        } else {
          src.memtables.push_back({mems[d], KeyInterval::OfDrange(l, d)});
        }
      }
    }
    if (rng() % 2 == 0) {  // a memtable of unknown Drange: the whole key space
      auto m = Mem();
      for (int w = 0; w < 20; ++w) {
        const std::string k = Key(static_cast<int>(rng() % kKeys));
        m->Add(seq, lsm::kTypeValue, k, "x");
        model[lsm::MakeInternalKey(k, seq, lsm::kTypeValue)] = "x";
        ++seq;
      }
      src.memtables.push_back({m, KeyInterval::All()});
    }
    std::vector<KeyBound> bounds;
    for (int d = 0; d < layouts.back()->size(); ++d)
      bounds.push_back(layouts.back()->drange(d).lower);
    auto index = RangeIndex::Build(Bytewise(), bounds, src);

    // Exactness: every source holding a key is listed in that key's partition.
    for (size_t m = 0; m < index->memtables().size(); ++m) {
      std::unique_ptr<leveldb::Iterator> it(index->memtables()[m]->NewIterator());
      for (it->SeekToFirst(); it->Valid(); it->Next()) {
        const auto& p = index->partition(index->Find(lsm::ExtractUserKey(it->key())));
        ASSERT_TRUE(std::count(p.memtables.begin(), p.memtables.end(), m) == 1)
            << "memtable " << index->memtables()[m]->id() << " missing for key "
            << lsm::ExtractUserKey(it->key()).ToString() << "\n" << index->DebugString();
      }
    }

    const std::vector<std::pair<std::string, std::string>> all(model.begin(), model.end());
    std::unique_ptr<leveldb::Iterator> it(NewRangeIndexIterator(&icmp_, index));
    size_t n = 0;
    for (it->SeekToFirst(); it->Valid(); it->Next(), ++n) {
      ASSERT_LT(n, all.size());
      ASSERT_EQ(it->key().ToString(), all[n].first) << "entry " << n;
      ASSERT_EQ(it->value().ToString(), all[n].second);
    }
    ASSERT_TRUE(it->status().ok());
    ASSERT_EQ(n, all.size());
    n = all.size();
    for (it->SeekToLast(); it->Valid(); it->Prev()) {
      ASSERT_GT(n, 0u);
      --n;
      ASSERT_EQ(it->key().ToString(), all[n].first) << "entry " << n << " backwards";
    }
    ASSERT_EQ(n, 0u);
    // Seeks (to keys, between keys, at random sequences) then random walks.
    for (int s = 0; s < 200; ++s) {
      std::string user = Key(static_cast<int>(rng() % (kKeys + 2)));
      if (rng() % 4 == 0) user.push_back('\0');  // between keys
      const std::string target = lsm::MakeInternalKey(
          user, rng() % (seq + 2), rng() % 2 ? lsm::kTypeValue : lsm::kTypeDeletion);
      size_t pos =
          static_cast<size_t>(std::lower_bound(all.begin(), all.end(), target,
                                               [this](const auto& e, const std::string& t) {
                                                 return icmp_.Compare(e.first, t) < 0;
                                               }) -
                              all.begin());
      it->Seek(target);
      for (int step = 0; step < 30; ++step) {
        if (pos == all.size()) {
          ASSERT_FALSE(it->Valid()) << "seek " << s << " step " << step;
          break;
        }
        ASSERT_TRUE(it->Valid()) << "seek " << s << " step " << step;
        ASSERT_EQ(it->key().ToString(), all[pos].first) << "seek " << s << " step " << step;
        if (rng() % 3 == 0) {
          if (pos == 0) {
            it->Prev();
            ASSERT_FALSE(it->Valid());
            break;
          }
          it->Prev();
          --pos;
        } else {
          it->Next();
          ++pos;
        }
      }
    }
  }
}

// The level iterator opens tables lazily and reads a sorted level as one stream.
TEST_F(RangeIndexTest, LevelIteratorConcatenatesTables) {
  auto version = std::make_shared<Version>();
  std::vector<std::string> all;
  lsm::SequenceNumber seq = 1;
  for (int t = 0; t < 5; ++t) {
    std::map<std::string, std::string, ByIcmp> entries(ByIcmp{&icmp_});
    for (int k = t * 20; k < t * 20 + 15; ++k) {
      entries[lsm::MakeInternalKey(Key(k), seq++, lsm::kTypeValue)] = "v";
    }
    for (const auto& [k, v] : entries) all.push_back(k);
    version->levels[1].push_back(Table(entries));
  }
  std::unique_ptr<leveldb::Iterator> it(NewLevelIterator(&icmp_, version, 1));
  size_t n = 0;
  for (it->SeekToFirst(); it->Valid(); it->Next()) ASSERT_EQ(it->key().ToString(), all[n++]);
  EXPECT_EQ(n, all.size());
  for (it->SeekToLast(); it->Valid(); it->Prev()) ASSERT_EQ(it->key().ToString(), all[--n]);
  EXPECT_EQ(n, 0u);
  it->Seek(lsm::MakeInternalKey(Key(17), lsm::kMaxSequenceNumber, lsm::kTypeForSeek));  // a gap
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(lsm::ExtractUserKey(it->key()).ToString(), Key(20));
  it->Prev();
  ASSERT_TRUE(it->Valid());
  EXPECT_EQ(lsm::ExtractUserKey(it->key()).ToString(), Key(14));
  it->Seek(lsm::MakeInternalKey(Key(99), lsm::kMaxSequenceNumber, lsm::kTypeForSeek));
  EXPECT_FALSE(it->Valid());
  EXPECT_TRUE(it->status().ok());
}

}  // namespace
}  // namespace nova::ltc
