#include "common/lsm/fragmented_table.h"

#include <gtest/gtest.h>
#include <leveldb/cache.h>
#include <leveldb/comparator.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <utility>

#include "common/coding.h"
#include "common/mutex.h"
#include "tests/util/test_util.h"

namespace nova::lsm {
namespace {

constexpr size_t kMiB = 1 << 20;
constexpr int kBloomBitsPerKey = 10;
constexpr uint64_t kBlockTrailerBytes = 5;  // type u8 | crc u32: LevelDB's table format

struct FragmentRead {
  uint32_t fragment;
  uint64_t offset;
  size_t n;
};

// Serves each fragment from its own string, records every read, and fails the test if a
// read leaves its fragment.
class MemoryFragmentSource : public FragmentSource {
 public:
  // copy_to_scratch: return bytes in scratch (LevelDB may cache them) or in place.
  MemoryFragmentSource(std::string_view contents, const TableLayout& layout, bool copy_to_scratch)
      : copy_(copy_to_scratch) {
    for (uint32_t i = 0; i < layout.num_fragments(); ++i) {
      fragments_.emplace_back(contents.substr(layout.FragmentStart(i), layout.FragmentSize(i)));
    }
  }
  MemoryFragmentSource(const BuiltTable& table, bool copy_to_scratch)
      : MemoryFragmentSource(table.contents, table.layout, copy_to_scratch) {}

  leveldb::Status ReadFragment(uint32_t fragment, uint64_t offset, size_t n, char* scratch,
                               leveldb::Slice* result) override {
    MutexLock lock(&mu_);
    reads_.push_back({fragment, offset, n});
    if (fragment >= fragments_.size()) {
      ADD_FAILURE() << "read of fragment " << fragment << " of " << fragments_.size();
      return leveldb::Status::IOError("no such fragment");
    }
    const std::string& f = fragments_[fragment];
    if (offset > f.size() || n > f.size() - offset) {
      ADD_FAILURE() << "read [" << offset << ", +" << n << ") crosses the end of fragment "
                    << fragment << " (" << f.size() << " bytes)";
      return leveldb::Status::IOError("read crosses a fragment end");
    }
    if (fail_) return leveldb::Status::IOError("injected failure");
    if (short_reads_ && n > 0) --n;
    if (copy_) {
      std::memcpy(scratch, f.data() + offset, n);
      *result = leveldb::Slice(scratch, n);
    } else {
      *result = leveldb::Slice(f.data() + offset, n);
    }
    return leveldb::Status::OK();
  }

  std::vector<FragmentRead> TakeReads() {
    MutexLock lock(&mu_);
    return std::exchange(reads_, {});
  }
  // REQUIRES: no read in progress.
  void FlipByte(uint32_t fragment, uint64_t offset) { fragments_[fragment][offset] ^= 0x5a; }
  void set_fail(bool fail) { fail_ = fail; }
  void set_short_reads(bool short_reads) { short_reads_ = short_reads; }

