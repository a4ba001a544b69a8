#include "ltc/engine/range_engine.h"

#include <algorithm>
#include <set>
#include <thread>

#include <glog/logging.h>

#include "common/lsm/leveldb_glue.h"

#include "common/clock.h"
#include "common/fault_point.h"
#include "common/lsm/compaction_merge.h"
#include "common/lsm/merging_iterator.h"
#include "common/lsm/table_sink.h"
#include "common/lsm/user_iterator.h"
#include "ltc/engine/log_record.h"
#include "ltc/engine/memtable_log.h"

namespace nova::ltc {

namespace {

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

RangeEngine::RangeEngine(const EngineOptions& options, lsm::TableStore* store)
    : options_(options),
      store_(store),
      icmp_(options.comparator),
      table_ctx_(store, &icmp_, options.bloom_bits_per_key, options.block_cache_bytes,
                 options.shared_block_cache),
      versions_(VersionSetOptions{options.range_id, options.manifest_roll_bytes},
                &table_ctx_.ctx),
      picker_(CompactionPickerOptions{options.comparator, options.l0_compaction_trigger,
                                      options.l0_slowdown_writes_bytes,
                                      options.l0_stop_writes_bytes, options.level1_bytes,
                                      options.sstable_bytes}),
      reorganizer_(DrangeReorganizerOptions{options.comparator, options.dranges,
                                            options.tranges_per_drange,
                                            options.drange_imbalance_threshold,
                                            options.reorganize_every_writes}),
      pool_("ltc-bg-" + std::to_string(options.range_id), std::max(1, options.compaction_threads),
            1024) {}

RangeEngine::~RangeEngine() {
  std::thread maintenance;
  {
    MutexLock lock(&mu_);
    life_.shutting_down = true;
    write_gate_.blocked = true;
    cv_.NotifyAll();
    cv_.Wait(&lock, [&]() REQUIRES(mu_) { return bg_.running == 0; });
    maintenance = std::move(bg_.maintenance_thread);
  }
  // It sees shutting_down after its current step (a relocation or sweep it is in finishes;
  // nothing is installed after it).
  if (maintenance.joinable()) maintenance.join();
  pool_.Shutdown();
}

// ---- Open -----------------------------------------------------------------------------

namespace {
// Memtable ids a recovery skips (see Open): far more than a range can create between two
// MANIFEST edits (each flush writes one), few enough that u64 ids never run out.
constexpr uint64_t kRecoveryMemtableIdGap = 1ull << 32;
// Sequences an owner skips when it opens a range at an owner epoch (see Open): more than any
// owner assigns between its last MANIFEST edit and being fenced; 2^24 owner changes fit.
constexpr lsm::SequenceNumber kOwnerSequenceGap = 1ull << 32;
// Table numbers an Open skips past the largest it knows (CollectOrphansLocked). An offloaded
// compaction job outlives the LTC that started it (its StoC does not know the LTC died, and
// without owner epochs nothing fences it) and creates its outputs, under numbers that LTC
// handed it and never recorded, after this Open listed the tables: reusing them, the new
// incarnation's flush and the old job would replace each other's files (the table in the
// MANIFEST then has none). A job gets at most lsm::kMaxJobOutputNumbers numbers, and an
// incarnation takes few between its last MANIFEST edit and its death; u64 numbers leave
// room for 2^40 Opens.
constexpr uint64_t kFileNumbersSkippedAtOpen = 1ull << 24;
}  // namespace

Status RangeEngine::Open() {
  MutexLock lock(&mu_);
  if (router_.Current() != nullptr) return Status::IllegalState("Open called twice");
  bool new_range = false;
  NOVA_RETURN_NOT_OK(versions_.Recover(&new_range));
  ids_.next = std::max(ids_.next, versions_.state().next_memtable_id());
  // The memtables a live migration copied (range_engine_migration.cc), then those of the
  // other logs (range_engine_recovery.cc). Their ids are older than any new memtable's:
  // AdoptMigratedLocked and RebuildFromLogsLocked move ids_.next past them.
  std::vector<std::shared_ptr<MemTable>> rebuilt;
  std::set<uint64_t> copied;
  lsm::SequenceNumber replayed = 0;
  NOVA_RETURN_NOT_OK(AdoptMigratedLocked(&rebuilt, &copied, &replayed));
  const size_t adopted = rebuilt.size();
  const uint64_t unreplayed_from = versions_.state().log_floor();
  if (options_.log != nullptr) {
    std::vector<std::shared_ptr<MemTable>> from_logs;
    lsm::SequenceNumber max_logged = 0;
    // Closed cleanly last time (CloseCleanly): like a new range, it has no log to miss.
    const bool clean = !new_range && versions_.state().AllLogsObsolete();
    LOG_IF(INFO, clean) << "range " << options_.range_id
                        << ": closed cleanly last time: no log to replay";
    NOVA_RETURN_NOT_OK(RebuildFromLogsLocked(new_range || clean, copied, &from_logs,
                                             &ids_.absorbed, &max_logged));
    replayed = std::max(replayed, max_logged);
    rebuilt.insert(rebuilt.end(), from_logs.begin(), from_logs.end());
    std::sort(rebuilt.begin(), rebuilt.end(),
              [](const auto& a, const auto& b) { return a->id() < b->id(); });
    // A log recovery did not see (its LogC could not be listed; by the recovery rule it
    // held no acknowledged write) must never be replayed later: its versions could shadow
    // newer ones. New memtables skip far past every id an earlier run can have used since
    // its last MANIFEST edit, and the ids in between that were not replayed are recorded
    // obsolete below, before the range serves.
    if (!new_range) ids_.next += kRecoveryMemtableIdGap;
  }
  const uint64_t first_new_id = ids_.next;
  lsm::SequenceNumber last = std::max<lsm::SequenceNumber>(versions_.state().last_sequence(), replayed);
  if (options_.owner_epoch > 0 && !new_range) {
    // A new owner's sequences start far above anything an older owner may have assigned to
    // writes it was refused (a copy of one may survive on a LogC that missed the fence): such
    // a record, replayed by some later recovery, must never shadow this owner's writes.
    last += kOwnerSequenceGap;
  }
  seq_.Reset(last);
  const std::shared_ptr<const DrangeLayout> layout =
      versions_.state().dranges() ? RestoreLayout(*versions_.state().dranges())
                                  : std::make_unique<DrangeLayout>(options_.comparator, 0);
  std::vector<std::shared_ptr<DrangeState>> states;
  for (int d = 0; d < layout->size(); ++d) {
    states.push_back(std::make_shared<DrangeState>(NewMemTableLocked()));
  }
  {
    // The first routing: there is no Drange to lock yet (and writes wait for opened).
    DrangeRouter::Install install(&router_);
    install.Publish(layout, states);
  }
  for (auto& mem : rebuilt) {
    // The oldest memtables of the Drange of their smallest key: they flush before anything
    // newer of it, and are never merged (nor merged into).
    uint32_t d = 0;
    std::unique_ptr<leveldb::Iterator> it(mem->NewIterator());
    it->SeekToFirst();
    if (it->Valid()) {
      const leveldb::Slice smallest = lsm::ExtractUserKey(it->key());
      d = static_cast<uint32_t>(layout->Find(smallest).first);
      it->SeekToLast();
      range_index_.memtable_intervals[mem->id()] =
          KeyInterval::Closed(smallest, lsm::ExtractUserKey(it->key()));
    }
    live_.push_back(mem);
    mid_to_table_[mem->id()] = MidLocation{mem, 0};
    immutables_.push_back(
        ImmutableMemTable{mem, d, mem->largest_sequence(), states[d], /*no_merge=*/true});
  }
  // The numbers skipped here (kFileNumbersSkippedAtOpen) are recorded before the range
  // serves: were they only in memory, an incarnation killed before its first flush or
  // compaction edit would leave the MANIFEST's counter where it was, and the next one would
  // hand out again the numbers this one gave to an offloaded job still running.
  CollectOrphansLocked();
  VersionEdit e;
  e.next_file_number = versions_.state().next_file_number();
  if (options_.log != nullptr && !new_range) {
    // Replayed logs stay live, and so do the ids of logless memtables whose entries a
    // replayed log took (absorbed): a later recovery must route those entries again.
    std::vector<uint64_t> kept;
    for (const auto& mem : rebuilt) kept.push_back(mem->id());
    for (const auto& [into, ids] : ids_.absorbed) kept.insert(kept.end(), ids.begin(), ids.end());
    std::sort(kept.begin(), kept.end());
    uint64_t begin = unreplayed_from;
    for (uint64_t id : kept) {
      if (id > begin) e.obsolete_log_ranges.emplace_back(begin, id);
      begin = std::max(begin, id + 1);
    }
    if (first_new_id > begin) e.obsolete_log_ranges.emplace_back(begin, first_new_id);
  }
  NOVA_RETURN_NOT_OK_PREPEND(LogAndApplyLocked(&e),
                             "recording the table numbers skipped and the logs recovery did "
                             "not replay");
  RebuildRangeIndexLocked();
  write_gate_.l0_bytes = versions_.current()->LevelBytes(0);
  life_.opened = true;
  write_gate_.blocked = false;
  if (!immutables_.empty()) ScheduleWork();
  if (options_.sweep_interval.count() > 0) bg_.maint.next_sweep_at = MonoNow() + options_.sweep_interval;
  bg_.maintenance_thread = std::thread([this] { MaintenanceLoop(); });
  LOG(INFO) << "range " << options_.range_id << " opened: " << versions_.current()->levels[0].size()
            << " L0 tables, " << adopted << " memtables adopted from a migration, "
            << rebuilt.size() - adopted << " rebuilt from logs, last sequence "
            << seq_.last_assigned() << ", " << layout->size() << " Dranges";
  return Status::OK();
}

void RangeEngine::CollectOrphansLocked() {
  // Tables no MANIFEST references: outputs of a flush or compaction that a crash (or a
  // failed MANIFEST append that could not be rolled over) cut off before they were
  // recorded. This engine writes none of its tables yet, so every unreferenced one is
  // garbage (an offloaded job of an earlier incarnation may still be writing one: it fails
  // or leaves an orphan for the next Open).
  auto listed = store_->ListTables();
  if (!listed.ok()) {
    LOG(WARNING) << "range " << options_.range_id
                 << ": cannot list tables to collect orphans (next Open retries): "
                 << listed.status().ToString();
    versions_.SkipFileNumbersThrough(versions_.state().next_file_number() +
                                     kFileNumbersSkippedAtOpen);
    return;
  }
  std::set<uint64_t> live;
  for (const auto& level : versions_.current()->levels) {
    for (const TableRef& t : level) live.insert(t->meta().number);
  }
  uint64_t largest = 0;
  for (uint64_t n : listed.value()) {
    largest = std::max(largest, n);
    if (live.count(n) != 0) continue;
    Status s = store_->DeleteTableFiles(n);
    if (s.ok()) {
      ++stats_.orphans_collected;
    } else {
      LOG(WARNING) << "range " << options_.range_id << ": deleting orphaned table " << n
                   << ": " << s.ToString();
    }
  }
  LOG_IF(INFO, stats_.orphans_collected > 0)
      << "range " << options_.range_id << ": collected " << stats_.orphans_collected
      << " orphaned tables";
  // Never reuse the number of a table file that may still exist (an orphan whose deletion
  // failed, or one a StoC was still writing), nor one a StoC may still create: see
  // kFileNumbersSkippedAtOpen.
  versions_.SkipFileNumbersThrough(std::max(largest, versions_.state().next_file_number()) +
                                   kFileNumbersSkippedAtOpen);
}

// ---- Writes ---------------------------------------------------------------------------

Status RangeEngine::Put(const leveldb::Slice& key, const leveldb::Slice& value) {
  counters_.puts.fetch_add(1, std::memory_order_relaxed);
  return Write({WriteOp{lsm::kTypeValue, key, value}});
}

Status RangeEngine::Delete(const leveldb::Slice& key) {
  counters_.deletes.fetch_add(1, std::memory_order_relaxed);
  return Write({WriteOp{lsm::kTypeDeletion, key, leveldb::Slice()}});
}

Status RangeEngine::Write(const std::vector<WriteOp>& ops) {
  if (ops.empty()) return Status::OK();
  std::vector<leveldb::Slice> keys;
  for (const WriteOp& op : ops) keys.push_back(op.key);
  std::vector<std::shared_ptr<MemTable>> mems;
  lsm::SequenceNumber first;
  NOVA_RETURN_NOT_OK(PrepareWrite(keys, &mems, &first));
  // (Tests delay a write here: it holds its sequence but is not in its memtable yet.)
  MAYBE_FAULT_VOID("ltc.write.before_add");
  Status logged;
  std::shared_ptr<MemTable> log_failed;  // the memtable whose log append failed
  bool reached = true;                   // the record may be in some log
  if (options_.log != nullptr) logged = LogWrite(ops, mems, first, &log_failed, &reached);
  // Applied even if logging failed when the record may be in some log already (a replica,
  // or another memtable's log for a batch): what a log holds must be in its memtable, or a
  // replay could bring back a version older than ones compacted below the memtables. The
  // client gets the error: the write's outcome is unknown to it, as after a timeout. A
  // record that reached no log (too few LogCs to send it to) is not applied: nobody may
  // read a write that a crash would lose and that was never acknowledged. Its sequence
  // numbers stay unused.
  // Not when a newer owner refused it: this owner's memtables are going away, and readers
  // that still hold it must not see a write that was refused.
  if (logged.ok() || (reached && !logged.IsFenced())) {
    for (size_t i = 0; i < ops.size(); ++i) {
      mems[i]->Add(first + i, ops[i].type, ops[i].key, ops[i].value);
      if (options_.lookup_index) index_.Update(ops[i].key, mems[i]->id(), first + i);
    }
  }
  FinishWrite(first, ops.size());
  if (logged.IsFenced()) {
    // A newer owner has the range: the record was refused, and nothing more is logged.
    MutexLock lock(&mu_);
    StopIfFencedLocked(logged);
    return logged;
  }
  if (!logged.ok()) {
    counters_.log_failures.fetch_add(1, std::memory_order_relaxed);
    // The memtable's log is dead (no replica left): retire the memtable so the next writes
    // get a new one, with a new log on the LogCs still alive.
    RetireActive(log_failed);
    return logged.Prepend(reached ? "logging the write (it may or may not be applied)"
                                  : "logging the write (not applied)");
  }
  if (reorganizer_.CountWrites(ops.size())) {
    MaybeReorganize();
  }
  // Acknowledge the write only once readers see it: a Get that starts after Put returned
  // must find it (read-your-writes). The watermark passes this write only after every
  // earlier sequence's write finished; usually this write's own Finish already moved it.
  const lsm::SequenceNumber last = first + ops.size() - 1;
  while (!seq_.WaitVisible(last, Deadline::After(kSealWaitLog))) {
    LOG(WARNING) << "range " << options_.range_id << ": write of sequence " << last
                 << " still waits for earlier writes (visible " << seq_.visible() << ")";
  }
  return Status::OK();
}

void RangeEngine::RetireActive(const std::shared_ptr<MemTable>& mem) {
  if (mem == nullptr) return;
  const std::shared_ptr<const DrangeRouting> routing = router_.Current();
  for (uint32_t d = 0; d < routing->states.size(); ++d) {
    const std::shared_ptr<DrangeState>& ds = routing->states[d];
    MutexLock dl(&ds->mu);
    if (ds->retired || ds->active != mem) continue;
    MutexLock lock(&mu_);
    // Not once CloseCleanly began: its clean edit marks every memtable id handed out so far
    // obsolete, and this writer (past FinishWrite) is not waited for. A new id would be
    // recorded above them by the next edit, and the range would need its logs again.
    if (life_.closing) return;
    // Within the memtable budget only: while every LogC is down each write would otherwise
    // leave a memtable behind. A later failing write retires it once there is room.
    if (RoomToRotateLocked(d)) RotateLocked(d, ds);
    return;
  }
}

Status RangeEngine::LogWrite(const std::vector<WriteOp>& ops,
                             const std::vector<std::shared_ptr<MemTable>>& mems,
                             lsm::SequenceNumber first, std::shared_ptr<MemTable>* failed,
                             bool* reached) {
  *reached = false;
  std::vector<ltc::LogEntry> entries;
  entries.reserve(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    entries.push_back(ltc::LogEntry{mems[i]->id(), first + i, static_cast<uint8_t>(ops[i].type),
                                     std::string_view(ops[i].key.data(), ops[i].key.size()),
                                     std::string_view(ops[i].value.data(), ops[i].value.size())});
  }
  std::string record;
  ltc::AppendLogRecord(&record, entries);
  // The whole record goes to the log of each memtable the write touches (a batch may span
  // Dranges): recovery then finds all of an acknowledged batch in any of them.
  std::vector<uint64_t> logged;
  for (const auto& m : mems) {
    if (std::find(logged.begin(), logged.end(), m->id()) != logged.end()) continue;
    bool sent = true;
    Status s = options_.log->Append(m->id(), record, &sent);
    *reached = *reached || sent;
    if (!s.ok()) {
      *failed = m;
      return s;
    }
    logged.push_back(m->id());
  }
  return Status::OK();
}

bool RangeEngine::RoomToRotateLocked(uint32_t d) const {
  const int dranges = router_.Current()->layout->size();
  const int per_drange = std::max(1, options_.memtables / std::max<int>(1, dranges) - 1);
  int mine = 0;
  for (const ImmutableMemTable& imm : immutables_) mine += imm.drange == d;
  return mine < per_drange && versions_.current()->LevelBytes(0) < options_.l0_stop_writes_bytes;
}

void RangeEngine::RotateLocked(uint32_t d, const std::shared_ptr<DrangeState>& ds, bool no_merge) {
  DCHECK(router_.Current()->states[d] == ds);
  immutables_.push_back(ImmutableMemTable{ds->active, d, seq_.last_assigned(), ds, no_merge});
  ds->active = NewMemTableLocked();
  RebuildRangeIndexLocked();
  ScheduleWork();
}

std::shared_ptr<MemTable> RangeEngine::NewMemTableLocked() {
  auto m = std::make_shared<MemTable>(&icmp_, ids_.next++);
  live_.push_back(m);
  mid_to_table_[m->id()] = MidLocation{m, 0};
  return m;
}

Status RangeEngine::PrepareWrite(const std::vector<leveldb::Slice>& keys,
                                 std::vector<std::shared_ptr<MemTable>>* mems,
                                 lsm::SequenceNumber* first) {
  bool stalled = false;  // counted once per write however long it waits
  bool stalled_by_l0 = false;
  bool slowed = false;
  DrangeRouter::WriteRoute route;  // the Dranges' locks, held until return
  while (true) {
    if (write_gate_.blocked.load(std::memory_order_acquire)) {
      MutexLock lock(&mu_);
      if (!life_.opened) return Status::IllegalState("range is not open");
      if (life_.shutting_down) return Status::Aborted("engine shutting down");
      if (life_.closing) return Status::Aborted("range closing");
      if (life_.migration.handed_off) return HandedOffStatus();
      if (!life_.bg_error.ok()) return life_.bg_error.Prepend("writes stopped");
    }
    const uint64_t l0 = write_gate_.l0_bytes.load(std::memory_order_relaxed);
    if (!slowed && l0 >= options_.l0_slowdown_writes_bytes && options_.l0_slowdown_micros > 0) {
      // Level 0 is nearing the stop: delay the write once, by a share of
      // l0_slowdown_micros growing linearly from 0 at the slow-down mark to all of it at the
      // stop, so writers yield to compaction gradually instead of hitting the stop at once.
      slowed = true;
      const uint64_t band = options_.l0_stop_writes_bytes > options_.l0_slowdown_writes_bytes
                                ? options_.l0_stop_writes_bytes - options_.l0_slowdown_writes_bytes
                                : 1;
      const double share =
          std::min(1.0, static_cast<double>(l0 - options_.l0_slowdown_writes_bytes + 1) / band);
      const auto delay = std::chrono::microseconds(
          static_cast<int64_t>(share * options_.l0_slowdown_micros) + 1);
      const MonoTime start = MonoNow();
      std::this_thread::sleep_for(delay);
      counters_.slowdowns.fetch_add(1, std::memory_order_relaxed);
      counters_.slowdown_micros.fetch_add(
          static_cast<uint64_t>(
              std::chrono::duration_cast<std::chrono::microseconds>(MonoNow() - start).count()),
          std::memory_order_relaxed);
    }
    // Routes the keys and locks their Dranges (in index order, so batches never deadlock).
    // If a reorganization retired them meanwhile, start over with the new layout (the checks
    // above first: the reorganization may have stopped writes).
    if (!router_.LockForWrite(keys, &route)) continue;
    if (write_gate_.blocked.load(std::memory_order_acquire)) {
      // Writes stopped while this one routed: refused (checked above) unless it was only a
      // moment's (EndMigrationOut). A hand-off cycles the Drange locks after it blocks
      // writes, so a write that gets its sequence below has been waited for.
      route.Unlock();
      continue;
    }
    bool stall = false;
    for (uint32_t d : route.dranges()) {
      const std::shared_ptr<DrangeState>& ds = route.routing().states[d];
      ds->mu.AssertHeld();  // locked by `route`
      if (ds->active->ApproximateMemoryUsage() < options_.memtable_bytes) continue;
      MutexLock lock(&mu_);
      if (RoomToRotateLocked(d)) {
        RotateLocked(d, ds);
      } else {
        stall = true;
        break;
      }
    }
    if (stall) {
      route.Unlock();  // let other writers and the rotation path go while we wait
      MutexLock lock(&mu_);
      const MonoTime start = MonoNow();
      if (!stalled) ++stats_.stalls;
      stalled = true;
      // Level 0 at the stop blocks every rotation; otherwise the Drange is out of memtables.
      const bool l0_stop = versions_.current()->LevelBytes(0) >= options_.l0_stop_writes_bytes;
      if (l0_stop && !stalled_by_l0) ++stats_.l0_stop_stalls;
      stalled_by_l0 = stalled_by_l0 || l0_stop;
      ScheduleWork();
      // While a writer waits for room, flushes held by a migration out run.
      ++life_.migration.stalled_writers;
      cv_.WaitFor(&lock, std::chrono::milliseconds(10));
      --life_.migration.stalled_writers;
      const auto waited = static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::microseconds>(MonoNow() - start).count());
      stats_.stall_micros += waited;
      if (l0_stop) stats_.l0_stop_stall_micros += waited;
      continue;
    }
    mems->clear();
    for (size_t i = 0; i < keys.size(); ++i) {
      DrangeState* ds = route.state(route.drange_of(i));
      ds->mu.AssertHeld();  // locked by `route`
      mems->push_back(ds->active);
    }
    // Taken under the Dranges' locks: within a Drange sequences follow memtable order.
    *first = seq_.Assign(keys.size());
    return Status::OK();
  }
}

void RangeEngine::FinishWrite(lsm::SequenceNumber first, size_t count) {
  seq_.Finish(first, count);
}

uint64_t RangeEngine::NewFileNumber() {
  MutexLock lock(&mu_);
  return versions_.NewFileNumber();
}

lsm::SequenceNumber RangeEngine::VisibleSequence() const { return seq_.visible(); }

// ---- Reads ----------------------------------------------------------------------------

Status RangeEngine::Get(const leveldb::Slice& key, std::string* value,
                        const EngineSnapshot* snapshot) {
  counters_.gets.fetch_add(1, std::memory_order_relaxed);
  lsm::SequenceNumber seq;
  std::vector<std::shared_ptr<MemTable>> mems;
  std::shared_ptr<const RangeIndex> rindex;
  std::shared_ptr<Version> version;
  std::optional<LookupIndex::Entry> indexed;
  if (options_.lookup_index) indexed = index_.Lookup(key);
  MidLocation where;
  {
    // The sequence and the state it is read in must be taken together: a flush installs its
    // table and drops its memtable under mu_, and it may have dropped versions older than
    // the newest one (no snapshot needed them), so a sequence taken before a flush must not
    // be read in the state after it.
    MutexLock lock(&mu_);
    if (!life_.opened) return Status::IllegalState("range is not open");
    seq = snapshot ? snapshot->sequence() : VisibleSequence();
    if (range_index_.index != nullptr) {
      rindex = range_index_.index;
    } else {
      mems = live_;
    }
    version = versions_.current();
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
      if (TableRef t = version->FindLevel0(where.table)) {
        NOVA_RETURN_NOT_OK(t->Get(key, seq, &hit));
      }
    }
    if (hit.found && hit.sequence == indexed->sequence) {
      counters_.index_hits.fetch_add(1, std::memory_order_relaxed);
      if (hit.type == lsm::kTypeDeletion) return Status::NotFound("key not found");
      *value = std::move(hit.value);
      return Status::OK();
    }
  }
  // Memtables and Level 0 may overlap: the newest version by sequence wins. With the range
  // index, only the memtables and tables of the partition holding the key can hold it.
  std::shared_ptr<MemTable> best_mem;  // the memtable `best` came from, if any
  auto search_mem = [&](const std::shared_ptr<MemTable>& m) -> Status {
    std::unique_ptr<leveldb::Iterator> it(m->NewIterator());
    NOVA_RETURN_NOT_OK(SeekNewest(it.get(), &icmp_, key, seq, &hit));
    if (hit.found && (!best.found || hit.sequence > best.sequence)) {
      best = std::move(hit);
      best_mem = m;
    }
    return Status::OK();
  };
  auto search_table = [&](const TableRef& t) -> Status {
    if (!t->Overlaps(key, key)) return Status::OK();
    NOVA_RETURN_NOT_OK(t->Get(key, seq, &hit));
    if (hit.found && (!best.found || hit.sequence > best.sequence)) {
      best = std::move(hit);
      best_mem = nullptr;
    }
    return Status::OK();
  };
  if (rindex != nullptr) {
    const RangeIndex::Partition& p = rindex->partition(rindex->Find(key));
    for (uint32_t m : p.memtables) NOVA_RETURN_NOT_OK(search_mem(rindex->memtables()[m]));
    for (uint32_t t : p.tables) NOVA_RETURN_NOT_OK(search_table(rindex->tables()[t]));
  } else {
    for (const auto& m : mems) NOVA_RETURN_NOT_OK(search_mem(m));
    for (const TableRef& t : version->levels[0]) NOVA_RETURN_NOT_OK(search_table(t));
  }
  if (best_mem != nullptr && !indexed && options_.lookup_index && snapshot == nullptr) {
    // A miss in the lookup index (it starts empty after recovery, paper 4.4.5): record
    // where the newest version is. Safe while that memtable is live: a newer version of the
    // key would have its own entry, which only a compaction of its flushed table erases,
    // and that waits for every memtable holding older versions of its keys (this one).
    MutexLock lock(&mu_);
    if (mid_to_table_.count(best_mem->id()) != 0 &&
        std::find(live_.begin(), live_.end(), best_mem) != live_.end()) {
      index_.InsertIfAbsent(key, best_mem->id(), best.sequence);
    }
  }
  if (!best.found) {
    NOVA_RETURN_NOT_OK(
        version->GetBelowLevel0(options_.comparator, key, seq, &best, options_.read_pool));
  }
  if (!best.found || best.type == lsm::kTypeDeletion) return Status::NotFound("key not found");
  *value = std::move(best.value);
  return Status::OK();
}

