// RangeEngine: the maintenance thread: relocating the copies of tables off evacuated StoCs
// (repair after a StoC is lost, drain of a StoC) and sweeping garbage table files
// (lsm::TableStore, "Relocation and sweeping").
//
// Why a thread of its own rather than a task of pool_: relocations are paced (a token
// bucket waits between tables) and sweeps are periodic; on pool_ either would hold one of
// the compaction threads while it waits, or need a timer the pool does not have.
//
// How a relocation stays correct with the rest of the engine:
//   1. It is installed by a MANIFEST edit that deletes and adds the table at its level
//      (version_edit.h), with mu_ held, only if the table's handle is still the current
//      version's at that level (a compaction may have removed it meanwhile: it is never
//      brought back, and its new copies are deleted) and no migration out lasts.
//   2. Readers of the old handle (versions pinned by iterators and Gets, a compaction's
//      inputs, an offloaded job reading the old locations) keep reading the old copies:
//      they are deleted only when the old handle goes (TableHandle::MarkReplaced). New
//      reads go through the new handle, whose source is opened from the new metadata (the
//      table cache is per handle; block cache entries are the same bytes either way); the
//      lookup index finds Level-0 tables by number in the current version.
//   3. Compactions pick tables by number, so a replaced table under compaction stays busy,
//      and the compaction's edit deletes it by number whichever metadata is current.
// How a sweep spares what is not garbage:
//   4. `live` holds the metadata of every table handle alive (TableRegistry: in any version
//      a reader holds, not only the current one), so nothing still read is deleted.
//   5. `unreferenced_below` is the smallest pending output (Background::pending_outputs),
//      else the next table number, taken with mu_ held together with `live`: every table
//      written from then on, or installed by a job already running, is numbered at least
//      that. Relocations write under numbers of tables already in `live`, and never run
//      during a sweep (same thread).
//   6. A table with two handles alive (a relocation's old one still read) has two sets of
//      copies a single TableMeta cannot describe: it is left out of `live` and the bound
//      lowered to its number, so the sweep does not touch it.
#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include <glog/logging.h>

#include "common/lsm/table_meta.h"
#include "ltc/engine/range_engine.h"

