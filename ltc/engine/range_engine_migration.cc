// RangeEngine: live migration of the range to another LTC (range_migration.h,
// docs/coordinator.md "Live migration"), both sides.
//
// Source: BeginMigrationOut makes the active memtables immutable and holds flushes, so the
// memtables stay in memory while the destination copies them; ExportImmutables hands them
// out once no write adds to them any more; Handoff stops writes and background work and
// hands out every memtable and the id bookkeeping; EndMigrationOut undoes it all.
//   1. Writes stop without losing one: Handoff sets write_gate_.blocked, then takes and
//      lets go of every Drange lock (SyncWithWritersHoldingDranges). A writer gets its
//      sequence number under its Drange locks and checks the gate after taking them, so
//      every write is either refused or has its sequence before Handoff reads the last one
//      assigned; Handoff then waits until that sequence is visible (every such write is in
//      its memtable).
//   2. Copied memtables do not change: merges are off for the whole migration
//      (forcing_flush_), a merge job that started before waits out (flushing_at_begin), and
//      an immutable memtable takes no writes once its sealed sequence is visible.
//   3. Nothing depends on the hold: a memtable flushed after it was copied is marked
//      obsolete by the flush's MANIFEST edit (with or without logs), and the destination,
//      which fences the StoCs before it reads the MANIFEST, drops its copy.
//
// Destination: Open adopts the copied memtables the MANIFEST does not mark obsolete exactly
// like memtables rebuilt from logs (oldest immutables of their Drange, never merged, flushed
// first); their logs are listed but not read, and stay the range's logs until they flush.
#include <glog/logging.h>

#include <algorithm>
#include <set>

#include "ltc/engine/memtable_log.h"
#include "ltc/engine/range_engine.h"

