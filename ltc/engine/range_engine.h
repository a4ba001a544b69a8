// RangeEngine: the LSM-tree of one range at an LTC (paper 4.4, DESIGN.md section 5).
//
// Writes get a sequence number and go to the active memtable of the Drange holding their
// key (drange.h); a full memtable becomes immutable and a background thread flushes it as
// an SSTable through the lsm::TableStore (fragments scattered over StoCs) into Level 0.
// Compaction merges Level-0 tables of non-overlapping key ranges (different Dranges) in
// parallel into Level 1, and each level into the next when it grows past its target.
// Every change to the set of tables is recorded in the range's MANIFEST before it is
// visible, so Open() gives back exactly the tables and the Drange layout.
//
// Reads: a Get returns the newest version visible at its snapshot: the newest by sequence
// among the memtables and Level-0 tables (which may overlap), else the first hit in Levels
// 1..6 (older data: a Level-0 table moves down only when no memtable holds older versions of
// its keys, and together with every Level-0 table overlapping it). Iterators merge
// everything visible at their snapshot. The range index (range_index.h, on by default)
// narrows the memtables and Level-0 tables a scan merges, or a Get that misses the lookup
// index searches, to those of the partition holding the position or key.
//
// Logs (EngineOptions::log, docs/durability.md): each write's record is appended to the log
// of every memtable it goes to before it is added there and acknowledged; a memtable's log
// is dropped once its table is in the MANIFEST (whose edits also mark such logs obsolete,
// so a log that outlives its memtable is never replayed); Open rebuilds the memtables of
// the live logs (range_engine_recovery.cc). Compactions may be offloaded to StoCs
// (EngineOptions::compaction_offloader, range_engine_offload.cc).
//
// Parts with one job each: DrangeRouter (which Drange a write goes to, the Dranges' states,
// installing a new layout), DrangeReorganizer (when and how the Drange layout changes),
// FlushJob (an immutable memtable becomes a Level-0 table, or merges back into its Drange),
// VersionSet (versions and the MANIFEST), Version::GetBelowLevel0 (the level search of a
// Get), CompactionPicker (which compaction next); the engine holds them together under mu_.
// Sources: range_engine.cc (Open, writes, reads), range_engine_flush.cc (background work,
// what flush jobs change in the engine), range_engine_compaction.cc (compactions, layout
// installs, stats), range_engine_index.cc, range_engine_recovery.cc,
// range_engine_offload.cc, range_engine_migration.cc (live migration, both sides),
// range_engine_relocation.cc (moving copies off evacuated StoCs, sweeping garbage files).
//
// Thread safety: all public methods are thread-safe. Lock order: Drange locks
// (DrangeState::mu, in index order), then mu_, then the router's lock (a leaf). Members are
// GUARDED_BY their lock (clang checks them).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <leveldb/cache.h>
#include <leveldb/filter_policy.h>
#include <leveldb/iterator.h>

#include "common/clock.h"
#include "common/key_range.h"
#include "common/lsm/compaction_merge.h"
#include "common/lsm/internal_key.h"
#include "common/mutex.h"
#include "common/retry_policy.h"
#include "common/lsm/table_store.h"
#include "common/status.h"
#include "common/thread_pool.h"
#include "ltc/engine/compaction_picker.h"
#include "ltc/engine/drange.h"
#include "ltc/engine/drange_reorganizer.h"
#include "ltc/engine/drange_router.h"
#include "ltc/engine/engine_options.h"
#include "ltc/engine/flush_job.h"
#include "ltc/engine/lookup_index.h"
#include "ltc/engine/manifest.h"
#include "ltc/engine/memtable.h"
#include "ltc/engine/range_index.h"
#include "ltc/engine/range_migration.h"
#include "ltc/engine/sequence_watermark.h"
#include "ltc/engine/version.h"
#include "ltc/engine/version_set.h"

namespace nova::ltc {

// A point in time readers can see the range at. Release it with ReleaseSnapshot.
class EngineSnapshot {
 public:
  lsm::SequenceNumber sequence() const { return sequence_; }

