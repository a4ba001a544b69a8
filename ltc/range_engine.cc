#include "ltc/range_engine.h"

#include <algorithm>

#include <glog/logging.h>

#include "common/lsm/leveldb_glue.h"

#include "common/clock.h"
#include "common/lsm/compaction_merge.h"
#include "common/lsm/merging_iterator.h"
#include "common/lsm/user_iterator.h"
#include "ltc/table_sink.h"

namespace nova::ltc {

namespace {

// Attempts at one MANIFEST record before the range stops taking writes.
constexpr int kManifestAppendAttempts = 3;
// Largest MANIFEST before it rolls over to a new file with a snapshot.
constexpr uint64_t kManifestRollBytes = 4ull << 20;
// A flush waits for writes still going into its memtable in steps of this long.
constexpr auto kSealWaitStep = std::chrono::milliseconds(1);


// Iterator that keeps what it reads (memtables, the version) alive.
class PinningIterator : public leveldb::Iterator {
 public:
  PinningIterator(leveldb::Iterator* it, std::vector<std::shared_ptr<void>> pins)
      : pins_(std::move(pins)), it_(it) {}
  bool Valid() const override { return it_->Valid(); }
  void SeekToFirst() override { it_->SeekToFirst(); }
  void SeekToLast() override { it_->SeekToLast(); }
  void Seek(const leveldb::Slice& t) override { it_->Seek(t); }
  void Next() override { it_->Next(); }
  void Prev() override { it_->Prev(); }
  leveldb::Slice key() const override { return it_->key(); }
  leveldb::Slice value() const override { return it_->value(); }
  leveldb::Status status() const override { return it_->status(); }

 private:
  std::vector<std::shared_ptr<void>> pins_;  // declared first: destroyed after it_
  std::unique_ptr<leveldb::Iterator> it_;
};

// An iterator that only reports an error.
class ErrorIterator : public leveldb::Iterator {
 public:
  explicit ErrorIterator(const Status& s) : s_(leveldb::Status::IOError(s.ToString())) {}
  bool Valid() const override { return false; }
  void SeekToFirst() override {}
  void SeekToLast() override {}
  void Seek(const leveldb::Slice&) override {}
  void Next() override {}
  void Prev() override {}
  leveldb::Slice key() const override { return leveldb::Slice(); }
  leveldb::Slice value() const override { return leveldb::Slice(); }
  leveldb::Status status() const override { return s_; }