namespace nova::ltc {

namespace {
// A write or a hand-off waiting this long for writes to finish logs a warning (and waits on).
constexpr std::chrono::seconds kWriteWaitLog{10};
}  // namespace

Status RangeEngine::HandedOffStatus() const {
  return Status::Fenced("range " + std::to_string(options_.range_id) +
                        " handed off to its new owner");
}

// ---- Source ---------------------------------------------------------------------------

Status RangeEngine::BeginMigrationOut() {
  {
    MutexLock lock(&mu_);
    if (!life_.opened) return Status::IllegalState("range is not open");
    if (life_.shutting_down) return Status::IllegalState("engine shutting down");
    if (!life_.bg_error.ok()) return life_.bg_error.Prepend("range stopped");
    if (life_.migration.out) return Status::OK();
    life_.migration.out = true;
    life_.migration.flushing_at_begin = bg_.flushing_ids;
    // Before any rotation (as FlushAll): a merge that has not looked at it yet flushes
    // instead, and one already merging into an active memtable did so under the Drange's
    // lock, before the rotation below.
    forcing_flush_.fetch_add(1);
  }
  // Reorganizations wait from now on (InstallLayout), so the routing changes at most once
  // more (an install that was already under way).
  std::shared_ptr<const DrangeRouting> routing;
  do {
    routing = router_.Current();
    for (size_t d = 0; d < routing->states.size(); ++d) {
      const std::shared_ptr<DrangeState>& ds = routing->states[d];
      MutexLock dl(&ds->mu);
      MutexLock lock(&mu_);
      if (!ds->retired && ds->active->num_entries() > 0) {
        RotateLocked(static_cast<uint32_t>(d), ds, /*no_merge=*/true);
      }
    }
  } while (router_.Current() != routing);
  return Status::OK();
}

bool RangeEngine::WaitForFlushesBeforeMigrationLocked(MutexLock* lock) {
  cv_.Wait(lock, [&]() REQUIRES(mu_) {
    if (life_.shutting_down) return true;
    for (uint64_t id : life_.migration.flushing_at_begin) {
      if (bg_.flushing_ids.count(id) != 0) return false;
    }
    return true;
  });
  life_.migration.flushing_at_begin.clear();  // none of them runs any more
  return !life_.shutting_down;
}

Status RangeEngine::ExportImmutables(std::vector<MigratedMemtable>* out) {
  out->clear();
  std::vector<std::shared_ptr<MemTable>> mems;
  lsm::SequenceNumber sealed = 0;
  {
    MutexLock lock(&mu_);
    if (!life_.migration.out) return Status::IllegalState("no migration out in progress");
    if (!WaitForFlushesBeforeMigrationLocked(&lock)) {
      return Status::Aborted("engine shutting down");
    }
    for (const ImmutableMemTable& imm : immutables_) {
      mems.push_back(imm.mem);
      sealed = std::max(sealed, imm.sealed);
    }
  }
  // Every write into them has a sequence <= sealed: once that is visible, all are in.
  while (!seq_.WaitVisible(sealed, Deadline::After(kWriteWaitLog))) {
    LOG(WARNING) << "range " << options_.range_id << ": exporting memtables waits for the "
                 << "writes up to sequence " << sealed << " (visible " << seq_.visible() << ")";
  }
  std::sort(mems.begin(), mems.end(),
            [](const auto& a, const auto& b) { return a->id() < b->id(); });
  for (auto& m : mems) out->push_back(MigratedMemtable{std::move(m)});
  return Status::OK();
}

void RangeEngine::SyncWithWritersHoldingDranges() {
  std::shared_ptr<const DrangeRouting> routing;
  do {
    routing = router_.Current();
    for (const auto& ds : routing->states) MutexLock dl(&ds->mu);
  } while (router_.Current() != routing);
}

Status RangeEngine::Handoff(MigratedState* out) {
  *out = MigratedState();
  NOVA_RETURN_NOT_OK(BeginMigrationOut());
  {
    MutexLock lock(&mu_);
    if (!life_.bg_error.ok()) return life_.bg_error.Prepend("range stopped");
    // Unlike StopIfFencedLocked: on_fenced is not called (the range is not lost, it moves;
    // EndMigrationOut may still take it back).
    life_.migration.handed_off = true;
    write_gate_.blocked = true;
    cv_.NotifyAll();  // FlushAll and WaitForCompactions return
  }
  SyncWithWritersHoldingDranges();  // (the file comment, 1)
  const lsm::SequenceNumber last = seq_.last_assigned();
  while (!seq_.WaitVisible(last, Deadline::After(kWriteWaitLog))) {
    LOG(WARNING) << "range " << options_.range_id << ": hand-off waits for the writes up to "
                 << "sequence " << last << " (visible " << seq_.visible() << ")";
  }
  MutexLock lock(&mu_);
  if (!WaitForFlushesBeforeMigrationLocked(&lock)) return Status::Aborted("engine shutting down");
  // A relocation or sweep that started before the migration out installs nothing now and
  // deletes nothing the destination may reference once it returns (Maintenance, 1).
  cv_.Wait(&lock, [&]() REQUIRES(mu_) { return !bg_.maint.busy || life_.shutting_down; });
  if (life_.shutting_down) return Status::Aborted("engine shutting down");
  std::vector<std::shared_ptr<MemTable>> mems = live_;
  std::sort(mems.begin(), mems.end(),
            [](const auto& a, const auto& b) { return a->id() < b->id(); });
  for (auto& m : mems) out->memtables.push_back(MigratedMemtable{std::move(m)});
  out->complete = true;
  out->next_memtable_id = ids_.next;
  out->absorbed = ids_.absorbed;
  out->unrecorded_obsolete = ids_.unrecorded_obsolete;
  out->last_sequence = seq_.last_assigned();
  LOG(INFO) << "range " << options_.range_id << " handed off: " << out->memtables.size()
            << " memtables, last sequence " << out->last_sequence;
  return Status::OK();
}

void RangeEngine::EndMigrationOut() {
  MutexLock lock(&mu_);
  if (!life_.migration.out) return;
  const bool was_handed_off = life_.migration.handed_off;
  life_.migration.out = false;
  life_.migration.handed_off = false;
  life_.migration.flushing_at_begin.clear();
  forcing_flush_.fetch_sub(1);
  write_gate_.blocked =
      !life_.opened || life_.shutting_down || life_.closing || !life_.bg_error.ok();
  if (options_.log != nullptr && !life_.migration.deferred_drops.empty()) {
    options_.log->Drop(life_.migration.deferred_drops);
  }
  life_.migration.deferred_drops.clear();
  LOG(INFO) << "range " << options_.range_id << ": migration out ended"
            << (was_handed_off ? " after the hand-off" : "") << "; the range serves on";
  ScheduleWork();  // the held flushes
  cv_.NotifyAll();
}

bool RangeEngine::handed_off() const {
  MutexLock lock(&mu_);
  return life_.migration.handed_off;
}

// ---- Destination ----------------------------------------------------------------------

Status RangeEngine::AdoptMigratedLocked(std::vector<std::shared_ptr<MemTable>>* adopted,
                                        std::set<uint64_t>* copied,
                                        lsm::SequenceNumber* last_sequence) {
  adopted->clear();
  copied->clear();
  *last_sequence = 0;
  const std::shared_ptr<const MigratedState>& m = options_.migrated;
  if (m == nullptr) return Status::OK();
  size_t obsolete = 0;
  for (const MigratedMemtable& mm : m->memtables) {
    if (mm.mem == nullptr) return Status::InvalidArgument("a migrated memtable is missing");
    if (std::string(mm.mem->comparator()->user_comparator()->Name()) !=
        options_.comparator->Name()) {
      return Status::InvalidArgument("migrated memtable " + std::to_string(mm.mem->id()) +
                                     " is ordered by another comparator");
    }
    if (!copied->insert(mm.mem->id()).second) {
      return Status::InvalidArgument("migrated memtable " + std::to_string(mm.mem->id()) +
                                     " given twice");
    }
    ids_.next = std::max(ids_.next, mm.mem->id() + 1);
    // Flushed (or dropped) at the source after it was copied: the MANIFEST has it.
    if (versions_.state().LogIsObsolete(mm.mem->id())) {
      ++obsolete;
      continue;
    }
    adopted->push_back(mm.mem);
    *last_sequence = std::max(*last_sequence, mm.mem->largest_sequence());
    stats_.migrated_entries += mm.mem->num_entries();
  }
  std::sort(adopted->begin(), adopted->end(),
            [](const auto& a, const auto& b) { return a->id() < b->id(); });
  if (m->complete) {
    ids_.next = std::max(ids_.next, m->next_memtable_id);
    *last_sequence = std::max(*last_sequence, m->last_sequence);
    for (const auto& [into, ids] : m->absorbed) {
      // A flushed memtable's edit made the logs of those merged into it obsolete too.
      if (versions_.state().LogIsObsolete(into) || copied->count(into) == 0) continue;
      std::vector<uint64_t>& mine = ids_.absorbed[into];
      mine.insert(mine.end(), ids.begin(), ids.end());
      copied->insert(ids.begin(), ids.end());  // their entries are in `into`
    }
    for (uint64_t id : m->unrecorded_obsolete) {
      copied->insert(id);  // merged into a copied memtable, or empty
      if (!versions_.state().LogIsObsolete(id)) ids_.unrecorded_obsolete.push_back(id);
    }
  }
  stats_.migrated_memtables = adopted->size();
  LOG(INFO) << "range " << options_.range_id << ": adopting " << adopted->size()
            << " migrated memtables (" << stats_.migrated_entries << " entries; " << obsolete
            << " flushed at the source since copied), "
            << (m->complete ? "after a hand-off" : "without a hand-off");
  return Status::OK();
}

}  // namespace nova::ltc
