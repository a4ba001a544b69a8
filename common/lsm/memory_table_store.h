// MemoryTableStore: a TableStore that keeps a range's tables and MANIFEST in process
// memory, for tests of the LTC engine (no StoC, no network).
//
// Tables are kept as one string per fragment plus the filter; TableMeta records them as
// one replica per non-empty fragment at a pseudo StoC (kMemoryStoreStocId) whose file id
// is the table number. Reads copy into the caller's scratch and look the table up on
// every call, so reading a table after DeleteTable fails (NotFound), as it would over
// StoCs: an engine that reads a deleted table is caught here rather than in production.
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
#include <map>
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
  Status AppendManifest(const std::string& record) override;
  Status RollManifest(const std::string& snapshot_record) override;
  Result<std::string> ReadManifest() override;

  // Fault hooks: the next n calls of the kind fail with IOError and change nothing.
  // n <= 0 clears the hook.
  void FailNextWrites(int n);          // WriteTable
  void FailNextManifestWrites(int n);  // AppendManifest, RollManifest
  void FailNextReads(int n);           // FragmentSource::ReadFragment, ReadFilter
  void FailNextGcCalls(int n);         // ListTables, DeleteTableFiles
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

  // The stored MANIFEST bytes, for tests that damage or cut them. The pointer lives as
  // long as the store. REQUIRES: no other call on the store runs while it is used.
  std::string* mutable_manifest_for_testing() { return &manifest_; }

 private:
  class Source;
  struct StoredTable {
    std::vector<std::string> fragments;  // by fragment index; empty data fragments too
    std::string filter;
  };

  // Copies n bytes at `offset` of fragment `fragment` of table `number` into dst.
  Status ReadFragment(uint64_t number, uint32_t fragment, uint64_t offset, size_t n, char* dst);
  // Consumes one injected fault of *counter (a member guarded by mu_), if any.
  // REQUIRES: mu_ held.
  static bool TakeFault(int* counter);

  mutable Mutex mu_;
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
