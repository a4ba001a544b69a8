// The lookup index (paper 4.4.1.1): for each key written to a range, the id of the memtable
// that received its newest version and that version's sequence number. A Get first reads
// just that memtable (or the Level-0 table it was flushed to: the engine maps memtable ids to
// tables, the paper's MIDToTable) and uses the entry it finds only if its sequence is exactly
// the indexed one, so a stale or missing index entry can only cost a full search, never a
// wrong answer. Entries of a Level-0 table are erased when it is compacted into Level 1.
//
// Keys are indexed by their bytes: the range's comparator must treat keys as equal only
// when their bytes are (true of the bytewise default).
//
// Thread safety: thread-safe (striped locks).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include <leveldb/slice.h>

#include "common/lsm/internal_key.h"
#include "common/mutex.h"

namespace nova::ltc {

class LookupIndex {
 public:
  struct Entry {
    uint64_t memtable_id = 0;
    lsm::SequenceNumber sequence = 0;
  };

  // Records that `key` got a version with `sequence` in memtable `memtable_id`, unless a
  // newer version is already recorded (concurrent writers may finish out of order).
  void Update(const leveldb::Slice& key, uint64_t memtable_id, lsm::SequenceNumber sequence);
  // Records the entry only if `key` has none (a Get that missed fills the index in).
  void InsertIfAbsent(const leveldb::Slice& key, uint64_t memtable_id,
                      lsm::SequenceNumber sequence);
  std::optional<Entry> Lookup(const leveldb::Slice& key) const;
  // Makes the entry of `key` point at memtable `to` if it points at memtable `from` (its
  // versions moved there with their sequence numbers).
  void Repoint(const leveldb::Slice& key, uint64_t from, uint64_t to);
  // Removes the entry of `key` if it still points at `memtable_id`.
  void EraseIf(const leveldb::Slice& key, uint64_t memtable_id);
  size_t size() const;

 private:
  static constexpr size_t kStripes = 64;  // spreads concurrent writers' lock traffic
  // Transparent hashing and equality: lookups by a key's bytes without building a string
  // (the put path updates the index on every write).
  struct KeyHash {
    using is_transparent = void;
    size_t operator()(std::string_view k) const { return std::hash<std::string_view>()(k); }
  };
  struct KeyEq {
    using is_transparent = void;
    bool operator()(std::string_view a, std::string_view b) const { return a == b; }
  };
  struct Stripe {
    mutable Mutex mu;
    std::unordered_map<std::string, Entry, KeyHash, KeyEq> entries GUARDED_BY(mu);
  };
  Stripe& StripeOf(const leveldb::Slice& key) const;

  mutable std::array<Stripe, kStripes> stripes_;
};

}  // namespace nova::ltc
