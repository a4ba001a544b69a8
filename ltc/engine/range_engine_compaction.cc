// RangeEngine: running compactions (the picker chooses them), installing reorganized Drange
// layouts (through the DrangeRouter), flushing everything, statistics. (range_engine.cc has
// Open and the read and write paths; range_engine_flush.cc the background work and flushes.)
#include <algorithm>
#include <cmath>
#include <memory>
#include <set>
#include <string>
#include <string_view>

#include <glog/logging.h>

#include "common/coding.h"
#include "common/lsm/compaction_merge.h"
#include "common/lsm/merging_iterator.h"
#include "common/lsm/scan_table.h"
#include "common/lsm/table_sink.h"
#include "ltc/engine/range_engine.h"

namespace nova::ltc {

namespace {

// Passes a table's iterator through and appends each distinct user key it moves onto to
// *keys (varint32-length-prefixed), so a Level-0 compaction learns its inputs' keys for the
// lookup index's clean-up while merging them, instead of reading the inputs a second time.
// Compactions only move forward (SeekToFirst, then Next).
class KeyRecordingIterator final : public leveldb::Iterator {
 public:
  KeyRecordingIterator(leveldb::Iterator* base, std::string* keys) : base_(base), keys_(keys) {}

  bool Valid() const override { return base_->Valid(); }
  void SeekToFirst() override {
    base_->SeekToFirst();
    Record();
  }
  void SeekToLast() override { base_->SeekToLast(); }
  void Seek(const leveldb::Slice& target) override {
    base_->Seek(target);
    Record();
  }
  void Next() override {
    base_->Next();
    Record();
  }
  void Prev() override { base_->Prev(); }
  leveldb::Slice key() const override { return base_->key(); }
  leveldb::Slice value() const override { return base_->value(); }
  leveldb::Status status() const override { return base_->status(); }

 private:
  void Record() {
    if (!base_->Valid()) return;
    const leveldb::Slice user_key = lsm::ExtractUserKey(base_->key());
    if (any_ && user_key == leveldb::Slice(last_)) return;
    last_.assign(user_key.data(), user_key.size());
    any_ = true;
    PutLengthPrefixed(keys_, std::string_view(user_key.data(), user_key.size()));
  }

