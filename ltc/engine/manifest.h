// MANIFEST records and the metadata state they build (DESIGN.md section 4).
//
// A range's MANIFEST is a log of VersionEdits, one per record of common/lsm/manifest_format.h
// (a self-checking framing). On a StoC each record is one appended block of a persistent
// file, replicated on several StoCs.
//
// The first record is a snapshot of the whole state. A MANIFEST rolls over to a new file
// that starts with a snapshot when it grows large; nothing is dropped on the way.
// Recovery rules: a record cut short (header or payload incomplete), or whose payload
// checksum fails while it is the last record, is a torn append that was never acknowledged
// and is ignored; any other damage is Corruption (never silently used or skipped).
//
// Thread safety: ManifestState is not thread-safe (the engine serializes edits).
#pragma once

#include <cstdint>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "ltc/engine/version_edit.h"

namespace nova::ltc {

std::string EncodeManifestRecord(const VersionEdit& edit);

struct ParsedManifest {
  std::vector<VersionEdit> edits;
  uint64_t valid_bytes = 0;  // bytes of complete, valid records
  uint64_t torn_bytes = 0;   // ignored bytes of a torn last record
};
// Parses a whole MANIFEST. Corruption (with the byte offset) for a bad record that is not
// the last, or a first record that is not a snapshot.
Status ParseManifest(std::string_view contents, ParsedManifest* out);

// ParseManifest's verdict alone (for stoc::StocTableStoreOptions::validate_manifest).
Status ValidateManifest(std::string_view contents);

// The metadata a MANIFEST describes: tables per level, counters and the Drange layout.
class ManifestState {
 public:
  // Applies an edit: a snapshot replaces the state. Corruption if it deletes a table that
  // is not there or adds one that already is (a MANIFEST that contradicts itself).
  Status Apply(const VersionEdit& edit);
  // One snapshot edit holding the whole state (starts a new MANIFEST file).
  VersionEdit Snapshot() const;

  const std::map<uint64_t, lsm::TableMeta>& level(int l) const { return levels_[l]; }
  uint64_t next_file_number() const { return next_file_number_; }
  uint64_t last_sequence() const { return last_sequence_; }
  const std::optional<PersistedDrangeLayout>& dranges() const { return dranges_; }
  uint64_t next_memtable_id() const { return next_memtable_id_; }
  uint64_t log_floor() const { return log_floor_; }
  // True if memtable `id`'s log must not be replayed: its contents are in tables.
  bool LogIsObsolete(uint64_t id) const {
    if (id < log_floor_ || obsolete_logs_.count(id) != 0) return true;
    auto it = obsolete_ranges_.upper_bound(id);  // the first range beginning after id
    return it != obsolete_ranges_.begin() && id < std::prev(it)->second;
  }
  // True if no log of the range can hold anything to replay: the log of every memtable id
  // handed out so far (below next_memtable_id()) is obsolete. The range was closed cleanly
  // (RangeEngine::CloseCleanly) and not opened since: every later Open records live
  // memtable ids above these before the range serves.
  bool AllLogsObsolete() const {
    if (next_memtable_id_ <= log_floor_) return true;
    auto it = obsolete_ranges_.upper_bound(log_floor_);  // the first range beginning above
    return it != obsolete_ranges_.begin() && std::prev(it)->second >= next_memtable_id_;
  }
  bool operator==(const ManifestState&) const = default;

 private:
  std::map<uint64_t, lsm::TableMeta> levels_[lsm::kNumLevels];  // by table number
  uint64_t next_file_number_ = 1;
  uint64_t last_sequence_ = 0;
  std::optional<PersistedDrangeLayout> dranges_;
  uint64_t next_memtable_id_ = 1;
  uint64_t log_floor_ = 0;
  std::set<uint64_t> obsolete_logs_;  // ids >= log_floor_ only
  // begin -> end, disjoint and not touching; each ends above log_floor_.
  std::map<uint64_t, uint64_t> obsolete_ranges_;
};

}  // namespace nova::ltc