leveldb::Iterator* RangeEngine::NewIterator(const EngineSnapshot* snapshot) {
  lsm::SequenceNumber seq;
  std::vector<std::shared_ptr<void>> pins;
  std::vector<std::shared_ptr<MemTable>> mems;
  std::shared_ptr<const RangeIndex> rindex;
  std::shared_ptr<Version> version;
  {
    MutexLock lock(&mu_);  // the sequence with the state it is read in (see Get)
    if (!life_.opened) return new ErrorIterator(Status::IllegalState("range is not open"));
    seq = snapshot ? snapshot->sequence() : VisibleSequence();
    if (range_index_.index != nullptr) {
      rindex = range_index_.index;  // holds its memtables and Level-0 tables
    } else {
      mems = live_;
    }
    version = versions_.current();
  }
  pins.push_back(version);
  leveldb::Iterator* merged = NewInternalIterator(mems, std::move(rindex), version);
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
  MutexLock lock(&mu_);
  auto* s = new EngineSnapshot(VisibleSequence());
  snapshots_.insert(s->sequence());
  return s;
}

void RangeEngine::ReleaseSnapshot(const EngineSnapshot* snapshot) {
  {
    MutexLock lock(&mu_);
    auto it = snapshots_.find(snapshot->sequence());
    if (it != snapshots_.end()) snapshots_.erase(it);
  }
  delete snapshot;
}