 private:
  const bool copy_;
  bool fail_ = false;
  bool short_reads_ = false;
  std::vector<std::string> fragments_;
  Mutex mu_;
  std::vector<FragmentRead> reads_;  // guarded by mu_
};

std::string RandomBytes(std::mt19937_64* rnd, size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((*rnd)() & 0xff);
  return s;
}

// What a table holds, sorted by the internal key comparator.
struct Model {
  std::vector<std::pair<std::string, std::string>> entries;  // internal key, value
  std::vector<std::string> user_keys;                        // distinct, unordered
};

// `num_entries` entries over ~num_entries/3 user keys (the empty key among them) with
// unique sequence numbers, a fifth of them deletions, and `num_large` values of up to 1 MiB.
Model RandomModel(std::mt19937_64* rnd, const InternalKeyComparator& icmp, int num_entries,
                  int num_large) {
  Model m;
  std::set<std::string> pool = {std::string()};
  while (static_cast<int>(pool.size()) < std::max(1, num_entries / 3)) {
    pool.insert(RandomBytes(rnd, (*rnd)() % 13));
  }
  m.user_keys.assign(pool.begin(), pool.end());
  std::vector<SequenceNumber> seqs(static_cast<size_t>(num_entries) * 4);
  for (size_t i = 0; i < seqs.size(); ++i) seqs[i] = i + 1;
  std::shuffle(seqs.begin(), seqs.end(), *rnd);
  for (int i = 0; i < num_entries; ++i) {
    const std::string& user = m.user_keys[(*rnd)() % m.user_keys.size()];
    const bool deletion = (*rnd)() % 5 == 0;
    std::string value;
    if (!deletion) {
      const size_t n = i < num_large ? (i == 0 ? kMiB : 1 + (*rnd)() % kMiB) : (*rnd)() % 101;
      // Half the values compress well, so snappy tables hold compressed blocks.
      value = (*rnd)() % 2 ? RandomBytes(rnd, n) : std::string(n, static_cast<char>('a' + i % 26));
    }
    m.entries.emplace_back(MakeInternalKey(user, seqs[i], deletion ? kTypeDeletion : kTypeValue),
                           std::move(value));
  }
  std::sort(m.entries.begin(), m.entries.end(),
            [&](const auto& a, const auto& b) { return icmp.Compare(a.first, b.first) < 0; });
  return m;
}

// What TableGet should return: the newest entry of user_key with sequence <= snapshot.
std::pair<TableGetResult, std::string> Expected(const Model& m, const std::string& user_key,
                                                SequenceNumber snapshot) {
  const std::pair<TableGetResult, std::string> none(TableGetResult::kNotFound, "");
  auto best = none;
  SequenceNumber best_seq = 0;
  for (const auto& [ikey, value] : m.entries) {
    ParsedInternalKey p;
    EXPECT_TRUE(ParseInternalKey(ikey, &p));
    if (p.user_key.ToString() != user_key || p.sequence > snapshot) continue;
    if (best.first != TableGetResult::kNotFound && p.sequence < best_seq) continue;
    best_seq = p.sequence;
    best = p.type == kTypeValue ? std::make_pair(TableGetResult::kFound, value)
                                : std::make_pair(TableGetResult::kDeleted, std::string());
  }
  return best;
}

void Build(const InternalKeyComparator& icmp, const TableBuildOptions& options, const Model& m,
           BuiltTable* out) {
  FragmentedTableBuilder builder(&icmp, options);
  for (const auto& [ikey, value] : m.entries) builder.Add(ikey, value);
  EXPECT_EQ(builder.NumEntries(), m.entries.size());
  const Status s = builder.Finish(out);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(out->layout.Validate().ok());
  ASSERT_EQ(out->layout.num_data_fragments(), options.num_data_fragments);
  ASSERT_EQ(out->contents.size(), out->layout.file_size);
  ASSERT_GT(out->layout.FragmentSize(out->layout.meta_fragment()), 0u);
  EXPECT_EQ(out->num_entries, m.entries.size());
  EXPECT_EQ(out->smallest, m.entries.empty() ? "" : m.entries.front().first);
  EXPECT_EQ(out->largest, m.entries.empty() ? "" : m.entries.back().first);
}

// The start of every data block, found through the public index lookup.
std::set<uint64_t> DataBlockStarts(const FragmentedTable& table, const Model& m) {
  std::set<uint64_t> starts;
  for (const auto& e : m.entries) starts.insert(table.table()->ApproximateOffsetOf(e.first));
  return starts;
}

// Every data-fragment read is one whole data block inside one data fragment (the source
// has already checked that no read crosses a fragment end). Returns the blocks read.
std::set<uint64_t> CheckDataReads(const std::vector<FragmentRead>& reads, const TableLayout& layout,
                                  const std::set<uint64_t>& blocks) {
  std::set<uint64_t> read;
  for (const FragmentRead& r : reads) {
    if (r.fragment >= layout.num_data_fragments()) continue;
    const uint64_t global = layout.FragmentStart(r.fragment) + r.offset;
    auto it = blocks.find(global);
    if (it == blocks.end()) {
      ADD_FAILURE() << "data read at " << global << " is not at a block start";
      continue;
    }
    const uint64_t next = std::next(it) == blocks.end() ? layout.data_end : *std::next(it);
    EXPECT_EQ(global + r.n, next) << "data read at " << global << " is not one whole block";
    read.insert(global);
  }
  return read;
}

void ScanAndCompare(const FragmentedTable& table, const Model& m) {
  leveldb::ReadOptions ro;
  ro.verify_checksums = true;
  std::unique_ptr<leveldb::Iterator> it = table.NewIterator(ro);
  size_t i = 0;
  for (it->SeekToFirst(); it->Valid(); it->Next(), ++i) {
    ASSERT_LT(i, m.entries.size());
    ASSERT_EQ(it->key().ToString(), m.entries[i].first) << "entry " << i;
    ASSERT_EQ(it->value().ToString(), m.entries[i].second) << "entry " << i;
  }
  ASSERT_TRUE(it->status().ok()) << it->status().ToString();
  ASSERT_EQ(i, m.entries.size());
  // Backwards over the last few entries.
  it->SeekToLast();
  for (size_t k = m.entries.size(); k > 0 && k + 20 > m.entries.size(); --k, it->Prev()) {
    ASSERT_TRUE(it->Valid());
    ASSERT_EQ(it->key().ToString(), m.entries[k - 1].first);
  }
}

void CheckGet(const FragmentedTable& table, const TableFilter* filter, const Model& m,
              const std::string& user_key, SequenceNumber snapshot) {
  std::string value = "stale";
  TableGetResult result;
  const Status s =
      TableGet(table, leveldb::ReadOptions(), filter, user_key, snapshot, &value, &result);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const auto [want, want_value] = Expected(m, user_key, snapshot);
  ASSERT_EQ(static_cast<int>(result), static_cast<int>(want))
      << "key size " << user_key.size() << " snapshot " << snapshot;
  if (want == TableGetResult::kFound) {
    ASSERT_EQ(value, want_value);
  }
}

TEST(FragmentedTableTest, RandomTablesReadBackThroughFragments) {
  std::mt19937_64 rnd(test::TestSeed("FragmentedTableTest.RandomTablesReadBackThroughFragments"));
  const InternalKeyComparator icmp(leveldb::BytewiseComparator());
  std::unique_ptr<const leveldb::FilterPolicy> bloom(
      leveldb::NewBloomFilterPolicy(kBloomBitsPerKey));
  for (uint32_t rho : {1u, 2u, 3u, 8u}) {
    for (size_t block_size : {size_t{256}, size_t{4096}}) {
      for (auto compression : {leveldb::kNoCompression, leveldb::kSnappyCompression}) {
        const bool copy = rnd() % 2 == 0;
        SCOPED_TRACE("rho " + std::to_string(rho) + " block_size " + std::to_string(block_size) +
                     " compression " + std::to_string(compression) + " copy " +
                     std::to_string(copy));
        const Model model = RandomModel(&rnd, icmp, 1500, 2);
        TableBuildOptions options;
        options.block_size = block_size;
        options.compression = compression;
        options.num_data_fragments = rho;
        options.filter_policy = bloom.get();
        BuiltTable built;
        ASSERT_NO_FATAL_FAILURE(Build(icmp, options, model, &built));

        MemoryFragmentSource source(built, copy);
        std::unique_ptr<leveldb::Cache> cache(rnd() % 2 ? leveldb::NewLRUCache(8 * kMiB) : nullptr);
        std::unique_ptr<FragmentedTable> table;
        const Status open = OpenTable({&icmp, cache.get(), /*paranoid_checks=*/true}, built.layout,
                                      &source, &table);
        ASSERT_TRUE(open.ok()) << open.ToString();
        ASSERT_NO_FATAL_FAILURE(ScanAndCompare(*table, model));

        // Invariants 1-3 of the header: blocks whole, fragments start at blocks.
        const std::set<uint64_t> blocks = DataBlockStarts(*table, model);
        ASSERT_FALSE(blocks.empty());
        ASSERT_LT(*blocks.rbegin(), built.layout.data_end);
        const std::set<uint64_t> read = CheckDataReads(source.TakeReads(), built.layout, blocks);
        EXPECT_EQ(read, blocks);  // a full scan of a fresh table reads every block once
        // Each trailer's first byte is its block's compression type.
        int compressed = 0;
        for (auto it = blocks.begin(); it != blocks.end(); ++it) {
          const uint64_t end =
              std::next(it) == blocks.end() ? built.layout.data_end : *std::next(it);
          compressed += built.contents[end - kBlockTrailerBytes] == leveldb::kSnappyCompression;
        }
        EXPECT_EQ(compressed > 0, compression == leveldb::kSnappyCompression);
        for (uint32_t i = 0; i < rho; ++i) {
          if (blocks.size() >= rho) {
            EXPECT_GT(built.layout.FragmentSize(i), 0u) << i;
          }
          if (built.layout.FragmentSize(i) > 0) {
            EXPECT_EQ(blocks.count(built.layout.FragmentStart(i)), 1u) << i;
          }
        }

        // Point lookups at every version boundary, through the filter and without it.
        std::map<std::string, std::vector<SequenceNumber>> versions;
        for (const auto& e : model.entries) {
          ParsedInternalKey p;
          ASSERT_TRUE(ParseInternalKey(e.first, &p));
          versions[p.user_key.ToString()].push_back(p.sequence);
        }
        const TableFilter filter(bloom.get(), built.filter);
        for (const auto& [user, seqs] : versions) {
          const TableFilter* f = rnd() % 2 ? &filter : nullptr;
          ASSERT_NO_FATAL_FAILURE(CheckGet(*table, f, model, user, kMaxSequenceNumber));
          ASSERT_NO_FATAL_FAILURE(CheckGet(*table, f, model, user, ~SequenceNumber{0}));
          ASSERT_NO_FATAL_FAILURE(CheckGet(*table, f, model, user, 0));
          for (SequenceNumber s : seqs) {
            ASSERT_NO_FATAL_FAILURE(CheckGet(*table, f, model, user, s));
            ASSERT_NO_FATAL_FAILURE(CheckGet(*table, f, model, user, s - 1));
          }
        }
        // Keys never written, and the bloom filter's two error rates.
        const std::set<std::string> present(model.user_keys.begin(), model.user_keys.end());
        for (const std::string& user : model.user_keys) {
          if (versions.count(user)) {
            EXPECT_TRUE(filter.KeyMayMatch(user));  // no false negative
          }
        }
        int absent = 0;
        int false_positives = 0;
        while (absent < 2000) {
          std::string user = RandomBytes(&rnd, rnd() % 16);
          if (present.count(user)) continue;
          ++absent;
          false_positives += filter.KeyMayMatch(user);
          if (absent <= 200) {
            ASSERT_NO_FATAL_FAILURE(
                CheckGet(*table, absent % 2 ? &filter : nullptr, model, user, kMaxSequenceNumber));
          }
        }
        // ~1% expected at 10 bits per key.
        EXPECT_LT(false_positives, absent / 20) << "bloom false positives";
      }
    }
  }
}

TEST(FragmentedTableTest, DataFragmentsAreBalancedByBytes) {
  const InternalKeyComparator icmp(leveldb::BytewiseComparator());
  Model m;
  for (int i = 0; i < 4000; ++i) {
    char user[16];
    std::snprintf(user, sizeof(user), "key%06d", i);
    m.entries.emplace_back(MakeInternalKey(user, i + 1, kTypeValue), std::string(100, 'v'));
  }
  for (uint32_t rho : {1u, 2u, 3u, 8u}) {
    for (size_t block_size : {size_t{256}, size_t{4096}}) {
      SCOPED_TRACE("rho " + std::to_string(rho) + " block_size " + std::to_string(block_size));
      TableBuildOptions options;
      options.block_size = block_size;
      options.num_data_fragments = rho;
      BuiltTable built;
      ASSERT_NO_FATAL_FAILURE(Build(icmp, options, m, &built));
      MemoryFragmentSource source(built, true);
      std::unique_ptr<FragmentedTable> table;
      ASSERT_TRUE(OpenTable({&icmp, nullptr, false}, built.layout, &source, &table).ok());
      const std::set<uint64_t> blocks = DataBlockStarts(*table, m);
      uint64_t max_block = 0;
      for (auto it = blocks.begin(); it != blocks.end(); ++it) {
        const uint64_t next =
            std::next(it) == blocks.end() ? built.layout.data_end : *std::next(it);
        max_block = std::max(max_block, next - *it);
      }
      const uint64_t share = built.layout.data_end / rho;
      for (uint32_t i = 0; i < rho; ++i) {
        const uint64_t size = built.layout.FragmentSize(i);
        EXPECT_LE(size, share + 2 * max_block) << "fragment " << i;
        EXPECT_GE(size + 2 * max_block, share) << "fragment " << i;
        EXPECT_EQ(blocks.count(built.layout.FragmentStart(i)), 1u) << i;
      }
    }
  }
}

TEST(FragmentedTableTest, FewerBlocksThanFragmentsLeavesTrailingFragmentsEmpty) {
  const InternalKeyComparator icmp(leveldb::BytewiseComparator());
  for (int num_entries : {1, 3}) {
    Model m;
    for (int i = 0; i < num_entries; ++i) {
      m.entries.emplace_back(
          MakeInternalKey(std::string(1, static_cast<char>('a' + i)), 7, kTypeValue),
          std::string(300, 'x'));  // > block_size: one block per entry
    }
    TableBuildOptions options;
    options.block_size = 256;
    options.num_data_fragments = 8;
    BuiltTable built;
    ASSERT_NO_FATAL_FAILURE(Build(icmp, options, m, &built));
    const TableLayout& layout = built.layout;
    for (uint32_t i = 0; i < 8; ++i) {
      EXPECT_EQ(layout.FragmentSize(i) > 0, static_cast<int>(i) < num_entries) << i;
    }
    EXPECT_EQ(layout.FragmentOf(0), 0);
    EXPECT_EQ(layout.FragmentOf(layout.data_end - 1), num_entries - 1);
    EXPECT_EQ(layout.FragmentOf(layout.data_end), 8);
    MemoryFragmentSource source(built, false);
    std::unique_ptr<FragmentedTable> table;
    ASSERT_TRUE(OpenTable({&icmp, nullptr, true}, layout, &source, &table).ok());
    ASSERT_NO_FATAL_FAILURE(ScanAndCompare(*table, m));
    CheckDataReads(source.TakeReads(), layout, DataBlockStarts(*table, m));
  }
}

TEST(FragmentedTableTest, EmptyTable) {
  const InternalKeyComparator icmp(leveldb::BytewiseComparator());
  std::unique_ptr<const leveldb::FilterPolicy> bloom(
      leveldb::NewBloomFilterPolicy(kBloomBitsPerKey));
  TableBuildOptions options;
  options.num_data_fragments = 3;
  options.filter_policy = bloom.get();
  BuiltTable built;
  ASSERT_NO_FATAL_FAILURE(Build(icmp, options, Model(), &built));
  EXPECT_EQ(built.layout.data_end, 0u);
  for (uint32_t i = 0; i < 3; ++i) EXPECT_EQ(built.layout.FragmentSize(i), 0u);
  MemoryFragmentSource source(built, true);
  std::unique_ptr<FragmentedTable> table;
  ASSERT_TRUE(OpenTable({&icmp, nullptr, true}, built.layout, &source, &table).ok());
  ASSERT_NO_FATAL_FAILURE(ScanAndCompare(*table, Model()));
  const TableFilter filter(bloom.get(), built.filter);
  ASSERT_NO_FATAL_FAILURE(CheckGet(*table, &filter, Model(), "", kMaxSequenceNumber));
  ASSERT_NO_FATAL_FAILURE(CheckGet(*table, nullptr, Model(), "a", kMaxSequenceNumber));
}

// A user comparator other than bytewise: descending byte order.
class ReverseComparator : public leveldb::Comparator {
 public:
  const char* Name() const override { return "nova.test.Reverse"; }
  int Compare(const leveldb::Slice& a, const leveldb::Slice& b) const override {
    return b.compare(a);
  }
  void FindShortestSeparator(std::string*, const leveldb::Slice&) const override {}
  void FindShortSuccessor(std::string*) const override {}
};

TEST(FragmentedTableTest, NonBytewiseUserComparator) {
  std::mt19937_64 rnd(test::TestSeed("FragmentedTableTest.NonBytewiseUserComparator"));
  const ReverseComparator reverse;
  const InternalKeyComparator icmp(&reverse);
  const Model model = RandomModel(&rnd, icmp, 600, 0);
  TableBuildOptions options;
  options.block_size = 256;
  options.num_data_fragments = 3;
  BuiltTable built;
  ASSERT_NO_FATAL_FAILURE(Build(icmp, options, model, &built));
  MemoryFragmentSource source(built, true);
  std::unique_ptr<FragmentedTable> table;
  ASSERT_TRUE(OpenTable({&icmp, nullptr, true}, built.layout, &source, &table).ok());
  ASSERT_NO_FATAL_FAILURE(ScanAndCompare(*table, model));
  for (const std::string& user : model.user_keys) {
    ASSERT_NO_FATAL_FAILURE(CheckGet(*table, nullptr, model, user, kMaxSequenceNumber));
    ASSERT_NO_FATAL_FAILURE(CheckGet(*table, nullptr, model, user, rnd() % 2400));
  }
}

TEST(FragmentedTableTest, BlockCacheHoldsBlocksReadIntoScratchOnly) {
  std::mt19937_64 rnd(test::TestSeed("FragmentedTableTest.BlockCache"));
  const InternalKeyComparator icmp(leveldb::BytewiseComparator());
  const Model model = RandomModel(&rnd, icmp, 1000, 0);
  TableBuildOptions options;
  options.block_size = 512;
  options.num_data_fragments = 2;
  BuiltTable built;
  ASSERT_NO_FATAL_FAILURE(Build(icmp, options, model, &built));
  for (bool copy : {true, false}) {
    std::unique_ptr<leveldb::Cache> cache(leveldb::NewLRUCache(8 * kMiB));
    MemoryFragmentSource source(built, copy);
    std::unique_ptr<FragmentedTable> table;
    ASSERT_TRUE(OpenTable({&icmp, cache.get(), false}, built.layout, &source, &table).ok());
    ASSERT_NO_FATAL_FAILURE(ScanAndCompare(*table, model));
    const std::set<uint64_t> blocks = DataBlockStarts(*table, model);
    EXPECT_EQ(CheckDataReads(source.TakeReads(), built.layout, blocks), blocks);
    ASSERT_NO_FATAL_FAILURE(ScanAndCompare(*table, model));
    // LevelDB caches a block read into scratch; one served in place is used in place.
    const std::set<uint64_t> again = CheckDataReads(source.TakeReads(), built.layout, blocks);
    EXPECT_EQ(again.empty(), copy);
  }
}

TEST(FragmentedTableTest, DamageIsReported) {
  std::mt19937_64 rnd(test::TestSeed("FragmentedTableTest.DamageIsReported"));
  const InternalKeyComparator icmp(leveldb::BytewiseComparator());
  const Model model = RandomModel(&rnd, icmp, 500, 0);
  TableBuildOptions options;
  options.block_size = 256;
  options.num_data_fragments = 2;
  BuiltTable built;
  ASSERT_NO_FATAL_FAILURE(Build(icmp, options, model, &built));
  const uint32_t meta = built.layout.meta_fragment();
  const uint64_t meta_size = built.layout.FragmentSize(meta);
  std::unique_ptr<FragmentedTable> table;

  {  // A damaged footer or index block.
    MemoryFragmentSource source(built, true);
    source.FlipByte(meta, meta_size - 1);  // the footer's magic number
    EXPECT_TRUE(OpenTable({&icmp, nullptr, true}, built.layout, &source, &table).IsCorruption());
  }
  {  // A failing or short fragment read while opening.
    MemoryFragmentSource source(built, true);
    source.set_fail(true);
    EXPECT_EQ(OpenTable({&icmp, nullptr, true}, built.layout, &source, &table).code(),
              Status::Code::kIOError);
    source.set_fail(false);
    source.set_short_reads(true);
    EXPECT_TRUE(OpenTable({&icmp, nullptr, true}, built.layout, &source, &table).IsCorruption());
  }
  {  // A damaged data block: the first, which holds the smallest key.
    MemoryFragmentSource source(built, false);
    ASSERT_TRUE(OpenTable({&icmp, nullptr, true}, built.layout, &source, &table).ok());
    source.FlipByte(0, 1);
    leveldb::ReadOptions ro;
    ro.verify_checksums = true;
    std::string value;
    TableGetResult result;
    const std::string smallest_user = ExtractUserKey(built.smallest).ToString();
    EXPECT_TRUE(TableGet(*table, ro, nullptr, smallest_user, kMaxSequenceNumber, &value, &result)
                    .IsCorruption());
    std::unique_ptr<leveldb::Iterator> it = table->NewIterator(ro);
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
    }
    EXPECT_TRUE(it->status().IsCorruption()) << it->status().ToString();
  }
  EXPECT_TRUE(OpenTable({nullptr, nullptr, false}, built.layout, nullptr, &table).code() ==
              Status::Code::kInvalidArgument);
  TableLayout bad = built.layout;
  bad.data_end = bad.file_size + 1;
  EXPECT_TRUE(OpenTable({&icmp, nullptr, false}, bad, nullptr, &table).IsCorruption());
}

TEST(FragmentedTableTest, BuilderRejectsBadInput) {
  const InternalKeyComparator icmp(leveldb::BytewiseComparator());
  const auto finish_code = [&](const TableBuildOptions& options,
                               const std::vector<std::string>& keys) {
    FragmentedTableBuilder builder(&icmp, options);
    for (const std::string& k : keys) builder.Add(k, "v");
    BuiltTable built;
    return builder.Finish(&built).code();
  };
  const std::string a5 = MakeInternalKey("a", 5, kTypeValue);
  const std::string a4 = MakeInternalKey("a", 4, kTypeValue);
  const std::string b9 = MakeInternalKey("b", 9, kTypeValue);
  const TableBuildOptions good;
  EXPECT_EQ(finish_code(good, {a5, a4, b9}), Status::Code::kOk);
  EXPECT_EQ(finish_code(good, {a4, a5}), Status::Code::kInvalidArgument);  // out of order
  EXPECT_EQ(finish_code(good, {a5, a5}), Status::Code::kInvalidArgument);  // duplicate
  EXPECT_EQ(finish_code(good, {a5, "short"}), Status::Code::kInvalidArgument);
  std::string bad_type = b9;
  bad_type[bad_type.size() - 8] = 9;
  EXPECT_EQ(finish_code(good, {a5, bad_type}), Status::Code::kInvalidArgument);
  for (auto edit : std::vector<void (*)(TableBuildOptions*)>{
           [](TableBuildOptions* o) { o->num_data_fragments = 0; },
           [](TableBuildOptions* o) { o->num_data_fragments = kMaxDataFragments + 1; },
           [](TableBuildOptions* o) { o->block_size = 0; },
           [](TableBuildOptions* o) { o->block_restart_interval = 0; },
       }) {
    TableBuildOptions options;
    edit(&options);
    EXPECT_EQ(finish_code(options, {a5}), Status::Code::kInvalidArgument);
  }
  FragmentedTableBuilder builder(&icmp, good);
  builder.Add(a5, "v");
  BuiltTable built;
  ASSERT_TRUE(builder.Finish(&built).ok());
  EXPECT_EQ(builder.Finish(&built).code(), Status::Code::kIllegalState);
}

TEST(TableLayoutTest, AccessorsWithEmptyFragments) {
  TableLayout layout;
  layout.file_size = 100;
  layout.data_end = 60;
  layout.fragment_starts = {0, 0, 30, 60};  // 0 and 3 empty
  ASSERT_TRUE(layout.Validate().ok());
  EXPECT_EQ(layout.num_data_fragments(), 4u);
  EXPECT_EQ(layout.num_fragments(), 5u);
  const std::vector<std::pair<uint64_t, uint64_t>> want = {
      {0, 0}, {0, 30}, {30, 30}, {60, 0}, {60, 40}};
  for (uint32_t i = 0; i < 5; ++i) {
    EXPECT_EQ(layout.FragmentStart(i), want[i].first) << i;
    EXPECT_EQ(layout.FragmentSize(i), want[i].second) << i;
  }
  for (const auto& [offset, fragment] : std::vector<std::pair<uint64_t, int>>{
           {0, 1}, {29, 1}, {30, 2}, {59, 2}, {60, 4}, {99, 4}, {100, -1}, {~0ull, -1}}) {
    EXPECT_EQ(layout.FragmentOf(offset), fragment) << offset;
  }
}

TableLayout RandomLayout(std::mt19937_64* rnd) {
  TableLayout layout;
  const uint32_t rho = 1 + (*rnd)() % 20;
  layout.data_end = (*rnd)() % 2 ? (*rnd)() % 5000 : (*rnd)() >> 10;
  layout.file_size = layout.data_end + (*rnd)() % 300;
  layout.fragment_starts.push_back(0);
  for (uint32_t i = 1; i < rho; ++i) {
    uint64_t s = layout.data_end == 0 ? 0 : (*rnd)() % (layout.data_end + 1);
    if ((*rnd)() % 4 == 0) s = layout.fragment_starts.back();  // empty fragments
    layout.fragment_starts.push_back(s);
  }
  std::sort(layout.fragment_starts.begin(), layout.fragment_starts.end());
  return layout;
}

TEST(TableLayoutTest, EncodeDecodeRoundTripAndRejectsDamage) {
  std::mt19937_64 rnd(test::TestSeed("TableLayoutTest.EncodeDecode"));
  for (int iter = 0; iter < 500; ++iter) {
    const TableLayout layout = RandomLayout(&rnd);
    ASSERT_TRUE(layout.Validate().ok());
    std::string enc;
    layout.EncodeTo(&enc);
    const std::string with_tail = enc + "tail";
    std::string_view in = with_tail;
    TableLayout decoded;
    ASSERT_TRUE(TableLayout::DecodeFrom(&in, &decoded).ok());
    ASSERT_EQ(decoded, layout);
    ASSERT_EQ(in, "tail");
    // Every truncation is rejected, leaving cursor and output alone.
    for (size_t n = 0; n < enc.size(); ++n) {
      std::string_view cut(enc.data(), n);
      TableLayout out = layout;
      ASSERT_TRUE(TableLayout::DecodeFrom(&cut, &out).IsCorruption()) << n;
      ASSERT_EQ(cut.size(), n);
      ASSERT_EQ(out, layout);
    }
    // A damaged byte decodes to an error or to some valid layout; never crashes.
    std::string damaged = enc;
    damaged[rnd() % damaged.size()] ^= static_cast<char>(1 + rnd() % 255);
    std::string_view d = damaged;
    TableLayout out;
    if (TableLayout::DecodeFrom(&d, &out).ok()) {
      ASSERT_TRUE(out.Validate().ok());
    }
  }
}

TEST(TableLayoutTest, DecodeRejectsInvalidLayouts) {
  const auto encode = [](uint8_t version, uint64_t file_size, uint64_t data_end, uint32_t rho,
                         const std::vector<uint64_t>& deltas) {
    std::string s(1, static_cast<char>(version));
    PutVarint64(&s, file_size);
    PutVarint64(&s, data_end);
    PutVarint32(&s, rho);
    for (uint64_t d : deltas) PutVarint64(&s, d);
    return s;
  };
  const auto decodes = [](const std::string& s) {
    std::string_view in = s;
    TableLayout out;
    return TableLayout::DecodeFrom(&in, &out).ok();
  };
  EXPECT_TRUE(decodes(encode(1, 100, 60, 3, {20, 40})));
  EXPECT_FALSE(decodes(encode(2, 100, 60, 3, {20, 40})));  // unknown version
  EXPECT_FALSE(decodes(encode(1, 100, 60, 0, {})));        // no data fragment
  EXPECT_FALSE(decodes(encode(1, 100, 60, kMaxDataFragments + 1,
                              std::vector<uint64_t>(kMaxDataFragments, 0))));  // too many
  EXPECT_FALSE(decodes(encode(1, 100, 60, 1000000, {})));  // claimed, not present
  EXPECT_FALSE(decodes(encode(1, 50, 60, 1, {})));         // data_end > file_size
  EXPECT_FALSE(decodes(encode(1, 100, 60, 3, {20, 41})));  // start past data_end
  EXPECT_FALSE(decodes(encode(1, 100, 60, 2, {~0ull})));   // overflowing delta
  TableLayout invalid;
  EXPECT_TRUE(invalid.Validate().IsCorruption());  // no fragments
  invalid.fragment_starts = {5};
  invalid.file_size = invalid.data_end = 10;
  EXPECT_TRUE(invalid.Validate().IsCorruption());  // fragment 0 not at 0
  invalid.fragment_starts = {0, 7, 6};
  EXPECT_TRUE(invalid.Validate().IsCorruption());  // decreasing
}

TEST(FragmentedFileTest, ArbitraryReadsAreSplitAtFragmentEnds) {
  std::mt19937_64 rnd(test::TestSeed("FragmentedFileTest.ArbitraryReads"));
  for (int iter = 0; iter < 50; ++iter) {
    TableLayout layout = RandomLayout(&rnd);
    layout.data_end %= 5000;  // keep the contents small
    for (uint64_t& s : layout.fragment_starts) s = std::min(s, layout.data_end);
    layout.file_size = layout.data_end + rnd() % 300;
    ASSERT_TRUE(layout.Validate().ok());
    const std::string contents = RandomBytes(&rnd, layout.file_size);
    MemoryFragmentSource source(contents, layout, rnd() % 2 == 0);
    const FragmentedFile file(layout, &source);
    std::string scratch;
    for (int r = 0; r < 200; ++r) {
      const uint64_t offset = rnd() % (layout.file_size + 10);
      const size_t n = rnd() % 3 == 0 ? rnd() % 16 : rnd() % (layout.file_size + 10);
      scratch.assign(n, '\0');
      leveldb::Slice result;
      ASSERT_TRUE(file.Read(offset, n, &result, scratch.data()).ok());
      const std::string want =
          offset >= contents.size() ? std::string() : contents.substr(offset, n);
      ASSERT_EQ(result.ToString(), want) << "offset " << offset << " n " << n;
      // One source read per non-empty fragment touched.
      size_t touched = 0;
      for (uint32_t i = 0; i < layout.num_fragments(); ++i) {
        const uint64_t start = layout.FragmentStart(i);
        const uint64_t end = start + layout.FragmentSize(i);
        touched += !want.empty() && start < end && start < offset + want.size() && offset < end;
      }
      ASSERT_EQ(source.TakeReads().size(), touched);
    }
  }
}

}  // namespace
}  // namespace nova::lsm
