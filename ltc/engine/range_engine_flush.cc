// RangeEngine: background work: scheduling flushes and compactions, their backoff after
// failures, and flushing one immutable memtable into a Level-0 table. (Compactions are in
// range_engine_compaction.cc, merging small memtables back in range_engine_merge.cc.)
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
  if (shutting_down_ || bg_.running >= std::max(1, options_.compaction_threads)) return;
  ++bg_.running;
  Status s = pool_.Submit([this] { BackgroundWork(); });
  if (!s.ok()) --bg_.running;
}

const RangeEngine::Immutable* RangeEngine::NextFlushLocked() const {
  // Oldest first, and within a Drange strictly in order: a memtable waits while an older
  // one of its Drange is pending or being flushed (the small-memtable merge moves versions
  // into the next one; Level-0 compaction relies on a Drange's tables arriving in order).
  // Memtables of different Dranges flush in parallel, up to the background threads.
  std::vector<const DrangeState*> waiting;
  for (const Immutable& imm : immutables_) {
    const bool blocked =
        std::find(waiting.begin(), waiting.end(), imm.state.get()) != waiting.end();
    if (!blocked && bg_.flushing_ids.count(imm.mem->id()) == 0) return &imm;
    waiting.push_back(imm.state.get());
  }
  return nullptr;
}

void RangeEngine::EraseImmutableLocked(const std::shared_ptr<MemTable>& mem) {
  auto it = std::find_if(immutables_.begin(), immutables_.end(),
                         [&](const Immutable& i) { return i.mem == mem; });
  DCHECK(it != immutables_.end());
  if (it != immutables_.end()) immutables_.erase(it);
}

void RangeEngine::RotateForCompaction() {
  const std::set<uint32_t> wanted = std::move(bg_.rotate_for_compaction);
  bg_.rotate_for_compaction.clear();
  const std::vector<std::shared_ptr<DrangeState>> states = dranges_;
  mu_.Unlock();
  for (uint32_t d : wanted) {
    if (d >= states.size()) continue;
    std::lock_guard dl(states[d]->mu);
    MutexLock l(&mu_);
    // Past the memtable budget by one at most: this memtable is about to be flushed, and
    // not rotating it could stop Level 0 (and so writes) for good. Not merged: that would
    // put the same old versions back into the active memtable.
    if (!states[d]->retired && states[d]->active->num_entries() > 0) {
      RotateLocked(d, states[d].get(), /*no_merge=*/true);
    }
  }
  mu_.Lock();
}

void RangeEngine::BackgroundWork() {
  MutexLock lock(&mu_);
  // Runs one flush (of a copy: the queue may change meanwhile).
  auto flush = [&](Immutable imm) REQUIRES(mu_) {
    bg_.flushing_ids.insert(imm.mem->id());
    mu_.Unlock();
    Status s = FlushOne(imm);
    mu_.Lock();
    bg_.flushing_ids.erase(imm.mem->id());
    if (s.ok()) {
      bg_.flush_backoff = Backoff(kBackgroundRetry);
    } else if (bg_error_.ok()) {
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
  while (!shutting_down_ && bg_error_.ok()) {
    const MonoTime now = MonoNow();
    const Immutable* next_flush = NextFlushLocked();
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
      lock.Unlock();
      Status s = RunCompaction(pick->level, pick->inputs, pick->next);
      lock.Lock();
      picker_.Finish(*pick);
      if (s.ok()) {
        bg_.compaction_backoff = Backoff(kBackgroundRetry);
      } else if (bg_error_.ok()) {
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

Status RangeEngine::FlushOne(const Immutable& imm) {
  // Writes that took a sequence before the rotation may still be adding to the memtable.
  while (!seq_.WaitVisible(imm.sealed, Deadline::After(kSealWaitLog))) {
    LOG(WARNING) << "range " << options_.range_id << ": flush of memtable " << imm.mem->id()
                 << " still waits for writes up to sequence " << imm.sealed << " (visible "
                 << seq_.visible() << ")";
  }
  if (imm.mem->num_entries() == 0) {
    // Nothing to write (e.g. a reorganization retired an empty memtable): just drop it.
    MutexLock lock(&mu_);
    EraseImmutableLocked(imm.mem);
    live_.erase(std::remove(live_.begin(), live_.end(), imm.mem), live_.end());
    mid_to_table_.erase(imm.mem->id());
    RebuildRangeIndexLocked();
    if (options_.log != nullptr) {
      // Every logged write is added to its memtable, so an empty one has no log records;
      // its id is marked obsolete all the same (a log may have been opened).
      ids_.unrecorded_obsolete.push_back(imm.mem->id());
      options_.log->Drop({imm.mem->id()});
    }
    return Status::OK();
  }
  if (MaybeMergeIntoActive(imm)) return Status::OK();
  lsm::TableBuildOptions opts;
  opts.block_size = options_.block_bytes;
  opts.num_data_fragments = options_.scatter_width;
  opts.filter_policy = table_ctx_.filter_policy.get();
  lsm::TableSink sink(&icmp_, opts, store_, [this] { return NewFileNumber(); }, imm.drange);
  lsm::CompactionMergeOptions mo;
  mo.icmp = &icmp_;
  {
    MutexLock lock(&mu_);
    mo.snapshots = LiveSnapshots();
  }
  mo.smallest_snapshot_or_max =
      mo.snapshots.empty() ? lsm::kMaxSequenceNumber : mo.snapshots.front();
  mo.max_output_bytes = UINT64_MAX / 2;  // a memtable becomes one table
  std::unique_ptr<leveldb::Iterator> it(imm.mem->NewIterator());
  lsm::CompactionStats cs;
  Status s = lsm::RunCompactionMerge(it.get(), mo, &sink, &cs);
  if (!s.ok()) {
    sink.Discard();
    return s.Prepend("flushing memtable " + std::to_string(imm.mem->id()));
  }
  std::vector<lsm::TableMeta> outputs = std::move(sink.outputs());
  MutexLock lock(&mu_);
  VersionEdit edit;
  lsm::SequenceNumber last = versions_.state().last_sequence();
  for (lsm::TableMeta& m : outputs) {
    last = std::max(last, m.largest_sequence);
    edit.new_tables.emplace_back(0, std::move(m));
  }
  edit.last_sequence = last;
  edit.next_file_number = versions_.state().next_file_number();
  if (options_.log != nullptr) {
    // The memtable's log (and those of memtables merged into it) become obsolete with it.
    edit.obsolete_logs.push_back(imm.mem->id());
    auto absorbed = ids_.absorbed.find(imm.mem->id());
    if (absorbed != ids_.absorbed.end()) {
      edit.obsolete_logs.insert(edit.obsolete_logs.end(), absorbed->second.begin(),
                                absorbed->second.end());
    }
  }
  s = LogAndApplyLocked(&edit);
  if (!s.ok()) return s;
  ids_.absorbed.erase(imm.mem->id());
  // The memtable is now in a table: readers stop seeing it in the same step.
  EraseImmutableLocked(imm.mem);
  live_.erase(std::remove(live_.begin(), live_.end(), imm.mem), live_.end());
  RebuildRangeIndexLocked();
  if (edit.new_tables.empty()) {
    mid_to_table_.erase(imm.mem->id());
  } else {
    mid_to_table_[imm.mem->id()] = MidLocation{nullptr, edit.new_tables.front().second.number};
  }
  ++stats_.flushes;
  return Status::OK();
}

}  // namespace nova::ltc