std::vector<lsm::SequenceNumber> RangeEngine::LiveSnapshots() const {
  return std::vector<lsm::SequenceNumber>(snapshots_.begin(), snapshots_.end());
}

void RangeEngine::StopIfFencedLocked(const Status& s) {
  if (!s.IsFenced() || life_.bg_error.IsFenced()) return;
  LOG(WARNING) << "range " << options_.range_id
               << ": fenced by a newer owner; writes stop and nothing more is written: "
               << s.ToString();
  life_.bg_error = s;
  write_gate_.blocked = true;
  cv_.NotifyAll();
  if (options_.on_fenced) options_.on_fenced();
}

Status RangeEngine::LogAndApplyLocked(VersionEdit* edit) {
  // Also without logs: a live migration's destination tells the memtables flushed since
  // they were copied by the ids this records obsolete.
  AddLogBookkeepingLocked(edit);
  bool fatal = false;
  Status s = versions_.LogAndApply(*edit, &fatal);
  if (!s.ok()) {
    if (fatal && s.IsFenced()) {
      StopIfFencedLocked(s);
    } else if (fatal) {
      // Nothing may be appended or deleted any more (the edit's tables may be referenced
      // after a restart).
      LOG(ERROR) << "range " << options_.range_id << ": writes stop: " << s.ToString();
      life_.bg_error = s;
      write_gate_.blocked = true;
    }
    return s;
  }
  DropLogsLocked(*edit);
  RebuildRangeIndexLocked();  // Level 0 may have changed
  StopIfFencedLocked(versions_.fenced());  // a roll-over after the edit was refused
  write_gate_.l0_bytes.store(versions_.current()->LevelBytes(0), std::memory_order_relaxed);
  return Status::OK();
}

}  // namespace nova::ltc