  const std::unique_ptr<leveldb::Iterator> base_;
  std::string* const keys_;
  std::string last_;
  bool any_ = false;
};

}  // namespace

std::vector<std::shared_ptr<MemTable>> RangeEngine::MemtablesThatMayHoldOlderVersions() const {
  // Within one Drange of one generation, sequence numbers are taken under the Drange's lock
  // and a memtable is rotated under it too, so an active memtable only holds versions newer
  // than everything already flushed from its Drange; a new generation's memtables only hold
  // versions newer than the reorganization. What can hold a version older than a flushed
  // one is (1) an immutable memtable not flushed yet (an older generation, or a duplicate
  // point's), and (2) the active memtable of a duplicated point Drange (its copies take
  // writes of the same key in any order).
  std::vector<std::shared_ptr<MemTable>> out;
  for (const ImmutableMemTable& imm : immutables_) out.push_back(imm.mem);
  const std::shared_ptr<const DrangeRouting> routing = router_.Current();
  const DrangeLayout& layout = *routing->layout;
  for (int d = 0; d < layout.size(); ++d) {
    if (!layout.drange(d).point) continue;
    auto [first, last] = layout.Find(layout.drange(d).lower.key);
    if (last > first) out.push_back(ActiveUnderMu(*routing->states[d]));
  }
  return out;
}

std::optional<CompactionPick> RangeEngine::PickCompactionLocked() {
  return picker_.Pick(*versions_.current(), router_.Current()->layout->size(),
                      [this](const std::vector<TableRef>& cluster, const std::string& lo,
                             const std::string& hi) REQUIRES(mu_) {
                        return OlderVersionsInMemory(cluster, lo, hi);
                      });
}

bool RangeEngine::OlderVersionsInMemory(const std::vector<TableRef>& cluster,
                                        const std::string& lo, const std::string& hi) {
  // Move data down only if no memtable still holds older versions of these keys.
  lsm::SequenceNumber newest = 0;
  for (const auto& t : cluster) newest = std::max(newest, t->meta().largest_sequence);
  bool older_in_memory = false;
  for (const auto& m : MemtablesThatMayHoldOlderVersions()) {
    if (m->num_entries() == 0 || m->smallest_sequence() > newest) continue;
    std::unique_ptr<leveldb::Iterator> it(m->NewIterator());
    it->SeekToFirst();
    const std::string first = lsm::ExtractUserKey(it->key()).ToString();
    it->SeekToLast();
    const leveldb::Slice last = lsm::ExtractUserKey(it->key());
    const leveldb::Comparator* ucmp = options_.comparator;
    if (ucmp->Compare(last, lo) >= 0 && ucmp->Compare(first, hi) <= 0) {
      older_in_memory = true;
      // An active memtable (of a duplicated point Drange) may never fill up if its key
      // goes cold, or may not rotate while writes are stopped: ask for a rotation, so
      // it gets flushed or merged and the cluster can move down.
      const std::shared_ptr<const DrangeRouting> routing = router_.Current();
      for (uint32_t d = 0; d < routing->states.size(); ++d) {
        if (ActiveUnderMu(*routing->states[d]) == m) bg_.rotate_for_compaction.insert(d);
      }
      // An immutable one that merging keeps giving back to its Drange: flush it.
      for (ImmutableMemTable& imm : immutables_) {
        if (imm.mem == m) imm.no_merge = true;
      }
    }
  }
  return older_in_memory;
}

Status RangeEngine::RunCompaction(int level, const std::vector<TableRef>& inputs,
                                  const std::vector<TableRef>& next) {
  const MonoTime started = MonoNow();
  std::vector<TableRef> all = inputs;
  all.insert(all.end(), next.begin(), next.end());
  std::string lo, hi;
  UserKeyRange(options_.comparator, all, &lo, &hi);
  lsm::CompactionMergeOptions mo;
  mo.icmp = &icmp_;
  mo.max_output_bytes = options_.sstable_bytes;
  {
    MutexLock lock(&mu_);
    mo.snapshots = LiveSnapshots();
    // Nothing of these keys below the output level: deletions can go.
    mo.bottommost = true;
    for (int l = level + 2; l < lsm::kNumLevels && mo.bottommost; ++l) {
      for (const TableRef& t : versions_.current()->levels[l]) {
        if (t->Overlaps(lo, hi)) mo.bottommost = false;
      }
    }
    mo.split_user_keys = DrangeSplitKeys();  // outputs respect Drange boundaries
  }
  mo.smallest_snapshot_or_max =
      mo.snapshots.empty() ? lsm::kMaxSequenceNumber : mo.snapshots.front();
  // Offloaded (paper 4.4.3) if configured; any failure there runs the job here instead, so
  // offloading never loses or blocks a compaction.
  std::vector<lsm::TableMeta> outputs;
  // Per Level-0 input (in `inputs` order), its user keys if a local merge recorded them.
  std::vector<std::string> recorded_keys;
  bool offloaded = false;
  if (options_.compaction_offloader != nullptr) {
    Status o = OffloadCompaction(level, inputs, next, mo, &outputs);
    // A newer owner has the range: the job must not run here either.
    if (o.IsFenced()) return o;
    offloaded = o.ok();
    if (!offloaded) {
      LOG(WARNING) << "range " << options_.range_id << ": running a Level-" << level
                   << " compaction here after its offload failed: " << o.ToString();
      MutexLock lock(&mu_);
      ++stats_.compaction_offload_fallbacks;
    }
  }
  if (!offloaded) {
    // Inputs are read front to back in read-ahead windows (lsm::ScanTable); the tables are
    // declared before the merged iterator so they outlive it.
    std::vector<std::unique_ptr<lsm::ScanTable>> tables;
    std::vector<leveldb::Iterator*> children;
    // Level-0 inputs' keys are recorded as they pass, for the lookup index's clean-up.
    const bool record = level == 0 && options_.lookup_index;
    if (record) recorded_keys.resize(inputs.size());
    for (size_t i = 0; i < all.size(); ++i) {
      const TableRef& t = all[i];
      auto opened = lsm::ScanTable::Open(store_, t->meta(), &icmp_);
      if (!opened.ok()) {
        for (auto* c : children) delete c;
        return opened.status().Prepend("opening compaction input " +
                                       std::to_string(t->meta().number));
      }
      tables.push_back(std::move(opened.value()));
      leveldb::Iterator* it = tables.back()->NewIterator().release();
      if (record && i < inputs.size()) it = new KeyRecordingIterator(it, &recorded_keys[i]);
      children.push_back(it);
    }
    std::unique_ptr<leveldb::Iterator> merged(lsm::NewMergingIterator(&icmp_, std::move(children)));
    lsm::TableBuildOptions opts;
    opts.block_size = options_.block_bytes;
    opts.num_data_fragments = options_.scatter_width;
    opts.filter_policy = table_ctx_.filter_policy.get();
    lsm::TableSink sink(&icmp_, opts, store_, [this] { return NewFileNumber(); },
                   inputs.front()->meta().drange);
    lsm::CompactionStats cs;
    Status s = lsm::RunCompactionMerge(merged.get(), mo, &sink, &cs);
    merged.reset();
    if (!s.ok()) {
      sink.Discard();
      return s;
    }
    outputs = std::move(sink.outputs());
  }
  MutexLock lock(&mu_);
  VersionEdit edit;
  for (const TableRef& t : inputs) edit.deleted_tables.emplace_back(level, t->meta().number);
  for (const TableRef& t : next) edit.deleted_tables.emplace_back(level + 1, t->meta().number);
  for (lsm::TableMeta& m : outputs) edit.new_tables.emplace_back(level + 1, std::move(m));
  edit.next_file_number = versions_.state().next_file_number();
  Status s = LogAndApplyLocked(&edit);
  if (!s.ok()) {
    // LogAndApplyLocked deleted the outputs if it could start a new MANIFEST without the
    // edit; else the range stopped and they stay (a restart may find the edit).
    return s;
  }
  ++stats_.compactions;
  if (offloaded) ++stats_.compactions_offloaded;
  stats_.level_compaction_micros[level + 1] += static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(MonoNow() - started).count());
  for (const TableRef& t : all) stats_.level_read_bytes[level + 1] += t->meta().layout.file_size;
  for (const auto& [lvl, m] : edit.new_tables) {
    stats_.level_write_bytes[level + 1] += m.layout.file_size;
  }
  lock.Unlock();
  if (level == 0 && options_.lookup_index) ForgetCompactedLevel0(inputs, recorded_keys);
  return Status::OK();
}

