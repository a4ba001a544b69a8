// Tables and versions of one range's LSM-tree.
//
// A TableHandle is one SSTable: its metadata and, opened on first use, the table read
// through the TableStore and its whole-table bloom filter. A Version is an immutable set of
// tables per level; readers hold a shared_ptr to the version they started with, so tables
// stay readable while compactions replace them. A table removed from the current version is
// marked obsolete and its fragments are deleted when the last version holding it goes away.
//
// Thread safety: TableHandle and Version are safe for concurrent readers.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <leveldb/cache.h>
#include <leveldb/filter_policy.h>
#include <leveldb/iterator.h>

#include "common/lsm/fragmented_table.h"
#include "common/lsm/internal_key.h"
#include "common/status.h"
#include "ltc/table_store.h"
#include "ltc/version_edit.h"

namespace nova::ltc {

// What a point lookup found in one table or memtable.
struct LookupHit {
  bool found = false;  // an entry of the key with sequence <= snapshot exists
  lsm::SequenceNumber sequence = 0;
  lsm::ValueType type = lsm::kTypeValue;
  std::string value;
};

// Finds the newest entry of user_key with sequence <= snapshot in an internal iterator.
Status SeekNewest(leveldb::Iterator* it, const lsm::InternalKeyComparator* icmp,
                  const leveldb::Slice& user_key, lsm::SequenceNumber snapshot, LookupHit* hit);

// Shared by every table of a range; must outlive them.
struct TableContext {
  TableStore* store = nullptr;
  const lsm::InternalKeyComparator* icmp = nullptr;
  leveldb::Cache* block_cache = nullptr;
  const leveldb::FilterPolicy* filter_policy = nullptr;
};

// A table opened for one pass front to back, as a compaction reads its inputs: its
// fragments are read in windows of kScanReadaheadBytes (lsm::ReadaheadSource) instead of
// one round trip per data block, and its blocks bypass the block cache (each is read
// once). Separate from the TableHandle that Gets and scans use.
//
// Thread safety: as lsm::FragmentedTable.
class ScanTable {
 public:
  static constexpr size_t kScanReadaheadBytes = 256 << 10;

  // Opens `meta` through `store` (both must outlive this): reads its footer and index.
  static Result<std::unique_ptr<ScanTable>> Open(TableStore* store, const TableMeta& meta,
                                                 const lsm::InternalKeyComparator* icmp);

  // An iterator over the table's internal keys. REQUIRES: destroyed before this.
  std::unique_ptr<leveldb::Iterator> NewIterator() const;

 private:
  ScanTable() = default;
  std::unique_ptr<lsm::FragmentSource> source_;  // declared before table_: outlives it
  std::unique_ptr<lsm::FragmentedTable> table_;
};

class TableHandle {
 public:
  TableHandle(TableMeta meta, const TableContext* ctx) : meta_(std::move(meta)), ctx_(ctx) {}
  ~TableHandle();  // deletes the table's fragments if it was marked obsolete
  TableHandle(const TableHandle&) = delete;
  TableHandle& operator=(const TableHandle&) = delete;

  const TableMeta& meta() const { return meta_; }
  // Point lookup (skips the read when the bloom filter rules the key out).
  Status Get(const leveldb::Slice& user_key, lsm::SequenceNumber snapshot, LookupHit* hit);
  // An iterator over the table's internal keys; it keeps the table open. Caller deletes.
  Result<leveldb::Iterator*> NewIterator();
  // The table leaves the LSM-tree: delete it once nobody reads it any more.
  void MarkObsolete() { obsolete_ = true; }
  // True if the user-key range of this table overlaps [smallest, largest] (user keys).
  bool Overlaps(const leveldb::Slice& smallest, const leveldb::Slice& largest) const;

 private:
  Status EnsureOpen();

  const TableMeta meta_;
  const TableContext* const ctx_;  // must outlive this
  std::mutex mu_;
  // Protected by mu_ until opened, then constant:
  std::unique_ptr<lsm::FragmentSource> source_;
  std::unique_ptr<lsm::FragmentedTable> table_;
  std::unique_ptr<lsm::TableFilter> filter_;
  bool opened_ = false;
  std::atomic<bool> obsolete_{false};
};

using TableRef = std::shared_ptr<TableHandle>;

struct Version {
  // Level 0: in order of table number (newer tables later); levels >= 1: sorted by smallest
  // key, non-overlapping.
  std::vector<TableRef> levels[kNumLevels];
  uint64_t LevelBytes(int level) const;
};

}  // namespace nova::ltc
