#include "ltc/engine/version.h"

#include <algorithm>
#include <functional>

#include <glog/logging.h>

#include "common/lsm/leveldb_glue.h"

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

OwnedTableContext::OwnedTableContext(lsm::TableStore* store,
                                     const lsm::InternalKeyComparator* icmp,
                                     int bloom_bits_per_key, size_t block_cache_bytes,
                                     std::shared_ptr<leveldb::Cache> shared_block_cache)
    : filter_policy(leveldb::NewBloomFilterPolicy(bloom_bits_per_key)),
      block_cache(shared_block_cache != nullptr
                      ? std::move(shared_block_cache)
                      : std::shared_ptr<leveldb::Cache>(leveldb::NewLRUCache(block_cache_bytes))) {
  ctx.store = store;
  ctx.icmp = icmp;
  ctx.block_cache = block_cache.get();
  ctx.filter_policy = filter_policy.get();
  ctx.registry = &registry;
}

void TableRegistry::Add(const TableHandle* t) {
  MutexLock lock(&mu_);
  handles_.emplace(t->meta().number, t);
}

void TableRegistry::Remove(const TableHandle* t) {
  MutexLock lock(&mu_);
  auto [begin, end] = handles_.equal_range(t->meta().number);
  for (auto it = begin; it != end; ++it) {
    if (it->second == t) {
      handles_.erase(it);
      return;
    }
  }
}

std::map<uint64_t, std::vector<lsm::TableMeta>> TableRegistry::Snapshot() const {
  MutexLock lock(&mu_);
  std::map<uint64_t, std::vector<lsm::TableMeta>> out;
  for (const auto& [number, t] : handles_) {
    std::vector<lsm::TableMeta>& metas = out[number];
    if (std::find(metas.begin(), metas.end(), t->meta()) == metas.end()) {
      metas.push_back(t->meta());
    }
  }
  return out;
}

TableHandle::TableHandle(lsm::TableMeta meta, const TableContext* ctx)
    : meta_(std::move(meta)), ctx_(ctx) {
  if (ctx_->registry != nullptr) ctx_->registry->Add(this);
}

TableHandle::~TableHandle() {
  std::shared_ptr<TableHandle> successor;
  {
    MutexLock lock(&mu_);
    successor = std::move(successor_);
  }
  table_.reset();
  source_.reset();
  if (successor != nullptr) {
    // Its copies that moved: those on a dead StoC cannot be deleted (a sweep takes them
    // once the StoC is back), so one line per table is enough. A copy any later handle of
    // the chain holds stays: a later relocation may have put the same file name back on
    // a StoC this one used.
    std::vector<lsm::TableMeta> keep;
    for (auto s = successor; s != nullptr; s = s->successor()) keep.push_back(s->meta());
    Status s = ctx_->store->DeleteCopiesNotInAny(meta_, keep);
    LOG_IF(WARNING, !s.ok()) << "could not delete every old copy of relocated table "
                             << meta_.number << ": " << s.ToString();
  } else if (obsolete_) {
    Status s = ctx_->store->DeleteTable(meta_);
    LOG_IF(WARNING, !s.ok()) << "could not delete obsolete table " << meta_.number << ": "
                             << s.ToString();
  }
  // Registered until its files are gone, so a sweep never races its delete (harmless
  // either way); the successor is released last.
  if (ctx_->registry != nullptr) ctx_->registry->Remove(this);
  successor.reset();
}

std::shared_ptr<TableHandle> TableHandle::successor() const {
  MutexLock lock(&mu_);
  return successor_;
}

void TableHandle::MarkReplaced(std::shared_ptr<TableHandle> successor) {
  MutexLock lock(&mu_);
  successor_ = std::move(successor);
}

Status TableHandle::EnsureOpen() {
  MutexLock lock(&mu_);
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

Result<uint64_t> TableHandle::ApproximateOffsetOf(const leveldb::Slice& ikey) {
  NOVA_RETURN_NOT_OK(EnsureOpen());
  return std::min<uint64_t>(table_->table()->ApproximateOffsetOf(ikey), meta_.layout.file_size);
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

Status Version::GetBelowLevel0(const leveldb::Comparator* ucmp, const leveldb::Slice& user_key,
                               lsm::SequenceNumber snapshot, LookupHit* hit,
                               ThreadPool* pool) const {
  hit->found = false;
  std::vector<TableHandle*> candidates;  // at most one per level, in level order
  for (int level = 1; level < lsm::kNumLevels; ++level) {
    const auto& tables = levels[level];
    auto it = std::lower_bound(
        tables.begin(), tables.end(), user_key, [ucmp](const TableRef& t, const leveldb::Slice& k) {
          return ucmp->Compare(lsm::ExtractUserKey(t->meta().largest), k) < 0;
        });
    if (it == tables.end() || !(*it)->Overlaps(user_key, user_key)) continue;
    if (pool == nullptr) {  // one level after another, stopping at the first hit
      NOVA_RETURN_NOT_OK((*it)->Get(user_key, snapshot, hit));
      if (hit->found) return Status::OK();
    } else {
      candidates.push_back(it->get());
    }
  }
  if (candidates.empty()) return Status::OK();
  // Every candidate level at once; the answer is what the sequential search would give:
  // the first level's error or hit, in level order.
  std::vector<LookupHit> hits(candidates.size());
  std::vector<Status> results(candidates.size());
  std::vector<std::function<void()>> jobs;
  jobs.reserve(candidates.size());
  for (size_t i = 0; i < candidates.size(); ++i) {
    jobs.push_back([&, i] { results[i] = candidates[i]->Get(user_key, snapshot, &hits[i]); });
  }
  RunAll(pool, jobs);
  for (size_t i = 0; i < candidates.size(); ++i) {
    NOVA_RETURN_NOT_OK(results[i]);
    if (hits[i].found) {
      *hit = std::move(hits[i]);
      return Status::OK();
    }
  }
  return Status::OK();
}

void UserKeyRange(const leveldb::Comparator* ucmp, const std::vector<TableRef>& tables,
                  std::string* smallest, std::string* largest) {
  for (size_t i = 0; i < tables.size(); ++i) {
    leveldb::Slice s = lsm::ExtractUserKey(tables[i]->meta().smallest);
    leveldb::Slice l = lsm::ExtractUserKey(tables[i]->meta().largest);
    if (i == 0 || ucmp->Compare(s, *smallest) < 0) smallest->assign(s.data(), s.size());
    if (i == 0 || ucmp->Compare(l, *largest) > 0) largest->assign(l.data(), l.size());
  }
}

TableRef Version::FindLevel0(uint64_t number) const {
  for (const TableRef& t : levels[0]) {
    if (t->meta().number == number) return t;
  }
  return nullptr;
}

}  // namespace nova::ltc
