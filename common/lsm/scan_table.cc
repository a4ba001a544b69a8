#include "common/lsm/scan_table.h"

#include "common/lsm/leveldb_glue.h"
#include "common/lsm/readahead_source.h"

namespace nova::lsm {

Result<std::unique_ptr<ScanTable>> ScanTable::Open(TableStore* store, const TableMeta& meta,
                                                   const InternalKeyComparator* icmp) {
  auto base = store->OpenTable(meta);
  if (!base.ok()) return base.status();
  std::unique_ptr<ScanTable> t(new ScanTable());
  t->source_ =
      std::make_unique<ReadaheadSource>(std::move(base.value()), meta.layout, kScanReadaheadBytes);
  TableReadOptions ro;
  ro.comparator = icmp;  // no block cache: each block is read once
  NOVA_RETURN_NOT_OK(OpenTable(ro, meta.layout, t->source_.get(), &t->table_));
  return t;
}

std::unique_ptr<leveldb::Iterator> ScanTable::NewIterator() const {
  leveldb::ReadOptions ro;
  ro.fill_cache = false;
  return table_->NewIterator(ro);
}

}  // namespace nova::lsm
