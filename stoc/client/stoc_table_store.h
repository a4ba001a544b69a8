// StocTableStore: a range's SSTables and MANIFEST on StoCs (DESIGN.md sections 4, 5, 7).
//
// Tables. WriteTable scatters a table's rho data fragments over rho distinct StoCs chosen
// by the placement policy (ChooseStocs with d = 2 * rho), and its meta fragment to
// one more StoC (d = 2). Each fragment has R replicas on R distinct StoCs (replica 0 where
// placement put the fragment, the others placed the same way among the remaining StoCs).
// Every replica is one persistent StoC file named
// TableFragmentFileName({range, table, fragment, replica}) holding the fragment as
// one block; a meta fragment file holds the whole-table filter as a second block
// (lsm::TableMeta::filter records it, one location per replica). Empty data fragments get no
// file. All files of a table are written in parallel; on failure every file written is
// deleted again. Reads go to a fragment's replicas in turn, starting from the one that
// last worked; a replica that fails is logged and the next one tried.
//
// Suspects. A StoC that fails a write is left out of placement for kSuspectPeriod (while
// enough other StoCs remain), so a retried flush or MANIFEST write does not pick the StoC
// that just failed it again.
//
// MANIFEST. A persistent StoC file ManifestFileName(range, n) on `manifest_replicas`
// distinct StoCs; each AppendManifest record is one block appended to every replica (an
// error if any replica fails). ReadManifest finds the current MANIFEST by itself: it lists
// every StoC, takes the highest n whose file holds at least one valid record (a higher,
// empty one is a roll-over that never finished), reads it block by block (extents from
// StatFile) from the replica holding the most valid records, and reopens it for appending.
// Valid: well framed (common/lsm/manifest_format.h) and, with validate_manifest, accepted by
// it (the LTC's decoder), so a replica whose records do not decode is never chosen.
// Invariants that keep a MANIFEST from losing acknowledged records:
//  1. A new MANIFEST (first append of a new range, a roll-over, a repair) is complete on
//     all its replicas before the previous one is deleted, and its number is higher than
//     every MANIFEST number this store has seen or tried.
//  2. After a failed append or roll-over the replicas may differ, so the store appends no
//     further record to that MANIFEST: the next AppendManifest first "repairs" by writing
//     the acknowledged bytes, as one block, into a new MANIFEST (1), then appends.
//  3. ReadManifest refuses (Unavailable) while as many StoCs as manifest_replicas are
//     unreachable: they could hold every replica of a newer MANIFEST. With fewer, a newer
//     MANIFEST has a replica in view.
//  4. When ReadManifest finds the current MANIFEST on fewer than manifest_replicas StoCs
//     with identical contents, it repairs it as in (2). Older MANIFESTs and unfinished
//     roll-overs are deleted (best effort; the next ReadManifest retries).
//  5. A new MANIFEST is never placed on a StoC this ReadManifest failed to list, read or
//     reopen (the repair of (4) would fail there), and such a StoC is also a suspect (see
//     above) for later roll-overs and tables. A new MANIFEST whose write fails at some
//     StoC is placed again, under a new number, on StoCs that did not fail (a few times).
//  6. With a manifest_pointer_path (stoc/client/manifest_pointer.h), every number is recorded as
//     allocated before its files are made (never reused, even by a later run that cannot
//     list the StoC holding a leftover) and as committed once complete on every replica,
//     before the previous MANIFEST is deleted. ReadManifest refuses (Unavailable) when the
//     newest MANIFEST it finds is older than the committed one: a StoC that was down during
//     a roll-over still holds the older one, and the StoCs of the newer one may have lost
//     their disks; opening from it would drop every edit since. Unless force_recovery.
//
// Owner fencing (options.owner_epoch > 0; docs/stoc.md "Owner fencing"). The store is the
// range's writer at that epoch; a newer owner's store fences it off:
//  F1. Init() fences the range at every StoC (StocClient::FenceRange) before any MANIFEST
//      is read, and fails Unavailable, naming the StoCs that did not confirm, unless fewer
//      than manifest_replicas did not (at least N - M + 1 of N StoCs confirmed). Then every
//      MANIFEST complete on its M replicas has a replica at a fenced StoC, so the current
//      one is read where no older owner can append any more, and every new MANIFEST an
//      older owner tries to complete fails (Fenced) at a fenced StoC. Discovery retries the
//      StoCs that did not confirm and never chooses, reopens or places a MANIFEST replica at
//      one that still has not (invariant 5 repairs around it; for invariant 3 it counts as
//      unreachable). Every file the store opens
//      or deletes carries the epoch too, so a StoC that missed the fence is fenced by the
//      new owner's first open there.
//  F2. MANIFEST numbers of epoch e lie in [e << kManifestEpochShift, (e + 1) << ...): the
//      first discovery moves a MANIFEST numbered below that band into it (a repair, as in
//      invariant 4), so the newest owner's MANIFEST outnumbers anything an older owner may
//      leave at a StoC that missed the fence, and "highest number wins" stays right.
//      A discovery that finds a MANIFEST numbered above its band has met a newer owner:
//      Fenced.
//  F3. Sticky: once any StoC answers Fenced (or F1 or F2 finds a newer owner), fenced()
//      is true and every later WriteTable, DeleteTable, DeleteTableFiles, AppendManifest,
//      RollManifest and ReadManifest returns Fenced without touching a StoC; the call that
//      met it returns Fenced as is: no cleanup of what it wrote, no retry of a MANIFEST on
//      other StoCs, no repair, no deletes (a fenced-off owner's deletes could hit the new
//      owner's files of the same names). Reads (OpenTable, ReadFilter, ListTables) go on.
//      Only Close, which releases a StoC append slot, is still sent. A write that fails
//      otherwise (e.g. the newer owner deleted the old MANIFEST this store appends to) is
//      followed by a probe (a kFenceRange at the store's own epoch) that turns it into
//      Fenced when a newer owner is the cause.
// owner_epoch 0 (legacy): no fence, no bands, nothing refused; as before fencing existed.
//
// Registered memory. Writes register the caller's bytes (the table's contents, a MANIFEST
// record) for the duration of the call: no copy, and no pool sized for the largest table
// times the concurrent flushes. Reads are small (a data block) and frequent, so they use
// buffers of a SlabAllocator registered once; a read larger than its largest class, or
// made while the pool is exhausted, registers its destination for the call instead.
//
// Sizes: none. Fragments and MANIFEST records of any size are appended in StoC blocks of
// at most max_append_bytes (which must not exceed the StoCs' --stoc_max_block_mb) and read
// back in pieces of at most that, so a table holding one 64 MiB value, or a MANIFEST
// snapshot of many tables with 64 KiB keys, needs no bigger StoC block.
//
//   StocTableStoreOptions o;
//   o.range_id = 3;
//   o.stocs = {1, 2, 3, 4};     // every StoC the client was given with AddStoc
//   o.fragment_replicas = 2;
//   StocTableStore store(&client, o);
//   NOVA_RETURN_NOT_OK(store.Init());
//   auto manifest = store.ReadManifest();  // recovery: the range's MANIFEST bytes, or ""
//
// Lifecycle: the constructor cannot fail; Init() validates the options, prepares the
// read buffers and (owner_epoch > 0) fences the range. Thread safety: thread-safe. Table
// operations run concurrently; MANIFEST operations serialize on manifest_mu_. Lock order:
// manifest_mu_ before rng_mu_.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/lsm/placement_policy.h"
#include "common/lsm/table_store.h"
#include "common/mutex.h"
#include "common/thread_pool.h"
#include "common/transport/slab_allocator.h"
#include "stoc/client/file_names.h"
#include "stoc/client/manifest_pointer.h"
#include "stoc/client/placement.h"
#include "stoc/client/stoc_client.h"

