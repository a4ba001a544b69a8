// RangeEngine: rebuilding memtables from their logs at Open (paper 4.4.5, docs/durability.md).
//
// Which logs are replayed: every log the range's MemtableLog still has, except those the
// MANIFEST marks obsolete (their memtables are in tables, or were re-logged elsewhere):
// replaying one of those could put an old version in a memtable above newer versions in
// Levels 1+, where a Get would take it. Obsolete logs found are dropped (listed, never read).
//
// How: the logs are parsed in parallel (recovery_threads); each record's entries carry
// the id of the memtable they went to, so every live log becomes one rebuilt memtable with
// its own id (its log stays its log until it is flushed). An entry of a batch whose copy in
// its own memtable's log was torn is taken from another log's copy; an entry whose memtable
// has no log left (never created, or lost) goes to the memtable of the log it was found in,
// which then also makes that id obsolete when it flushes. Duplicates (batch copies) are
// dropped by sequence number. Parsing stops at the first torn or damaged record of a log.
//
// A live migration's destination (range_engine_migration.cc) passes the ids of the copied
// memtables: their logs are listed, not read, and stay until those memtables flush; their
// entries found in other logs are dropped (the copies hold them).
//
// The rebuilt memtables become the oldest immutable memtables of the Drange holding their
// smallest key, never merged, flushed first; the range index covers them by their key
// interval; the lookup index starts empty and fills on misses.
//
// A clean close (CloseCleanly, at a clean shutdown) flushes every memtable and then
// records every memtable id handed out so far obsolete. Recovery needs LogCs to vouch for
// their listings only because a log with acknowledged writes may be on the silent ones; a
// range whose MANIFEST says every log is obsolete has none to miss, so its next Open does
// not wait for them (a whole cluster stopped cleanly comes back although its memory LogCs
// restarted empty). The state cannot outlive that next Open: it records new live memtable
// ids above the obsolete ones before the range serves.
#include <algorithm>
#include <atomic>
#include <map>
#include <set>
#include <thread>

#include <glog/logging.h>

#include "common/clock.h"
#include "ltc/engine/log_record.h"
#include "ltc/engine/memtable_log.h"
#include "ltc/engine/range_engine.h"

namespace nova::ltc {

namespace {

// How often CloseCleanly logs while it waits for writes in flight.
constexpr std::chrono::seconds kCloseWaitLog{10};

// Runs fn(i) for i in [0, n) on up to `threads` threads.
void ParallelFor(size_t n, int threads, const std::function<void(size_t)>& fn) {
  const size_t workers = std::min<size_t>(n, static_cast<size_t>(std::max(1, threads)));
  if (workers <= 1) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<size_t> next{0};
  std::vector<std::thread> pool;
  pool.reserve(workers);
  for (size_t w = 0; w < workers; ++w) {
    pool.emplace_back([&] {
      for (size_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) fn(i);
    });
  }
  for (auto& t : pool) t.join();
}

}  // namespace

Status RangeEngine::RebuildFromLogsLocked(
    bool new_range, const std::set<uint64_t>& copied,
    std::vector<std::shared_ptr<MemTable>>* rebuilt,
    std::unordered_map<uint64_t, std::vector<uint64_t>>* absorbed,
    lsm::SequenceNumber* max_sequence) {
  const MonoTime start = MonoNow();
  const int threads = std::max(1, options_.recovery_threads);
  std::vector<MemtableLog::Recovered> logs;
  // Neither the logs of copied memtables nor obsolete ones are read (only listed).
  const ManifestState& manifest = versions_.state();
  auto to_read = [&](uint64_t m) { return copied.count(m) == 0 && !manifest.LogIsObsolete(m); };
  NOVA_RETURN_NOT_OK_PREPEND(options_.log->ReadAll(threads, new_range, to_read, &logs),
                             "reading the range's logs");
  stats_.recovery_read_micros = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(MonoNow() - start).count());

