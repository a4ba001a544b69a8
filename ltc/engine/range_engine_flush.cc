// RangeEngine: background work: scheduling flushes and compactions and their backoff after
// failures, and what a FlushJob (ltc/engine/flush_job.h) changes in the engine: the
// MANIFEST edit of a flushed memtable, the bookkeeping of a dropped or merged one.
// (Compactions are in range_engine_compaction.cc.)
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <glog/logging.h>

#include "common/clock.h"
#include "common/fault_point.h"
#include "common/lsm/compaction_merge.h"
#include "common/lsm/table_sink.h"
#include "ltc/engine/memtable_log.h"
#include "ltc/engine/range_engine.h"

namespace nova::ltc {

// ---- Background work ------------------------------------------------------------------

void RangeEngine::ScheduleWork() {
  if (life_.shutting_down || life_.migration.handed_off ||
      bg_.running >= std::max(1, options_.compaction_threads)) {
    return;
  }
  ++bg_.running;
  Status s = pool_.Submit([this] { BackgroundWork(); });
  if (!s.ok()) --bg_.running;
}

const ImmutableMemTable* RangeEngine::NextFlushLocked() const {
  // A migration out holds flushes (its memtables are being copied) unless a writer waits
  // for room or FlushAll runs; a hand-off holds them all (MigrationOut invariant 2).
  const auto& m = life_.migration;
  if (m.handed_off || (m.out && m.stalled_writers == 0 && m.flush_alls == 0)) return nullptr;
  // Oldest first, and within a Drange strictly in order: a memtable waits while an older
  // one of its Drange is pending or being flushed (the small-memtable merge moves versions
  // into the next one; Level-0 compaction relies on a Drange's tables arriving in order).
  // Memtables of different Dranges flush in parallel, up to the background threads.
  std::vector<const DrangeState*> waiting;
  for (const ImmutableMemTable& imm : immutables_) {
    const bool blocked =
        std::find(waiting.begin(), waiting.end(), imm.state.get()) != waiting.end();
    if (!blocked && bg_.flushing_ids.count(imm.mem->id()) == 0) return &imm;
    waiting.push_back(imm.state.get());
  }
  return nullptr;
}

void RangeEngine::EraseImmutableLocked(const std::shared_ptr<MemTable>& mem) {
  auto it = std::find_if(immutables_.begin(), immutables_.end(),
                         [&](const ImmutableMemTable& i) { return i.mem == mem; });
  DCHECK(it != immutables_.end());
  if (it != immutables_.end()) immutables_.erase(it);
}

void RangeEngine::RotateForCompaction() {
  const std::set<uint32_t> wanted = std::move(bg_.rotate_for_compaction);
  bg_.rotate_for_compaction.clear();
  const std::shared_ptr<const DrangeRouting> routing = router_.Current();
  mu_.Unlock();
  for (uint32_t d : wanted) {
    if (d >= routing->states.size()) continue;
    const std::shared_ptr<DrangeState>& ds = routing->states[d];
    MutexLock dl(&ds->mu);
    MutexLock l(&mu_);
    // Past the memtable budget by one at most: this memtable is about to be flushed, and
    // not rotating it could stop Level 0 (and so writes) for good. Not merged: that would
    // put the same old versions back into the active memtable.
    if (!ds->retired && ds->active->num_entries() > 0) {
      RotateLocked(d, ds, /*no_merge=*/true);
    }
  }
  mu_.Lock();
}

void RangeEngine::BackgroundWork() {
  MutexLock lock(&mu_);
  // Runs one flush (of a copy: the queue may change meanwhile).
  auto flush = [&](ImmutableMemTable imm) REQUIRES(mu_) {
    bg_.flushing_ids.insert(imm.mem->id());
    const auto pending = bg_.pending_outputs.insert(versions_.state().next_file_number());
    mu_.Unlock();
    Status s = FlushOne(imm);
    mu_.Lock();
    bg_.pending_outputs.erase(pending);
    bg_.flushing_ids.erase(imm.mem->id());
    StopIfFencedLocked(s);
    if (s.ok()) {
      bg_.flush_backoff = Backoff(kBackgroundRetry);
    } else if (life_.bg_error.ok()) {
      // The memtable stays immutable and readable; a StoC that failed is left out of
      // placement for a while, so the retry goes elsewhere.
      ++stats_.flush_failures;
      bg_.last_flush_error = s;
      const auto delay = bg_.flush_backoff.Next();
      bg_.flush_retry_at = MonoNow() + delay;
      LOG(WARNING) << "range " << options_.range_id << ": flush failed (retry in "
                   << delay.count() << " ms): " << s.ToString();
    }
    cv_.NotifyAll();
  };
  // (A hand-off stops background work: what runs may finish, nothing new starts.)
  while (!life_.shutting_down && life_.bg_error.ok() && !life_.migration.handed_off) {
    const MonoTime now = MonoNow();
    const ImmutableMemTable* next_flush = NextFlushLocked();
    const bool flush_due = next_flush != nullptr;
    const bool flush_now = flush_due && now >= bg_.flush_retry_at;
    // Flushes come first, but a second concurrent flush only when no compaction is
    // waiting: else a steady stream of flushes would starve Level 0.
    if (flush_now && bg_.flushing_ids.empty()) {
      flush(*next_flush);
      continue;
    }
    std::optional<CompactionPick> pick;
    if (now >= bg_.compaction_retry_at && (pick = PickCompactionLocked())) {
      picker_.Start(*pick);
      const auto pending = bg_.pending_outputs.insert(versions_.state().next_file_number());
      lock.Unlock();
      Status s;
      if (!MoveTableDown(pick->level, pick->inputs, pick->next, &s)) {
        s = RunCompaction(pick->level, pick->inputs, pick->next);
      }
      lock.Lock();
      bg_.pending_outputs.erase(pending);
      picker_.Finish(*pick);
      StopIfFencedLocked(s);
      if (s.ok()) {
        bg_.compaction_backoff = Backoff(kBackgroundRetry);
      } else if (life_.bg_error.ok()) {
        ++stats_.compaction_failures;
        const auto delay = bg_.compaction_backoff.Next();
        bg_.compaction_retry_at = MonoNow() + delay;
        LOG(WARNING) << "range " << options_.range_id << ": compaction failed (retry in "
                     << delay.count() << " ms): " << s.ToString();
      }
      cv_.NotifyAll();
      continue;
    }
    if (flush_now) {
      flush(*next_flush);  // (picking does not change the queue)
      continue;
    }
    if (!bg_.rotate_for_compaction.empty()) {
      RotateForCompaction();
      continue;
    }
    if (flush_due) {
      // Only a flush waiting out its backoff: wait here (woken early by shutdown).
      cv_.WaitUntil(&lock, bg_.flush_retry_at);
      continue;
    }
    break;
  }
  --bg_.running;
  cv_.NotifyAll();
}

// ---- Flushes --------------------------------------------------------------------------

// What a FlushJob changes in the engine. Each method that touches engine state takes mu_
// itself (FlushForced reads an atomic and takes none); the job holds no engine lock when it
// calls them, and MergeTarget runs under the Drange's lock, which comes first.
class RangeEngine::FlushHost final : public FlushJob::Host {
 public:
  explicit FlushHost(RangeEngine* engine) : e_(engine), started_(MonoNow()) {}