namespace nova::stoc {

// How long a StoC that failed a write is left out of placement: long enough for the
// configuration to drop a dead StoC, short enough that a restarted one soon gets work.
constexpr std::chrono::seconds kSuspectPeriod{10};
// Largest m (StocTableStoreOptions::parity_fragments).
constexpr int kMaxParityFragments = 4;
// Owner fencing F2: MANIFEST numbers of owner epoch e start at e << kManifestEpochShift,
// leaving each owner 2^32 numbers. DO NOT CHANGE: persisted (MANIFEST file names).
constexpr int kManifestEpochShift = 32;
// Largest owner epoch a store accepts, so that banded numbers stay below 2^63.
constexpr uint64_t kMaxOwnerEpoch = (uint64_t{1} << 31) - 1;

struct StocTableStoreOptions {
  uint32_t range_id = 0;
  // Every StoC of the cluster (ids the StocClient knows): placement chooses among them and
  // ReadManifest lists them all.
  std::vector<uint32_t> stocs;
  // StoCs of `stocs` that take no new data (being drained): read, listed, never placed on.
  std::vector<uint32_t> no_new_data;
  // How tables survive StoC losses ("Availability" above; --ltc_table_availability).
  lsm::TableAvailability availability = lsm::TableAvailability::kReplicas;
  // R: replicas of each fragment, on distinct StoCs (--ltc_fragment_replicas); used by
  // availability kReplicas only.
  int fragment_replicas = 1;
  // m: parity fragments of each table (kParity, kHybrid; --ltc_parity_fragments), 1..4.
  int parity_fragments = 1;
  // How StoCs are chosen for fragments and MANIFEST replicas (--ltc_placement).
  lsm::PlacementPolicy placement = lsm::PlacementPolicy::kPowerOfD;
  // Loads power-of-d compares. Null: the StocClient's load_view(), fed by StoC replies.
  // Must outlive the store.
  const LoadView* loads = nullptr;
  // Replicas of the MANIFEST, on distinct StoCs (--ltc_manifest_replicas).
  int manifest_replicas = 1;
  // Registered buffers for reads. Null: Init() makes a pool of read_pool_bytes on the
  // client's transport. Must outlive the store.
  transport::SlabAllocator* read_buffers = nullptr;
  uint64_t read_pool_bytes = 16ull << 20;
  // Threads writing the files of a table (and MANIFEST replicas) in parallel; the calling
  // thread writes one of them itself.
  int io_threads = 8;
  // Seed of the placement generator; 0 picks a random one.
  uint64_t seed = 0;
  // Largest block one append carries. A fragment (or filter) larger than this is written as
  // consecutive appends to its file and recorded as one location, so tables may be larger
  // than a StoC block (a 16 MiB memtable flushed with rho = 1). Must not exceed any StoC's
  // --stoc_max_block_mb.
  uint64_t max_append_bytes = 4ull << 20;
  // The LTC's own record of the range's MANIFEST numbers (stoc/client/manifest_pointer.h); empty:
  // none is kept, and a stale MANIFEST left on a StoC cannot be told from the current one
  // when every StoC holding the current one lost its disk.
  std::string manifest_pointer_path;
  // Open the range from the newest MANIFEST found even when it is older than the one the
  // pointer says was completed (an operator's decision: --ltc_force_recovery_ranges).
  bool force_recovery = false;
  // Checks a MANIFEST replica's records beyond their framing (the LTC passes its
  // VersionEdit decoder, ltc::ValidateManifest): a replica it rejects is not chosen, as one
  // with damaged frames is not. Null: framing only.
  std::function<Status(std::string_view contents)> validate_manifest;
  // The range's owner epoch (RangeAssignment::owner_epoch): this store writes as that owner
  // and is fenced off by a newer one (see "Owner fencing" above). 0: legacy, not fenced.
  uint64_t owner_epoch = 0;
  // With owner_epoch > 0: Init fences the range (F1). Off only for a store that never
  // touches the MANIFEST (a StoC's compaction service writing a job's outputs): its opens
  // and deletes still carry the epoch and are refused once a newer owner fenced the range.
  bool fence_on_init = true;
};

// What the store did (monotonic counters; a snapshot).
struct StocTableStoreStats {
  uint64_t tables_written = 0;
  uint64_t tables_deleted = 0;
  uint64_t fragment_files_written = 0;  // replicas of fragments, one file each
  uint64_t bytes_written = 0;           // fragment and filter bytes, all replicas
  uint64_t read_failovers = 0;          // reads that failed on a replica and moved on
  uint64_t manifest_appends = 0;
  uint64_t manifest_rolls = 0;         // roll-overs asked for by RollManifest
  uint64_t manifest_repairs = 0;       // new MANIFESTs made to repair (invariants 2 and 4)
  uint64_t table_files_collected = 0;  // files removed by DeleteTableFiles
  uint64_t parity_files_written = 0;   // parity fragments, one file each
  uint64_t degraded_reads = 0;         // reads rebuilt from a stripe's parity
  uint64_t copies_relocated = 0;       // copies RelocateTable wrote elsewhere
  uint64_t files_swept = 0;            // files SweepTableFiles deleted
};

class StocTableStore final : public lsm::TableStore {
 public:
  // `client` must outlive the store and know every StoC of options.stocs.
  StocTableStore(StocClient* client, StocTableStoreOptions options);
  ~StocTableStore() override;
  StocTableStore(const StocTableStore&) = delete;
  StocTableStore& operator=(const StocTableStore&) = delete;