 private:
  friend class RangeEngine;
  explicit EngineSnapshot(lsm::SequenceNumber s) : sequence_(s) {}
  lsm::SequenceNumber sequence_;
};

struct EngineStats {
  uint64_t puts = 0, deletes = 0, gets = 0;
  uint64_t flushes = 0, compactions = 0;
  // Immutable memtables merged into their Drange's active memtable instead of flushed, and
  // the entries they carried over.
  uint64_t memtable_merges = 0, merged_entries = 0;
  // Background failures: flushes and compactions retried after a backoff, and MANIFEST
  // appends that failed for good (the edit dropped, a new MANIFEST started).
  uint64_t flush_failures = 0, compaction_failures = 0, manifest_failures = 0;
  // Unreferenced table files deleted at Open.
  uint64_t orphans_collected = 0;
  // Of `compactions`, those executed by a StoC; and offloads that failed, after which the
  // job ran here (EngineOptions::compaction_offloader).
  uint64_t compactions_offloaded = 0, compaction_offload_fallbacks = 0;
  // Compactions that moved their one table down instead (RangeEngine::MoveTableDown); not
  // in `compactions`.
  uint64_t table_moves = 0;
  uint64_t stalls = 0;           // writes that had to wait for a free memtable or Level 0
  uint64_t stall_micros = 0;     // time they waited
  // Of those: writes that waited (also) because Level 0 was at l0_stop_writes_bytes, and
  // the time waited for that reason. The rest waited for a flush to free a memtable.
  uint64_t l0_stop_stalls = 0, l0_stop_stall_micros = 0;
  // Writes delayed (once each) because Level 0 passed l0_slowdown_writes_bytes, and the
  // time they were delayed.
  uint64_t slowdowns = 0, slowdown_micros = 0;
  uint64_t major_reorganizations = 0, minor_reorganizations = 0;
  // Writes refused because their log append failed.
  uint64_t log_failures = 0;
  // The last Open's recovery: logs replayed, entries rebuilt into memtables, bytes of log
  // read, bytes ignored past torn or damaged tails, obsolete logs dropped, and its duration.
  uint64_t recovered_logs = 0, recovered_entries = 0, recovered_log_bytes = 0;
  uint64_t recovery_ignored_bytes = 0, recovery_obsolete_logs = 0, recovery_micros = 0;
  uint64_t recovery_read_micros = 0;  // of recovery_micros, reading the logs
  // The last Open's live migration (EngineOptions::migrated): memtables adopted from the
  // source LTC instead of replayed (their logs were listed, not read), and their entries.
  uint64_t migrated_memtables = 0, migrated_entries = 0;
  // Relocation and sweeping (RangeEngine::GetRelocationProgress has the meanings).
  uint64_t relocation_copies_at_risk = 0, relocation_tables_at_risk = 0;
  uint64_t relocated_tables = 0, relocated_bytes = 0, relocation_failures = 0;
  uint64_t sweeps = 0, swept_files = 0;
  // Of the last complete window of reorganize_every_writes writes (the load check's
  // figure); until the first window completes, of the writes so far.
  double drange_imbalance = 0;
  uint64_t lookup_index_hits = 0;   // Gets answered from the one indexed memtable or table
  uint64_t lookup_index_entries = 0;
  int dranges = 0;
  int immutable_memtables = 0;
  uint64_t level_tables[lsm::kNumLevels] = {};
  uint64_t level_bytes[lsm::kNumLevels] = {};
  // What writing each level cost since Open (LevelDB's "leveldb.stats" columns): flushes
  // into Level 0 and compactions into the level (by its output level, offloaded ones
  // included): their time, and the table bytes they read and wrote.
  uint64_t level_compaction_micros[lsm::kNumLevels] = {};
  uint64_t level_read_bytes[lsm::kNumLevels] = {};
  uint64_t level_write_bytes[lsm::kNumLevels] = {};
  // Memtables readers see (active and immutable), the memory they hold, and the bytes the
  // block cache holds.
  int memtables = 0;
  uint64_t memtable_bytes = 0;
  uint64_t block_cache_bytes = 0;
  lsm::SequenceNumber last_sequence = 0;
};

// What a range serves from (RangeEngine::GetShape): its tables per level (Level 0 oldest
// first, levels 1+ in key order) and its Drange/Trange layout, as a MANIFEST snapshot
// records them. Reopening a range from its MANIFEST gives back the same shape.
struct EngineShape {
  std::vector<lsm::TableMeta> levels[lsm::kNumLevels];
  PersistedDrangeLayout dranges;
  bool operator==(const EngineShape&) const = default;
};

// Where moving copies off evacuated StoCs stands (RangeEngine::GetRelocationProgress).
struct RelocationProgress {
  // Copies (lsm::CopiesOn) of the current version's tables on an evacuated StoC, and the
  // tables with at least one, now.
  uint64_t copies_at_risk = 0;
  uint64_t tables_at_risk = 0;
  // Totals since Open: relocations installed, the bytes they copied, and relocations that
  // failed (RelocateTable or the MANIFEST edit; each is retried after a backoff).
  uint64_t tables_relocated = 0;
  uint64_t bytes_relocated = 0;
  uint64_t failures = 0;
  // Totals since Open: sweeps that completed, and the files they deleted.
  uint64_t sweeps = 0;
  uint64_t files_swept = 0;
  // Nothing runs now, no copy is at risk and no sweep was requested.
  bool idle = true;
  // A flush or compaction (local or offloaded) that started before the evacuated StoCs
  // last changed is still running: it may still install a table with a copy on one.
  bool writes_from_before = false;
};

// One write of a batch (RangeEngine::Write); the slices must stay valid for the call.
struct WriteOp {
  lsm::ValueType type = lsm::kTypeValue;  // kTypeValue: a Put; kTypeDeletion: a Delete
  leveldb::Slice key;
  leveldb::Slice value;  // a Put's only
};

class RangeEngine {
 public:
  // `store` must outlive the engine.
  RangeEngine(const EngineOptions& options, lsm::TableStore* store);
  ~RangeEngine();  // stops background work (waits for running flushes and compactions)
  RangeEngine(const RangeEngine&) = delete;
  RangeEngine& operator=(const RangeEngine&) = delete;