std::vector<std::string> RangeEngine::DrangeSplitKeys() const {
  const std::shared_ptr<const DrangeRouting> routing = router_.Current();
  const DrangeLayout& layout = *routing->layout;
  std::vector<std::string> keys;
  for (int d = 1; d < layout.size(); ++d) {
    const KeyBound& b = layout.drange(d).lower;
    if (b.min || b.after) continue;
    if (keys.empty() || options_.comparator->Compare(keys.back(), b.key) < 0) {
      keys.push_back(b.key);
    }
  }
  return keys;
}

bool RangeEngine::MoveTableDown(int level, const std::vector<TableRef>& inputs,
                                const std::vector<TableRef>& next, Status* result) {
  if (!options_.table_moves || inputs.size() != 1 || !next.empty() ||
      level + 1 >= lsm::kNumLevels) {
    return false;
  }
  const TableRef& t = inputs.front();
  const lsm::TableMeta& meta = t->meta();
  const leveldb::Slice lo = lsm::ExtractUserKey(meta.smallest);
  const leveldb::Slice hi = lsm::ExtractUserKey(meta.largest);
  const leveldb::Comparator* ucmp = options_.comparator;
  // LevelDB's bound on what a moved table may overlap two levels down.
  const uint64_t max_grandparent_bytes = 10 * options_.sstable_bytes;
  MutexLock lock(&mu_);
  const std::shared_ptr<Version> v = versions_.current();
  // As picked: still at `level`, nothing at level + 1 in its way (the picker's busy marks
  // keep it so; checked again, as it costs nothing). Otherwise the pick is stale, and so is
  // its empty `next`: no merge may run on it either (its outputs would overlap level + 1).
  const bool still_there = std::any_of(v->levels[level].begin(), v->levels[level].end(),
                                       [&](const TableRef& x) { return x == t; });
  const bool clear_below = std::none_of(v->levels[level + 1].begin(), v->levels[level + 1].end(),
                                        [&](const TableRef& x) { return x->Overlaps(lo, hi); });
  if (!still_there || !clear_below) {
    *result = Status::IllegalState("table " + std::to_string(meta.number) +
                                   " changed after its compaction was picked; picking again");
    return true;
  }
  if (level + 2 < lsm::kNumLevels) {
    uint64_t overlap = 0;
    for (const TableRef& g : v->levels[level + 2]) {
      if (g->Overlaps(lo, hi)) overlap += g->meta().layout.file_size;
    }
    if (overlap > max_grandparent_bytes) return false;
  }
  for (const std::string& k : DrangeSplitKeys()) {
    if (ucmp->Compare(lo, k) < 0 && ucmp->Compare(k, hi) <= 0) return false;  // straddles it
  }
  VersionEdit edit;
  edit.deleted_tables.emplace_back(level, meta.number);
  edit.new_tables.emplace_back(level + 1, meta);
  *result = LogAndApplyLocked(&edit);
  if (!result->ok()) return true;  // as a failed compaction: retried after a backoff
  ++stats_.table_moves;
  lock.Unlock();
  // The lookup index names Level-0 tables: forget this one's keys (read from the table once,
  // as after an offloaded compaction).
  if (level == 0 && options_.lookup_index) ForgetCompactedLevel0(inputs, {});
  return true;
}

