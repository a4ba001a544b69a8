#include "common/lsm/memory_table_store.h"

#include <gtest/gtest.h>

#include "common/lsm/table_store_test_util.h"
#include "tests/util/test_util.h"

namespace nova::lsm {
namespace {

class MemoryTableStoreTest : public ::testing::Test {
 protected:
  const InternalKeyComparator icmp_{leveldb::BytewiseComparator()};
  std::unique_ptr<const leveldb::FilterPolicy> bloom_{leveldb::NewBloomFilterPolicy(10)};
  MemoryTableStore store_;
};

TEST_F(MemoryTableStoreTest, WriteReadDeleteTables) {
  std::mt19937_64 rng(test::TestSeed("MemoryTableStoreTest.WriteReadDeleteTables"));
  std::map<uint64_t, TableMeta> metas;
  for (uint32_t rho : {1u, 3u}) {
    const table_test::TableModel m = table_test::RandomTableModel(&rng, 300, 200);
    BuiltTable built = table_test::BuildTable(icmp_, m, rho, bloom_.get());
    TableMeta meta;
    meta.number = rho;
    meta.layout = built.layout;
    ASSERT_TRUE(store_.WriteTable(rho, built, &meta).ok());
    ASSERT_EQ(meta.fragments.size(), rho + 1);
    ASSERT_EQ(meta.filter.size(), 1u);
    ASSERT_NO_FATAL_FAILURE(table_test::VerifyTable(&store_, icmp_, meta, m));
    ASSERT_NO_FATAL_FAILURE(table_test::VerifyFilter(&store_, bloom_.get(), meta, m));
    EXPECT_TRUE(store_.WriteTable(rho, built, &meta).code() == Status::Code::kAlreadyExists);
    metas[rho] = meta;
  }
  EXPECT_EQ(store_.tables_written(), 2u);
  EXPECT_EQ(store_.live_tables(), 2u);
  EXPECT_GT(store_.live_bytes(), 0u);

  const TableMeta& one = metas[1];
  auto source = store_.OpenTable(one);
  ASSERT_TRUE(source.ok());
  ASSERT_TRUE(store_.DeleteTable(one).ok());
  EXPECT_TRUE(store_.DeleteTable(one).IsNotFound());
  EXPECT_FALSE(store_.HasTable(1));
  EXPECT_TRUE(store_.HasTable(3));
  EXPECT_EQ(store_.tables_deleted(), 1u);
  // A source of a deleted table fails instead of serving stale bytes.
  char scratch[4];
  leveldb::Slice result;
  EXPECT_TRUE(source.value()->ReadFragment(0, 0, 1, scratch, &result).IsNotFound());
}

TEST(MemoryTableStoreStocModeTest, RelocateDeleteCopiesAndSweep) {
  const InternalKeyComparator icmp{leveldb::BytewiseComparator()};
  std::unique_ptr<const leveldb::FilterPolicy> bloom(leveldb::NewBloomFilterPolicy(10));
  std::mt19937_64 rng(test::TestSeed("MemoryTableStoreStocModeTest"));
  MemoryTableStore store({1, 2, 3});
  const table_test::TableModel m = table_test::RandomTableModel(&rng, 300, 200);
  BuiltTable built = table_test::BuildTable(icmp, m, 3, bloom.get());
  TableMeta meta;
  meta.number = 7;
  meta.layout = built.layout;
  ASSERT_TRUE(store.WriteTable(7, built, &meta).ok());
  auto on2 = [](uint32_t s) { return s == 2; };
  ASSERT_GT(CopiesOn(meta, on2), 0u);
  const uint64_t copies = store.total_copies();
  EXPECT_EQ(copies, CopiesOn(meta, [](uint32_t) { return true; }));

  // Nowhere to go: refused, nothing changes.
  store.SetStocs({2});
  EXPECT_TRUE(store.RelocateTable(meta, on2, nullptr).status().IsUnavailable());
  store.FailNextRelocations(1);
  store.SetStocs({1, 3});
  EXPECT_TRUE(store.RelocateTable(meta, on2, nullptr).status().code() == Status::Code::kIOError);
  EXPECT_EQ(store.total_copies(), copies);

  uint64_t bytes = 0;
  auto moved = store.RelocateTable(meta, on2, &bytes);
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_EQ(CopiesOn(moved.value(), on2), 0u);
  EXPECT_GT(bytes, 0u);
  EXPECT_EQ(store.total_copies(), copies + CopiesOn(meta, on2));
  ASSERT_NO_FATAL_FAILURE(table_test::VerifyTable(&store, icmp, moved.value(), m));
  // The old metadata still reads until its moved copies are deleted.
  ASSERT_NO_FATAL_FAILURE(table_test::VerifyTable(&store, icmp, meta, m));
  ASSERT_TRUE(store.DeleteCopiesNotIn(meta, moved.value()).ok());
  EXPECT_EQ(store.CopiesOnStoc(2), 0u);
  EXPECT_EQ(store.total_copies(), copies);
  ASSERT_NO_FATAL_FAILURE(table_test::VerifyTable(&store, icmp, moved.value(), m));

  // A sweep keeps a live table's placed copies, deletes the rest and unreferenced tables
  // below the bound, and never touches those above it.
  TableMeta other;
  other.number = 9;
  other.layout = built.layout;
  ASSERT_TRUE(store.WriteTable(9, built, &other).ok());
  TableMeta young;
  young.number = 20;
  young.layout = built.layout;
  ASSERT_TRUE(store.WriteTable(20, built, &young).ok());
  auto swept = store.SweepTableFiles({{7, moved.value()}}, 10);
  ASSERT_TRUE(swept.ok());
  EXPECT_EQ(swept.value(), CopiesOn(other, [](uint32_t) { return true; }));
  EXPECT_TRUE(store.HasTable(7));
  EXPECT_FALSE(store.HasTable(9));
  EXPECT_TRUE(store.HasTable(20));
}

TEST_F(MemoryTableStoreTest, InjectedFaultsChangeNothing) {
  BuiltTable built = table_test::BuildTable(icmp_, {{"k", "v"}}, 1, nullptr);
  TableMeta meta;
  meta.number = 5;
  meta.layout = built.layout;
  store_.FailNextWrites(1);
  EXPECT_TRUE(store_.WriteTable(5, built, &meta).code() == Status::Code::kIOError);
  EXPECT_FALSE(store_.HasTable(5));
  EXPECT_TRUE(meta.fragments.empty());
  ASSERT_TRUE(store_.WriteTable(5, built, &meta).ok());
  EXPECT_TRUE(meta.filter.empty());  // built without a filter policy
  auto filter = store_.ReadFilter(meta);
  ASSERT_TRUE(filter.ok());
  EXPECT_TRUE(filter->empty());

  store_.FailNextReads(1);
  auto source = store_.OpenTable(meta);
  ASSERT_TRUE(source.ok());
  char scratch[4];
  leveldb::Slice result;
  EXPECT_TRUE(source.value()->ReadFragment(0, 0, 1, scratch, &result).IsIOError());
  EXPECT_TRUE(source.value()->ReadFragment(0, 0, 1, scratch, &result).ok());

  ASSERT_TRUE(store_.AppendManifest("a").ok());
  store_.FailNextManifestWrites(2);
  EXPECT_FALSE(store_.AppendManifest("b").ok());
  EXPECT_FALSE(store_.RollManifest("s").ok());
  ASSERT_TRUE(store_.AppendManifest("c").ok());
  EXPECT_EQ(store_.ReadManifest().value(), "ac");
  ASSERT_TRUE(store_.RollManifest("s").ok());
  ASSERT_TRUE(store_.AppendManifest("d").ok());
  EXPECT_EQ(store_.ReadManifest().value(), "sd");
  EXPECT_EQ(store_.manifest_appends(), 3u);
  EXPECT_EQ(store_.manifest_rolls(), 1u);
}

TEST_F(MemoryTableStoreTest, ListAndCollectTables) {
  BuiltTable built = table_test::BuildTable(icmp_, {{"k", "v"}}, 2, bloom_.get());
  for (uint64_t number : {9, 4, 7}) {
    TableMeta meta;
    meta.number = number;
    meta.layout = built.layout;
    ASSERT_TRUE(store_.WriteTable(number, built, &meta).ok());
  }
  ASSERT_TRUE(store_.AppendManifest("m").ok());
  auto listed = store_.ListTables();
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  EXPECT_EQ(listed.value(), (std::vector<uint64_t>{4, 7, 9}));

  ASSERT_TRUE(store_.DeleteTableFiles(7).ok());
  ASSERT_TRUE(store_.DeleteTableFiles(7).ok()) << "nothing left to delete is fine";
  ASSERT_TRUE(store_.DeleteTableFiles(123).ok());
  EXPECT_FALSE(store_.HasTable(7));
  EXPECT_EQ(store_.tables_collected(), 1u);
  EXPECT_EQ(store_.ListTables().value(), (std::vector<uint64_t>{4, 9}));
  EXPECT_EQ(store_.ReadManifest().value(), "m") << "collecting never touches the MANIFEST";

  store_.FailNextGcCalls(2);
  EXPECT_EQ(store_.ListTables().status().code(), Status::Code::kIOError);
  EXPECT_EQ(store_.DeleteTableFiles(4).code(), Status::Code::kIOError);
  EXPECT_TRUE(store_.HasTable(4));
  ASSERT_TRUE(store_.DeleteTableFiles(4).ok());
  EXPECT_EQ(store_.ListTables().value(), (std::vector<uint64_t>{9}));
}

}  // namespace
}  // namespace nova::lsm
