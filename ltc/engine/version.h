// Tables and versions of one range's LSM-tree.
//
// A TableHandle is one SSTable: its metadata and, opened on first use, the table read
// through the lsm::TableStore and its whole-table bloom filter. A Version is an immutable set of
// tables per level; readers hold a shared_ptr to the version they started with, so tables
// stay readable while compactions replace them. A table removed from the current version is
// marked obsolete and its fragments are deleted when the last version holding it goes away.
//
// Thread safety: TableHandle and Version are safe for concurrent readers.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <leveldb/cache.h>
#include <leveldb/filter_policy.h>
#include <leveldb/iterator.h>

#include "common/lsm/fragmented_table.h"
#include "common/lsm/internal_key.h"
#include "common/lsm/table_store.h"
#include "common/mutex.h"
#include "common/status.h"
#include "common/thread_pool.h"
#include "ltc/engine/version_edit.h"

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

class TableHandle;

// The metadata of every TableHandle alive (in a version, or held by a reader, an iterator or
// a compaction): what a sweep of garbage table files must keep (RangeEngine, "sweeping").
// Thread safety: thread-safe; its lock is a leaf.
class TableRegistry {
 public:
  void Add(const TableHandle* t) EXCLUDES(mu_);
  void Remove(const TableHandle* t) EXCLUDES(mu_);
  // Table number -> the metadata of each handle of that number alive now (two after a
  // relocation replaced a table whose old handle is still read).
  std::map<uint64_t, std::vector<lsm::TableMeta>> Snapshot() const EXCLUDES(mu_);

 private:
  mutable Mutex mu_;
  std::multimap<uint64_t, const TableHandle*> handles_ GUARDED_BY(mu_);
};

// Shared by every table of a range; must outlive them.
struct TableContext {
  lsm::TableStore* store = nullptr;
  const lsm::InternalKeyComparator* icmp = nullptr;
  leveldb::Cache* block_cache = nullptr;
  const leveldb::FilterPolicy* filter_policy = nullptr;
  TableRegistry* registry = nullptr;  // null: handles are not registered
};

// A TableContext with what it points at that the range holds: the bloom filter policy and
// the block cache (its own, or `shared_block_cache` when set). Constant after construction.
struct OwnedTableContext {
  OwnedTableContext(lsm::TableStore* store, const lsm::InternalKeyComparator* icmp,
                    int bloom_bits_per_key, size_t block_cache_bytes,
                    std::shared_ptr<leveldb::Cache> shared_block_cache = nullptr);
  std::unique_ptr<const leveldb::FilterPolicy> filter_policy;
  std::shared_ptr<leveldb::Cache> block_cache;
  TableRegistry registry;
  TableContext ctx;  // points at the above
};

class TableHandle {
 public:
  TableHandle(lsm::TableMeta meta, const TableContext* ctx);
  // Deletes the table's fragments if it was marked obsolete; if it was replaced, deletes
  // the copies its successor does not hold (then lets go of the successor).
  ~TableHandle();
  TableHandle(const TableHandle&) = delete;
  TableHandle& operator=(const TableHandle&) = delete;

  const lsm::TableMeta& meta() const { return meta_; }
  // Point lookup (skips the read when the bloom filter rules the key out).
  Status Get(const leveldb::Slice& user_key, lsm::SequenceNumber snapshot, LookupHit* hit);
  // An iterator over the table's internal keys; it keeps the table open. Caller deletes.
  Result<leveldb::Iterator*> NewIterator();
  // The offset in the table's bytes where the entries at or after internal key `ikey`
  // begin, approximately (from the index block, as leveldb::Table::ApproximateOffsetOf:
  // no data block is read; file_size past the last entry). Opens the table on first use.
  Result<uint64_t> ApproximateOffsetOf(const leveldb::Slice& ikey);
  // The table leaves the LSM-tree: delete it once nobody reads it any more.
  void MarkObsolete() { obsolete_ = true; }
  // The same table, with some copies moved elsewhere (a relocation), replaced this one in
  // the LSM-tree. This handle keeps reading its own copies; once nobody reads it any more,
  // the copies `successor` does not hold are deleted. The successor is kept alive until
  // then, so copies both hold are deleted (with the successor, if it becomes obsolete)
  // only after neither is read. REQUIRES: called once, before the handle can be released.
  void MarkReplaced(std::shared_ptr<TableHandle> successor) EXCLUDES(mu_);
  // The handle that replaced this one (null if none).
  std::shared_ptr<TableHandle> successor() const EXCLUDES(mu_);
  // True if the user-key range of this table overlaps [smallest, largest] (user keys).
  bool Overlaps(const leveldb::Slice& smallest, const leveldb::Slice& largest) const;

 private:
  // Opens the table on first use. OK once opened (then source_, table_ and filter_ are
  // set and stay so).
  Status EnsureOpen() EXCLUDES(mu_);

  const lsm::TableMeta meta_;
  const TableContext* const ctx_;  // must outlive this
  mutable Mutex mu_;
  bool opened_ GUARDED_BY(mu_) = false;
  // Set under mu_ before opened_, then constant: read without the lock by whoever saw
  // EnsureOpen() succeed (the analysis cannot express "guarded until published").
  std::unique_ptr<lsm::FragmentSource> source_;
  std::unique_ptr<lsm::FragmentedTable> table_;
  std::unique_ptr<lsm::TableFilter> filter_;
  std::atomic<bool> obsolete_{false};
  std::shared_ptr<TableHandle> successor_ GUARDED_BY(mu_);  // set by MarkReplaced
};

using TableRef = std::shared_ptr<TableHandle>;

// The user-key range [*smallest, *largest] of `tables` (not empty), `ucmp` ordering user
// keys.
void UserKeyRange(const leveldb::Comparator* ucmp, const std::vector<TableRef>& tables,
                  std::string* smallest, std::string* largest);

struct Version {
  // Level 0: in order of table number (newer tables later); levels >= 1: sorted by smallest
  // key, non-overlapping.
  std::vector<TableRef> levels[lsm::kNumLevels];

  uint64_t LevelBytes(int level) const;

  // The level search of a point lookup below Level 0: levels 1.. hold older data than the
  // memtables and Level 0, and their tables do not overlap, so at most one table per level
  // can hold `user_key` (found by binary search on the largest keys, `ucmp` ordering user
  // keys) and the first level with an entry of it (sequence <= snapshot) has the newest.
  // hit->found false if no level has one. A table's read error is returned. With `pool`,
  // the levels with a candidate table are searched concurrently (RunAll), with the same
  // answer: the first level's error or entry, in level order.
  Status GetBelowLevel0(const leveldb::Comparator* ucmp, const leveldb::Slice& user_key,
                        lsm::SequenceNumber snapshot, LookupHit* hit,
                        ThreadPool* pool = nullptr) const;

  // Level 0's table `number`, or null.
  TableRef FindLevel0(uint64_t number) const;
};

}  // namespace nova::ltc