void RangeEngine::ForgetCompactedLevel0(const std::vector<TableRef>& tables,
                                        const std::vector<std::string>& recorded_keys) {
  for (size_t i = 0; i < tables.size(); ++i) {
    const TableRef& t = tables[i];
    std::vector<uint64_t> mids;
    {
      MutexLock lock(&mu_);
      for (const auto& [mid, where] : mid_to_table_) {
        if (where.mem == nullptr && where.table == t->meta().number) mids.push_back(mid);
      }
    }
    if (mids.empty()) continue;
    if (i < recorded_keys.size()) {
      // The merge saw every key of the table (it read each input to its end).
      std::string_view in(recorded_keys[i]);
      std::string_view key;
      while (GetLengthPrefixed(&in, &key)) {
        for (uint64_t mid : mids) index_.EraseIf(leveldb::Slice(key.data(), key.size()), mid);
      }
    } else if (auto scan = lsm::ScanTable::Open(store_, t->meta(), &icmp_); scan.ok()) {
      // An offloaded job: read the table again. It is obsolete but still readable while
      // we hold it.
      std::unique_ptr<leveldb::Iterator> iter = scan.value()->NewIterator();
      for (iter->SeekToFirst(); iter->Valid(); iter->Next()) {
        for (uint64_t mid : mids) index_.EraseIf(lsm::ExtractUserKey(iter->key()), mid);
      }
    }
    // Entries left behind (a read error) only cost a full search later: they never match.
    MutexLock lock(&mu_);
    for (uint64_t mid : mids) mid_to_table_.erase(mid);
  }
}

Status RangeEngine::FlushAll() { return FlushMemtables(/*cancel=*/nullptr, /*all=*/true); }

Status RangeEngine::FlushMemtables(const std::atomic<bool>* cancel, bool all) {
  {
    MutexLock lock(&mu_);
    if (!life_.opened) return Status::IllegalState("range is not open");
    if (life_.migration.handed_off) return HandedOffStatus();
  }
  // Before any rotation: a merge that has not yet looked at the flag will flush instead, and
  // one that already merged did so into a memtable rotated below.
  forcing_flush_.fetch_add(1);
  struct Unforce {
    std::atomic<int>* n;
    ~Unforce() { n->fetch_sub(1); }
  } unforce{&forcing_flush_};
  std::shared_ptr<const DrangeRouting> routing;
  uint64_t failures;  // flush failures before this call: a new one is reported
  {
    MutexLock lock(&mu_);
    routing = router_.Current();
    failures = stats_.flush_failures;
  }
  for (size_t d = 0; d < routing->states.size(); ++d) {
    const std::shared_ptr<DrangeState>& ds = routing->states[d];
    MutexLock dl(&ds->mu);
    MutexLock lock(&mu_);
    if (!ds->retired && ds->active->num_entries() > 0) {
      RotateLocked(static_cast<uint32_t>(d), ds);
    }
  }
  MutexLock lock(&mu_);
  // Unless `all`: only what is immutable now, so that steady writes (which keep rotating
  // memtables) cannot keep the wait going for ever.
  std::set<uint64_t> rotated;
  if (!all) {
    for (const ImmutableMemTable& im : immutables_) rotated.insert(im.mem->id());
  }
  auto flushed = [&]() REQUIRES(mu_) {
    if (all) return immutables_.empty();
    for (const ImmutableMemTable& im : immutables_) {
      if (rotated.count(im.mem->id()) != 0) return false;
    }
    return true;
  };
  ++life_.migration.flush_alls;  // a migration out's hold yields to it
  ScheduleWork();
  bool cancelled = false;
  for (;;) {
    const bool done = cv_.WaitFor(&lock, std::chrono::milliseconds(100), [&]() REQUIRES(mu_) {
      return flushed() || !life_.bg_error.ok() || life_.shutting_down ||
             stats_.flush_failures != failures || life_.migration.handed_off;
    });
    if (done) break;
    if (cancel != nullptr && cancel->load()) {
      cancelled = true;
      break;
    }
  }
  --life_.migration.flush_alls;
  if (cancelled) return Status::Aborted("cancelled while flushing");
  if (life_.bg_error.ok() && life_.migration.handed_off) return HandedOffStatus();
  if (life_.bg_error.ok() && stats_.flush_failures != failures) {
    return bg_.last_flush_error.Prepend("flush failed (retried in the background)");
  }
  return life_.bg_error;
}