  // InvalidArgument for options that cannot work (no StoCs, fewer distinct StoCs than R or
  // than the MANIFEST replicas, R or MANIFEST replicas < 1, io_threads < 1, owner_epoch >
  // kMaxOwnerEpoch), or the error preparing the read buffers. With owner_epoch > 0 it then
  // fences the range (F1): Fenced if a StoC knows a newer owner (fenced() is then true),
  // Unavailable naming the StoCs that did not confirm if manifest_replicas or more did not.
  // REQUIRES: called once, before anything else.
  Status Init() EXCLUDES(manifest_mu_);

  // lsm::TableStore. See the file comment. WriteTable: InvalidArgument if the table needs more
  // distinct StoCs than there are (rho or R); otherwise the first StoC error, after
  // deleting what was written. OpenTable: Corruption if `meta` is inconsistent (no
  // StoC is asked). ReadFilter and source reads: the last replica's error once every
  // replica failed. DeleteTable: the first error other than NotFound (files already gone
  // are fine); it still tries every file.
  Status WriteTable(uint64_t number, const lsm::BuiltTable& table, lsm::TableMeta* meta) override;
  Result<std::unique_ptr<lsm::FragmentSource>> OpenTable(const lsm::TableMeta& meta) override;
  Result<std::string> ReadFilter(const lsm::TableMeta& meta) override;
  Status DeleteTable(const lsm::TableMeta& meta) override;
  // Garbage collection: both list every StoC (in parallel), and parse the names
  // (stoc/client/file_names.h); only table fragment files of this range count. ListTables: the
  // last List error only if no StoC answered. DeleteTableFiles: the first List or Delete
  // error (NotFound is fine: a file already gone); costs one List per StoC, so a pass over
  // many tables should list once (ListTables) and delete only the orphans.
  Result<std::vector<uint64_t>> ListTables() override;
  Status DeleteTableFiles(uint64_t number) override;
  // Relocation and sweeping ("Repair and drain" above).
  Result<lsm::TableMeta> RelocateTable(const lsm::TableMeta& meta,
                                       const std::function<bool(uint32_t stoc_id)>& must_move,
                                       uint64_t* bytes_copied) override;
  Status DeleteCopiesNotIn(const lsm::TableMeta& from, const lsm::TableMeta& to) override;
  Status DeleteCopiesNotInAny(const lsm::TableMeta& from,
                              const std::vector<lsm::TableMeta>& keep) override;
  Result<uint64_t> SweepTableFiles(const std::map<uint64_t, lsm::TableMeta>& live,
                                   uint64_t unreferenced_below) override;