  // Recovers tables and Dranges from the MANIFEST (or starts an empty range), and deletes
  // table files the MANIFEST does not reference (orphans of a crash or failed append).
  // With options.migrated, adopts the copied memtables (range_engine_migration.cc).
  Status Open();

  Status Put(const leveldb::Slice& key, const leveldb::Slice& value);
  Status Delete(const leveldb::Slice& key);
  // Applies `ops` atomically, in order: readers see all of them or none. OK for none.
  Status Write(const std::vector<WriteOp>& ops);
  // NotFound if the key has no value at the snapshot (null: latest).
  Status Get(const leveldb::Slice& key, std::string* value,
             const EngineSnapshot* snapshot = nullptr);
  // The user view at the snapshot (null: latest). Caller deletes; the iterator pins what it
  // reads. Errors surface through its status().
  leveldb::Iterator* NewIterator(const EngineSnapshot* snapshot = nullptr);
  // Up to `count` pairs with key >= start, in order.
  Status Scan(const leveldb::Slice& start, size_t count,
              std::vector<std::pair<std::string, std::string>>* out,
              const EngineSnapshot* snapshot = nullptr);

  const EngineSnapshot* GetSnapshot();
  void ReleaseSnapshot(const EngineSnapshot* snapshot);

  // Makes every memtable immutable and waits until all are flushed (tests, shutdown).
  // Returns the error of a flush that fails meanwhile (the flush is retried in the
  // background) or the error that stopped the range. While a migration out lasts it
  // flushes what it waits for (the hold yields to it); once handed off it returns Fenced at
  // once and flushes nothing.
  Status FlushAll();
  // The end of a clean shutdown (range_engine_recovery.cc): refuses writes for good, waits
  // for those in flight, flushes every memtable and records in the MANIFEST that no log of
  // the range holds anything (every memtable id so far obsolete). The next Open then reads
  // no log and needs no LogC to vouch for its listing: a whole cluster stopped cleanly
  // resumes although memory LogCs restarted empty (docs/durability.md, "Recovery").
  // Returns OK; FlushAll's error or the edit's (nothing recorded: the next Open recovers
  // from the logs, as after a crash); HandedOffStatus() when handed off. Reads go on.
  // REQUIRES: called at most once, before destruction; the range is not used to write
  // afterwards.
  Status CloseCleanly() EXCLUDES(mu_);
  // Waits until no compaction is needed or running (memtables held by a migration out do
  // not count). Fenced at once when handed off.
  Status WaitForCompactions();

  // Live migration, source side (range_migration.h, docs/coordinator.md "Live migration";
  // range_engine_migration.cc).
  // Starts a migration out: every non-empty active memtable becomes immutable (never merged
  // back; a Drange may exceed its memtable budget by one), no memtable is merged into
  // another, and immutable memtables are not flushed while the migration lasts unless a
  // writer waits for room or FlushAll runs (then they flush in the usual order; correctness
  // never depends on the hold). Drange reorganizations wait until the migration ends. The
  // range keeps serving. OK; calling it again restarts nothing; IllegalState if the range
  // is not open, shutting down, or stopped (its error).
  Status BeginMigrationOut() EXCLUDES(mu_);
  // The immutable memtables now (ascending id) once every write to them has finished (and
  // any merge into them that started before BeginMigrationOut): each is complete and no
  // longer changes. The engine keeps them too (flushes are held, not forbidden).
  // IllegalState without BeginMigrationOut; Aborted if the engine shuts down meanwhile.
  Status ExportImmutables(std::vector<MigratedMemtable>* out) EXCLUDES(mu_);
  // Stops the range for a hand-off (begins the migration out first if needed): new writes
  // fail with Fenced (on_fenced is not called); a write already past PrepareWrite (it has
  // its sequence number) completes, and the call waits until every such write has finished;
  // no background work starts any more (a flush or compaction running may finish: its
  // MANIFEST edit is fine either way, the destination fences before reading). *out gets
  // every live memtable (actives and immutables, ascending id) plus the bookkeeping, with
  // complete = true. From then on the engine writes nothing (no flush, compaction, merge,
  // log drop or closing flush) until EndMigrationOut. Reads still work (the server refuses
  // them once handed off). Calling it again returns the state again.
  // Errors: those of BeginMigrationOut; the error that stopped the range.
  Status Handoff(MigratedState* out) EXCLUDES(mu_);
  // Undoes BeginMigrationOut and Handoff (the move was abandoned): writes, flushes, merges,
  // reorganizations and compactions resume; log drops deferred by the hand-off run. A
  // no-op if no migration is in progress.
  void EndMigrationOut() EXCLUDES(mu_);
  // True between a successful Handoff and EndMigrationOut.
  bool handed_off() const EXCLUDES(mu_);

