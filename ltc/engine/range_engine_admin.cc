// RangeEngine: administration for the leveldb::DB adapter (issue 19): approximate sizes of
// key spans, and manual compaction of a span (LevelDB's CompactRange) through the
// background compaction's machinery.
#include <algorithm>
#include <memory>
#include <set>
#include <string>

#include <glog/logging.h>

#include "ltc/engine/range_engine.h"

namespace nova::ltc {

bool RangeEngine::TableOverlapsSpan(const TableHandle& t, const KeyRange& span) const {
  const leveldb::Comparator* ucmp = options_.comparator;
  if (ucmp->Compare(lsm::ExtractUserKey(t.meta().largest), span.start) < 0) return false;
  return !span.end.has_value() ||
         ucmp->Compare(lsm::ExtractUserKey(t.meta().smallest), *span.end) < 0;
}

Result<uint64_t> RangeEngine::ApproximateSize(const KeyRange& span) {
  std::shared_ptr<Version> version;
  std::vector<std::shared_ptr<MemTable>> mems;
  {
    MutexLock lock(&mu_);
    if (!life_.opened) return Status::IllegalState("range is not open");
    version = versions_.current();  // pinned: its tables stay readable
    mems = live_;
  }
  const leveldb::Comparator* ucmp = options_.comparator;
  // Seek keys: the first entry of a user key is its newest version.
  const std::string start_key =
      lsm::MakeInternalKey(span.start, lsm::kMaxSequenceNumber, lsm::kTypeForSeek);
  const std::string end_key =
      span.end ? lsm::MakeInternalKey(*span.end, lsm::kMaxSequenceNumber, lsm::kTypeForSeek)
               : std::string();
  uint64_t total = 0;
  for (int level = 0; level < lsm::kNumLevels; ++level) {
    for (const TableRef& t : version->levels[level]) {
      if (!TableOverlapsSpan(*t, span)) continue;
      const uint64_t size = t->meta().layout.file_size;
      const bool from_start = ucmp->Compare(lsm::ExtractUserKey(t->meta().smallest),
                                            span.start) >= 0;
      const bool to_end =
          !span.end || ucmp->Compare(lsm::ExtractUserKey(t->meta().largest), *span.end) < 0;
      if (from_start && to_end) {
        total += size;
        continue;
      }
      uint64_t lo = 0, hi = size;
      Result<uint64_t> a = from_start ? Result<uint64_t>(lo) : t->ApproximateOffsetOf(start_key);
      Result<uint64_t> b = to_end ? Result<uint64_t>(hi) : t->ApproximateOffsetOf(end_key);
      if (!a.ok() || !b.ok()) {
        LOG(WARNING) << "range " << options_.range_id << ": approximate size of table "
                     << t->meta().number << " counted as half its size: "
                     << (a.ok() ? b.status() : a.status()).ToString();
        total += size / 2;
        continue;
      }
      lo = a.value();
      hi = b.value();
      total += hi > lo ? hi - lo : 0;
    }
  }
  // Memtables: a memtable the span covers counts its payload at once; one it partly
  // covers is walked over the span.
  constexpr uint64_t kInternalKeyTag = 8;  // sequence and type after each user key
  for (const auto& m : mems) {
    if (m->num_entries() == 0) continue;
    std::unique_ptr<leveldb::Iterator> it(m->NewIterator());
    it->SeekToFirst();
    if (!it->Valid()) continue;
    const bool from_start = ucmp->Compare(lsm::ExtractUserKey(it->key()), span.start) >= 0;
    it->SeekToLast();
    const bool to_end =
        !span.end || ucmp->Compare(lsm::ExtractUserKey(it->key()), *span.end) < 0;
    if (from_start && to_end) {
      total += m->data_bytes() + kInternalKeyTag * m->num_entries();
      continue;
    }
    for (it->Seek(start_key); it->Valid(); it->Next()) {
      if (span.end && ucmp->Compare(lsm::ExtractUserKey(it->key()), *span.end) >= 0) break;
      total += it->key().size() + it->value().size();
    }
  }
  return total;
}

Status RangeEngine::CompactRange(const KeyRange& span, const std::atomic<bool>* cancel) {
  // The memtables holding data now: not those later writes rotate meanwhile (LevelDB's
  // CompactRange also leaves what arrives after its flush in memtables or Level 0).
  NOVA_RETURN_NOT_OK_PREPEND(FlushMemtables(cancel, /*all=*/false),
                             "CompactRange: flushing the memtables");
  // LevelDB's rule: down to the deepest level holding data of the span, at least Level 1.
  // Looked at again after each level: a background compaction may have moved some of the
  // span's data deeper meanwhile.
  auto deepest = [&]() EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    int d = 1;
    for (int level = 1; level < lsm::kNumLevels; ++level) {
      for (const TableRef& t : versions_.current()->levels[level]) {
        if (TableOverlapsSpan(*t, span)) d = level;
      }
    }
    return d;
  };
  for (int level = 0; level < deepest(); ++level) {
    NOVA_RETURN_NOT_OK(CompactSpanAtLevel(level, span, cancel));
  }
  return Status::OK();
}

Status RangeEngine::CompactSpanAtLevel(int level, const KeyRange& span,
                                       const std::atomic<bool>* cancel) {
  MutexLock lock(&mu_);
  // The tables to move: those of the level holding keys of the span now. Tables arriving
  // later (flushes, background compactions) are left where they land, so the call ends.
  std::set<uint64_t> todo;
  for (const TableRef& t : versions_.current()->levels[level]) {
    if (TableOverlapsSpan(*t, span)) todo.insert(t->meta().number);
  }
  const uint64_t step_bytes = kManualStepTables * std::max<uint64_t>(options_.sstable_bytes, 1);
  for (;;) {
    if (!life_.opened) return Status::IllegalState("range is not open");
    if (life_.shutting_down) return Status::Aborted("CompactRange: the range is closing");
    if (cancel != nullptr && cancel->load()) return Status::Aborted("CompactRange cancelled");
    if (life_.migration.handed_off) return HandedOffStatus();
    if (!life_.bg_error.ok()) return life_.bg_error;
    bool wait = false;
    std::optional<CompactionPick> pick = picker_.PickManual(
        *versions_.current(), level, &todo, step_bytes,
        [this](const std::vector<TableRef>& cluster, const std::string& lo,
               const std::string& hi) REQUIRES(mu_) {
          return OlderVersionsInMemory(cluster, lo, hi);
        },
        &wait);
    if (!pick) {
      if (!wait) return Status::OK();
      // A background compaction holds a table (its end wakes us), or memtables with older
      // versions must be rotated and flushed first (the background thread does that).
      ScheduleWork();
      cv_.WaitFor(&lock, kManualStepRecheck);
      continue;
    }
    picker_.Start(*pick);
    const auto pending = bg_.pending_outputs.insert(versions_.state().next_file_number());
    lock.Unlock();
    Status s = RunCompaction(pick->level, pick->inputs, pick->next);
    lock.Lock();
    bg_.pending_outputs.erase(pending);
    picker_.Finish(*pick);
    StopIfFencedLocked(s);
    if (!s.ok() && life_.bg_error.ok()) ++stats_.compaction_failures;
    cv_.NotifyAll();
    ScheduleWork();  // the new shape may make background work due
    if (!s.ok()) {
      return s.Prepend("CompactRange: compacting Level " + std::to_string(level) + " into " +
                       std::to_string(level + 1));
    }
  }
}

}  // namespace nova::ltc
