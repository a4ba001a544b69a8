// TableStore: where a range's SSTables and MANIFEST live, as the LTC engine sees it.
//
// The engine builds a table in memory (FragmentedTableBuilder), hands it to the store,
// which writes its fragments (and the whole-table bloom filter) somewhere and records where
// in the TableMeta; reading goes through an FragmentSource the store opens from that
// metadata. The MANIFEST is a sequence of records (manifest.h) the store appends durably.
//
// Implementations: StocTableStore (fragments scattered over StoCs by a placement policy,
// replicated; MANIFEST as a replicated persistent StoC file) and MemoryTableStore (tests).
//
// Thread safety: implementations must be thread-safe (flushes and compactions of different
// Dranges write tables concurrently).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/lsm/fragmented_table.h"
#include "common/lsm/table_meta.h"
#include "common/status.h"

namespace nova::lsm {

class TableStore {
 public:
  virtual ~TableStore() = default;

  // Writes the fragments and filter of `table` (number `number`, of this store's range) and
  // fills meta->fragments and meta->filter. The other TableMeta fields are the caller's.
  // On error nothing the caller must clean up is left referenced.
  virtual Status WriteTable(uint64_t number, const BuiltTable& table, TableMeta* meta) = 0;

  // A source reading the fragments of `meta` (from any live replica). The source must stay
  // valid while the store lives.
  virtual Result<std::unique_ptr<FragmentSource>> OpenTable(const TableMeta& meta) = 0;

  // Reads the table's whole-table filter (empty if it has none).
  virtual Result<std::string> ReadFilter(const TableMeta& meta) = 0;

  // Deletes the table's fragments and filter. Best effort: an error is logged by the
  // caller; the engine never references the table again.
  virtual Status DeleteTable(const TableMeta& meta) = 0;

  // Garbage collection of orphaned tables: a flush or compaction whose MANIFEST append
  // failed leaves table files that no MANIFEST record references. Safe use, e.g. at Open:
  // after ReadManifest succeeded and before any WriteTable starts, delete (with
  // DeleteTableFiles) each number ListTables reports that the MANIFEST just read does not
  // reference. ReadManifest's answer is final (a store repairs diverged MANIFEST replicas
  // before returning it), so no later read can bring such a table back. Never delete a
  // number a WriteTable may be writing concurrently (also one a StoC's compaction service
  // writes for this range).

  // Table numbers of this range that have at least one file on a reachable StoC, ascending
  // and without repeats. A down StoC does not make it fail: the numbers found on the StoCs
  // that answered are returned (every one of them has files; a table whose files are all
  // on down StoCs waits for a later pass). An error only if no StoC could be asked.
  virtual Result<std::vector<uint64_t>> ListTables() = 0;
  // Deletes every file of table `number` of this range (all fragments, replicas, filter),
  // on every reachable StoC. Best effort per file; returns the first error (a StoC that
  // cannot be listed is one). OK if the table has no file. Files of other tables, of other
  // ranges, MANIFESTs and logs are never touched.
  virtual Status DeleteTableFiles(uint64_t number) = 0;

  // Appends one MANIFEST record durably (all replicas, or an error).
  virtual Status AppendManifest(const std::string& record) = 0;
  // Starts a new MANIFEST whose first record is `snapshot_record`, then retires the old one
  // (roll-over when the MANIFEST grows large).
  virtual Status RollManifest(const std::string& snapshot_record) = 0;
  // The current MANIFEST's bytes (empty if the range is new).
  virtual Result<std::string> ReadManifest() = 0;
};

}  // namespace nova::lsm
