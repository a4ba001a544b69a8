// Table metadata shared by every component that handles SSTables: where each copy of a
// table fragment lives on the StoCs (FragmentLocation) and what an LTC knows of one table
// (TableMeta), with the encoding that MANIFEST records (ltc/engine/version_edit.h) and
// offloaded compaction jobs (common/lsm/compaction_job.h) share.
//
// Thread safety: value types and pure functions.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/lsm/fragmented_table.h"

namespace nova::lsm {

constexpr int kNumLevels = 7;

// Where one copy of a table fragment (or its filter) lives in a StoC file: one block, or
// several consecutive blocks when it is larger than one append may carry.
struct FragmentLocation {
  uint32_t stoc_id = 0;
  uint64_t file_id = 0;
  uint64_t offset = 0;  // file offset of its first byte
  uint64_t size = 0;    // bytes of fragment data
  // 0: the fragment is one block. Otherwise it is stored in chunks of chunk_bytes data (the
  // last may be shorter), chunk i starting at file offset `offset + i * chunk_stride`; the
  // gap between chunks is the StoC's block framing, which the reader skips.
  uint64_t chunk_bytes = 0;
  uint64_t chunk_stride = 0;
  bool operator==(const FragmentLocation&) const = default;
};

// Metadata of one SSTable.
struct TableMeta {
  uint64_t number = 0;
  std::string smallest;  // internal keys
  std::string largest;
  uint64_t num_entries = 0;
  // Sequence numbers of its entries: compaction may move a Level-0 table down only once no
  // memtable holds older versions of its keys.
  uint64_t smallest_sequence = 0;
  uint64_t largest_sequence = 0;
  uint32_t drange = 0;  // the Drange it was flushed from (Level 0); informational above
  TableLayout layout;
  // fragments[i] = the replicas of fragment i (layout.num_fragments() entries; an empty
  // data fragment has no replicas).
  std::vector<std::vector<FragmentLocation>> fragments;
  // The whole-table bloom filter's block (size 0: no filter).
  std::vector<FragmentLocation> filter;
  // Reed-Solomon parity (docs/stoc.md, "Table availability"): parity[j] is where parity
  // fragment j lies (one copy each; empty: the table has no parity). The stripe's columns,
  // in order: the data fragments 0..rho-1, then, if parity_covers_meta, the meta fragment
  // and the filter (mode parity); otherwise those two are replicated (mode hybrid). A
  // column shorter than the longest is read as if padded with zero bytes; each parity
  // fragment is as long as the longest column.
  std::vector<FragmentLocation> parity;
  bool parity_covers_meta = false;
  bool operator==(const TableMeta&) const = default;
};

// A TableMeta's encoding, shared by MANIFEST records (tag 5, after the level) and
// offloaded compaction jobs (common/lsm/compaction_job.h). DO NOT CHANGE: persisted.
void EncodeTableMeta(std::string* dst, const TableMeta& t);
// Reads one TableMeta from the front of *in and advances it; false on malformed input
// (never reads past *in; counts read are bounded, so damage cannot make it allocate much).
bool DecodeTableMeta(std::string_view* in, TableMeta* t);

// The copies of `t` (replicas of its data and meta fragments, replicas of its filter, its
// parity fragments; TableStore's "Relocation and sweeping") whose StoC `on` selects. A
// location of size 0 (an empty filter) holds no bytes and is not a copy.
size_t CopiesOn(const TableMeta& t, const std::function<bool(uint32_t stoc_id)>& on);

}  // namespace nova::lsm
