// Test helpers for TableStore implementations: random tables built with
// FragmentedTableBuilder, and checks that a table read back through a store's
// FragmentSource holds exactly what was written. Header-only; for the tests of table stores and the
// engine.
//
// Thread safety: none of these objects is thread-safe.
#pragma once

#include <gtest/gtest.h>
#include <leveldb/comparator.h>
#include <leveldb/filter_policy.h>

#include <map>
#include <memory>
#include <random>
#include <string>

#include "common/lsm/fragmented_table.h"
#include "common/lsm/internal_key.h"
#include "common/lsm/table_store.h"

namespace nova::lsm::table_test {

// A table's contents: distinct user keys, each with one value.
using TableModel = std::map<std::string, std::string>;

// `n` random keys with values of up to `max_value` bytes.
inline TableModel RandomTableModel(std::mt19937_64* rng, int n, size_t max_value) {
  TableModel m;
  while (static_cast<int>(m.size()) < n) {
    std::string key = "key" + std::to_string((*rng)() % 1000000000);
    std::string value((*rng)() % (max_value + 1), '\0');
    for (char& c : value) c = static_cast<char>('a' + (*rng)() % 26);
    m[std::move(key)] = std::move(value);
  }
  return m;
}

// Builds `m` (sequence numbers 1..n in key order) into a table of `rho` data fragments
// with a whole-table filter made by `policy` (may be null).
inline BuiltTable BuildTable(const InternalKeyComparator& icmp, const TableModel& m,
                                  uint32_t rho, const leveldb::FilterPolicy* policy,
                                  size_t block_size = 1024) {
  TableBuildOptions options;
  options.block_size = block_size;
  options.num_data_fragments = rho;
  options.filter_policy = policy;
  FragmentedTableBuilder builder(&icmp, options);
  SequenceNumber seq = 0;
  for (const auto& [key, value] : m) {
    builder.Add(MakeInternalKey(key, ++seq, kTypeValue), value);
  }
  BuiltTable table;
  const Status s = builder.Finish(&table);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return table;
}

// Opens table `meta` over `source`, scans it fully and point-reads every key (and a
// missing one) against `m`.
inline void VerifySource(FragmentSource* source, const InternalKeyComparator& icmp,
                         const TableMeta& meta, const TableModel& m) {
  TableReadOptions ro;
  ro.comparator = &icmp;
  ro.paranoid_checks = true;
  std::unique_ptr<FragmentedTable> table;
  Status s = OpenTable(ro, meta.layout, source, &table);
  ASSERT_TRUE(s.ok()) << s.ToString();
  leveldb::ReadOptions options;
  options.verify_checksums = true;
  {
    std::unique_ptr<leveldb::Iterator> it = table->NewIterator(options);
    auto want = m.begin();
    for (it->SeekToFirst(); it->Valid(); it->Next(), ++want) {
      ASSERT_NE(want, m.end());
      ASSERT_EQ(ExtractUserKey(it->key()).ToString(), want->first);
      ASSERT_EQ(it->value().ToString(), want->second);
    }
    ASSERT_TRUE(it->status().ok()) << it->status().ToString();
    ASSERT_EQ(want, m.end());
  }
  for (const auto& [key, value] : m) {
    std::string got;
    TableGetResult result;
    s = TableGet(*table, options, nullptr, key, kMaxSequenceNumber, &got, &result);
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_EQ(static_cast<int>(result), static_cast<int>(TableGetResult::kFound)) << key;
    ASSERT_EQ(got, value);
  }
  std::string got;
  TableGetResult result;
  s = TableGet(*table, options, nullptr, "missing", kMaxSequenceNumber, &got, &result);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(static_cast<int>(result), static_cast<int>(TableGetResult::kNotFound));
}

// Opens `meta` through `store` and checks it as VerifySource does.
inline void VerifyTable(TableStore* store, const InternalKeyComparator& icmp,
                        const TableMeta& meta, const TableModel& m) {
  auto source = store->OpenTable(meta);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  VerifySource(source.value().get(), icmp, meta, m);
}

// Reads the filter of `meta` through `store` and checks it admits every key of `m`.
inline void VerifyFilter(TableStore* store, const leveldb::FilterPolicy* policy,
                         const TableMeta& meta, const TableModel& m) {
  auto filter = store->ReadFilter(meta);
  ASSERT_TRUE(filter.ok()) << filter.status().ToString();
  ASSERT_FALSE(filter->empty());
  TableFilter f(policy, filter.value());
  for (const auto& [key, value] : m) ASSERT_TRUE(f.KeyMayMatch(key)) << key;
  int rejected = 0;
  for (int i = 0; i < 100; ++i) rejected += f.KeyMayMatch("absent" + std::to_string(i)) ? 0 : 1;
  EXPECT_GT(rejected, 50);
}

}  // namespace nova::lsm::table_test
