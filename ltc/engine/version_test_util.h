// Tables for tests of versions and of what reads them (the compaction picker): each one
// built from given entries and written to an in-memory table store. Header-only; tests only.
#pragma once

#include <gtest/gtest.h>
#include <leveldb/comparator.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/lsm/fragmented_table.h"
#include "common/lsm/memory_table_store.h"
#include "ltc/engine/version.h"

namespace nova::ltc::version_test {

struct Entry {
  std::string key;
  std::string value;
  lsm::SequenceNumber sequence = 1;
  lsm::ValueType type = lsm::kTypeValue;
};

class TestTables {
 public:
  TestTables() : icmp_(leveldb::BytewiseComparator()) {
    ctx_.store = &store_;
    ctx_.icmp = &icmp_;
  }

  // Table `number` holding `entries` (in internal-key order). Each number once per
  // TestTables.
  TableRef Table(uint64_t number, const std::vector<Entry>& entries) {
    lsm::TableBuildOptions o;
    o.block_size = 256;
    o.num_data_fragments = 1;
    lsm::FragmentedTableBuilder builder(&icmp_, o);
    lsm::SequenceNumber largest = 0;
    for (const Entry& e : entries) {
      builder.Add(lsm::MakeInternalKey(e.key, e.sequence, e.type), e.value);
      largest = std::max(largest, e.sequence);
    }
    lsm::BuiltTable built;
    EXPECT_TRUE(builder.Finish(&built).ok());
    lsm::TableMeta meta;
    meta.number = number;
    meta.smallest = built.smallest;
    meta.largest = built.largest;
    meta.num_entries = built.num_entries;
    meta.largest_sequence = largest;
    meta.layout = built.layout;
    EXPECT_TRUE(store_.WriteTable(number, built, &meta).ok());
    return std::make_shared<TableHandle>(meta, &ctx_);
  }

  // A table of the keys from..to (one character each), values "v".
  TableRef Span(uint64_t number, char from, char to, lsm::SequenceNumber sequence = 1) {
    std::vector<Entry> entries;
    for (char c = from; c <= to; ++c) entries.push_back({std::string(1, c), "v", sequence});
    return Table(number, entries);
  }

  lsm::MemoryTableStore& store() { return store_; }
  const TableContext* ctx() const { return &ctx_; }

 private:
  lsm::InternalKeyComparator icmp_;
  lsm::MemoryTableStore store_;
  TableContext ctx_;
};

}  // namespace nova::ltc::version_test
