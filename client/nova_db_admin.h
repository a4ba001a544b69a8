// What the leveldb::DB adapter (nova_db.h) answers for LevelDB's administration calls:
// GetProperty for LevelDB's property names, GetApproximateSizes and CompactRange, over
// NovaClient's administration calls (nova_client.h). Kept apart from NovaDB, which
// forwards to these.
//
// Properties, aggregated over every routed range (docs/client.md):
//   leveldb.num-files-at-level<N>     tables at level N, summed over the ranges
//   leveldb.sstables                  "--- level N ---" then one line per table:
//                                     " <number>:<bytes>['<smallest>' @ <seq> : <type> ..
//                                     '<largest>' @ <seq> : <type>] range <id>" (numbers
//                                     are per range)
//   leveldb.approximate-memory-usage  memtables plus block caches, in bytes
//   leveldb.stats                     LevelDB's "Compactions" table (Level, Files, Size(MB),
//                                     Time(sec), Read(MB), Write(MB); one row per level with
//                                     tables or work, summed over the ranges), then a
//                                     "Nova-LSM" summary line and every LTC's Stats text
// Any other name, or a cluster that cannot be asked: false.
//
// Thread safety: the functions are thread-safe (NovaClient is).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "client/nova_client.h"
#include "leveldb/db.h"
#include "leveldb/slice.h"

namespace nova::client {

// One of the LevelDB property names above into *value; false for another name or when no
// LTC answers.
bool GetLevelDbProperty(NovaClient* client, std::string_view property, std::string* value);
// sizes[i]: approximately the bytes of the keys ranges[i].start <= k < ranges[i].limit
// (0 when limit <= start, or when the cluster cannot be asked: LevelDB's call has no error).
void GetApproximateSizes(NovaClient* client, const leveldb::Range* ranges, int n,
                         uint64_t* sizes);
// Compacts the keys *begin <= k <= *end (null: unbounded on that side) on their LTCs and
// returns when done (or at ClientOptions::compact_range_timeout; errors are dropped, as
// LevelDB's call returns none).
void CompactRange(NovaClient* client, const leveldb::Slice* begin, const leveldb::Slice* end);

}  // namespace nova::client