Status RangeEngine::WaitForCompactions() {
  MutexLock lock(&mu_);
  if (!life_.opened) return Status::IllegalState("range is not open");
  while (life_.bg_error.ok()) {
    if (life_.migration.handed_off) return HandedOffStatus();
    // (Memtables a migration out holds back are not work to wait for.)
    const bool flushes = life_.migration.out ? NextFlushLocked() != nullptr : !immutables_.empty();
    const bool work = flushes || PickCompactionLocked().has_value();
    if (!work && bg_.running == 0) break;
    if (work) ScheduleWork();
    cv_.WaitFor(&lock, std::chrono::milliseconds(50));  // woken by background progress
  }
  return life_.bg_error;
}

// ---- Dranges --------------------------------------------------------------------------

void RangeEngine::MaybeReorganize() {
  if (!reorganizer_.TryBegin()) return;
  std::shared_ptr<const DrangeLayout> layout;
  std::vector<std::shared_ptr<MemTable>> mems;
  {
    MutexLock lock(&mu_);
    layout = router_.Current()->layout;
    mems = live_;
  }
  bool major = false;
  std::unique_ptr<DrangeLayout> next = reorganizer_.Plan(*layout, mems, &major);
  if (next != nullptr) InstallLayout(std::move(next), major);
  reorganizer_.End();
}

void RangeEngine::InstallLayout(std::unique_ptr<DrangeLayout> layout, bool major) {
  // Waits for the writes in the old Dranges, and keeps new ones out of them until the new
  // routing is published (it is destroyed after `lock`: a Drange's lock comes first).
  DrangeRouter::Install install(&router_);
  MutexLock lock(&mu_);
  // Not while a migration out copies the memtables (and a hand-off writes nothing): the
  // layout stays, the reorganizer plans again later.
  if (life_.migration.out) return;
  // Nor once CloseCleanly began (the writer that planned it is not waited for): the new
  // Dranges' memtable ids and this edit would come after the clean edit, and the range
  // would need its logs again (RetireActive).
  if (life_.closing) return;
  // The active memtables of the old layout become immutable (a new generation starts).
  const std::vector<std::shared_ptr<MemTable>> retired = install.RetireOld();
  for (size_t d = 0; d < retired.size(); ++d) {
    // Even an empty one: a writer that took its sequence under the Drange's lock may not
    // have added its entry yet (the flush job waits for it, and drops a memtable that stays
    // empty). Its (now retired) Drange is kept: memtables of one Drange flush in order.
    immutables_.push_back(ImmutableMemTable{retired[d], static_cast<uint32_t>(d),
                                            seq_.last_assigned(), install.old_states()[d]});
  }
  std::vector<std::shared_ptr<DrangeState>> states;
  for (int d = 0; d < layout->size(); ++d) {
    states.push_back(std::make_shared<DrangeState>(NewMemTableLocked()));
  }
  VersionEdit edit;
  edit.dranges = PersistLayout(*layout);
  Status s = LogAndApplyLocked(&edit);
  if (!s.ok() && life_.bg_error.ok()) {
    // The failed record was dropped into a new MANIFEST: record the layout there.
    s = LogAndApplyLocked(&edit);
  }
  if (!s.ok() && life_.bg_error.ok()) {
    LOG(ERROR) << "cannot record the Drange layout, writes stop: " << s.ToString();
    life_.bg_error = s;
    write_gate_.blocked = true;
  }
  install.Publish(std::move(layout), std::move(states));
  RebuildRangeIndexLocked();  // the new Dranges' memtables and boundaries
  ++(major ? stats_.major_reorganizations : stats_.minor_reorganizations);
  ScheduleWork();
}

