// VersionEdit: one change to a range's LSM-tree metadata, as recorded in its MANIFEST
// (DESIGN.md section 4): tables added and removed per level with where their fragments live,
// the next file number and last sequence, and the range's Drange/Trange layout.
//
// Encoding: a sequence of tagged fields, `tag varint32 | value`, so fields can be added
// later; an unknown tag is Corruption (an older binary must not silently drop what it does
// not understand). DO NOT CHANGE tags or field encodings: persisted.
//
// Thread safety: a value type.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/lsm/fragmented_table.h"
#include "common/status.h"

namespace nova::ltc {

constexpr int kNumLevels = 7;

// Where one copy of a table fragment (or its filter) lives in a StoC file: one block, or
// several consecutive blocks when it is larger than one append may carry.
struct FragmentLocation {
  uint32_t stoc_id = 0;
  uint64_t file_id = 0;
  uint64_t offset = 0;  // file offset of its first byte
  uint64_t size = 0;    // bytes of fragment data
  // 0: the fragment is one block. Otherwise it is stored in chunks of chunk_bytes data (the
  // last may be shorter), chunk i starting at file offset `offset + i * chunk_stride`; the
  // gap between chunks is the StoC's block framing, which the reader skips.
  uint64_t chunk_bytes = 0;
  uint64_t chunk_stride = 0;
  bool operator==(const FragmentLocation&) const = default;
};

// Metadata of one SSTable.
struct TableMeta {
  uint64_t number = 0;
  std::string smallest;  // internal keys
  std::string largest;
  uint64_t num_entries = 0;
  // Sequence numbers of its entries: compaction may move a Level-0 table down only once no
  // memtable holds older versions of its keys.
  uint64_t smallest_sequence = 0;
  uint64_t largest_sequence = 0;
  uint32_t drange = 0;   // the Drange it was flushed from (Level 0); informational above
  lsm::TableLayout layout;
  // fragments[i] = the replicas of fragment i (layout.num_fragments() entries; an empty
  // data fragment has no replicas).
  std::vector<std::vector<FragmentLocation>> fragments;
  // The whole-table bloom filter's block (size 0: no filter).
  std::vector<FragmentLocation> filter;
  bool operator==(const TableMeta&) const = default;
};

// A TableMeta's encoding, shared by MANIFEST records (tag 5, after the level) and
// offloaded compaction jobs (ltc/compaction_job.h). DO NOT CHANGE: persisted.
void EncodeTableMeta(std::string* dst, const TableMeta& t);
// Reads one TableMeta from the front of *in and advances it; false on malformed input
// (never reads past *in; counts read are bounded, so damage cannot make it allocate much).
bool DecodeTableMeta(std::string_view* in, TableMeta* t);

// One Drange of a persisted layout: its lower bound, whether it is a point, and its Tranges'
// lower bounds (the first equals the Drange's).
struct PersistedBound {
  std::string key;
  bool after = false;
  bool min = false;
  bool operator==(const PersistedBound&) const = default;
};
struct PersistedDrange {
  bool point = false;
  std::vector<PersistedBound> tranges;
  bool operator==(const PersistedDrange&) const = default;
};
struct PersistedDrangeLayout {
  uint64_t generation = 0;
  std::vector<PersistedDrange> dranges;
  bool operator==(const PersistedDrangeLayout&) const = default;
};

struct VersionEdit {
  // Set on the first record of a MANIFEST: the record holds the whole state.
  bool snapshot = false;
  std::optional<uint64_t> next_file_number;
  std::optional<uint64_t> last_sequence;
  std::vector<std::pair<int, uint64_t>> deleted_tables;  // (level, table number)
  std::vector<std::pair<int, TableMeta>> new_tables;     // (level, table)
  std::optional<PersistedDrangeLayout> dranges;
  // Memtable logs (docs/durability.md): memtable ids are never reused, so the next one is
  // persisted; every log of a memtable id below log_floor, and of those listed in
  // obsolete_logs, is obsolete (its contents are in tables): recovery must not replay it.
  std::optional<uint64_t> next_memtable_id;
  std::optional<uint64_t> log_floor;
  std::vector<uint64_t> obsolete_logs;
  // Ranges [begin, end) of memtable ids whose logs are obsolete: a recovery records the ids
  // it did not replay (up to the next id it hands out), so a log it could not see (its
  // LogC was unreachable; it held no acknowledged write) is never replayed later.
  std::vector<std::pair<uint64_t, uint64_t>> obsolete_log_ranges;

  void EncodeTo(std::string* dst) const;
  // Corruption (naming the field) on malformed input; never reads past `in`.
  Status DecodeFrom(std::string_view in);
  bool operator==(const VersionEdit&) const = default;
};

}  // namespace nova::ltc
