// MemTable: the LTC's in-memory write buffer, a sorted set of internal-key entries.
//
// Each Add() appends one entry to the memtable's Arena and indexes it in a lock-free
// SkipList ordered by the InternalKeyComparator (user key ascending, newest first). An entry
// is encoded as
//
//   varint32 internal key length | internal key | varint32 value length | fixed64 address
//
// where the internal key is user key | fixed64(sequence << 8 | type) (common/lsm/
// internal_key.h) and the address (absent for an empty value) points at the value's bytes
// in a second arena. Each entry shares one allocation with its index node and the values
// live elsewhere, so searches walk densely packed nodes whatever the value size (with
// 1 KiB values next to the keys, cache misses on the nodes were about half of the writers'
// CPU). Entries are never removed or changed; the memtable is dropped as a whole once it
// has been flushed (or merged into another one, paper 4.4.2).
//
// Writers serialize on the memtable's write mutex: that is the contention Nova-LSM's
// Dranges spread out by giving each Drange its own active memtable. Readers (Get, iterators,
// the counters) take no lock.
//
// Ownership: shared, through std::shared_ptr. The engine holds a memtable from several
// places and threads at once (the Drange's active slot, the immutable list, the lookup
// index, a flush job, open iterators); whoever lets go last frees it, with no Ref()/Unref()
// pairs to get wrong. Create memtables with std::make_shared<MemTable>(cmp, id):
// NewIterator() pins the memtable through that shared_ptr.
//
//   auto mem = std::make_shared<MemTable>(&icmp, /*id=*/7);
//   mem->Add(seq, lsm::kTypeValue, "k", "v");
//   std::string v;
//   if (mem->Get("k", snapshot, &v) == MemTable::GetResult::kFound) ...
#pragma once

#include <leveldb/iterator.h>
#include <leveldb/slice.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "common/lsm/internal_key.h"
#include "common/mutex.h"
#include "ltc/engine/arena.h"
#include "ltc/engine/skiplist.h"

namespace nova::ltc {

// Thread-safe: Add() may be called from any number of threads (they serialize on the write
// mutex); Get(), NewIterator(), iterators and the accessors run concurrently with them
// without locks.
class MemTable : public std::enable_shared_from_this<MemTable> {
 public:
  enum class GetResult {
    kFound,     // the newest visible entry is a value; *value holds it
    kDeleted,   // the newest visible entry is a deletion: stop looking in older tables
    kNotFound,  // no entry of the key at or below the snapshot: look in older tables
  };

  // An empty memtable called `id` (the engine's memtable id: lookup index entries name it).
  // *cmp must outlive the memtable and every iterator over it.
  MemTable(const lsm::InternalKeyComparator* cmp, uint64_t id);
  MemTable(const MemTable&) = delete;
  MemTable& operator=(const MemTable&) = delete;

  // Adds the entry (user_key, seq, type) -> value; `value` is ignored (stored empty) for
  // a deletion. Copies the bytes: the arguments need not outlive the call. Blocks while
  // another thread adds to this memtable. Versions of one key may be added out of sequence
  // order (concurrent writers); Get() and iterators still order them by sequence.
  // REQUIRES: seq <= lsm::kMaxSequenceNumber; (user_key, seq) not added before (sequence
  //   numbers are unique within a range); user_key.size() + 8 and value.size() fit in
  //   32 bits (the engine rejects larger requests before they reach the memtable).
  void Add(lsm::SequenceNumber seq, lsm::ValueType type, const leveldb::Slice& user_key,
           const leveldb::Slice& value) EXCLUDES(write_mu_);

  // Looks up the newest entry of `user_key` whose sequence is <= `snapshot` (a snapshot
  // above kMaxSequenceNumber reads everything). kFound copies its value into *value;
  // kDeleted and kNotFound leave *value unchanged. Entries being added concurrently may or
  // may not be seen; entries whose Add() returned before the call are. Lock-free.
  GetResult Get(const leveldb::Slice& user_key, lsm::SequenceNumber snapshot,
                std::string* value) const;

  // Returns a new iterator over every entry, in InternalKeyComparator order: key() is the
  // internal key, value() the value (empty for deletions). status() is always OK. The
  // iterator starts invalid; it is lock-free, used by one thread at a time, and sees
  // entries added after its creation when it moves over them (like Get, not a snapshot:
  // filter by sequence). The iterator holds a shared_ptr to this memtable, so it stays valid
  // after every other holder has let go; the caller deletes it. Slices from key()/value()
  // stay valid as long as the iterator (or another holder of the memtable) does.
  // REQUIRES: this memtable is owned by a std::shared_ptr (see the file comment).
  leveldb::Iterator* NewIterator() const;

  // Bytes held by the arenas (entries, index nodes and values): what the flush threshold
  // compares. Lock-free: Arena::MemoryUsage() is the one arena call safe without write_mu_
  // (the analysis cannot tell it from allocation).
  size_t ApproximateMemoryUsage() const NO_THREAD_SAFETY_ANALYSIS {
    return arena_.MemoryUsage() + value_arena_.MemoryUsage();
  }
  // Entries added, deletions included. A Get() or iterator started after this returns sees
  // at least the entries counted.
  uint64_t num_entries() const { return num_entries_.load(std::memory_order_acquire); }
  // Distinct user keys among the entries (the paper's small-memtable merge rule,
  // `--drange_merge_threshold_keys`). Exact: kept by Add(), which checks whether the new
  // entry's neighbours in the index share its user key.
  uint64_t num_unique_keys() const { return num_unique_keys_.load(std::memory_order_relaxed); }
  // Sum of user key and value sizes over all entries (the payload, without encoding).
  uint64_t data_bytes() const { return data_bytes_.load(std::memory_order_relaxed); }
  // Smallest and largest sequence added; an empty memtable reports kMaxSequenceNumber and
  // 0. Each counter is read atomically, but two reads are not a consistent pair while
  // writers run.
  lsm::SequenceNumber smallest_sequence() const {
    return smallest_sequence_.load(std::memory_order_relaxed);
  }
  lsm::SequenceNumber largest_sequence() const {
    return largest_sequence_.load(std::memory_order_relaxed);
  }
  uint64_t id() const { return id_; }
  const lsm::InternalKeyComparator* comparator() const { return cmp_; }

 private:
  class Iter;

  // Orders encoded entries (or encoded lookup keys) by their internal keys.
  struct EntryComparator {
    const lsm::InternalKeyComparator* cmp;
    bool bytewise;  // the user comparator is leveldb's bytewise one: compare inline
    int operator()(const char* a, const char* b) const;
  };
  using Table = SkipList<const char*, EntryComparator>;

  // Constant after construction.
  const lsm::InternalKeyComparator* const cmp_;  // must outlive this
  const uint64_t id_;

  // Serializes Add(): the arenas and the table's Insert() take one writer at a time.
  Mutex write_mu_;
  Arena arena_ GUARDED_BY(write_mu_);        // index nodes and entries (table_ allocates)
  Arena value_arena_ GUARDED_BY(write_mu_);  // values
  // Insert() needs write_mu_; reads are lock-free (so the analysis cannot guard it).
  Table table_;

  // Written under write_mu_ after the entry is in the table; read without a lock.
  std::atomic<uint64_t> num_entries_{0};
  std::atomic<uint64_t> num_unique_keys_{0};
  std::atomic<uint64_t> data_bytes_{0};
  std::atomic<lsm::SequenceNumber> smallest_sequence_{lsm::kMaxSequenceNumber};
  std::atomic<lsm::SequenceNumber> largest_sequence_{0};
};

}  // namespace nova::ltc