  // Relocation and sweeping (range_engine_relocation.cc; lsm::TableStore "Relocation and
  // sweeping"). One maintenance thread, started by Open, runs both, one step at a time.
  //
  // The StoCs whose copies must move (a dead StoC removed from the configuration, or one
  // being drained); replaces the previous set, empty: nothing to move. Table by table over
  // the current version, the thread has the store relocate every copy on them
  // (RelocateTable, at most EngineOptions::relocation_bytes_per_sec) and installs the
  // table's new metadata with a MANIFEST edit replacing it at its level, if the table is
  // still there unchanged (else the new copies are deleted). The old copies are deleted
  // once no reader holds the old metadata. A failed relocation is retried after a backoff;
  // nothing is relocated or installed while a migration out lasts, or after the range
  // stopped (fenced).
  void SetEvacuatedStocs(std::set<uint32_t> stocs) EXCLUDES(mu_);
  RelocationProgress GetRelocationProgress() const EXCLUDES(mu_);
  // Copies per StoC that holds any, of every table a reader may still read (the registry:
  // the current version's, and old handles' whose files are deleted when released).
  std::map<uint32_t, uint64_t> CopiesPerStoc() const EXCLUDES(mu_);
  // Asks for a sweep of garbage table files (TableStore::SweepTableFiles) as soon as the
  // thread is free; sweeps also run every EngineOptions::sweep_interval. A sweep keeps
  // every table any reader may still read and every number a flush, compaction (local or
  // offloaded) or relocation may still install; it never runs with a relocation, nor while
  // a migration out lasts. A failed sweep is retried after a backoff.
  void RequestSweep() EXCLUDES(mu_);

  // Administration (range_engine_admin.cc): what the leveldb::DB adapter's
  // GetApproximateSizes and CompactRange ask of a range. `span` holds the user keys
  // start <= k < end (no end: unbounded) in options.comparator's order.
  //
  // Approximately the bytes the span's keys take: for each table of the current version
  // holding keys of it, the table's size if the span covers it, else the part between the
  // span's bounds as the table's index places them (LevelDB's ApproximateOffsetOf: the
  // table is opened, reading its index from StoCs once); plus, for each memtable, its key
  // and value bytes in the span (every version counts, as in tables). A table that cannot be
  // opened counts half its size (logged). IllegalState if the range is not open.
  Result<uint64_t> ApproximateSize(const KeyRange& span) EXCLUDES(mu_);
  // LevelDB's manual compaction: flushes every memtable (FlushAll), then compacts the
  // tables holding keys of `span` down, level by level from Level 0, until the span's data
  // lies in one level: the deepest holding any of it (looked at again after each level),
  // at least Level 1. The steps are picked by CompactionPicker::PickManual and run by
  // RunCompaction (offloaded if configured) on the calling thread; a step whose tables a
  // background compaction holds waits for it. Writes go on meanwhile; what they add after the flush may stay in
  // memtables or Level 0. Returns when done: OK; FlushAll's or a step's error (the span is
  // then partly compacted: all data stays readable); Fenced once handed off; Aborted if the
  // engine shuts down meanwhile or `cancel` (if not null) becomes true (checked between
  // steps); IllegalState if not open.
  Status CompactRange(const KeyRange& span, const std::atomic<bool>* cancel = nullptr)
      EXCLUDES(mu_);

  EngineStats GetStats() const;
  std::string DrangeDebugString() const;
  // The current tables and Drange layout (empty before a successful Open).
  EngineShape GetShape() const;

 private:
  // A write waiting this long for earlier writes to become visible logs a warning.
  static constexpr std::chrono::seconds kSealWaitLog{10};
  // A CompactRange step above Level 0 moves down about this many tables' worth
  // (sstable_bytes each; one table at least), so background compactions interleave with a
  // long CompactRange and no one step holds a large part of a level.
  static constexpr int kManualStepTables = 10;
  // A CompactRange step that must wait (busy tables, memtables to flush) looks again after
  // at most this long (background progress wakes it earlier).
  static constexpr std::chrono::milliseconds kManualStepRecheck{50};
  // Backoff of a flush or compaction that failed (a StoC that failed is a suspect for a
  // while, so the retry goes elsewhere; a longer wait would only hold data in memory).
  static constexpr RetryPolicy kBackgroundRetry{std::chrono::milliseconds(10),
                                                std::chrono::milliseconds(5000)};
  // Backoff of a table whose relocation failed, and of a failed sweep: the cause (no StoC
  // to place on, every copy unreadable) lasts until the configuration changes.
  static constexpr RetryPolicy kMaintenanceRetry{std::chrono::milliseconds(50),
                                                 std::chrono::milliseconds(30000)};

  // What a FlushJob asks of the engine (range_engine_flush.cc).
  class FlushHost;

