#include "coordinator/range_assigner.h"

#include <algorithm>
#include <utility>

namespace nova::coordinator {

namespace {

void MergeMembers(const std::map<std::string, std::string>& live,
                  std::map<std::string, std::string>* members) {
  for (const auto& [id, address] : live) (*members)[id] = address;
}

// Rule 6: live migrations. A migration goes stale (dropped) once its range changed owner or
// owner epoch since it was queued (failover, a restart, a reopen move), once its source or
// destination is not live, or once its destination is draining; a running one is dropped
// after the timeout. Dropping one rolls it back: the source serves on (an LTC that handed
// the range off serves it again once no migration of it is left, docs/coordinator.md).
// Then queued ones start, in order, while fewer than the maximum run.
void AdvanceMigrations(const LiveMembers& live, const AssignmentOptions& options,
                       ClusterConfig* next) {
  std::erase_if(next->migrations, [&](const RangeMigration& m) {
    return !MigrationDropReason(*next, live, options, m).empty();
  });
  size_t running = 0;
  for (const RangeMigration& m : next->migrations) running += m.running ? 1 : 0;
  for (RangeMigration& m : next->migrations) {
    if (running >= std::max<size_t>(1, options.max_concurrent_migrations)) break;
    if (m.running) continue;
    m.running = true;
    m.started_ms = options.now_ms;
    running++;
  }
}

// Rule 7: dead StoCs leave `stocs`, while a majority is live and never the last one. The
// majority is counted before any removal, so a step removes no more than the dead minority.
void RemoveDeadStocs(const LiveMembers& live, const AssignmentOptions& options,
                     ClusterConfig* next) {
  if (options.removed_stocs.empty() || !StocRemovalHoldReason(*next, live).empty()) return;
  for (const std::string& id : options.removed_stocs) {
    if (next->stocs.size() <= 1) break;
    if (live.stocs.count(id) == 0) next->stocs.erase(id);
  }
}

}  // namespace

std::string StocRemovalHoldReason(const ClusterConfig& config, const LiveMembers& live) {
  size_t members = config.stocs.size();
  size_t alive = 0;
  for (const auto& [id, address] : config.stocs) alive += live.stocs.count(id);
  for (const auto& [id, address] : live.stocs) members += config.stocs.count(id) == 0 ? 1 : 0;
  alive += members - config.stocs.size();  // the joining ones are live
  if (2 * alive > members) return "";
  return "only " + std::to_string(alive) + " of the " + std::to_string(members) +
         " StoCs are live, not a majority (a cluster-wide outage is never repaired by "
         "removing StoCs; the others must come back first)";
}

std::string MigrationDropReason(const ClusterConfig& config, const LiveMembers& live,
                                const AssignmentOptions& options, const RangeMigration& m) {
  const RangeAssignment* r = config.Range(m.range);
  if (r == nullptr) return "no such range";
  if (r->ltc != m.from || r->owner_epoch != m.from_epoch) {
    return "the range changed owner or owner epoch since it was queued (now LTC " + r->ltc +
           " at owner epoch " + std::to_string(r->owner_epoch) + ", queued at " +
           std::to_string(m.from_epoch) + ")";
  }
  if (live.ltcs.count(m.from) == 0) return "the source LTC " + m.from + " is not live";
  if (live.ltcs.count(m.to) == 0 || config.ltcs.count(m.to) == 0) {
    return "the destination LTC " + m.to + " is not live";
  }
  if (config.draining.count(m.to) > 0) return "the destination LTC " + m.to + " is draining";
  if (m.running && options.now_ms > m.started_ms &&
      options.now_ms - m.started_ms > options.migration_timeout_ms) {
    return "it ran longer than " + std::to_string(options.migration_timeout_ms) + " ms";
  }
  return "";
}

std::optional<ClusterConfig> PlanNextConfig(const ClusterConfig& current, const LiveMembers& live,
                                            const AssignmentOptions& options) {
  ClusterConfig next = current;
  MergeMembers(live.ltcs, &next.ltcs);
  MergeMembers(live.logcs, &next.logcs);
  MergeMembers(live.stocs, &next.stocs);

  for (const auto& [id, incarnation] : live.ltc_incarnations) {
    if (incarnation.empty() || live.ltcs.count(id) == 0) continue;
    auto known = next.ltc_incarnations.find(id);
    if (known != next.ltc_incarnations.end() && known->second == incarnation) continue;
    next.ltc_incarnations[id] = incarnation;
    for (RangeAssignment& r : next.ranges) {
      if (r.ltc == id) r.BumpOwnerEpoch();
    }
  }
  // Draining LTCs take no ranges, and leave the set when they leave the configuration.
  for (auto it = next.draining.begin(); it != next.draining.end();) {
    it = next.ltcs.count(*it) == 0 ? next.draining.erase(it) : std::next(it);
  }
  LiveMembers takers = live;
  for (const std::string& id : next.draining) takers.ltcs.erase(id);

  std::vector<size_t> unassigned;
  for (size_t i = 0; i < next.ranges.size(); i++) {
    const std::string& owner = next.ranges[i].ltc;
    // A failed owner's ranges are given out like unassigned ones (but never all at once as
    // contiguous blocks: the others keep theirs).
    if (owner.empty() || (options.failed.count(owner) > 0 && live.ltcs.count(owner) == 0)) {
      unassigned.push_back(i);
    }
  }
  const size_t n_ltcs = takers.ltcs.size();
  const bool all_unassigned =
      std::all_of(next.ranges.begin(), next.ranges.end(),
                  [](const RangeAssignment& r) { return r.ltc.empty(); });
  // min_ltcs holds back the first spread only: failover goes to whoever is live.
  if (!unassigned.empty() && n_ltcs > 0 && (!all_unassigned || n_ltcs >= options.min_ltcs)) {
    std::vector<std::string> ids;
    for (const auto& [id, address] : takers.ltcs) ids.push_back(id);
    if (all_unassigned) {
      // Contiguous blocks: LTC k gets omega ranges, plus one for the first (R % L).
      const size_t omega = next.ranges.size() / n_ltcs;
      const size_t extra = next.ranges.size() % n_ltcs;
      size_t r = 0;
      for (size_t k = 0; k < n_ltcs; k++) {
        const size_t count = omega + (k < extra ? 1 : 0);
        for (size_t j = 0; j < count; j++) next.ranges[r++].SetOwner(ids[k]);
      }
    } else {
      std::map<std::string, size_t> load;
      for (const std::string& id : ids) load[id] = 0;
      for (const RangeAssignment& r : next.ranges) {
        auto it = load.find(r.ltc);
        if (it != load.end()) it->second++;
      }
      // Ranges of a failed LTC are scattered one at a time, so its load spreads evenly. A
      // range it was migrating goes to the migration's destination, which may hold a
      // complete copy of its memtables (the hand-off done) and opens it with them: its
      // commit finds the range already its own at the next owner epoch (range_migrator.h).
      for (size_t i : unassigned) {
        const RangeMigration* m = next.MigrationOf(next.ranges[i].id);
        if (m != nullptr && m->running && m->from == next.ranges[i].ltc &&
            m->from_epoch == next.ranges[i].owner_epoch && load.count(m->to) > 0) {
          next.ranges[i].SetOwner(m->to);
          load[m->to]++;
          continue;
        }
        // std::map iterates ids in order, so min_element breaks ties by smallest id.
        auto best = std::min_element(load.begin(), load.end(), [](const auto& a, const auto& b) {
          return a.second < b.second;
        });
        next.ranges[i].SetOwner(best->first);
        best->second++;
      }
    }
  }
  for (const std::string& id : options.removed) {
    if (live.ltcs.count(id) == 0 && next.RangesOf(id).empty()) next.ltcs.erase(id);
  }
  RemoveDeadStocs(live, options, &next);
  for (auto it = next.ltc_incarnations.begin(); it != next.ltc_incarnations.end();) {
    it = next.ltcs.count(it->first) == 0 ? next.ltc_incarnations.erase(it) : std::next(it);
  }
  AdvanceMigrations(live, options, &next);
  if (next == current) return std::nullopt;
  return next;
}

namespace {

Status CheckLogged(const ClusterConfig& c) {
  auto mode = c.settings.find("log_mode");
  if (mode == c.settings.end() || mode->second == "none") {
    return Status::InvalidArgument(
        "moving a range needs logged memtables (the cluster's log_mode is " +
        std::string(mode == c.settings.end() ? "unset, i.e. none" : "none") +
        "): its new owner recovers it from the MANIFEST and the logs, and without logs the "
        "old owner's memtables would be lost");
  }
  return Status::OK();
}

// Ranges owned per live, not draining LTC (zero for those owning none).
std::map<std::string, std::vector<size_t>> TakerLoads(const ClusterConfig& c,
                                                      const LiveMembers& live) {
  std::map<std::string, std::vector<size_t>> loads;
  for (const auto& [id, address] : live.ltcs) {
    if (c.ltcs.count(id) > 0 && c.draining.count(id) == 0) loads[id];
  }
  for (size_t i = 0; i < c.ranges.size(); ++i) {
    auto it = loads.find(c.ranges[i].ltc);
    if (it != loads.end()) it->second.push_back(i);
  }
  return loads;
}

void Move(MovePlan* plan, size_t index, const std::string& to) {
  RangeAssignment& r = plan->next.ranges[index];
  plan->moves.push_back(RangeMove{r.id, r.ltc, to});
  r.SetOwner(to);
}

// MoveMode::kLive: turns the plan's owner changes into queued migrations.
Status QueueMigrations(const ClusterConfig& current, MovePlan* plan) {
  for (const RangeMove& move : plan->moves) {
    RangeAssignment* r = plan->next.Range(move.range);
    const RangeAssignment* before = current.Range(move.range);
    r->ltc = before->ltc;
    r->owner_epoch = before->owner_epoch;
    RangeMigration* m = plan->next.MigrationOf(move.range);
    if (m != nullptr && m->to == move.to) continue;
    if (m != nullptr && m->running) {
      return Status::InvalidArgument("range " + std::to_string(move.range) +
                                     " is migrating to LTC " + m->to +
                                     " now: wait for it (nova_admin status shows it)");
    }
    if (m != nullptr) {
      m->to = move.to;
      continue;
    }
    plan->next.migrations.push_back(
        RangeMigration{move.range, before->ltc, move.to, before->owner_epoch, false, 0});
  }
  return Status::OK();
}

Result<MovePlan> Finish(const ClusterConfig& current, MovePlan plan, MoveMode mode) {
  if (mode == MoveMode::kLive) NOVA_RETURN_NOT_OK(QueueMigrations(current, &plan));
  return plan;
}

}  // namespace

Result<MovePlan> PlanMigration(const ClusterConfig& current, const LiveMembers& live,
                               uint32_t range, const std::string& to, MoveMode mode) {
  MovePlan plan{current, {}};
  auto r = std::find_if(plan.next.ranges.begin(), plan.next.ranges.end(),
                        [&](const RangeAssignment& a) { return a.id == range; });
  if (r == plan.next.ranges.end()) {
    return Status::NotFound("no range " + std::to_string(range) + " in cluster " + current.cluster);
  }
  if (current.ltcs.count(to) == 0 || live.ltcs.count(to) == 0) {
    return Status::InvalidArgument("LTC " + to + " is not a live member of the cluster " +
                                   "(nova_admin status lists them)");
  }
  if (current.draining.count(to) > 0) {
    return Status::InvalidArgument("LTC " + to + " is draining (nova_admin undrain-ltc first)");
  }
  if (r->ltc == to) {  // already there (a migration elsewhere would undo that)
    std::erase_if(plan.next.migrations, [&](const RangeMigration& m) { return m.range == range; });
    return plan;
  }
  if (mode == MoveMode::kReopen) NOVA_RETURN_NOT_OK(CheckLogged(current));
  Move(&plan, static_cast<size_t>(r - plan.next.ranges.begin()), to);
  return Finish(current, std::move(plan), mode);
}

Result<MovePlan> PlanDrain(const ClusterConfig& current, const LiveMembers& live,
                           const std::string& ltc, MoveMode mode) {
  if (current.ltcs.count(ltc) == 0) {
    return Status::InvalidArgument("LTC " + ltc + " is not in the configuration");
  }
  MovePlan plan{current, {}};
  plan.next.draining.insert(ltc);
  const std::vector<uint32_t> owned = current.RangesOf(ltc);
  if (owned.empty()) return plan;
  if (mode == MoveMode::kReopen) NOVA_RETURN_NOT_OK(CheckLogged(current));
  auto loads = TakerLoads(plan.next, live);
  if (loads.empty()) {
    return Status::InvalidArgument("no other live LTC can take the ranges of LTC " + ltc);
  }
  for (size_t i = 0; i < plan.next.ranges.size(); ++i) {
    if (plan.next.ranges[i].ltc != ltc) continue;
    auto best = std::min_element(loads.begin(), loads.end(), [](const auto& a, const auto& b) {
      return a.second.size() < b.second.size();
    });
    best->second.push_back(i);
    Move(&plan, i, best->first);
  }
  return Finish(current, std::move(plan), mode);
}

Result<ClusterConfig> PlanStocDrain(const ClusterConfig& current, const std::string& stoc) {
  if (current.stocs.count(stoc) == 0) {
    if (current.draining_stocs.count(stoc) > 0) return current;  // removed before
    return Status::InvalidArgument("StoC " + stoc + " is not in the configuration " +
                                   "(nova_admin status lists them)");
  }
  ClusterConfig next = current;
  next.draining_stocs.insert(stoc);
  const bool others = std::any_of(next.stocs.begin(), next.stocs.end(), [&](const auto& m) {
    return next.draining_stocs.count(m.first) == 0;
  });
  if (!others) {
    return Status::InvalidArgument("StoC " + stoc + " is the last StoC that is not draining: "
                                   "its table copies would have nowhere to go (start another "
                                   "StoC first, see nova_admin add-stoc, or undrain-stoc one)");
  }
  return next;
}

Result<ClusterConfig> PlanStocRemoval(const ClusterConfig& current, const std::string& stoc) {
  Result<ClusterConfig> next = PlanStocDrain(current, stoc);
  if (next.ok()) next->stocs.erase(stoc);
  return next;
}

Result<MovePlan> PlanRebalance(const ClusterConfig& current, const LiveMembers& live,
                               MoveMode mode) {
  MovePlan plan{current, {}};
  auto loads = TakerLoads(plan.next, live);
  if (loads.size() < 2) return plan;
  while (true) {
    auto most = std::max_element(loads.begin(), loads.end(), [](const auto& a, const auto& b) {
      return a.second.size() < b.second.size();
    });
    auto least = std::min_element(loads.begin(), loads.end(), [](const auto& a, const auto& b) {
      return a.second.size() < b.second.size();
    });
    if (most->second.size() < least->second.size() + 2) break;
    if (mode == MoveMode::kReopen) NOVA_RETURN_NOT_OK(CheckLogged(current));
    const size_t index = most->second.back();
    most->second.pop_back();
    least->second.push_back(index);
    Move(&plan, index, least->first);
  }
  return Finish(current, std::move(plan), mode);
}

}  // namespace nova::coordinator
