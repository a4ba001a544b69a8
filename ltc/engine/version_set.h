// VersionSet: a range's current Version and the MANIFEST behind it (DESIGN.md section 4,
// docs/ltc.md "MANIFEST").
//
// Recover() reads the MANIFEST through the table store and builds the current version (a
// new range gets its first MANIFEST; a torn last record starts a new one). LogAndApply()
// records an edit durably before installing the version it makes, so the MANIFEST always
// holds at least what readers were shown, and rolls the MANIFEST over to a snapshot once it
// outgrows manifest_roll_bytes. An append that keeps failing leaves it unknown whether the
// record reached a replica, so the edit is settled by writing a new MANIFEST without it
// (Open reads only the newest) and deleting the edit's tables; if even that fails, the
// caller must stop writing (`*fatal`).
//
// An edit that deletes and adds the same table number at one level replaces the table's
// metadata (a relocation moved some of its copies): readers of the old handle keep reading
// the old copies, and those the new metadata does not hold are deleted once nobody reads
// the old handle (TableHandle::MarkReplaced). If such an edit is given up, only the new
// copies go.
//
// Thread safety: not thread-safe (the engine calls it under its mutex). The versions
// current() returns are immutable and may be read without it.
#pragma once

#include <cstdint>
#include <memory>

#include "common/status.h"
#include "ltc/engine/manifest.h"
#include "ltc/engine/version.h"
#include "ltc/engine/version_edit.h"

namespace nova::ltc {

struct VersionSetOptions {
  uint32_t range_id = 0;                      // for messages
  uint64_t manifest_roll_bytes = 4ull << 20;  // a new MANIFEST starts past this size
  // Attempts at one MANIFEST record before giving the edit up.
  int append_attempts = 3;
};

class VersionSet {
 public:
  // `ctx` (with its store) must outlive this.
  VersionSet(const VersionSetOptions& options, const TableContext* ctx);

  VersionSet(const VersionSet&) = delete;
  VersionSet& operator=(const VersionSet&) = delete;

  // Reads the MANIFEST and builds the current version from it. *new_range: the range had no
  // MANIFEST (one holding the empty state was just written). The store's error (reading,
  // or writing a first or post-torn MANIFEST) or Corruption from the MANIFEST's contents.
  // REQUIRES: called once, before anything else.
  Status Recover(bool* new_range);

  // Appends `edit` to the MANIFEST (up to append_attempts tries) and installs the version
  // it makes; then rolls the MANIFEST over if it grew past manifest_roll_bytes (a failed
  // roll-over is logged and retried after the next edit). On failure nothing is installed
  // and the error names the MANIFEST append: *fatal false if a new MANIFEST without the
  // edit was written (its new tables are deleted), true if that failed too (whether the
  // edit is in the MANIFEST is unknown: the caller must write nothing more). Fenced (and
  // *fatal true) at once, without a retry, a new MANIFEST or a delete, when a StoC says a
  // newer owner has the range. Corruption if the edit contradicts the state (a bug).
  Status LogAndApply(const VersionEdit& edit, bool* fatal);

  // Takes the next table number; a number is never handed out twice by one VersionSet. It
  // reaches the MANIFEST with the next edit that records the counter (flushes and
  // compactions do) or snapshot; Open moves it past every table file found on the StoCs.
  uint64_t NewFileNumber();
  // Moves the next table number past `number` (a table file that may still exist).
  void SkipFileNumbersThrough(uint64_t number);

  const std::shared_ptr<Version>& current() const { return current_; }
  // What the MANIFEST holds (tables, counters, log bookkeeping, the Drange layout).
  const ManifestState& state() const { return state_; }
  // Edits given up after their MANIFEST append failed (a new MANIFEST settled them).
  uint64_t manifest_failures() const { return manifest_failures_; }
  // Fenced once a StoC refused this owner's MANIFEST write (also a roll-over after an edit
  // that was applied): the range must stop. OK otherwise.
  const Status& fenced() const { return fenced_; }

 private:
  // `base` with `edit` applied; tables the edit deletes are marked obsolete, except those it
  // also adds at the same level (replaced: MarkReplaced with the new handle) or at another
  // one (moved: the new version holds the same handle there).
  std::shared_ptr<Version> BuildVersion(const Version& base, const VersionEdit& edit) const;
  // The current handle of table `number` if `edit` deletes it (at any level: `edit` adds it
  // back, replaced at the same level or moved to another), else null.
  TableRef FindReplaced(const VersionEdit& edit, uint64_t number) const;
  // The whole state as the first record of a new MANIFEST.
  std::string SnapshotRecord() const { return EncodeManifestRecord(state_.Snapshot()); }

  // Constant after construction.
  const VersionSetOptions options_;
  const TableContext* const ctx_;  // must outlive this

  ManifestState state_;
  std::shared_ptr<Version> current_;
  uint64_t manifest_bytes_ = 0;  // of the current MANIFEST, bounding it across reopens too
  uint64_t manifest_failures_ = 0;
  Status fenced_;
};

}  // namespace nova::ltc