  // Replaces the StoCs of options.stocs and options.no_new_data (the cluster's StoCs
  // changed): new tables and MANIFESTs are placed on the new set at once; listings and
  // sweeps cover it. StoCs not in `stocs` are not listed any more (a removed, dead StoC);
  // their copies are still read where metadata points. The client must know every StoC of
  // `stocs`. Ignored if `stocs` is empty.
  void SetStocs(std::vector<uint32_t> stocs, std::vector<uint32_t> no_new_data)
      EXCLUDES(rng_mu_);
  // The StoCs as last set (ascending).
  std::vector<uint32_t> stocs() const EXCLUDES(rng_mu_);
  // If a replica of the current MANIFEST lies on a StoC `must_move` selects, writes the
  // MANIFEST anew on other StoCs (a repair: invariant 1) and deletes the old one. OK if
  // there is nothing to move or no MANIFEST yet.
  Status EvacuateManifest(const std::function<bool(uint32_t stoc_id)>& must_move)
      EXCLUDES(manifest_mu_);
  // The StoCs holding the current MANIFEST's replicas as last opened or written (empty
  // before). Never waits for a MANIFEST operation in progress.
  std::vector<uint32_t> ManifestStocs() const EXCLUDES(manifest_stocs_mu_);
  // MANIFEST calls find the current MANIFEST first if this store has not yet done so.
  Status AppendManifest(const std::string& record) override;
  Status RollManifest(const std::string& snapshot_record) override;
  // Closes whatever MANIFEST this store had open and finds the current one again.
  Result<std::string> ReadManifest() override;