  // Write path.
  // Appends the write's log record to the log of each memtable in `mems` (one per op). On
  // failure *failed is the memtable whose append failed.
  // *reached: false when the append failed before the record was sent to any replica of
  // any of the logs (it is in no log).
  Status LogWrite(const std::vector<WriteOp>& ops,
                  const std::vector<std::shared_ptr<MemTable>>& mems, lsm::SequenceNumber first,
                  std::shared_ptr<MemTable>* failed, bool* reached);
  // Rotates `mem` out if it is still a Drange's active memtable (its log died) and the
  // Drange has room for another memtable; not once the range is closing (no memtable id is
  // handed out after CloseCleanly began). REQUIRES: no Drange lock or mu_ held.
  void RetireActive(const std::shared_ptr<MemTable>& mem) EXCLUDES(mu_);
  // Recovery (range_engine_recovery.cc): reads the range's logs, drops the obsolete ones and
  // rebuilds a memtable per live log (same id) with --ltc_recovery_threads threads. Fills
  // *rebuilt (ascending id), *absorbed (rebuilt id -> ids of logless memtables whose
  // entries it took) and *max_sequence. `new_range`: the MANIFEST was just created, or it
  // says every log is obsolete (closed cleanly): no log can be missed.
  // REQUIRES: mu_ held, during Open.
  // `copied`: memtable ids whose logs are listed but neither read nor replayed, and whose
  // entries found in other logs are dropped (a live migration copied them, or their entries
  // are in a copied memtable).
  Status RebuildFromLogsLocked(bool new_range, const std::set<uint64_t>& copied,
                               std::vector<std::shared_ptr<MemTable>>* rebuilt,
                               std::unordered_map<uint64_t, std::vector<uint64_t>>* absorbed,
                               lsm::SequenceNumber* max_sequence) REQUIRES(mu_);
  // Live migration, destination side (range_engine_migration.cc): the memtables of
  // options_.migrated the MANIFEST does not mark obsolete (*adopted, ascending id), with the
  // source's bookkeeping merged into ids_ (if complete), *copied the ids RebuildFromLogsLocked
  // must not replay, and *last_sequence the source's last sequence (0 if not complete).
  // InvalidArgument for a memtable ordered by another comparator. REQUIRES: mu_ held,
  // during Open, after the MANIFEST is read.
  Status AdoptMigratedLocked(std::vector<std::shared_ptr<MemTable>>* adopted,
                             std::set<uint64_t>* copied, lsm::SequenceNumber* last_sequence)
      REQUIRES(mu_);
  // Drops these logs now, or after the hand-off if the range is handed off (nothing is
  // written then). REQUIRES: mu_ held; options_.log not null.
  void DropLogsNowOrLaterLocked(const std::vector<uint64_t>& memtables) REQUIRES(mu_);
  // Waits until no flush job that was running when the migration out began is still
  // running (one may be merging into a memtable about to be copied). False if the engine
  // shuts down meanwhile. REQUIRES: mu_ held (released while waiting).
  bool WaitForFlushesBeforeMigrationLocked(MutexLock* lock) REQUIRES(mu_);
  // Cycles the locks of every Drange of the current routing until the routing did not
  // change meanwhile: afterwards every writer that assigns a sequence sees
  // write_gate_.blocked as it was before the call. REQUIRES: no Drange lock or mu_ held.
  void SyncWithWritersHoldingDranges() EXCLUDES(mu_);
  // Adds the log bookkeeping to an edit: logs dropped since the last edit (merged or empty
  // memtables) join its obsolete_logs, and it records the log floor (every memtable below
  // the oldest live one) and the next memtable id. REQUIRES: mu_ held.
  void AddLogBookkeepingLocked(VersionEdit* edit) REQUIRES(mu_);
  // After the edit is in the MANIFEST: drops the logs it made obsolete. REQUIRES: mu_ held.
  void DropLogsLocked(const VersionEdit& edit) REQUIRES(mu_);
  // Locks the Dranges of `keys` (router_ routes them), makes sure each has an active
  // memtable with room (rotating and stalling as needed), assigns `keys.size()` sequence
  // numbers and returns the memtable for each key and the first sequence.
  Status PrepareWrite(const std::vector<leveldb::Slice>& keys,
                      std::vector<std::shared_ptr<MemTable>>* mems, lsm::SequenceNumber* first)
      EXCLUDES(mu_);
  // A new memtable, registered for readers and the lookup index. REQUIRES: mu_ held.
  std::shared_ptr<MemTable> NewMemTableLocked() REQUIRES(mu_);
  // Erases the lookup-index entries that point at the memtables flushed into Level-0 tables
  // that compaction just replaced. recorded_keys[i], if present, holds the user keys of
  // tables[i] (varint32-length-prefixed, as the local merge recorded them); a table without
  // them is read again. REQUIRES: mu_ not held.
  void ForgetCompactedLevel0(const std::vector<TableRef>& tables,
                             const std::vector<std::string>& recorded_keys) EXCLUDES(mu_);

