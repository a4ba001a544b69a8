// VersionEdit: one change to a range's LSM-tree metadata, as recorded in its MANIFEST
// (DESIGN.md section 4): tables added and removed per level with where their fragments live,
// the next file number and last sequence, and the range's Drange/Trange layout.
//
// Encoding: a sequence of tagged fields, `tag varint32 | value`, so fields can be added
// later; an unknown tag is Corruption (an older binary must not silently drop what it does
// not understand). DO NOT CHANGE tags or field encodings: persisted.
//
// Replacing a table's metadata (a relocation moved some of its copies): one edit that
// deletes (level, number) and adds the new TableMeta of the same number at the same level.
// Every reader applies an edit's deletes before its adds (ManifestState::Apply), so this
// needs no tag of its own and binaries older than relocation read it right.
//
// Thread safety: a value type.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/lsm/table_meta.h"
#include "common/status.h"

namespace nova::ltc {

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
  std::vector<std::pair<int, lsm::TableMeta>> new_tables;     // (level, table)
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