  StocTableStoreStats GetStats() const;
  // Number of the current MANIFEST (0: none yet). For tests and status pages.
  uint64_t manifest_number() const;
  // True once a newer owner fenced this store off (F3): it writes nothing more, ever.
  bool fenced() const { return fenced_.load(std::memory_order_acquire); }

 private:
  class Source;

  // Reads n bytes at `offset` of the block at `loc` into dst.
  Status ReadBlock(const lsm::FragmentLocation& loc, uint64_t offset, uint64_t n, char* dst);
  // Reads n bytes at `offset` of the block of `replicas`, trying the replicas in turn until
  // one succeeds (each failure is logged). *preferred, if not null, is the replica to try
  // first and is set to the one that worked. `what` names the block in messages.
  Status ReadAnyReplica(const std::vector<lsm::FragmentLocation>& replicas, uint64_t offset,
                        uint64_t n, char* dst, std::atomic<uint32_t>* preferred,
                        const std::string& what);
  // For each StoC, in parallel: lists it and calls `visit` with the parsed names of the
  // table fragment files of this range (from several threads at once: `visit` must be
  // thread-safe). Returns per StoC (in stocs_ order) the List error or visit's first error.
  std::vector<Status> VisitTableFiles(
      const std::function<Status(uint32_t stoc_id, const std::string& name,
                                 const ParsedFileName& parsed)>& visit);
  // Runs every job, in parallel, and returns their statuses in order.
  std::vector<Status> RunAll(const std::vector<std::function<Status()>>& jobs);
  // Where [offset, +n) of replica `loc` lies in its file; false if the range is not inside
  // the replica or runs from one chunk into the next (not contiguous in the file).
  static bool FileOffsetOf(const lsm::FragmentLocation& loc, uint64_t offset, uint64_t n,
                           uint64_t* file_offset);
  // Reads [offset, +n) of fragment `fragment` of `meta` into dst: from a replica (first
  // *preferred, then the others), else, for a stripe column, rebuilt from the stripe.
  Status ReadFragmentOf(const lsm::TableMeta& meta, uint32_t fragment, uint64_t offset,
                        uint64_t n, char* dst, std::atomic<uint32_t>* preferred);
  // Stripes (TableMeta::parity). Columns k = rho (+ 1 when parity_covers_meta: the meta
  // fragment followed by the filter), then the parity fragments.
  static int StripeColumns(const lsm::TableMeta& meta);
  static uint64_t ColumnSize(const lsm::TableMeta& meta, int column);
  // Reads [offset, +n) of stripe column `column` from its own copies (zeros past its end).
  Status ReadColumn(const lsm::TableMeta& meta, int column, uint64_t offset, uint64_t n,
                    char* dst);
  // Rebuilds [offset, +n) of stripe column `want` from k other columns, reading those on
  // StoCs that are not read suspects first.
  Status RebuildColumn(const lsm::TableMeta& meta, int want, uint64_t offset, uint64_t n,
                       char* dst);
  // Reads a StoC failed recently (and none succeeded since): its copies are read last, and
  // a stripe column on it is decoded first, from StoCs that are not suspects.
  bool ReadSuspect(uint32_t stoc_id) EXCLUDES(rng_mu_);
  void MarkReadSuspect(uint32_t stoc_id) EXCLUDES(rng_mu_);
  void ClearReadSuspect(uint32_t stoc_id) EXCLUDES(rng_mu_);
  // Chooses `n` distinct StoCs from the candidates other than `exclude`, d = 2 * n,
  // leaving out suspects unless fewer than n StoCs would remain.
  Status Choose(int n, const std::vector<uint32_t>& exclude, std::vector<uint32_t>* out)
      EXCLUDES(rng_mu_);
  // StoCs that take data and are not suspects (at least this many can be chosen at once
  // without a likely failure).
  size_t HealthyStocs() EXCLUDES(rng_mu_);
  // Leaves the StoC out of placement for a while (it failed a write).
  void MarkSuspect(uint32_t stoc_id, const Status& why) EXCLUDES(rng_mu_);
  // Deletes a StoC file; NotFound counts as success. Fenced (sent nothing) once fenced().
  Status DeleteFile(uint32_t stoc_id, const std::string& name);
  // Owner fencing. The Fenced status of a fenced-off store.
  Status FencedError() const;
  // Returns `s`; if it is Fenced, the store becomes fenced (F3).
  Status NoteFenced(const Status& s);
  // The first Fenced status of `results`, else the first error; OK if all are OK.
  static Status FirstError(const std::vector<Status>& results);
  // After a write to `stoc_id` failed with `failure` (not Fenced): asks that StoC whether a
  // newer owner fenced the range (a kFenceRange at this store's own epoch, which changes
  // nothing when the StoC knows it already). Returns Fenced (the store becomes fenced) if
  // so, else `failure` (at once for a timeout or an unreachable StoC). A write can fail for
  // a newer owner without saying so: e.g. its delete of the old MANIFEST this store appends
  // to, sent through the same StoC client (one process), frees the append slot.
  Status ProbeFence(uint32_t stoc_id, const Status& failure);
  // Fences the range at each StoC of `stocs` in parallel (F1); returns those that did not
  // confirm, or Fenced (the store becomes fenced) if one knows a newer owner.
  Result<std::vector<uint32_t>> FenceStocs(const std::vector<uint32_t>& stocs);
  // Opens (creating) a persistent file for appends, replacing a leftover of the same
  // name that already holds data (a crashed earlier attempt).
  Result<std::unique_ptr<StocFile>> CreateFile(uint32_t stoc_id, const std::string& name,
                                                     uint64_t slot_bytes);
  // Appends src[offset, +length) to `file` in chunks of at most max_append_bytes and
  // returns where the whole lies: one block, or chunks at a constant distance in the file
  // (IOError if the StoC placed a chunk elsewhere). REQUIRES: length > 0.
  Result<lsm::FragmentLocation> AppendInBlocks(StocFile* file, const transport::MemoryRegion& src,
                                          uint64_t offset, uint64_t length);