  std::vector<lsm::SequenceNumber> LiveSnapshots() override EXCLUDES(e_->mu_) {
    MutexLock lock(&e_->mu_);
    return e_->LiveSnapshots();
  }
  uint64_t NewFileNumber() override EXCLUDES(e_->mu_) { return e_->NewFileNumber(); }
  bool FlushForced() override { return e_->forcing_flush_.load() > 0; }

  std::shared_ptr<MemTable> MergeTarget(const ImmutableMemTable& imm) override
      EXCLUDES(e_->mu_) {
    MutexLock lock(&e_->mu_);
    for (const ImmutableMemTable& other : e_->immutables_) {
      if (other.mem != imm.mem && other.state == imm.state) return other.mem;
    }
    return nullptr;
  }

  void DropEmpty(const ImmutableMemTable& imm) override EXCLUDES(e_->mu_) {
    MutexLock lock(&e_->mu_);
    e_->EraseImmutableLocked(imm.mem);
    e_->live_.erase(std::remove(e_->live_.begin(), e_->live_.end(), imm.mem), e_->live_.end());
    e_->mid_to_table_.erase(imm.mem->id());
    e_->RebuildRangeIndexLocked();
    // Every logged write is added to its memtable, so an empty one has no log records;
    // its id is marked obsolete all the same (a log may have been opened; and without logs
    // a migration's destination must not adopt a copy of it).
    e_->ids_.unrecorded_obsolete.push_back(imm.mem->id());
    if (e_->options_.log != nullptr) e_->DropLogsNowOrLaterLocked({imm.mem->id()});
  }