namespace nova::ltc {

namespace {

// How long the maintenance thread sleeps with nothing due (it is woken earlier by any
// change of the engine's state: flushes, compactions, requests, shutdown).
constexpr auto kMaintenanceIdleWait = std::chrono::seconds(1);
// The token bucket holds at most this much time's worth of bytes (a burst after a pause).
constexpr auto kRelocationBurst = std::chrono::seconds(1);

}  // namespace

void RangeEngine::SetEvacuatedStocs(std::set<uint32_t> stocs) {
  MutexLock lock(&mu_);
  if (stocs == bg_.maint.evacuated) return;
  LOG(INFO) << "range " << options_.range_id << ": " << stocs.size()
            << " StoCs to move copies off";
  bg_.maint.evacuated = std::move(stocs);
  bg_.maint.evacuation_floor = versions_.state().next_file_number();
  bg_.maint.retries.clear();  // a new configuration: tables that failed may succeed now
  cv_.NotifyAll();
}

std::map<uint32_t, uint64_t> RangeEngine::CopiesPerStoc() const {
  std::map<uint32_t, uint64_t> out;
  // Every handle alive (a leaf lock): copies of a replaced or compacted table still read
  // by someone are still on their StoCs.
  for (const auto& [number, metas] : table_ctx_.registry.Snapshot()) {
    std::set<std::pair<uint32_t, uint64_t>> seen;  // a copy shared by two handles once
    for (const lsm::TableMeta& m : metas) {
      auto add = [&out, &seen](const lsm::FragmentLocation& l) {
        if (l.size != 0 && seen.insert({l.stoc_id, l.file_id}).second) out[l.stoc_id]++;
      };
      for (const auto& replicas : m.fragments) {
        for (const auto& l : replicas) add(l);
      }
      for (const auto& l : m.filter) add(l);
      for (const auto& l : m.parity) add(l);
    }
  }
  return out;
}

void RangeEngine::RequestSweep() {
  MutexLock lock(&mu_);
  bg_.maint.sweep_requested = true;
  cv_.NotifyAll();
}

void RangeEngine::CountAtRiskLocked(RelocationProgress* p) const {
  p->copies_at_risk = 0;
  p->tables_at_risk = 0;
  if (bg_.maint.evacuated.empty()) return;
  auto on = [this](uint32_t stoc) REQUIRES(mu_) { return bg_.maint.evacuated.count(stoc) != 0; };
  for (const auto& level : versions_.current()->levels) {
    for (const TableRef& t : level) {
      const size_t n = lsm::CopiesOn(t->meta(), on);
      p->copies_at_risk += n;
      p->tables_at_risk += n > 0 ? 1 : 0;
    }
  }
}

RelocationProgress RangeEngine::GetRelocationProgress() const {
  MutexLock lock(&mu_);
  RelocationProgress p;
  CountAtRiskLocked(&p);
  p.tables_relocated = bg_.maint.relocated_tables;
  p.bytes_relocated = bg_.maint.relocated_bytes;
  p.failures = bg_.maint.failures;
  p.sweeps = bg_.maint.sweeps;
  p.files_swept = bg_.maint.swept_files;
  p.idle = !bg_.maint.busy && p.copies_at_risk == 0 && !bg_.maint.sweep_requested;
  p.writes_from_before = !bg_.pending_outputs.empty() &&
                         *bg_.pending_outputs.begin() <= bg_.maint.evacuation_floor;
  return p;
}

TableRef RangeEngine::NextRelocationLocked(int* level, MonoTime* retry_at) const {
  auto on = [this](uint32_t stoc) REQUIRES(mu_) { return bg_.maint.evacuated.count(stoc) != 0; };
  const MonoTime now = MonoNow();
  const std::shared_ptr<Version> v = versions_.current();
  for (int l = 0; l < lsm::kNumLevels; ++l) {
    for (const TableRef& t : v->levels[l]) {
      if (lsm::CopiesOn(t->meta(), on) == 0) continue;
      auto r = bg_.maint.retries.find(t->meta().number);
      if (r != bg_.maint.retries.end() && r->second.at > now) {
        *retry_at = std::min(*retry_at, r->second.at);
        continue;
      }
      *level = l;
      return t;
    }
  }
  return nullptr;
}

void RangeEngine::MaintenanceLoop() {
  MutexLock lock(&mu_);
  while (!life_.shutting_down) {
    const MonoTime now = MonoNow();
    MonoTime wake = now + kMaintenanceIdleWait;
    // A stopped range (fenced, or its MANIFEST unknown) writes nothing more; a migration
    // out holds both kinds of work (Maintenance, 1).
    if (life_.bg_error.ok() && !life_.migration.out) {
      const bool periodic =
          options_.sweep_interval.count() > 0 && now >= bg_.maint.next_sweep_at;
      if ((bg_.maint.sweep_requested || periodic) && now >= bg_.maint.sweep_retry_at) {
        SweepLocked();
        continue;
      }
      if (bg_.maint.sweep_requested) wake = std::min(wake, bg_.maint.sweep_retry_at);
      if (options_.sweep_interval.count() > 0) wake = std::min(wake, bg_.maint.next_sweep_at);
      if (!bg_.maint.evacuated.empty()) {
        int level = 0;
        MonoTime retry_at = MonoTime::max();
        if (TableRef t = NextRelocationLocked(&level, &retry_at)) {
          if (now >= bg_.maint.relocate_not_before) {
            RelocateOneLocked(std::move(t), level);
            continue;
          }
          wake = std::min(wake, bg_.maint.relocate_not_before);
        } else {
          wake = std::min(wake, retry_at);
        }
      }
    }
    cv_.WaitUntil(&lock, wake);
  }
}

void RangeEngine::RelocationFailedLocked(uint64_t number, const Status& s) {
  ++bg_.maint.failures;
  Maintenance::Retry& r = bg_.maint.retries[number];
  const auto delay = r.backoff.Next();
  r.at = MonoNow() + delay;
  LOG(WARNING) << "range " << options_.range_id << ": relocating table " << number
               << " failed (retry in " << delay.count() << " ms): " << s.ToString();
}

void RangeEngine::RelocateOneLocked(TableRef t, int level) {
  const std::set<uint32_t> evacuated = bg_.maint.evacuated;
  auto must_move = [&evacuated](uint32_t stoc) { return evacuated.count(stoc) != 0; };
  const lsm::TableMeta& old = t->meta();
  bg_.maint.busy = true;
  mu_.Unlock();
  uint64_t bytes = 0;
  Result<lsm::TableMeta> moved = store_->RelocateTable(old, must_move, &bytes);
  mu_.Lock();
  // Charged whatever the outcome: the bytes were copied.
  if (options_.relocation_bytes_per_sec > 0 && bytes > 0) {
    const auto cost = std::chrono::duration_cast<MonoTime::duration>(
        std::chrono::duration<double>(static_cast<double>(bytes) /
                                      static_cast<double>(options_.relocation_bytes_per_sec)));
    bg_.maint.relocate_not_before =
        std::max(bg_.maint.relocate_not_before, MonoNow() - kRelocationBurst) + cost;
  }
  std::optional<lsm::TableMeta> drop;  // new copies to delete (not installed)
  if (!moved.ok()) {
    StopIfFencedLocked(moved.status());  // fenced: the range stops, and this work with it
    if (!moved.status().IsFenced()) RelocationFailedLocked(old.number, moved.status());
  } else if (moved.value() == old) {
    // Nothing selected (the set changed meanwhile) or the store moved nothing: if copies
    // are still at risk, back off rather than ask again at once.
    if (lsm::CopiesOn(old, [this](uint32_t s) REQUIRES(mu_) {
          return bg_.maint.evacuated.count(s) != 0;
        }) > 0) {
      RelocationFailedLocked(old.number, Status::IllegalState("the store moved no copy"));
    }
  } else {
    const auto& tables = versions_.current()->levels[level];
    const bool current = std::find(tables.begin(), tables.end(), t) != tables.end();
    if (!current || life_.shutting_down || !life_.bg_error.ok() || life_.migration.out) {
      // Compacted away (never brought back) or moved down a level (relocated again from
      // there later), or the range stops or moves: not installed.
      drop = std::move(moved.value());
    } else {
      VersionEdit edit;
      edit.deleted_tables.emplace_back(level, old.number);
      edit.new_tables.emplace_back(level, std::move(moved.value()));
      Status s = LogAndApplyLocked(&edit);
      if (s.ok()) {
        ++bg_.maint.relocated_tables;
        bg_.maint.relocated_bytes += bytes;
        bg_.maint.retries.erase(old.number);
      } else if (life_.bg_error.ok()) {
        // (LogAndApplyLocked deleted the new copies with the edit.)
        RelocationFailedLocked(old.number, s);
      }
    }
  }
  mu_.Unlock();
  if (drop) {
    Status d = store_->DeleteCopiesNotIn(*drop, old);
    LOG_IF(WARNING, !d.ok()) << "range " << options_.range_id << ": deleting the new copies "
                             << "of table " << old.number << " (not installed): "
                             << d.ToString();
  }
  // The old handle may go here (deleting its moved copies), without mu_.
  t.reset();
  mu_.Lock();
  bg_.maint.busy = false;
  cv_.NotifyAll();
}

void RangeEngine::SweepLocked() {
  bg_.maint.sweep_requested = false;
  if (options_.sweep_interval.count() > 0) {
    bg_.maint.next_sweep_at = MonoNow() + options_.sweep_interval;
  }
  // (The file comment, 4-6.)
  uint64_t below = versions_.state().next_file_number();
  if (!bg_.pending_outputs.empty()) below = std::min(below, *bg_.pending_outputs.begin());
  std::map<uint64_t, lsm::TableMeta> live;
  for (auto& [number, metas] : table_ctx_.registry.Snapshot()) {
    if (metas.size() == 1) {
      live.emplace(number, std::move(metas.front()));
    } else {
      below = std::min(below, number);
    }
  }
  bg_.maint.busy = true;
  mu_.Unlock();
  Result<uint64_t> swept = store_->SweepTableFiles(live, below);
  live.clear();
  mu_.Lock();
  bg_.maint.busy = false;
  cv_.NotifyAll();
  if (swept.ok()) {
    ++bg_.maint.sweeps;
    bg_.maint.swept_files += swept.value();
    bg_.maint.sweep_backoff = Backoff(kMaintenanceRetry);
    LOG_IF(INFO, swept.value() > 0) << "range " << options_.range_id << ": swept "
                                    << swept.value() << " garbage table files";
    return;
  }
  StopIfFencedLocked(swept.status());
  if (swept.status().IsFenced()) return;
  bg_.maint.sweep_requested = true;
  const auto delay = bg_.maint.sweep_backoff.Next();
  bg_.maint.sweep_retry_at = MonoNow() + delay;
  LOG(WARNING) << "range " << options_.range_id << ": sweep failed (retry in " << delay.count()
               << " ms): " << swept.status().ToString();
}

}  // namespace nova::ltc