  // Obsolete logs go; those of copied memtables stay (unread) until they flush; the rest
  // are replayed.
  std::vector<uint64_t> obsolete;
  std::vector<MemtableLog::Recovered> live;
  for (auto& l : logs) {
    ids_.next = std::max(ids_.next, l.memtable + 1);
    if (versions_.state().LogIsObsolete(l.memtable)) {
      obsolete.push_back(l.memtable);
    } else if (copied.count(l.memtable) == 0) {
      if (!l.read) {
        return Status::Corruption("log of memtable " + std::to_string(l.memtable) +
                                  " was listed but not read");
      }
      live.push_back(std::move(l));
    }
  }
  logs.clear();
  if (!obsolete.empty()) options_.log->Drop(obsolete);
  stats_.recovery_obsolete_logs = obsolete.size();
  std::sort(live.begin(), live.end(),
            [](const auto& a, const auto& b) { return a.memtable < b.memtable; });

  // Parse every live log (entries point into its bytes).
  std::vector<std::vector<ltc::LogEntry>> parsed(live.size());
  std::vector<ltc::LogParseResult> results(live.size());
  ParallelFor(live.size(), threads,
              [&](size_t i) { results[i] = ltc::ParseLogRecords(live[i].bytes, &parsed[i]); });

  // Where each entry goes: its own memtable if that has a live log, else (no log left) the
  // memtable of the first log it was found in; never a memtable whose log is obsolete.
  std::map<uint64_t, size_t> index_of;  // memtable id -> its log's index in `live`
  for (size_t i = 0; i < live.size(); ++i) index_of[live[i].memtable] = i;
  std::vector<std::vector<const ltc::LogEntry*>> targets(live.size());
  std::map<uint64_t, size_t> adopted;  // logless memtable id -> the log that took it
  for (size_t i = 0; i < live.size(); ++i) {
    stats_.recovered_log_bytes += results[i].valid_bytes;
    stats_.recovery_ignored_bytes += results[i].ignored_bytes;
    LOG_IF(WARNING, results[i].ignored_bytes > 0)
        << "range " << options_.range_id << ": log of memtable " << live[i].memtable
        << ": replayed " << results[i].records << " records (" << results[i].valid_bytes
        << " bytes), ignored " << results[i].ignored_bytes << " bytes after "
        << results[i].stop_reason;
    for (const ltc::LogEntry& e : parsed[i]) {
      // An id named by an entry may belong to a memtable whose own log was never created
      // (or is lost): it must not be handed out again either.
      ids_.next = std::max(ids_.next, e.memtable + 1);
      if (versions_.state().LogIsObsolete(e.memtable)) continue;
      if (copied.count(e.memtable) != 0) continue;  // the copy holds it
      auto own = index_of.find(e.memtable);
      size_t t = i;
      if (own != index_of.end()) {
        t = own->second;
      } else {
        auto [it, fresh] = adopted.emplace(e.memtable, i);
        t = it->second;
        if (fresh) (*absorbed)[live[t].memtable].push_back(e.memtable);
      }
      targets[t].push_back(&e);
    }
  }

  // Build the memtables in parallel, each from its entries in sequence order.
  rebuilt->assign(live.size(), nullptr);
  std::vector<lsm::SequenceNumber> max_seq(live.size(), 0);
  std::vector<uint64_t> counts(live.size(), 0);
  ParallelFor(live.size(), threads, [&](size_t i) {
    auto& entries = targets[i];
    std::sort(entries.begin(), entries.end(),
              [](const auto* a, const auto* b) { return a->sequence < b->sequence; });
    entries.erase(
        std::unique(entries.begin(), entries.end(),
                    [](const auto* a, const auto* b) { return a->sequence == b->sequence; }),
        entries.end());
    auto mem = std::make_shared<MemTable>(&icmp_, live[i].memtable);
    for (const ltc::LogEntry* e : entries) {
      mem->Add(e->sequence,
               e->type == 0 ? lsm::kTypeDeletion : lsm::kTypeValue,
               leveldb::Slice(e->key.data(), e->key.size()),
               leveldb::Slice(e->value.data(), e->value.size()));
      max_seq[i] = std::max<lsm::SequenceNumber>(max_seq[i], e->sequence);
    }
    counts[i] = entries.size();
    (*rebuilt)[i] = std::move(mem);
  });
  *max_sequence = 0;
  for (size_t i = 0; i < live.size(); ++i) {
    *max_sequence = std::max(*max_sequence, max_seq[i]);
    stats_.recovered_entries += counts[i];
  }
  // A log that holds nothing to replay (only failed writes' records were cut, say) still
  // becomes an empty memtable: the flush path drops it and its log.
  stats_.recovered_logs = live.size();
  stats_.recovery_micros = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(MonoNow() - start).count());
  LOG_IF(INFO, !live.empty() || !obsolete.empty())
      << "range " << options_.range_id << ": rebuilt " << live.size() << " memtables ("
      << stats_.recovered_entries << " entries, " << stats_.recovered_log_bytes
      << " log bytes) in " << stats_.recovery_micros / 1000 << " ms with " << threads
      << " threads; dropped " << obsolete.size() << " obsolete logs";
  return Status::OK();
}