  void FinishMerge(const ImmutableMemTable& imm, const std::shared_ptr<MemTable>& target,
                   uint64_t entries, bool relogged) override EXCLUDES(e_->mu_) {
    MutexLock lock(&e_->mu_);
    e_->EraseImmutableLocked(imm.mem);
    e_->live_.erase(std::remove(e_->live_.begin(), e_->live_.end(), imm.mem), e_->live_.end());
    e_->RebuildRangeIndexLocked();  // the range index lets go of it too
    e_->mid_to_table_.erase(imm.mem->id());
    // Its versions are logged in the target's log now. (Kept without logs too: a
    // migration's destination must not adopt a copy of it once the target is flushed.)
    std::vector<uint64_t>& into = e_->ids_.absorbed[target->id()];
    into.push_back(imm.mem->id());
    auto own = e_->ids_.absorbed.find(imm.mem->id());
    if (own != e_->ids_.absorbed.end()) {
      into.insert(into.end(), own->second.begin(), own->second.end());
      e_->ids_.absorbed.erase(own);
    }
    if (e_->options_.log == nullptr || relogged) {
      e_->ids_.unrecorded_obsolete.push_back(imm.mem->id());
      if (e_->options_.log != nullptr) e_->DropLogsNowOrLaterLocked({imm.mem->id()});
    }
    ++e_->stats_.memtable_merges;
    e_->stats_.merged_entries += entries;
  }

  Status InstallTables(const ImmutableMemTable& imm, std::vector<lsm::TableMeta> tables) override
      EXCLUDES(e_->mu_) {
    MutexLock lock(&e_->mu_);
    VersionEdit edit;
    lsm::SequenceNumber last = e_->versions_.state().last_sequence();
    for (lsm::TableMeta& m : tables) {
      last = std::max(last, m.largest_sequence);
      edit.new_tables.emplace_back(0, std::move(m));
    }
    edit.last_sequence = last;
    edit.next_file_number = e_->versions_.state().next_file_number();
    // The memtable's log (and those of memtables merged into it) become obsolete with it
    // (recorded without logs too: see LogAndApplyLocked).
    edit.obsolete_logs.push_back(imm.mem->id());
    auto absorbed = e_->ids_.absorbed.find(imm.mem->id());
    if (absorbed != e_->ids_.absorbed.end()) {
      edit.obsolete_logs.insert(edit.obsolete_logs.end(), absorbed->second.begin(),
                                absorbed->second.end());
    }
    // (On failure LogAndApplyLocked deleted the tables if it could start a new MANIFEST
    // without the edit; else the range stopped and they stay.)
    NOVA_RETURN_NOT_OK(e_->LogAndApplyLocked(&edit));
    e_->ids_.absorbed.erase(imm.mem->id());
    // The memtable is now in a table: readers stop seeing it in the same step.
    e_->EraseImmutableLocked(imm.mem);
    e_->live_.erase(std::remove(e_->live_.begin(), e_->live_.end(), imm.mem), e_->live_.end());
    e_->RebuildRangeIndexLocked();
    if (edit.new_tables.empty()) {
      e_->mid_to_table_.erase(imm.mem->id());
    } else {
      e_->mid_to_table_[imm.mem->id()] =
          MidLocation{nullptr, edit.new_tables.front().second.number};
    }
    ++e_->stats_.flushes;
    e_->stats_.level_compaction_micros[0] += static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::microseconds>(MonoNow() - started_).count());
    for (const auto& [level, m] : edit.new_tables) {
      e_->stats_.level_write_bytes[0] += m.layout.file_size;
    }
    return Status::OK();
  }

 private:
  RangeEngine* const e_;  // must outlive this
  const MonoTime started_;  // when the flush job began (leveldb.stats' Level-0 time)
};

Status RangeEngine::FlushOne(const ImmutableMemTable& imm) {
  FlushJobOptions fo;
  fo.range_id = options_.range_id;
  fo.icmp = &icmp_;
  fo.store = store_;
  fo.table.block_size = options_.block_bytes;
  fo.table.num_data_fragments = options_.scatter_width;
  fo.table.filter_policy = table_ctx_.filter_policy.get();
  fo.merge_threshold_keys = options_.drange_merge_threshold_keys;
  fo.memtable_bytes = options_.memtable_bytes;
  fo.log = options_.log;
  fo.lookup_index = options_.lookup_index ? &index_ : nullptr;
  fo.sequences = &seq_;
  FlushHost host(this);
  FlushJob job(fo, &host, imm);
  return job.Run();
}

}  // namespace nova::ltc
