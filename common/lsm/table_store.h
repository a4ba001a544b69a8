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
#include <functional>
#include <map>
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

  // ---- Relocation and sweeping (repair after a StoC is lost, drain of a StoC) -------
  //
  // A "copy" of a table is one replica of a data or meta fragment, one replica of its
  // filter, or one parity fragment; each lies on one StoC (FragmentLocation::stoc_id).

  // Copies each copy of `meta` whose StoC `must_move` selects to another StoC, chosen by the
  // store's placement rules: never a StoC `must_move` selects, never one already holding a
  // copy of the same fragment, and for a table with parity never one holding another member
  // of its stripe. A copy is read from its own StoC, from another replica, or decoded from
  // the stripe's parity, whichever works. Returns `meta` with the moved copies' locations
  // replaced and nothing else changed (`meta` itself if no copy is selected). The old
  // copies stay: delete them with DeleteCopiesNotIn(meta, result) once the result is
  // durable in the MANIFEST. On error every new copy written is deleted again and nothing
  // is left referenced. *bytes_copied (if not null) is set to the bytes written.
  // Not supported by default.
  virtual Result<TableMeta> RelocateTable(const TableMeta& meta,
                                          const std::function<bool(uint32_t stoc_id)>& must_move,
                                          uint64_t* bytes_copied) {
    return Status::NotSupported("this table store cannot relocate tables");
  }
  // Deletes every copy of table `from` that `to` (the same table, e.g. RelocateTable's
  // result) does not hold at the same place. Best effort per copy: the first error
  // (a copy already gone is fine). After a relocation whose MANIFEST edit was durable:
  // DeleteCopiesNotIn(old, new); after one that could not be installed: (new, old).
  virtual Status DeleteCopiesNotIn(const TableMeta& from, const TableMeta& to) {
    return Status::OK();
  }
  // The same for a chain of relocations: deletes every copy of `from` that none of `keep`
  // holds at the same place (an old handle released while newer ones of the same table,
  // which may have moved a copy back onto a StoC under the same name, are still alive).
  // Default: DeleteCopiesNotIn with a single `keep`; with several, nothing is deleted.
  virtual Status DeleteCopiesNotInAny(const TableMeta& from, const std::vector<TableMeta>& keep) {
    if (keep.size() == 1) return DeleteCopiesNotIn(from, keep.front());
    return Status::OK();
  }
  // Deletes, on every reachable StoC, each table file of this range that is garbage:
  //  - a file of a table not in `live` whose number is below `unreferenced_below` (a
  //    failed flush, compaction or relocation, or a table deleted while its StoC was
  //    down), or
  //  - a file of a table in `live` that the table's metadata does not place on that StoC
  //    (a copy relocated elsewhere while its StoC was down).
  // REQUIRES: no RelocateTable of this store runs concurrently; every table numbered below
  // unreferenced_below is either in `live` or will never be installed (no write of it is
  // in flight). Returns the number of files deleted; an error only if no StoC answered.
  // Not supported by default (returns 0).
  virtual Result<uint64_t> SweepTableFiles(const std::map<uint64_t, TableMeta>& live,
                                           uint64_t unreferenced_below) {
    return uint64_t{0};
  }

  // Appends one MANIFEST record durably (all replicas, or an error).
  virtual Status AppendManifest(const std::string& record) = 0;
  // Starts a new MANIFEST whose first record is `snapshot_record`, then retires the old one
  // (roll-over when the MANIFEST grows large).
  virtual Status RollManifest(const std::string& snapshot_record) = 0;
  // The current MANIFEST's bytes (empty if the range is new).
  virtual Result<std::string> ReadManifest() = 0;
};

}  // namespace nova::lsm