 private:
  leveldb::Status s_;
};

}  // namespace

RangeEngine::RangeEngine(const EngineOptions& options, TableStore* store)
    : options_(options),
      store_(store),
      icmp_(options.comparator),
      filter_policy_(leveldb::NewBloomFilterPolicy(options.bloom_bits_per_key)),
      block_cache_(leveldb::NewLRUCache(options.block_cache_bytes)),
      pool_("ltc-bg-" + std::to_string(options.range_id), std::max(1, options.compaction_threads),
            1024) {
  table_ctx_.store = store_;
  table_ctx_.icmp = &icmp_;
  table_ctx_.block_cache = block_cache_.get();
  table_ctx_.filter_policy = filter_policy_.get();
}

RangeEngine::~RangeEngine() {
  {
    std::unique_lock lock(mu_);
    shutting_down_ = true;
    cv_.notify_all();
    cv_.wait(lock, [&] { return running_ == 0; });
  }
  pool_.Shutdown();
}

// ---- Open -----------------------------------------------------------------------------

Status RangeEngine::Open() {
  auto contents = store_->ReadManifest();
  if (!contents.ok()) return contents.status().Prepend("reading the MANIFEST");
  ParsedManifest parsed;
  NOVA_RETURN_NOT_OK(ParseManifest(contents.value(), &parsed));
  std::unique_lock lock(mu_);
  for (const VersionEdit& e : parsed.edits) NOVA_RETURN_NOT_OK(manifest_.Apply(e));
  if (parsed.edits.empty()) {
    NOVA_RETURN_NOT_OK(store_->AppendManifest(EncodeManifestRecord(manifest_.Snapshot())));
  } else if (parsed.torn_bytes > 0) {
    // Records appended after the torn bytes would leave them in the middle of the MANIFEST:
    // continue in a new one.
    LOG(WARNING) << "range " << options_.range_id << ": ignoring a torn MANIFEST record of "
                 << parsed.torn_bytes << " bytes; starting a new MANIFEST";
    NOVA_RETURN_NOT_OK_PREPEND(store_->RollManifest(EncodeManifestRecord(manifest_.Snapshot())),
                               "starting a new MANIFEST after a torn record");
  }
  // The version from the MANIFEST's tables.
  VersionEdit all = manifest_.Snapshot();
  current_ = BuildVersion(std::make_shared<Version>(), all);
  last_assigned_ = manifest_.last_sequence();
  visible_ = last_assigned_;
  layout_ = manifest_.dranges() ? RestoreLayout(*manifest_.dranges())
                                : std::make_unique<DrangeLayout>(options_.comparator, 0);
  for (int d = 0; d < layout_->size(); ++d) {
    auto ds = std::make_shared<DrangeState>();
    ds->active = NewMemTableLocked();
    dranges_.push_back(std::move(ds));
  }
  opened_ = true;
  LOG(INFO) << "range " << options_.range_id << " opened: " << current_->levels[0].size()
            << " L0 tables, last sequence " << last_assigned_ << ", " << layout_->size()
            << " Dranges";
  return Status::OK();
}

// ---- Writes ---------------------------------------------------------------------------

Status RangeEngine::Put(const leveldb::Slice& key, const leveldb::Slice& value) {
  puts_.fetch_add(1, std::memory_order_relaxed);
  return WriteOps({Op{lsm::kTypeValue, key, value}});
}

Status RangeEngine::Delete(const leveldb::Slice& key) {
  deletes_.fetch_add(1, std::memory_order_relaxed);
  return WriteOps({Op{lsm::kTypeDeletion, key, leveldb::Slice()}});
}

Status RangeEngine::Write(leveldb::WriteBatch* batch) {
  struct Collector : leveldb::WriteBatch::Handler {
    std::vector<Op> ops;
    void Put(const leveldb::Slice& k, const leveldb::Slice& v) override {
      ops.push_back(Op{lsm::kTypeValue, k, v});
    }
    void Delete(const leveldb::Slice& k) override {
      ops.push_back(Op{lsm::kTypeDeletion, k, leveldb::Slice()});
    }
  } c;
  NOVA_RETURN_NOT_OK(lsm::FromLevelDbStatus(batch->Iterate(&c)));
  if (c.ops.empty()) return Status::OK();
  return WriteOps(c.ops);
}

Status RangeEngine::WriteOps(const std::vector<Op>& ops) {
  std::vector<leveldb::Slice> keys;
  for (const Op& op : ops) keys.push_back(op.key);
  std::vector<std::shared_ptr<MemTable>> mems;
  lsm::SequenceNumber first;
  NOVA_RETURN_NOT_OK(PrepareWrite(keys, &mems, &first));
  for (size_t i = 0; i < ops.size(); ++i) {
    mems[i]->Add(first + i, ops[i].type, ops[i].key, ops[i].value);
    if (options_.lookup_index) index_.Update(ops[i].key, mems[i]->id(), first + i);
  }
  FinishWrite(first, ops.size());
  if (writes_since_reorg_.fetch_add(ops.size()) + ops.size() >= options_.reorganize_every_writes) {
    MaybeReorganize();
  }
  return Status::OK();
}

bool RangeEngine::RoomToRotateLocked(uint32_t d) const {
  const int per_drange = std::max(1, options_.memtables / std::max<int>(1, layout_->size()) - 1);
  int mine = 0;
  for (const Immutable& imm : immutables_) mine += imm.drange == d;
  return mine < per_drange && current_->LevelBytes(0) < options_.l0_stop_writes_bytes;
}

void RangeEngine::RotateLocked(uint32_t d, DrangeState* ds) {
  {
    std::lock_guard s(seq_mu_);
    immutables_.push_back(Immutable{ds->active, d, last_assigned_});
  }
  ds->active = NewMemTableLocked();
  ScheduleWork();
}

std::shared_ptr<MemTable> RangeEngine::NewMemTableLocked() {
  auto m = std::make_shared<MemTable>(&icmp_, next_memtable_id_++);
  live_.push_back(m);
  mid_to_table_[m->id()] = MidLocation{m, 0};
  return m;
}

Status RangeEngine::PrepareWrite(const std::vector<leveldb::Slice>& keys,
                                 std::vector<std::shared_ptr<MemTable>>* mems,
                                 lsm::SequenceNumber* first) {
  bool stalled = false;  // counted once per write however long it waits
  while (true) {
    std::shared_ptr<const DrangeLayout> layout;
    std::vector<std::shared_ptr<DrangeState>> states;
    {
      std::lock_guard lock(mu_);
      if (!opened_) return Status::IllegalState("range is not open");
      if (!bg_error_.ok()) return bg_error_.Prepend("writes stopped");
      layout = layout_;
      states = dranges_;
    }
    std::vector<uint32_t> route;
    for (const auto& k : keys) route.push_back(static_cast<uint32_t>(layout->Route(k)));
    std::vector<uint32_t> order = route;
    std::sort(order.begin(), order.end());
    order.erase(std::unique(order.begin(), order.end()), order.end());
    // Lock the Dranges in index order (no deadlock between batches).
    std::vector<std::unique_lock<std::mutex>> locks;
    for (uint32_t d : order) locks.emplace_back(states[d]->mu);
    bool retry = false, stall = false;
    {
      std::unique_lock lock(mu_);
      if (layout_ != layout) retry = true;
      for (uint32_t d : order) {
        if (retry || stall) break;
        DrangeState* ds = states[d].get();
        if (ds->retired) {
          retry = true;
        } else if (ds->active->ApproximateMemoryUsage() >= options_.memtable_bytes) {
          if (RoomToRotateLocked(d)) {
            RotateLocked(d, ds);
          } else {
            stall = true;
          }
        }
      }
      if (stall) {
        locks.clear();  // let other writers and the rotation path go while we wait
        const MonoTime start = MonoNow();
        if (!stalled) ++stats_.stalls;
        stalled = true;
        ScheduleWork();
        cv_.wait_for(lock, std::chrono::milliseconds(10));
        stats_.stall_micros += static_cast<uint64_t>(
            std::chrono::duration_cast<std::chrono::microseconds>(MonoNow() - start).count());
        if (shutting_down_) return Status::Aborted("engine shutting down");
        continue;
      }
    }
    if (retry) continue;
    mems->clear();
    for (uint32_t d : route) mems->push_back(states[d]->active);
    std::lock_guard s(seq_mu_);
    *first = last_assigned_ + 1;
    last_assigned_ += keys.size();
    in_flight_.insert(*first);
    return Status::OK();
  }
}

void RangeEngine::FinishWrite(lsm::SequenceNumber first, size_t count) {
  std::lock_guard s(seq_mu_);
  in_flight_.erase(first);
  visible_.store(in_flight_.empty() ? last_assigned_ : *in_flight_.begin() - 1,
                 std::memory_order_release);
  (void)count;
  seq_cv_.notify_all();
}

uint64_t RangeEngine::NewFileNumber() {
  std::lock_guard lock(mu_);
  const uint64_t n = manifest_.next_file_number();
  VersionEdit e;
  e.next_file_number = n + 1;
  manifest_.Apply(e).IgnoreError();  // only a counter: cannot contradict the state
  return n;
}

lsm::SequenceNumber RangeEngine::VisibleSequence() const {
  return visible_.load(std::memory_order_acquire);
}

// ---- Reads ----------------------------------------------------------------------------

Status RangeEngine::Get(const leveldb::Slice& key, std::string* value,
                        const EngineSnapshot* snapshot) {
  gets_.fetch_add(1, std::memory_order_relaxed);
  lsm::SequenceNumber seq;
  std::vector<std::shared_ptr<MemTable>> mems;
  std::shared_ptr<Version> version;
  std::optional<LookupIndex::Entry> indexed;
  if (options_.lookup_index) indexed = index_.Lookup(key);
  MidLocation where;
  {
    // The sequence and the state it is read in must be taken together: a flush installs its
    // table and drops its memtable under mu_, and it may have dropped versions older than
    // the newest one (no snapshot needed them), so a sequence taken before a flush must not
    // be read in the state after it.
    std::lock_guard lock(mu_);
    if (!opened_) return Status::IllegalState("range is not open");
    seq = snapshot ? snapshot->sequence() : VisibleSequence();
    mems = live_;
    version = current_;
    if (indexed) {
      auto it = mid_to_table_.find(indexed->memtable_id);
      if (it != mid_to_table_.end()) where = it->second;
    }
  }
  LookupHit best, hit;
  // The lookup index names where the newest version went; trust what is found there only
  // if it is exactly that version (else search everything below).
  if (indexed && indexed->sequence <= seq) {
    if (where.mem != nullptr) {
      std::unique_ptr<leveldb::Iterator> it(where.mem->NewIterator());
      NOVA_RETURN_NOT_OK(SeekNewest(it.get(), &icmp_, key, seq, &hit));
    } else if (where.table != 0) {
      hit.found = false;
      for (const TableRef& t : version->levels[0]) {
        if (t->meta().number == where.table) {
          NOVA_RETURN_NOT_OK(t->Get(key, seq, &hit));
          break;
        }
      }
    }
    if (hit.found && hit.sequence == indexed->sequence) {
      index_hits_.fetch_add(1, std::memory_order_relaxed);
      if (hit.type == lsm::kTypeDeletion) return Status::NotFound("key not found");
      *value = std::move(hit.value);
      return Status::OK();
    }
  }
  // Memtables and Level 0 may overlap: the newest version by sequence wins.
  for (const auto& m : mems) {
    std::unique_ptr<leveldb::Iterator> it(m->NewIterator());
    NOVA_RETURN_NOT_OK(SeekNewest(it.get(), &icmp_, key, seq, &hit));
    if (hit.found && (!best.found || hit.sequence > best.sequence)) best = std::move(hit);
  }
  for (const TableRef& t : version->levels[0]) {
    if (!t->Overlaps(key, key)) continue;
    NOVA_RETURN_NOT_OK(t->Get(key, seq, &hit));
    if (hit.found && (!best.found || hit.sequence > best.sequence)) best = std::move(hit);
  }
  if (!best.found) {
    // Levels 1..6 hold older data, non-overlapping per level: the first hit is the newest.
    const leveldb::Comparator* ucmp = options_.comparator;
    for (int level = 1; level < kNumLevels && !best.found; ++level) {
      const auto& tables = version->levels[level];
      auto it = std::lower_bound(tables.begin(), tables.end(), key,
                                 [ucmp](const TableRef& t, const leveldb::Slice& k) {
                                   return ucmp->Compare(lsm::ExtractUserKey(t->meta().largest), k) < 0;
                                 });
      if (it == tables.end() || !(*it)->Overlaps(key, key)) continue;
      NOVA_RETURN_NOT_OK((*it)->Get(key, seq, &best));
    }
  }
  if (!best.found || best.type == lsm::kTypeDeletion) return Status::NotFound("key not found");
  *value = std::move(best.value);
  return Status::OK();
}

leveldb::Iterator* RangeEngine::NewIterator(const EngineSnapshot* snapshot) {
  lsm::SequenceNumber seq;
  std::vector<std::shared_ptr<void>> pins;
  std::vector<leveldb::Iterator*> children;
  std::shared_ptr<Version> version;
  {
    std::lock_guard lock(mu_);  // the sequence with the state it is read in (see Get)
    if (!opened_) return new ErrorIterator(Status::IllegalState("range is not open"));
    seq = snapshot ? snapshot->sequence() : VisibleSequence();
    for (const auto& m : live_) {
      children.push_back(m->NewIterator());  // pins its memtable
    }
    version = current_;
  }
  pins.push_back(version);
  for (int level = 0; level < kNumLevels; ++level) {
    for (const TableRef& t : version->levels[level]) {
      auto it = t->NewIterator();
      children.push_back(it.ok() ? it.value() : new ErrorIterator(it.status()));
    }
  }
  leveldb::Iterator* merged = lsm::NewMergingIterator(&icmp_, std::move(children));
  return new PinningIterator(lsm::NewUserIterator(&icmp_, merged, seq), std::move(pins));
}

Status RangeEngine::Scan(const leveldb::Slice& start, size_t count,
                         std::vector<std::pair<std::string, std::string>>* out,
                         const EngineSnapshot* snapshot) {
  out->clear();
  std::unique_ptr<leveldb::Iterator> it(NewIterator(snapshot));
  for (it->Seek(start); it->Valid() && out->size() < count; it->Next()) {
    out->emplace_back(it->key().ToString(), it->value().ToString());
  }
  return lsm::FromLevelDbStatus(it->status());
}

const EngineSnapshot* RangeEngine::GetSnapshot() {
  std::lock_guard lock(mu_);
  auto* s = new EngineSnapshot(VisibleSequence());
  snapshots_.insert(s->sequence());
  return s;
}

void RangeEngine::ReleaseSnapshot(const EngineSnapshot* snapshot) {
  {
    std::lock_guard lock(mu_);
    auto it = snapshots_.find(snapshot->sequence());
    if (it != snapshots_.end()) snapshots_.erase(it);
  }
  delete snapshot;
}

std::vector<lsm::SequenceNumber> RangeEngine::LiveSnapshots() const {
  return std::vector<lsm::SequenceNumber>(snapshots_.begin(), snapshots_.end());
}

// ---- Background work ------------------------------------------------------------------

void RangeEngine::ScheduleWork() {
  if (shutting_down_ || running_ >= std::max(1, options_.compaction_threads)) return;
  ++running_;
  Status s = pool_.Submit([this] { BackgroundWork(); });
  if (!s.ok()) --running_;
}

void RangeEngine::BackgroundWork() {
  std::unique_lock lock(mu_);
  while (!shutting_down_ && bg_error_.ok()) {
    if (!flushing_ && !immutables_.empty()) {
      flushing_ = true;
      Immutable imm = immutables_.front();
      lock.unlock();
      Status s = FlushOne(imm);
      lock.lock();
      flushing_ = false;
      if (!s.ok()) {
        LOG(ERROR) << "range " << options_.range_id << ": flush failed, writes stop: " << s.ToString();
        bg_error_ = s;
      }
      cv_.notify_all();
      continue;
    }
    std::vector<TableRef> inputs, next;
    int level;
    if (PickCompaction(&inputs, &level, &next)) {
      for (const auto& t : inputs) compacting_.insert(t->meta().number);
      for (const auto& t : next) compacting_.insert(t->meta().number);
      lock.unlock();
      Status s = RunCompaction(level, inputs, next);
      lock.lock();
      for (const auto& t : inputs) compacting_.erase(t->meta().number);
      for (const auto& t : next) compacting_.erase(t->meta().number);
      LOG_IF(WARNING, !s.ok()) << "range " << options_.range_id << ": compaction failed: "
                               << s.ToString();
      cv_.notify_all();
      if (!s.ok()) break;  // retried when more work arrives
      continue;
    }
    break;
  }
  --running_;
  cv_.notify_all();
}

Status RangeEngine::FlushOne(const Immutable& imm) {
  // Writes that took a sequence before the rotation may still be adding to the memtable.
  {
    std::unique_lock s(seq_mu_);
    while (visible_.load(std::memory_order_acquire) < imm.sealed) seq_cv_.wait_for(s, kSealWaitStep);
  }
  std::vector<TableMeta> outputs;
  if (imm.mem->num_entries() > 0) {
    lsm::TableBuildOptions opts;
    opts.block_size = options_.block_bytes;
    opts.num_data_fragments = options_.scatter_width;
    opts.filter_policy = filter_policy_.get();
    TableSink sink(&icmp_, opts, store_, [this] { return NewFileNumber(); }, imm.drange);
    lsm::CompactionMergeOptions mo;
    mo.icmp = &icmp_;
    {
      std::lock_guard lock(mu_);
      mo.snapshots = LiveSnapshots();
    }
    mo.smallest_snapshot_or_max = mo.snapshots.empty() ? lsm::kMaxSequenceNumber : mo.snapshots.front();
    mo.max_output_bytes = UINT64_MAX / 2;  // a memtable becomes one table
    std::unique_ptr<leveldb::Iterator> it(imm.mem->NewIterator());
    lsm::CompactionStats cs;
    Status s = lsm::RunCompactionMerge(it.get(), mo, &sink, &cs);
    if (!s.ok()) {
      sink.Discard();
      return s.Prepend("flushing memtable " + std::to_string(imm.mem->id()));
    }
    outputs = std::move(sink.outputs());
  }
  std::unique_lock lock(mu_);
  VersionEdit edit;
  lsm::SequenceNumber last = manifest_.last_sequence();
  for (TableMeta& m : outputs) {
    last = std::max(last, m.largest_sequence);
    edit.new_tables.emplace_back(0, std::move(m));
  }
  edit.last_sequence = last;
  edit.next_file_number = manifest_.next_file_number();
  Status s = LogAndApplyLocked(&edit, &lock);
  if (!s.ok()) return s;
  // The memtable is now in a table: readers stop seeing it in the same step.
  immutables_.pop_front();
  live_.erase(std::remove(live_.begin(), live_.end(), imm.mem), live_.end());
  if (edit.new_tables.empty()) {
    mid_to_table_.erase(imm.mem->id());
  } else {
    mid_to_table_[imm.mem->id()] = MidLocation{nullptr, edit.new_tables.front().second.number};
  }
  ++stats_.flushes;
  return Status::OK();
}

Status RangeEngine::LogAndApplyLocked(VersionEdit* edit, std::unique_lock<std::mutex>* lock) {
  (void)lock;
  std::string record = EncodeManifestRecord(*edit);
  Status appended;
  for (int attempt = 0; attempt < kManifestAppendAttempts; ++attempt) {
    // A failed append leaves the store to repair on the next one (e.g. a StoC restarted and
    // its append slot is gone); only repeated failure stops the range.
    appended = store_->AppendManifest(record);
    if (appended.ok()) break;
    LOG(WARNING) << "range " << options_.range_id << ": MANIFEST append failed (attempt "
                 << attempt + 1 << "): " << appended.ToString();
  }
  NOVA_RETURN_NOT_OK_PREPEND(appended, "MANIFEST append");
  NOVA_RETURN_NOT_OK(manifest_.Apply(*edit));
  current_ = BuildVersion(current_, *edit);
  manifest_bytes_ += record.size();
  if (manifest_bytes_ > kManifestRollBytes) {
    // Start a new MANIFEST with the whole state; the old one is retired by the store.
    const std::string snapshot = EncodeManifestRecord(manifest_.Snapshot());
    Status s = store_->RollManifest(snapshot);
    if (s.ok()) {
      manifest_bytes_ = snapshot.size();
    } else {
      LOG(WARNING) << "MANIFEST roll-over failed (will retry): " << s.ToString();
    }
  }
  return Status::OK();
}

std::shared_ptr<Version> RangeEngine::BuildVersion(const std::shared_ptr<Version>& base,
                                                   const VersionEdit& edit) {
  auto v = std::make_shared<Version>();
  for (int l = 0; l < kNumLevels; ++l) {
    for (const TableRef& t : base->levels[l]) {
      const bool deleted = std::any_of(edit.deleted_tables.begin(), edit.deleted_tables.end(),
                                       [&](const auto& d) { return d.first == l && d.second == t->meta().number; });
      if (deleted) {
        t->MarkObsolete();
      } else {
        v->levels[l].push_back(t);
      }
    }
  }
  for (const auto& [level, meta] : edit.new_tables) {
    v->levels[level].push_back(std::make_shared<TableHandle>(meta, &table_ctx_));
  }
  std::sort(v->levels[0].begin(), v->levels[0].end(),
            [](const TableRef& a, const TableRef& b) { return a->meta().number < b->meta().number; });
  for (int l = 1; l < kNumLevels; ++l) {
    std::sort(v->levels[l].begin(), v->levels[l].end(), [this](const TableRef& a, const TableRef& b) {
      return icmp_.Compare(a->meta().smallest, b->meta().smallest) < 0;
    });
  }
  return v;
}

}  // namespace nova::ltc
