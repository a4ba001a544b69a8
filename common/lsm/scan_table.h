// ScanTable: a table opened for one pass front to back, as a compaction reads its inputs.
//
// Its fragments are read in windows of kScanReadaheadBytes (ReadaheadSource) instead of
// one round trip per data block, and its blocks bypass the block cache (each is read
// once). Separate from the LTC's TableHandle (ltc/engine/version.h) that Gets and scans use.
//
// Thread safety: as FragmentedTable.
#pragma once

#include <leveldb/iterator.h>

#include <cstddef>
#include <memory>

#include "common/lsm/fragmented_table.h"
#include "common/lsm/internal_key.h"
#include "common/lsm/table_meta.h"
#include "common/lsm/table_store.h"
#include "common/status.h"

namespace nova::lsm {

class ScanTable {
 public:
  static constexpr size_t kScanReadaheadBytes = 256 << 10;

  // Opens `meta` through `store` (both must outlive this): reads its footer and index.
  static Result<std::unique_ptr<ScanTable>> Open(TableStore* store, const TableMeta& meta,
                                                 const InternalKeyComparator* icmp);

  // An iterator over the table's internal keys. REQUIRES: destroyed before this.
  std::unique_ptr<leveldb::Iterator> NewIterator() const;

 private:
  ScanTable() = default;
  std::unique_ptr<FragmentSource> source_;  // declared before table_: outlives it
  std::unique_ptr<FragmentedTable> table_;
};

}  // namespace nova::lsm