  // MANIFEST helpers. REQUIRES: manifest_mu_ held.
  Status EnsureManifestLocked() REQUIRES(manifest_mu_);
  Status DiscoverManifestLocked(std::string* contents) REQUIRES(manifest_mu_);
  // Durably records `allocated` (the pointer's never goes down) and `committed` in the
  // MANIFEST pointer, then in manifest_.pointed. REQUIRES: manifest_.pointer not null.
  Status RecordPointerLocked(uint64_t allocated, uint64_t committed) REQUIRES(manifest_mu_);
  // Writes `first_block` as the only block of a new MANIFEST on manifest_replicas StoCs
  // other than `avoid` and makes it current, deleting the previous one (invariant 1). If
  // writing fails at some StoC it tries again (a new number) without the StoCs that
  // failed, up to kManifestPlacements placements. Unavailable if too few StoCs are left
  // besides `avoid`; otherwise the last write error, with manifest_.broken set.
  Status CreateManifestLocked(const std::string& first_block, std::vector<uint32_t> avoid)
      REQUIRES(manifest_mu_);
  // One placement of CreateManifestLocked: creates MANIFEST `number` on the StoCs `where`
  // holding `first_block`. On success the open files go to *out; on failure the StoCs
  // that failed are added to *failed (and marked suspect) and every file is deleted again.
  Status WriteManifestReplicas(uint64_t number, const std::string& first_block,
                               const std::vector<uint32_t>& where,
                               std::vector<std::unique_ptr<StocFile>>* out,
                               std::vector<uint32_t>* failed);
  // Reads the replica's blocks; OK with *contents, or the error.
  Status ReadManifestReplica(uint32_t stoc_id, uint64_t file_id, std::string* contents);
  void CloseManifestLocked() REQUIRES(manifest_mu_);
  // Copies manifest_.files' StoCs to manifest_stocs_ (after every change of the files).
  void NoteManifestFilesLocked() REQUIRES(manifest_mu_) EXCLUDES(manifest_stocs_mu_);

