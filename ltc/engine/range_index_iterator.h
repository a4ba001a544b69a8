// The scan side of the range index (paper 4.4.1.2): an internal iterator over the memtables
// and Level-0 tables of a RangeIndex that, in the partition holding its position, merges
// only that partition's memtables and tables, and at the partition's upper bound moves on
// to the first key of the next partition's sources (backwards likewise). The engine merges
// it with one level iterator per Level 1..6 and filters the result to the user view
// (RangeEngine::NewIterator).
//
// Each entry of a memtable or table that spans several partitions is yielded once, by the
// partition holding its user key, so the result is exactly the sorted union of every
// memtable and Level-0 table of the index.
//
// Thread safety: as leveldb::Iterator (one thread at a time).
#pragma once

#include <memory>

#include <leveldb/iterator.h>

#include "common/lsm/internal_key.h"
#include "ltc/engine/range_index.h"

namespace nova::ltc {

// Caller deletes the result. `icmp` must outlive it (its user comparator must be the
// index's); the iterator holds `index` and so every memtable and table it reads.
leveldb::Iterator* NewRangeIndexIterator(const lsm::InternalKeyComparator* icmp,
                                         std::shared_ptr<const RangeIndex> index);

}  // namespace nova::ltc
