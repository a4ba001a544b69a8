// The range index (paper 4.4.1.2): partitions of a range's key space, each with the
// memtables and Level-0 tables that may hold keys inside it, so a scan merges only the
// memtables and Level-0 tables of the partition it is in (plus Levels 1..6), and a Get that
// misses the lookup index searches only those of the partition holding its key.
//
// Design (this implementation's choices):
//  - A RangeIndex is an immutable snapshot. The engine builds a new one, under its mutex and
//    in the same critical section, whenever the set of memtables or Level-0 tables changes
//    (a memtable is created, a memtable is flushed into a table, tables are compacted away,
//    a reorganization, Open), and readers take a shared_ptr to the current one together
//    with the sequence they read at. Readers therefore never lock or see a half update, and
//    the snapshot itself keeps every memtable and Level-0 table it names alive.
//  - Partitions are rebuilt from the *current* Drange boundaries each time rather than
//    split finer and finer as the paper describes: the index then stays bounded (at most
//    theta partitions, the Drange layout's distinct lower bounds) however many
//    reorganizations happened. A memtable of an older layout or a Level-0 table that spans
//    several partitions is listed in each (pointers are stored once per snapshot; the
//    partitions hold 4-byte positions into those lists). Adjacent partitions whose lists
//    are identical are merged into one, so a scan switches sources only where they change.
//  - A memtable's key interval is the [lower, upper) bound of the Drange it was created for
//    (recorded by the engine when it becomes the Drange's active memtable): writes are
//    routed by Drange, so it never holds a key outside it, even while writes land
//    concurrently. A memtable whose Drange is not known is given the whole key space
//    (costs only work, never a missed key). A Level-0 table's interval is exactly
//    [smallest, largest] user key from its metadata.
//
// Exactness: every memtable or Level-0 table that may hold a key k is listed in the
// partition containing k (its interval contains k, so it overlaps that partition).
//
// Size: positions stored = sum over sources of the partitions each spans, so at most
// partitions x (memtables + Level-0 tables), typically a few per partition.
//
// Thread safety: immutable after Build(); safe to share between threads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <leveldb/comparator.h>
#include <leveldb/slice.h>

#include "ltc/engine/drange.h"
#include "ltc/engine/memtable.h"
#include "ltc/engine/version.h"

namespace nova::ltc {

// [lower, upper) in user-key order; no upper: unbounded above.
struct KeyInterval {
  KeyBound lower = KeyBound::Min();
  std::optional<KeyBound> upper;

  static KeyInterval All() { return KeyInterval{}; }
  // [smallest, largest] (both user keys, inclusive).
  static KeyInterval Closed(const leveldb::Slice& smallest, const leveldb::Slice& largest);
  // The keys routed to Drange d of `layout`: from its lower bound to the lower bound of the
  // next Drange that starts elsewhere (duplicated point Dranges share one interval).
  static KeyInterval OfDrange(const DrangeLayout& layout, int d);
};

// What a RangeIndex is built from.
struct RangeIndexSources {
  struct Mem {
    std::shared_ptr<MemTable> mem;
    KeyInterval interval;
  };
  std::vector<Mem> memtables;
  std::vector<TableRef> level0;  // each table's interval comes from its metadata
};

class RangeIndex {
 public:
  struct Partition {
    KeyBound lower;  // the upper bound is the next partition's lower (the last: unbounded)
    std::vector<uint32_t> memtables;  // positions in RangeIndex::memtables(), ascending
    std::vector<uint32_t> tables;     // positions in RangeIndex::tables(), ascending
  };

  // Partitions cut at `boundaries` (any order, duplicates allowed; the minimum bound is
  // added if missing), then merged where neighbours have the same sources. `cmp` must
  // outlive the index. Never returns null; at least one partition.
  static std::shared_ptr<const RangeIndex> Build(const leveldb::Comparator* cmp,
                                                 std::vector<KeyBound> boundaries,
                                                 RangeIndexSources sources);

  int size() const { return static_cast<int>(partitions_.size()); }
  const Partition& partition(int i) const { return partitions_[i]; }
  // Upper bound of partition i; nullptr for the last (unbounded).
  const KeyBound* UpperBound(int i) const {
    return i + 1 < size() ? &partitions_[i + 1].lower : nullptr;
  }
  // The partition containing user key `key`.
  int Find(const leveldb::Slice& key) const;
  // True if user key `key` lies in partition i.
  bool Contains(int i, const leveldb::Slice& key) const;

  // Every memtable and Level-0 table of the index (the partitions name positions in these).
  const std::vector<std::shared_ptr<MemTable>>& memtables() const { return memtables_; }
  const std::vector<TableRef>& tables() const { return tables_; }
  const leveldb::Comparator* comparator() const { return cmp_; }
  // Positions stored over all partitions (the index's size besides its pointers).
  size_t entries() const;

  // "[lower, upper): m<ids> t<numbers>" per partition, for tests and debugging.
  std::string DebugString() const;

 private:
  explicit RangeIndex(const leveldb::Comparator* cmp) : cmp_(cmp) {}

  const leveldb::Comparator* const cmp_;  // must outlive this
  std::vector<Partition> partitions_;
  std::vector<std::shared_ptr<MemTable>> memtables_;
  std::vector<TableRef> tables_;
};

}  // namespace nova::ltc