  // Constant after construction.
  StocClient* const client_;  // must outlive this
  const StocTableStoreOptions options_;
  const LoadView* const loads_;  // options_.loads or the client's; must outlive this

  transport::SlabAllocator* read_buffers_ = nullptr;            // set by Init
  std::unique_ptr<transport::SlabAllocator> own_read_buffers_;  // when options had none
  std::unique_ptr<ThreadPool> io_pool_;                         // set by Init
  std::atomic<bool> fenced_{false};                             // F3: sticky

  mutable Mutex rng_mu_ ACQUIRED_AFTER(manifest_mu_);
  std::mt19937_64 rng_ GUARDED_BY(rng_mu_);
  std::map<uint32_t, MonoTime> suspects_ GUARDED_BY(rng_mu_);  // StoC -> until when left out
  std::map<uint32_t, MonoTime> read_suspects_ GUARDED_BY(rng_mu_);  // StoC -> until when
  std::atomic<size_t> num_read_suspects_{0};  // read_suspects_.size(): skips the lock
  // options_.stocs (then SetStocs) without repeats, ascending; of them, the ones that take
  // no new data.
  std::vector<uint32_t> stocs_ GUARDED_BY(rng_mu_);
  std::vector<uint32_t> no_new_data_ GUARDED_BY(rng_mu_);

  mutable Mutex manifest_mu_;
  // The current MANIFEST, as this store knows it.
  struct Manifest {
    bool found = false;  // the current MANIFEST was looked for
    std::unique_ptr<ManifestPointer> pointer;  // null without manifest_pointer_path
    ManifestPointer::Numbers pointed;          // as last loaded or stored
    uint64_t number = 0;                       // 0: none
    uint64_t next_number = 1;
    std::vector<std::unique_ptr<StocFile>> files;  // open for appending
    std::string contents;  // its acknowledged bytes
    bool broken = false;   // invariant 2: repair before the next append
  };
  Manifest manifest_ GUARDED_BY(manifest_mu_);
  mutable Mutex manifest_stocs_mu_ ACQUIRED_AFTER(manifest_mu_);  // a leaf
  std::vector<uint32_t> manifest_stocs_ GUARDED_BY(manifest_stocs_mu_);
  // F1: StoCs that have not confirmed this store's fence (set by Init, retried by discovery).
  std::vector<uint32_t> unfenced_ GUARDED_BY(manifest_mu_);
  // Counters.
  // StocTableStoreStats' counters (GetStats takes a snapshot).
  struct Counters {
    std::atomic<uint64_t> tables_written{0}, tables_deleted{0}, fragment_files_written{0},
        bytes_written{0}, read_failovers{0}, manifest_appends{0}, manifest_rolls{0},
        manifest_repairs{0}, table_files_collected{0}, parity_files_written{0},
        degraded_reads{0}, copies_relocated{0}, files_swept{0};
  };
  Counters counters_;
};

}  // namespace nova::stoc