  // Range index (range_engine_index.cc). Builds range_index_ anew from the routing
  // (router_), live_ and the current version, recording the interval of each active memtable
  // not seen before; to be called in the same mu_ critical section as every change to those
  // (readers take the index with the sequence they read at). REQUIRES: mu_ held.
  void RebuildRangeIndexLocked() REQUIRES(mu_);
  // The internal iterator (every version of every key) over `version` and the memtables
  // and Level-0 tables of `rindex` (if not null) or else `mems` and version's Level 0.
  // Caller deletes it; it holds what it reads except `version` (the caller pins it).
  leveldb::Iterator* NewInternalIterator(const std::vector<std::shared_ptr<MemTable>>& mems,
                                         std::shared_ptr<const RangeIndex> rindex,
                                         const std::shared_ptr<Version>& version);
  // Makes the active memtable of Drange `d` (state `ds`, of the current routing) immutable
  // and starts a new one. REQUIRES: ds->mu and mu_ held.
  void RotateLocked(uint32_t d, const std::shared_ptr<DrangeState>& ds, bool no_merge = false)
      REQUIRES(mu_, ds->mu);
  // The active memtable of `ds` for a reader that holds mu_ but not ds.mu: RotateLocked, the
  // only writer of a live Drange's active memtable, holds both, so mu_ alone keeps it still.
  // (The analysis cannot express "guarded by either lock".) REQUIRES: mu_ held.
  const std::shared_ptr<MemTable>& ActiveUnderMu(const DrangeState& ds) const
      REQUIRES(mu_) NO_THREAD_SAFETY_ANALYSIS {
    return ds.active;
  }
  // True if Drange d may rotate now (a free memtable and Level 0 not over its limit).
  // REQUIRES: mu_ held.
  bool RoomToRotateLocked(uint32_t d) const REQUIRES(mu_);
  // Installs a reorganized layout: the old Dranges' active memtables become immutable, the
  // new Dranges get new memtables, the layout is recorded in the MANIFEST, and router_
  // publishes it (with mu_ held). Nothing while a migration out lasts or the range is
  // closing. REQUIRES: no Drange lock or mu_ held.
  void InstallLayout(std::unique_ptr<DrangeLayout> layout, bool major) EXCLUDES(mu_);
  void FinishWrite(lsm::SequenceNumber first, size_t count);
  lsm::SequenceNumber VisibleSequence() const;
  // Takes the next table number. REQUIRES: mu_ not held.
  uint64_t NewFileNumber() EXCLUDES(mu_);
  void MaybeReorganize();

  // Background work.
  void ScheduleWork() REQUIRES(mu_);
  void BackgroundWork();
  // Rotates the Dranges in bg_.rotate_for_compaction. REQUIRES: mu_ held (released and
  // retaken: a Drange's lock comes first).
  void RotateForCompaction() REQUIRES(mu_);
  // The immutable memtable to flush next, or null. REQUIRES: mu_ held.
  const ImmutableMemTable* NextFlushLocked() const REQUIRES(mu_);
  // Removes `mem` from immutables_. REQUIRES: mu_ held.
  void EraseImmutableLocked(const std::shared_ptr<MemTable>& mem) REQUIRES(mu_);
  // Runs the FlushJob of `imm` (a table, a merge into its Drange, or a drop). REQUIRES: mu_
  // not held.
  Status FlushOne(const ImmutableMemTable& imm) EXCLUDES(mu_);
  // The next compaction (picker_ over the current version), or nullopt if nothing can run
  // now. REQUIRES: mu_ held.
  std::optional<CompactionPick> PickCompactionLocked() REQUIRES(mu_);
  // True if a memtable may hold a version, older than `cluster`'s newest, of a key in
  // [lo, hi] (user keys): the cluster must not move below Level 0 yet. Asks for the
  // rotation or flush of such memtables. REQUIRES: mu_ held.
  bool OlderVersionsInMemory(const std::vector<TableRef>& cluster, const std::string& lo,
                             const std::string& hi) REQUIRES(mu_);
  // Memtables that may hold a version older than one already flushed. REQUIRES: mu_ held.
  std::vector<std::shared_ptr<MemTable>> MemtablesThatMayHoldOlderVersions() const
      REQUIRES(mu_);
  Status RunCompaction(int level, const std::vector<TableRef>& inputs,
                       const std::vector<TableRef>& next);
  // A background compaction of one table that overlaps nothing at level + 1 moves it down
  // by a MANIFEST edit instead, not rewritten (LevelDB's trivial move; a Level-0 table's
  // keys are read once for the lookup index's clean-up), unless it overlaps more than 10
  // tables' worth at level + 2 (its own next compaction would be that big) or straddles a
  // Drange boundary (merges split their outputs there). False if the compaction must run;
  // else true, with the edit's outcome in *result (an error also when the pick went stale:
  // it is picked again after the backoff). REQUIRES: mu_ not held.
  bool MoveTableDown(int level, const std::vector<TableRef>& inputs,
                     const std::vector<TableRef>& next, Status* result) EXCLUDES(mu_);
  // The user keys at which compaction outputs are split, ascending and distinct: the lower
  // bounds of the current layout's Dranges after the first (a table never straddles one
  // below Level 0).
  std::vector<std::string> DrangeSplitKeys() const;
  // CompactRange's steps at `level`: moves the tables of `level` holding keys of `span`
  // (when the call began) to level + 1. REQUIRES: mu_ not held.
  Status CompactSpanAtLevel(int level, const KeyRange& span, const std::atomic<bool>* cancel)
      EXCLUDES(mu_);
  // True if table `t` holds keys of `span` (by its smallest and largest user keys).
  bool TableOverlapsSpan(const TableHandle& t, const KeyRange& span) const;
  // Runs the job through options_.compaction_offloader (range_engine_offload.cc); on OK,
  // *outputs are the written outputs for level + 1. REQUIRES: mu_ not held.
  Status OffloadCompaction(int level, const std::vector<TableRef>& inputs,
                           const std::vector<TableRef>& next,
                           const lsm::CompactionMergeOptions& mo,
                           std::vector<lsm::TableMeta>* outputs) EXCLUDES(mu_);
  // Records the edit in the MANIFEST and installs the new version (versions_); after a
  // failure that leaves the MANIFEST unknown, stops the range. REQUIRES: mu_ held.
  Status LogAndApplyLocked(VersionEdit* edit) REQUIRES(mu_);
  // FlushAll's work: rotates every active memtable holding entries and waits until every
  // immutable memtable (`all`) or those immutable when it rotated (!all) are flushed, or
  // until `cancel` (checked every 100 ms; may be null) is set: then Aborted.
  Status FlushMemtables(const std::atomic<bool>* cancel, bool all) EXCLUDES(mu_);
  // If `s` is Fenced (a newer owner took the range over): writes stop for good with it as
  // the background error, background work ends, and options_.on_fenced runs (once).
  void StopIfFencedLocked(const Status& s) REQUIRES(mu_);
  // What writes, FlushAll and WaitForCompactions return while the range is handed off.
  Status HandedOffStatus() const;
  // Deletes tables the store has but the current version does not reference, and moves
  // the next file number past every listed table and every number an earlier incarnation
  // may have handed to an offloaded job still running (kFileNumbersSkippedAtOpen).
  // REQUIRES: mu_ held, at Open.
  void CollectOrphansLocked() REQUIRES(mu_);
  std::vector<lsm::SequenceNumber> LiveSnapshots() const REQUIRES(mu_);