PersistedDrangeLayout RangeEngine::PersistLayout(const DrangeLayout& l) const {
  PersistedDrangeLayout p;
  p.generation = l.generation();
  for (int d = 0; d < l.size(); ++d) {
    PersistedDrange pd;
    pd.point = l.drange(d).point;
    for (const Trange& t : l.drange(d).tranges) {
      pd.tranges.push_back(PersistedBound{t.lower.key, t.lower.after, t.lower.min});
    }
    p.dranges.push_back(std::move(pd));
  }
  return p;
}

std::unique_ptr<DrangeLayout> RangeEngine::RestoreLayout(const PersistedDrangeLayout& p) const {
  std::vector<Drange> ds;
  for (const PersistedDrange& pd : p.dranges) {
    Drange d;
    d.point = pd.point;
    for (const PersistedBound& b : pd.tranges)
      d.tranges.emplace_back(KeyBound{b.key, b.after, b.min});
    d.lower = d.tranges.front().lower;
    ds.push_back(std::move(d));
  }
  if (ds.empty()) return std::make_unique<DrangeLayout>(options_.comparator, p.generation);
  return std::make_unique<DrangeLayout>(options_.comparator, p.generation, std::move(ds));
}

// ---- Introspection --------------------------------------------------------------------

EngineStats RangeEngine::GetStats() const {
  MutexLock lock(&mu_);
  EngineStats s = stats_;
  s.manifest_failures = versions_.manifest_failures();
  if (!life_.opened) return s;
  s.puts = counters_.puts.load();
  s.deletes = counters_.deletes.load();
  s.gets = counters_.gets.load();
  s.slowdowns = counters_.slowdowns.load();
  s.slowdown_micros = counters_.slowdown_micros.load();
  s.log_failures = counters_.log_failures.load();
  s.lookup_index_hits = counters_.index_hits.load();
  s.lookup_index_entries = index_.size();
  const std::shared_ptr<const DrangeLayout> layout = router_.Current()->layout;
  s.dranges = layout->size();
  const double window = reorganizer_.last_window_imbalance();
  s.drange_imbalance = std::isnan(window) ? layout->Load().imbalance : window;
  s.immutable_memtables = static_cast<int>(immutables_.size());
  s.memtables = static_cast<int>(live_.size());
  for (const auto& m : live_) s.memtable_bytes += m->ApproximateMemoryUsage();
  s.block_cache_bytes = table_ctx_.block_cache->TotalCharge();
  for (int l = 0; l < lsm::kNumLevels; ++l) {
    s.level_tables[l] = versions_.current()->levels[l].size();
    s.level_bytes[l] = versions_.current()->LevelBytes(l);
  }
  s.last_sequence = VisibleSequence();
  RelocationProgress p;
  CountAtRiskLocked(&p);
  s.relocation_copies_at_risk = p.copies_at_risk;
  s.relocation_tables_at_risk = p.tables_at_risk;
  s.relocated_tables = bg_.maint.relocated_tables;
  s.relocated_bytes = bg_.maint.relocated_bytes;
  s.relocation_failures = bg_.maint.failures;
  s.sweeps = bg_.maint.sweeps;
  s.swept_files = bg_.maint.swept_files;
  return s;
}

std::string RangeEngine::DrangeDebugString() const {
  MutexLock lock(&mu_);
  if (!life_.opened) return "range is not open";
  return router_.Current()->layout->DebugString();
}

EngineShape RangeEngine::GetShape() const {
  MutexLock lock(&mu_);
  EngineShape shape;
  if (!life_.opened) return shape;
  for (int l = 0; l < lsm::kNumLevels; ++l) {
    for (const TableRef& t : versions_.current()->levels[l]) shape.levels[l].push_back(t->meta());
  }
  shape.dranges = PersistLayout(*router_.Current()->layout);
  return shape;
}

}  // namespace nova::ltc
