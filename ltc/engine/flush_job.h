// FlushJob: what becomes of one immutable memtable (docs/ltc.md "Flush"). Once every write
// sealed into it is in (its sequences are visible), the memtable is
//   - dropped if it is empty (a reorganization retires empty memtables too);
//   - merged back into its Drange, under the small-memtable rule of paper 4.4.2, if it holds
//     fewer distinct keys than merge_threshold_keys; or else
//   - written as a Level-0 table (one, however large) through the table store.
// The engine that owns the memtable provides the rest through FlushJob::Host: the live
// snapshots, table numbers, the merge target, and what each outcome changes in its state (the
// MANIFEST edit of a flush, the bookkeeping of a drop or merge).
//
// The small-memtable rule. A Drange whose memtables fill up with few distinct keys (a hot
// key's versions, typically a duplicated point Drange under skew) would otherwise write a
// table per memtable holding almost nothing but one version per key. Instead the versions
// readers may still need (the newest of each key, plus what live snapshots need; deletions
// stay, older versions may be in tables) move, with their sequence numbers, into another
// memtable of the Drange and the immutable one is dropped: nothing reaches the StoCs until
// the Drange gathers enough distinct keys.
//   1. Where the versions go: the Drange's next immutable memtable if it has one, else its
//      active memtable. (The paper builds a new immutable memtable; one kept back from
//      flushing would hold versions older than Level-0 tables flushed since, and Level-0
//      compaction must not move those tables below it, as reads take the first hit in
//      Levels 1+: parking it would stall Level 0.) Either way the versions land in the
//      Drange's oldest unflushed memtable, which flushes before anything newer of the
//      Drange, so every table of the Drange flushed later holds newer versions, and the
//      active memtable keeps holding only versions newer than its Drange's tables
//      (compaction relies on it).
//   2. Into the active memtable they move under the Drange's lock: it cannot rotate
//      meanwhile, and a forced flush (Host::FlushForced, raised before it rotates under that
//      lock) either sees them in the memtable it rotates or makes the job flush instead.
//   3. With logs, the versions are first appended as one record to the target's log (paper
//      4.4.2: the merged memtable gets a fresh log); the merged memtable's log may go only
//      if that worked (Host::FinishMerge's `relogged`). A failed append does not stop the
//      merge: part of the record may be in the target's log, and what a log holds must be
//      in its memtable.
//   Not merged: memtables marked no_merge, those of a retired Drange, those whose kept
//   versions exceed half of memtable_bytes (large values), and any while FlushForced().
//
//   FlushJob job(options, &host, imm);
//   Status s = job.Run();          // job.outcome() says which of the three happened
//
// Thread safety: a job is run by one thread. Jobs of different memtables may run at once;
// the memtables of one Drange must be run in order, one at a time (the merge target rule).
// Lock order: the Drange's lock (DrangeState::mu), then whatever the Host takes.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/lsm/compaction_merge.h"
#include "common/lsm/fragmented_table.h"
#include "common/lsm/table_meta.h"
#include "common/lsm/table_store.h"
#include "common/status.h"
#include "ltc/engine/drange_router.h"
#include "ltc/engine/lookup_index.h"
#include "ltc/engine/memtable.h"
#include "ltc/engine/memtable_log.h"
#include "ltc/engine/sequence_watermark.h"

