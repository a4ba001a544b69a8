// CompactionJob: one compaction as an LTC hands it to a StoC (paper 4.4.3, DESIGN.md
// sections 5 and 7), its result, and their wire codec; and RunCompactionJob, which executes
// a job against a TableStore (the StoC's compaction service runs it over a StocTableStore).
//
// A job is self-contained: the input tables with their levels and fragment locations, the
// merge options the LTC computed under its lock (snapshots, bottommost, Drange split keys,
// output size), how to build tables (block size, rho, bloom bits, R), a block of table
// numbers the LTC reserved for the outputs, and the address of every StoC the executor may
// read inputs from or place outputs on. The executor keeps no state about the range: the
// LTC alone installs the result in its MANIFEST.
//
// Encoding (payload of stoc::kCompact, after common/wire's PayloadWriter; DO NOT CHANGE:
// on the wire; new fields go at the end behind a version bump):
//   request  := version u8 (2 or 3) | range_id varint32 | drange varint32 | output_level u8
//               | comparator bytes | inputs varint32 | (level u8 | TableMeta bytes)*
//               | snapshots varint32 | seq varint64* | smallest_snapshot varint64
//               | bottommost u8 | max_output_bytes varint64 | split_keys varint32 | bytes*
//               | block_bytes varint32 | scatter_width varint32 | bloom_bits varint32
//               | fragment_replicas varint32 | numbers varint32 | varint64*
//               | stocs varint32 | (id varint32 | address bytes)*
//               | placement u8 (version 2 on: 0 random, 1 power-of-d)
//               | owner_epoch varint64 (version 3 on; version 4: present even if 0)
//               | availability u8 (0 none, 1 replicas, 2 parity, 3 hybrid)
//               | parity_fragments varint32 | no_new_data varint32 | id varint32*
//                 (version 4 only)
//   A version 1 request (no placement byte) is still accepted and places by power-of-d,
//   as every executor did before version 2. A job whose owner_epoch is 0 is encoded as
//   version 2 (so executors older than version 3 still run legacy ranges' jobs); one with
//   an owner epoch as version 3, which only an executor that knows it accepts. A job whose
//   outputs get parity (availability parity or hybrid), or that names StoCs to keep
//   outputs off, is version 4; other jobs keep the older versions (none as
//   fragment_replicas 1).
//   response := version u8 (=1) | executed_by varint32 | outputs varint32 | TableMeta bytes*
//               | input_entries, output_entries, dropped_entries, dropped_deletions varint64
// TableMeta bytes are EncodeTableMeta (version_edit.h), as in the MANIFEST.
//
// Thread safety: value types; RunCompactionJob is safe to call concurrently.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/lsm/compaction_merge.h"
#include "common/lsm/placement_policy.h"
#include "common/lsm/table_meta.h"
#include "common/lsm/table_store.h"
#include "common/status.h"

namespace nova::lsm {

// Bounds a decoder accepts, so a damaged or hostile job cannot make the executor allocate
// much before it fails.
constexpr uint32_t kMaxJobInputs = 1 << 16;
constexpr uint32_t kMaxJobSnapshots = 1 << 20;
constexpr uint32_t kMaxJobSplitKeys = 1 << 16;
constexpr uint32_t kMaxJobOutputNumbers = 1 << 16;
constexpr uint32_t kMaxJobStocs = 1 << 12;
constexpr uint32_t kMaxJobBloomBits = 64;

struct CompactionJobInput {
  int level = 0;
  TableMeta table;
  bool operator==(const CompactionJobInput&) const = default;
};

struct CompactionJob {
  uint32_t range_id = 0;
  uint32_t drange = 0;      // recorded in the outputs' TableMeta
  int output_level = 1;     // informational for the executor: the LTC installs the result
  // Name of the user comparator (leveldb::Comparator::Name()); the executor refuses a job
  // whose comparator it does not have (NotSupported).
  std::string comparator;
  std::vector<CompactionJobInput> inputs;

  // CompactionMergeOptions without the comparator.
  std::vector<SequenceNumber> snapshots;
  SequenceNumber smallest_snapshot = kMaxSequenceNumber;
  bool bottommost = false;
  uint64_t max_output_bytes = kDefaultMaxOutputBytes;
  std::vector<std::string> split_user_keys;

  // How output tables are built and stored.
  uint32_t block_bytes = 4096;
  uint32_t scatter_width = 1;  // rho
  uint32_t bloom_bits_per_key = 10;  // 0: no filter
  uint32_t fragment_replicas = 1;    // R

  // Table numbers reserved by the LTC for the outputs, used in order. A job that needs more
  // outputs fails (ResourceExhausted) rather than invent numbers the LTC does not know.
  std::vector<uint64_t> output_numbers;
  // Every StoC the executor may use: id -> transport address.
  std::vector<std::pair<uint32_t, std::string>> stocs;
  // How the executor chooses StoCs for the outputs' fragments: the LTC's --ltc_placement.
  PlacementPolicy placement = PlacementPolicy::kPowerOfD;
  // The range's owner epoch of the LTC that sent the job (StocTableStoreOptions::
  // owner_epoch): the executor writes and deletes the outputs as that owner, so a StoC
  // refuses them (Fenced) once a newer owner fenced the range. 0: legacy, not fenced.
  uint64_t owner_epoch = 0;
  // How the outputs survive StoC losses (StocTableStoreOptions::availability and
  // parity_fragments). kNone and kReplicas travel as fragment_replicas (1 for kNone).
  TableAvailability availability = TableAvailability::kReplicas;
  uint32_t parity_fragments = 1;  // m (parity and hybrid)
  // StoCs of `stocs` that hold inputs but take no outputs (being drained).
  std::vector<uint32_t> no_new_data;

  bool operator==(const CompactionJob&) const = default;
};

struct CompactionJobResult {
  uint32_t executed_by = 0;  // the StoC that ran the job
  std::vector<TableMeta> outputs;  // in key order, for output_level
  CompactionStats stats;      // `outputs` is outputs.size()
};

std::string EncodeCompactionJob(const CompactionJob& job);
// InvalidArgument naming the field on malformed input or values out of range (never reads
// past `in`). *job is unchanged on failure.
Status DecodeCompactionJob(std::string_view in, CompactionJob* job);
std::string EncodeCompactionJobResult(const CompactionJobResult& result);
// Corruption naming the field on malformed input. *result is unchanged on failure.
Status DecodeCompactionJobResult(std::string_view in, CompactionJobResult* result);

// Executes `job`: opens its inputs through `store` (reads any replica), merges them with
// RunCompactionMerge and writes the outputs through `store` under the job's reserved
// numbers. `icmp` must order the job's keys (its user comparator named job.comparator).
//
// Returns OK with result->outputs (executed_by is the caller's to set); on failure deletes
// every output it wrote and returns the error: InvalidArgument for a job that cannot run
// (no inputs, bad options), ResourceExhausted if the reserved numbers ran out, or the
// store's or the merge's error.
Status RunCompactionJob(const CompactionJob& job, const InternalKeyComparator* icmp,
                        TableStore* store, CompactionJobResult* result);

}  // namespace nova::lsm