Status RangeEngine::CloseCleanly() {
  {
    MutexLock lock(&mu_);
    if (!life_.opened) return Status::IllegalState("range is not open");
    if (life_.migration.handed_off) return HandedOffStatus();
    if (!life_.bg_error.ok()) return life_.bg_error.Prepend("range stopped");
    life_.closing = true;
    write_gate_.blocked = true;
  }
  // Every write from here on is refused (PrepareWrite); one that passed the gate holds a
  // Drange lock until it has its sequence, and is waited for with the sequences. (What a
  // writer does past FinishWrite is not waited for: its RetireActive or reorganization sees
  // life_.closing and hands out no memtable id.)
  SyncWithWritersHoldingDranges();
  const lsm::SequenceNumber last = seq_.last_assigned();
  while (!seq_.WaitVisible(last, Deadline::After(kCloseWaitLog))) {
    LOG(WARNING) << "range " << options_.range_id << ": closing waits for the writes up to "
                 << "sequence " << last << " (visible " << seq_.visible() << ")";
  }
  NOVA_RETURN_NOT_OK(FlushAll());
  MutexLock lock(&mu_);
  if (life_.migration.handed_off) return HandedOffStatus();
  if (!life_.bg_error.ok()) return life_.bg_error.Prepend("range stopped");
  // No write can come any more, so what FlushAll left is what there is: the active
  // memtables, empty (their logs hold nothing; a failed write's record that reached a log
  // is in its memtable too, so it would show here).
  bool empty = immutables_.empty() && ids_.absorbed.empty();
  for (const auto& m : live_) empty = empty && m->num_entries() == 0;
  if (!empty) return Status::IllegalState("memtables left after the closing flush");
  VersionEdit e;
  e.obsolete_log_ranges.emplace_back(versions_.state().log_floor(), ids_.next);
  NOVA_RETURN_NOT_OK_PREPEND(LogAndApplyLocked(&e), "recording the clean close");
  LOG(INFO) << "range " << options_.range_id << " closed cleanly: every memtable flushed, "
            << "every log obsolete";
  return Status::OK();
}

void RangeEngine::AddLogBookkeepingLocked(VersionEdit* edit) {
  edit->obsolete_logs.insert(edit->obsolete_logs.end(), ids_.unrecorded_obsolete.begin(),
                             ids_.unrecorded_obsolete.end());
  // Below every live memtable, and below every memtable merged into a live one whose log
  // is kept until that one flushes (its re-logging failed).
  uint64_t floor = ids_.next;
  for (const auto& m : live_) floor = std::min(floor, m->id());
  for (const auto& [into, ids] : ids_.absorbed) {
    for (uint64_t id : ids) floor = std::min(floor, id);
  }
  edit->log_floor = floor;
  edit->next_memtable_id = ids_.next;
}

void RangeEngine::DropLogsLocked(const VersionEdit& edit) {
  // The edit recorded them: they need no record any more (whether or not the drop works,
  // a surviving log is recognized as obsolete).
  std::erase_if(ids_.unrecorded_obsolete, [&](uint64_t id) {
    return std::find(edit.obsolete_logs.begin(), edit.obsolete_logs.end(), id) !=
           edit.obsolete_logs.end();
  });
  if (options_.log != nullptr && !edit.obsolete_logs.empty()) {
    DropLogsNowOrLaterLocked(edit.obsolete_logs);
  }
}

void RangeEngine::DropLogsNowOrLaterLocked(const std::vector<uint64_t>& memtables) {
  if (life_.migration.handed_off) {
    // Nothing is written while handed off; the ids are recorded obsolete already, so a log
    // left behind (the range closes before EndMigrationOut) is dropped at the next Open.
    life_.migration.deferred_drops.insert(life_.migration.deferred_drops.end(), memtables.begin(),
                                     memtables.end());
    return;
  }
  options_.log->Drop(memtables);
}

}  // namespace nova::ltc
