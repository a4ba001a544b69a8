#include "common/lsm/readahead_source.h"

#include <gtest/gtest.h>
#include <leveldb/comparator.h>

#include <cstring>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "tests/util/test_util.h"

namespace nova::lsm {
namespace {

// Serves fragments from memory, counting reads; can be told to fail.
class CountingSource : public FragmentSource {
 public:
  explicit CountingSource(const BuiltTable& table) {
    for (uint32_t i = 0; i < table.layout.num_fragments(); ++i) {
      fragments_.push_back(
          table.contents.substr(table.layout.FragmentStart(i), table.layout.FragmentSize(i)));
    }
  }
  leveldb::Status ReadFragment(uint32_t fragment, uint64_t offset, size_t n, char* scratch,
                               leveldb::Slice* result) override {
    ++*reads_;
    if (*fail_) return leveldb::Status::IOError("injected failure");
    const std::string& f = fragments_.at(fragment);
    if (offset + n > f.size()) {
      ADD_FAILURE() << "read past the end of fragment " << fragment;
      return leveldb::Status::IOError("past the end");
    }
    // Half the time in place, as a source with its own memory may answer.
    if (offset % 2 == 0) {
      *result = leveldb::Slice(f.data() + offset, n);
    } else {
      std::memcpy(scratch, f.data() + offset, n);
      *result = leveldb::Slice(scratch, n);
    }
    return leveldb::Status::OK();
  }
  // Shared with the test after the source moves into a ReadaheadSource.
  std::shared_ptr<uint64_t> reads_ = std::make_shared<uint64_t>(0);
  std::shared_ptr<bool> fail_ = std::make_shared<bool>(false);

 private:
  std::vector<std::string> fragments_;
};

struct Table {
  BuiltTable built;
  std::vector<std::pair<std::string, std::string>> entries;  // internal key, value; in order
};

Table MakeTable(std::mt19937_64* rnd, const InternalKeyComparator* icmp, uint32_t rho) {
  Table t;
  std::map<std::string, std::string> users;
  for (int i = 0; i < 3000; ++i) {
    users["key" + std::to_string((*rnd)() % 100000)] = std::string(1 + (*rnd)() % 300, 'a' + i % 26);
  }
  TableBuildOptions o;
  o.block_size = 1024;
  o.num_data_fragments = rho;
  FragmentedTableBuilder builder(icmp, o);
  SequenceNumber seq = 1;
  for (const auto& [k, v] : users) {
    const std::string ikey = MakeInternalKey(k, seq++, kTypeValue);
    builder.Add(ikey, v);
    t.entries.emplace_back(ikey, v);
  }
  EXPECT_TRUE(builder.Finish(&t.built).ok());
  return t;
}

TEST(ReadaheadSourceTest, FrontToBackPassReadsWindowsNotBlocks) {
  const uint64_t seed = test::TestSeed("ReadaheadSourceTest.FrontToBackPassReadsWindowsNotBlocks");
  std::mt19937_64 rnd(seed);
  const InternalKeyComparator icmp(leveldb::BytewiseComparator());
  for (uint32_t rho : {1u, 3u}) {
    const Table t = MakeTable(&rnd, &icmp, rho);
    const uint64_t blocks = t.built.layout.data_end / 1024;
    ASSERT_GT(blocks, 100u) << "the table should have many data blocks";
    for (size_t window : {size_t{1}, size_t{700}, size_t{4096}, size_t{64} << 10, size_t{8} << 20}) {
      SCOPED_TRACE("rho " + std::to_string(rho) + " window " + std::to_string(window));
      auto base = std::make_unique<CountingSource>(t.built);
      auto reads = base->reads_;
      ReadaheadSource source(std::move(base), t.built.layout, window);
      TableReadOptions ro;
      ro.comparator = &icmp;
      std::unique_ptr<FragmentedTable> table;
      ASSERT_TRUE(OpenTable(ro, t.built.layout, &source, &table).ok());
      leveldb::ReadOptions opts;
      opts.verify_checksums = true;
      auto it = table->NewIterator(opts);
      auto want = t.entries.begin();
      for (it->SeekToFirst(); it->Valid(); it->Next(), ++want) {
        ASSERT_NE(want, t.entries.end());
        ASSERT_EQ(it->key().ToString(), want->first);
        ASSERT_EQ(it->value().ToString(), want->second);
      }
      ASSERT_TRUE(it->status().ok()) << it->status().ToString();
      ASSERT_EQ(want, t.entries.end());
      EXPECT_EQ(source.base_reads(), *reads);
      if (window >= (64u << 10)) {
        // Each fragment is read window by window, plus the footer and index reads.
        const uint64_t bound = t.built.layout.file_size / window + 2 * (rho + 1) + 2;
        EXPECT_LE(*reads, bound) << "blocks " << blocks;
      }
      // Random seeks are still answered right (windows move backwards too).
      for (int i = 0; i < 50; ++i) {
        const auto pick = t.entries.begin() + static_cast<long>(rnd() % t.entries.size());
        it->Seek(pick->first);
        ASSERT_TRUE(it->Valid());
        ASSERT_EQ(it->value().ToString(), pick->second);
      }
    }
  }
}

TEST(ReadaheadSourceTest, FailedWindowReadIsReportedAndRetried) {
  std::mt19937_64 rnd(test::TestSeed("ReadaheadSourceTest.FailedWindowReadIsReportedAndRetried"));
  const InternalKeyComparator icmp(leveldb::BytewiseComparator());
  const Table t = MakeTable(&rnd, &icmp, 2);
  auto base = std::make_unique<CountingSource>(t.built);
  auto fail = base->fail_;
  ReadaheadSource source(std::move(base), t.built.layout, 4096);
  char scratch[100];
  leveldb::Slice got;
  *fail = true;
  EXPECT_TRUE(source.ReadFragment(0, 0, 100, scratch, &got).IsIOError());
  *fail = false;
  ASSERT_TRUE(source.ReadFragment(0, 0, 100, scratch, &got).ok());
  EXPECT_EQ(got.ToString(), t.built.contents.substr(0, 100));
  // Past the fragment's end: Corruption, never a read out of bounds.
  const uint64_t size0 = t.built.layout.FragmentSize(0);
  EXPECT_TRUE(source.ReadFragment(0, size0 - 10, 20, scratch, &got).IsCorruption());
  EXPECT_TRUE(source.ReadFragment(9, 0, 10, scratch, &got).IsCorruption());
}

}  // namespace
}  // namespace nova::lsm