namespace nova::ltc {

// An immutable memtable waiting for its FlushJob.
struct ImmutableMemTable {
  std::shared_ptr<MemTable> mem;
  uint32_t drange = 0;             // its Drange's index in the layout it was written under
  lsm::SequenceNumber sealed = 0;  // every write into mem has a sequence <= this
  // The Drange it came from (retired if a reorganization replaced it): its memtables flush
  // in order, and a merge may give the versions back to it.
  std::shared_ptr<DrangeState> state;
  // Must become a table, not be merged back (a Level-0 compaction waits for it).
  bool no_merge = false;
};

struct FlushJobOptions {
  uint32_t range_id = 0;                             // for log messages
  const lsm::InternalKeyComparator* icmp = nullptr;  // must outlive the job
  lsm::TableStore* store = nullptr;                  // must outlive the job
  lsm::TableBuildOptions table;  // block size, fragments, filter policy of the table
  // The small-memtable rule: merge a memtable with fewer distinct keys than this (0: never).
  uint64_t merge_threshold_keys = 0;
  uint64_t memtable_bytes = 0;  // kept versions over half of this are flushed, not merged
  MemtableLog* log = nullptr;   // null: no logs; else must outlive the job
  // Null: no lookup index; else must outlive the job (a merge repoints its entries).
  LookupIndex* lookup_index = nullptr;
  const SequenceWatermark* sequences = nullptr;  // the range's; must outlive the job
};

class FlushJob {
 public:
  // What the job needs from the engine that owns the memtable. Called from the job's thread;
  // the job holds no lock when it calls them, except the Drange's (DrangeState::mu) around
  // MergeTarget.
  class Host {
   public:
    virtual ~Host() = default;
    // The sequence numbers of the live snapshots, ascending (their versions are kept).
    virtual std::vector<lsm::SequenceNumber> LiveSnapshots() = 0;
    // A new table number.
    virtual uint64_t NewFileNumber() = 0;
    // True while every memtable must become a table (a forced flush runs): no merge.
    virtual bool FlushForced() = 0;
    // The Drange's immutable memtable after `imm` (it takes merged versions), or null: then
    // its active memtable does. Called with imm.state->mu held.
    virtual std::shared_ptr<MemTable> MergeTarget(const ImmutableMemTable& imm) = 0;
    // The outcomes; one of them is called once per successful Run, none after a failure.
    // `imm` was empty: drop it.
    virtual void DropEmpty(const ImmutableMemTable& imm) = 0;
    // `imm`'s kept versions (`entries` of them) are in `target` now; `relogged`: and in
    // its log, so imm's log may go.
    virtual void FinishMerge(const ImmutableMemTable& imm, const std::shared_ptr<MemTable>& target,
                             uint64_t entries, bool relogged) = 0;
    // `imm` is written as `tables` (one, or none if no version survived): record them in
    // Level 0. An error fails the job (the tables are the host's to delete or keep).
    virtual Status InstallTables(const ImmutableMemTable& imm,
                                 std::vector<lsm::TableMeta> tables) = 0;
  };

  enum class Outcome { kNone, kDropped, kMerged, kFlushed };

  // `host` must outlive the job.
  FlushJob(const FlushJobOptions& options, Host* host, ImmutableMemTable imm);
  FlushJob(const FlushJob&) = delete;
  FlushJob& operator=(const FlushJob&) = delete;

  // Waits until every write sealed into the memtable is in, then drops, merges or writes it
  // (see the file comment). On failure nothing changed (a table written is deleted again,
  // unless InstallTables failed) and the memtable stays as it was. REQUIRES: called once.
  Status Run();
  // What Run did; kNone before it, or after it failed.
  Outcome outcome() const { return outcome_; }

 private:
  // A writer sealed into the memtable that is still not in after this long logs a warning.
  static constexpr std::chrono::seconds kSealWaitLog{10};

  // The small-memtable rule; false (nothing changed) if it does not apply.
  bool TryMerge();
  // Logs and adds the kept versions to `target`, repointing the lookup index; returns how
  // the re-logging went (see the file comment, 3).
  Status MoveVersions(const std::vector<std::pair<std::string, std::string>>& kept,
                      const std::shared_ptr<MemTable>& target);
  Status WriteTable();
  lsm::CompactionMergeOptions MergeOptions();

  const FlushJobOptions options_;
  Host* const host_;  // must outlive this
  const ImmutableMemTable imm_;
  Outcome outcome_ = Outcome::kNone;
};

}  // namespace nova::ltc