  // Relocation and sweeping (range_engine_relocation.cc).
  // The maintenance thread's loop: sweeps and relocations, one at a time, until shutdown.
  void MaintenanceLoop() EXCLUDES(mu_);
  // The next table to relocate (its level in *level), or null; *retry_at is the earliest
  // time a table now in backoff may be retried (unchanged if none). REQUIRES: mu_ held.
  TableRef NextRelocationLocked(int* level, MonoTime* retry_at) const REQUIRES(mu_);
  // Relocates table `t` at `level` and installs it. REQUIRES: mu_ held (released during the
  // copy and the deletes).
  void RelocateOneLocked(TableRef t, int level) REQUIRES(mu_);
  // One sweep. REQUIRES: mu_ held (released during the sweep).
  void SweepLocked() REQUIRES(mu_);
  // Backs table `number`'s relocation off after a failure. REQUIRES: mu_ held.
  void RelocationFailedLocked(uint64_t number, const Status& s) REQUIRES(mu_);
  // Fills the at-risk counts of *p from the current version. REQUIRES: mu_ held.
  void CountAtRiskLocked(RelocationProgress* p) const REQUIRES(mu_);
  PersistedDrangeLayout PersistLayout(const DrangeLayout& l) const;
  std::unique_ptr<DrangeLayout> RestoreLayout(const PersistedDrangeLayout& p) const;

  // Constant after construction.
  const EngineOptions options_;
  lsm::TableStore* const store_;  // must outlive this
  const lsm::InternalKeyComparator icmp_;
  OwnedTableContext table_ctx_;  // what tables are read with

  // Sequence numbers: assigned in order, visible once every smaller one is in a memtable.
  SequenceWatermark seq_;

  // The Drange layout and the Dranges' states (their locks and active memtables). Writers
  // take its snapshot under its own leaf lock, so they never wait for mu_ (held across
  // MANIFEST appends). It changes only with mu_ held (Open, InstallLayout), so code holding
  // mu_ sees one routing throughout.
  DrangeRouter router_;
  // What the write path checks without mu_.
  struct WriteGate {
    // Set (under mu_) until Open, and when writes stop (life_.bg_error) or the engine shuts
    // down; the write path reads it without mu_ and only then takes mu_ for the reason.
    std::atomic<bool> blocked{true};
    // Level-0 bytes of the current version, for the slow-down check.
    std::atomic<uint64_t> l0_bytes{0};
  };
  WriteGate write_gate_;

