// TableStore: where a range's SSTables and MANIFEST live, as the LTC engine sees it.
//
// The engine builds a table in memory (lsm::FragmentedTableBuilder), hands it to the store,
// which writes its fragments (and the whole-table bloom filter) somewhere and records where
// in the TableMeta; reading goes through an lsm::FragmentSource the store opens from that
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
#include "common/status.h"
#include "ltc/version_edit.h"

namespace nova::ltc {

class TableStore {
 public:
  virtual ~TableStore() = default;

  // Writes the fragments and filter of `table` (number `number`, of this store's range) and
  // fills meta->fragments and meta->filter. The other TableMeta fields are the caller's.
  // On error nothing the caller must clean up is left referenced.
  virtual Status WriteTable(uint64_t number, const lsm::BuiltTable& table, TableMeta* meta) = 0;

  // A source reading the fragments of `meta` (from any live replica). The source must stay
  // valid while the store lives.
  virtual Result<std::unique_ptr<lsm::FragmentSource>> OpenTable(const TableMeta& meta) = 0;

  // Reads the table's whole-table filter (empty if it has none).
  virtual Result<std::string> ReadFilter(const TableMeta& meta) = 0;

  // Deletes the table's fragments and filter. Best effort: an error is logged by the
  // caller; the engine never references the table again.
  virtual Status DeleteTable(const TableMeta& meta) = 0;

  // Appends one MANIFEST record durably (all replicas, or an error).
  virtual Status AppendManifest(const std::string& record) = 0;
  // Starts a new MANIFEST whose first record is `snapshot_record`, then retires the old one
  // (roll-over when the MANIFEST grows large).
  virtual Status RollManifest(const std::string& snapshot_record) = 0;
  // The current MANIFEST's bytes (empty if the range is new).
  virtual Result<std::string> ReadManifest() = 0;
};

}  // namespace nova::ltc
