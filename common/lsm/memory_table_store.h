// MemoryTableStore: a TableStore that keeps a range's tables and MANIFEST in process
// memory, for tests of the LTC engine (no StoC, no network).
//
// Tables are kept as one string per fragment plus the filter; TableMeta records them as
// one replica per non-empty fragment at a pseudo StoC (kMemoryStoreStocId) whose file id
// is the table number. Reads copy into the caller's scratch and look the table up on
// every call, so reading a table after DeleteTable fails (NotFound), as it would over
// StoCs: an engine that reads a deleted table is caught here rather than in production.
//
// StoC mode (constructed with a list of fake StoC ids): each copy (one replica of each
// non-empty fragment, of the filter) is placed round-robin on the StoCs of SetStocs and
// recorded as a file (stoc id, a file id unique in the store); reads need the copy they
// read to exist (a source opened from metadata whose copies were deleted fails), deletes
// remove the copies the metadata names (the table goes with its last copy), and the
// relocation and sweep calls work over these files. A StoC marked down (SetDownStocs)
// gets no new copy and its copies cannot be deleted (those deletes fail, the rest
// proceed); its copies still read (as the StoC store's degraded reads decode them from the
// others).
//
// Fault hooks make the next calls fail without changing anything: FailNextWrites (tables),
// FailNextManifestWrites (AppendManifest, RollManifest), FailNextReads (fragment and
// filter reads), FailNextGcCalls (ListTables, DeleteTableFiles). Counters let tests check
// what the engine did; mutable_manifest_for_testing lets them damage the MANIFEST.
//
//   MemoryTableStore store;
//   TableMeta meta;
//   Status s = store.WriteTable(7, built, &meta);
//   auto source = store.OpenTable(meta);
//
// Thread safety: thread-safe; every method may be called concurrently (one mutex).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <utility>
#include <memory>
#include <string>
#include <vector>

#include "common/lsm/table_store.h"
#include "common/mutex.h"

namespace nova::lsm {

// The stoc_id MemoryTableStore writes in FragmentLocations: no real StoC has it.
constexpr uint32_t kMemoryStoreStocId = 0xFFFFFFFFu;

class MemoryTableStore final : public TableStore {
 public:
  MemoryTableStore() = default;
  // StoC mode over these StoCs (at least one).
  explicit MemoryTableStore(std::vector<uint32_t> stocs);
  MemoryTableStore(const MemoryTableStore&) = delete;
  MemoryTableStore& operator=(const MemoryTableStore&) = delete;

  // TableStore. WriteTable returns AlreadyExists if table `number` is stored (the engine
  // reused a number), IOError for an injected fault. OpenTable and ReadFilter return
  // NotFound for a table that is not stored, Corruption if `meta` does not match it.
  // DeleteTable returns NotFound for a table that is not stored.
  Status WriteTable(uint64_t number, const BuiltTable& table, TableMeta* meta) override;
  Result<std::unique_ptr<FragmentSource>> OpenTable(const TableMeta& meta) override;
  Result<std::string> ReadFilter(const TableMeta& meta) override;
  Status DeleteTable(const TableMeta& meta) override;
  // ListTables: every stored table. DeleteTableFiles: removes the table if stored (OK if
  // not). Both return IOError for an injected fault (FailNextGcCalls).
  Result<std::vector<uint64_t>> ListTables() override;
  Status DeleteTableFiles(uint64_t number) override;
  // Relocation and sweeping (StoC mode; otherwise RelocateTable returns `meta` unchanged,
  // DeleteCopiesNotIn does nothing and SweepTableFiles works on whole tables).
  // RelocateTable: Unavailable if a copy has no StoC to go to (nothing changes), NotFound
  // for a table not stored, IOError for an injected fault (FailNextRelocations).
  Result<TableMeta> RelocateTable(const TableMeta& meta,
                                  const std::function<bool(uint32_t stoc_id)>& must_move,
                                  uint64_t* bytes_copied) override;
  Status DeleteCopiesNotIn(const TableMeta& from, const TableMeta& to) override;
  Status DeleteCopiesNotInAny(const TableMeta& from, const std::vector<TableMeta>& keep) override;
  Result<uint64_t> SweepTableFiles(const std::map<uint64_t, TableMeta>& live,
                                   uint64_t unreferenced_below) override;
  Status AppendManifest(const std::string& record) override;
  Status RollManifest(const std::string& snapshot_record) override;
  Result<std::string> ReadManifest() override;