  mutable Mutex mu_;
  CondVar cv_;  // background progress (flush, compaction, shutdown)
  // Protected by mu_ (the versions current() returns are immutable):
  VersionSet versions_ GUARDED_BY(mu_);
  std::deque<ImmutableMemTable> immutables_ GUARDED_BY(mu_);  // oldest first
  std::vector<std::shared_ptr<MemTable>> live_ GUARDED_BY(mu_);  // all readers must see
  // Memtable ids and their logs (docs/durability.md).
  struct MemtableIds {
    uint64_t next = 1;
    // Memtable id -> ids of memtables merged into it (their entries were re-logged into
    // its log): its flush makes their logs obsolete too.
    std::unordered_map<uint64_t, std::vector<uint64_t>> absorbed;
    // Logs dropped without an edit (memtables merged or empty): the next edit marks them.
    std::vector<uint64_t> unrecorded_obsolete;
  };
  MemtableIds ids_ GUARDED_BY(mu_);
  // MIDToTable (paper 4.4.1.1): memtable id -> the memtable, or the Level-0 table it became.
  struct MidLocation {
    std::shared_ptr<MemTable> mem;
    uint64_t table = 0;
  };
  std::unordered_map<uint64_t, MidLocation> mid_to_table_ GUARDED_BY(mu_);
  // The range index readers use (null until Open), and the key interval of each live
  // memtable (the Drange it was created for), by memtable id.
  struct RangeIndexState {
    std::shared_ptr<const RangeIndex> index;
    std::unordered_map<uint64_t, KeyInterval> memtable_intervals;
  };
  RangeIndexState range_index_ GUARDED_BY(mu_);
  std::multiset<lsm::SequenceNumber> snapshots_ GUARDED_BY(mu_);
  // Which compaction next; the tables running ones hold.
  CompactionPicker picker_ GUARDED_BY(mu_);
  // The maintenance thread's state (range_engine_relocation.cc; Background::maint).
  // Invariants:
  //   1. busy while a relocation or sweep runs with mu_ released; none starts while a
  //      migration out lasts, and Handoff waits until busy is false.
  //   2. Relocations and sweeps run only on the maintenance thread, so never concurrently
  //      (SweepTableFiles requires it).
  struct Maintenance {
    std::set<uint32_t> evacuated;  // SetEvacuatedStocs
    uint64_t evacuation_floor = 0;  // next table number when `evacuated` last changed
    bool busy = false;
    bool sweep_requested = false;
    MonoTime next_sweep_at{};  // the periodic sweep (sweep_interval > 0)
    MonoTime sweep_retry_at{};
    Backoff sweep_backoff{kMaintenanceRetry};
    // Tables whose relocation failed: not retried before `at`.
    struct Retry {
      MonoTime at{};
      Backoff backoff{kMaintenanceRetry};
    };
    std::map<uint64_t, Retry> retries;
    // Token bucket: the next relocation starts no earlier (lags now by one second at most).
    MonoTime relocate_not_before{};
    uint64_t relocated_tables = 0, relocated_bytes = 0, failures = 0;
    uint64_t sweeps = 0, swept_files = 0;
  };
  // Background work: the tasks running, and after a failed flush or compaction the
  // backoff (none is tried before its retry time).
  struct Background {
    int running = 0;  // tasks queued or running
    MonoTime flush_retry_at{}, compaction_retry_at{};
    // Waits after failures in a row: 10 ms doubling up to 5 s; reset by a success.
    Backoff flush_backoff{kBackgroundRetry}, compaction_backoff{kBackgroundRetry};
    Status last_flush_error;          // of the last failed flush (FlushAll reports it)
    std::set<uint64_t> flushing_ids;  // memtables being flushed (or merged) now
    // Dranges whose active memtable blocks a Level-0 compaction (the picker): the
    // background thread rotates them whatever the room (RotateForCompaction).
    std::set<uint32_t> rotate_for_compaction;
    // Pending outputs (LevelDB's pending_outputs_): for each flush or compaction running,
    // the next table number when it started; every number it takes, and so every table it
    // may install (an offloaded job's too), is at least that. A sweep spares them.
    std::multiset<uint64_t> pending_outputs;
    Maintenance maint;
    // Runs MaintenanceLoop from Open; the destructor takes it (under mu_) and joins it.
    std::thread maintenance_thread;
  };
  Background bg_ GUARDED_BY(mu_);
  // Where the range is in its life (write_gate_.blocked mirrors it for the write path).
  struct Lifecycle {
    bool opened = false;  // Open() succeeded; until then every call is refused
    bool shutting_down = false;
    // CloseCleanly: writes are refused for good, and no new memtable id is handed out
    // (only a non-empty memtable rotates then, and none is left once the writes in flight
    // finished; RetireActive and InstallLayout check it: the writers that run them are not
    // waited for).
    bool closing = false;
    Status bg_error;  // a MANIFEST write whose outcome is unknown: writes stop
    // A live migration out (range_engine_migration.cc). Invariants:
    //   1. out while BeginMigrationOut..EndMigrationOut; handed_off implies out.
    //   2. While out: forcing_flush_ counts one for it (no merges), no reorganization
    //      installs, and NextFlushLocked holds every flush unless stalled_writers or
    //      flush_alls is positive. While handed_off it holds every flush, and background
    //      work, log drops and writes (write_gate_.blocked) stop.
    struct MigrationOut {
      bool out = false;
      bool handed_off = false;
      int stalled_writers = 0;  // writers waiting for room now (always counted)
      int flush_alls = 0;       // FlushAll calls waiting now (always counted)
      // Flush jobs running when the migration began (one may be merging into another
      // memtable); ExportImmutables and Handoff wait until none of them runs.
      std::set<uint64_t> flushing_at_begin;
      std::vector<uint64_t> deferred_drops;  // log drops held back while handed off
    };
    MigrationOut migration;
  };
  Lifecycle life_ GUARDED_BY(mu_);
  EngineStats stats_ GUARDED_BY(mu_);
  // When and how the Drange layout changes (MaybeReorganize installs what it plans).
  DrangeReorganizer reorganizer_;
  // What the read and write paths count without a lock.
  struct Counters {
    std::atomic<uint64_t> puts{0}, deletes{0}, gets{0}, index_hits{0};
    std::atomic<uint64_t> slowdowns{0}, slowdown_micros{0};
    std::atomic<uint64_t> log_failures{0};
  };
  Counters counters_;
  // FlushAll calls in progress, plus one while a migration out lasts: while positive,
  // immutables are flushed, never merged.
  std::atomic<int> forcing_flush_{0};
  LookupIndex index_;

  ThreadPool pool_;
};

}  // namespace nova::ltc
