#include "ltc/version.h"

#include <glog/logging.h>

#include "common/lsm/leveldb_glue.h"
#include "common/lsm/readahead_source.h"

namespace nova::ltc {

Status SeekNewest(leveldb::Iterator* it, const lsm::InternalKeyComparator* icmp,
                  const leveldb::Slice& user_key, lsm::SequenceNumber snapshot, LookupHit* hit) {
  const std::string target = lsm::MakeInternalKey(
      user_key, std::min(snapshot, lsm::kMaxSequenceNumber), lsm::kTypeForSeek);
  it->Seek(target);
  hit->found = false;
  if (it->Valid()) {
    lsm::ParsedInternalKey p;
    if (!lsm::ParseInternalKey(it->key(), &p)) return Status::Corruption("malformed internal key");
    if (icmp->user_comparator()->Compare(p.user_key, user_key) == 0) {
      hit->found = true;
      hit->sequence = p.sequence;
      hit->type = p.type;
      hit->value.assign(it->value().data(), it->value().size());
    }
  }
  return lsm::FromLevelDbStatus(it->status());
}

Result<std::unique_ptr<ScanTable>> ScanTable::Open(TableStore* store, const TableMeta& meta,
                                                   const lsm::InternalKeyComparator* icmp) {
  auto base = store->OpenTable(meta);
  if (!base.ok()) return base.status();
  std::unique_ptr<ScanTable> t(new ScanTable());
  t->source_ = std::make_unique<lsm::ReadaheadSource>(std::move(base.value()), meta.layout,
                                                      kScanReadaheadBytes);
  lsm::TableReadOptions ro;
  ro.comparator = icmp;  // no block cache: each block is read once
  NOVA_RETURN_NOT_OK(lsm::OpenTable(ro, meta.layout, t->source_.get(), &t->table_));
  return t;
}

std::unique_ptr<leveldb::Iterator> ScanTable::NewIterator() const {
  leveldb::ReadOptions ro;
  ro.fill_cache = false;
  return table_->NewIterator(ro);
}

TableHandle::~TableHandle() {
  if (!obsolete_) return;
  table_.reset();
  source_.reset();
  Status s = ctx_->store->DeleteTable(meta_);
  LOG_IF(WARNING, !s.ok()) << "could not delete obsolete table " << meta_.number << ": "
                           << s.ToString();
}

Status TableHandle::EnsureOpen() {
  std::lock_guard lock(mu_);
  if (opened_) return Status::OK();
  auto source = ctx_->store->OpenTable(meta_);
  if (!source.ok()) return source.status();
  std::unique_ptr<lsm::FragmentedTable> table;
  lsm::TableReadOptions ro;
  ro.comparator = ctx_->icmp;
  ro.block_cache = ctx_->block_cache;
  NOVA_RETURN_NOT_OK(lsm::OpenTable(ro, meta_.layout, source.value().get(), &table));
  std::string filter;
  if (!meta_.filter.empty() && meta_.filter[0].size > 0) {
    auto f = ctx_->store->ReadFilter(meta_);
    if (!f.ok()) return f.status();
    filter = std::move(f.value());
  }
  source_ = std::move(source.value());
  table_ = std::move(table);
  filter_ = std::make_unique<lsm::TableFilter>(ctx_->filter_policy, std::move(filter));
  opened_ = true;
  return Status::OK();
}

Status TableHandle::Get(const leveldb::Slice& user_key, lsm::SequenceNumber snapshot,
                        LookupHit* hit) {
  hit->found = false;
  NOVA_RETURN_NOT_OK(EnsureOpen());
  if (!filter_->KeyMayMatch(user_key)) return Status::OK();
  auto it = table_->NewIterator(leveldb::ReadOptions());
  return SeekNewest(it.get(), ctx_->icmp, user_key, snapshot, hit);
}

Result<leveldb::Iterator*> TableHandle::NewIterator() {
  NOVA_RETURN_NOT_OK(EnsureOpen());
  // The handle must outlive the iterator: the caller's version keeps it alive.
  return table_->NewIterator(leveldb::ReadOptions()).release();
}

bool TableHandle::Overlaps(const leveldb::Slice& smallest, const leveldb::Slice& largest) const {
  const leveldb::Comparator* ucmp = ctx_->icmp->user_comparator();
  return !(ucmp->Compare(lsm::ExtractUserKey(meta_.largest), smallest) < 0 ||
           ucmp->Compare(lsm::ExtractUserKey(meta_.smallest), largest) > 0);
}

uint64_t Version::LevelBytes(int level) const {
  uint64_t b = 0;
  for (const auto& t : levels[level]) b += t->meta().layout.file_size;
  return b;
}

}  // namespace nova::ltc