  // Fault hooks: the next n calls of the kind fail with IOError and change nothing.
  // n <= 0 clears the hook.
  void FailNextWrites(int n);          // WriteTable
  void FailNextManifestWrites(int n);  // AppendManifest, RollManifest
  void FailNextReads(int n);           // FragmentSource::ReadFragment, ReadFilter
  void FailNextGcCalls(int n);         // ListTables, DeleteTableFiles, SweepTableFiles
  void FailNextRelocations(int n);     // RelocateTable
  // Called (without the store's lock) at the start of every RelocateTable, with the table
  // number; tests block in it to hold a relocation at that point. Null: none.
  void SetRelocateHook(std::function<void(uint64_t number)> hook);
  // StoC mode: where new copies go (WriteTable, RelocateTable), and the StoCs that are down.
  void SetStocs(std::vector<uint32_t> stocs);
  void SetDownStocs(std::set<uint32_t> down);
  // From now on every write, MANIFEST write and delete fails with Fenced and changes nothing
  // (as a StoC answers an owner a newer one fenced off).
  void Fence();

  // Counters (successful calls only).
  uint64_t tables_written() const;
  uint64_t tables_deleted() const;
  uint64_t tables_collected() const;  // tables DeleteTableFiles removed
  uint64_t manifest_appends() const;
  uint64_t manifest_rolls() const;
  // Tables stored now, and whether `number` is one of them.
  size_t live_tables() const;
  bool HasTable(uint64_t number) const;
  // Sum of the fragment and filter bytes of the tables stored now.
  uint64_t live_bytes() const;
  // StoC mode: copies (files) stored on `stoc` now, and in all.
  uint64_t CopiesOnStoc(uint32_t stoc) const;
  uint64_t total_copies() const;
  // Table numbers stored now, ascending.
  std::vector<uint64_t> StoredTables() const;
  uint64_t relocations() const;    // successful RelocateTable calls that moved a copy
  uint64_t copies_deleted() const; // by DeleteCopiesNotIn
  uint64_t files_swept() const;    // by SweepTableFiles

  // The stored MANIFEST bytes, for tests that damage or cut them. The pointer lives as
  // long as the store. REQUIRES: no other call on the store runs while it is used.
  std::string* mutable_manifest_for_testing() { return &manifest_; }

 private:
  class Source;
  struct StoredTable {
    std::vector<std::string> fragments;  // by fragment index; empty data fragments too
    std::string filter;
    std::set<std::pair<uint32_t, uint64_t>> copies;  // StoC mode: (stoc id, file id)
  };
  // A StoC for a new copy: the next of stocs_ (round-robin) that is up and that `avoid`
  // does not select; nullopt if none. REQUIRES: mu_ held.
  std::optional<uint32_t> PlaceLocked(const std::function<bool(uint32_t)>& avoid)
      REQUIRES(mu_);
  // Deletes the copies of `t` at `locs` that `keep` does not select; false if one is on a
  // down StoC (kept). Counts them in *deleted. REQUIRES: mu_ held.
  bool DeleteCopiesLocked(StoredTable* t, const std::vector<const FragmentLocation*>& locs,
                          uint64_t* deleted) REQUIRES(mu_);

  // Copies n bytes at `offset` of fragment `fragment` of table `number` into dst.
  // `loc`: the copies the reader may read (StoC mode: one must exist).
  Status ReadFragment(uint64_t number, const std::vector<FragmentLocation>* loc,
                      uint32_t fragment, uint64_t offset, size_t n, char* dst);
  // Consumes one injected fault of *counter (a member guarded by mu_), if any.
  // REQUIRES: mu_ held.
  static bool TakeFault(int* counter);

  const bool stoc_mode_ = false;

  mutable Mutex mu_;
  std::vector<uint32_t> stocs_ GUARDED_BY(mu_);
  std::set<uint32_t> down_ GUARDED_BY(mu_);
  size_t next_stoc_ GUARDED_BY(mu_) = 0;
  uint64_t next_file_id_ GUARDED_BY(mu_) = 1;
  int fail_relocations_ GUARDED_BY(mu_) = 0;
  std::function<void(uint64_t)> relocate_hook_ GUARDED_BY(mu_);
  uint64_t relocations_ GUARDED_BY(mu_) = 0;
  uint64_t copies_deleted_ GUARDED_BY(mu_) = 0;
  uint64_t files_swept_ GUARDED_BY(mu_) = 0;
  std::map<uint64_t, StoredTable> tables_ GUARDED_BY(mu_);  // by table number
  std::string manifest_ GUARDED_BY(mu_);
  bool fenced_ GUARDED_BY(mu_) = false;
  int fail_writes_ GUARDED_BY(mu_) = 0;
  int fail_manifest_writes_ GUARDED_BY(mu_) = 0;
  int fail_reads_ GUARDED_BY(mu_) = 0;
  int fail_gc_calls_ GUARDED_BY(mu_) = 0;
  uint64_t tables_written_ GUARDED_BY(mu_) = 0;
  uint64_t tables_deleted_ GUARDED_BY(mu_) = 0;
  uint64_t tables_collected_ GUARDED_BY(mu_) = 0;
  uint64_t manifest_appends_ GUARDED_BY(mu_) = 0;
  uint64_t manifest_rolls_ GUARDED_BY(mu_) = 0;
};

}  // namespace nova::lsm
