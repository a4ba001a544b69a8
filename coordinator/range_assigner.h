// Range assignment policy of the coordinator's leader: a pure function from the published
// configuration and the live members to the next configuration, so it is tested without
// ZooKeeper.
//
// Policy (docs/coordinator.md, "Assignment"):
//  1. Every live member (registered under members/<kind>) joins the configuration's member
//     set of its kind with its main address; a changed address is updated.
//  2. Unassigned ranges are given to live LTCs once at least `min_ltcs` are live: when no
//     range is assigned yet, in contiguous blocks (omega = ranges / LTCs, the first
//     ranges % LTCs LTCs take one more), so scans stay on few LTCs; otherwise each goes to
//     the live LTC owning the fewest ranges (ties: smallest id).
//  3. Failover (paper 4.4.5): the ranges of the LTCs the caller names in `failed` (LTCs
//     whose ZooKeeper node is gone, for as long as the coordinator's failover delay) go to
//     the live LTCs, one at a time to the one owning the fewest (ties: smallest id). Their
//     new owners recover them from the MANIFEST and the logs; the owner epoch bumps, so the
//     old owner, if it is only paused, is fenced off (docs/coordinator.md). A range with a
//     running live migration goes to the migration's destination (live, not draining).
//  4. LTCs the caller names in `removed` (gone for longer than the grace period) that are
//     not live and own nothing leave the configuration; one that comes back later registers
//     as a new, empty member. Other members stay.
//  5. A live LTC registered with an incarnation the configuration does not name yet (it
//     restarted, maybe while its previous process still runs, paused): the configuration
//     records it and bumps the owner epoch of each range the LTC owns, so the previous
//     process is fenced off. An LTC leaving `ltcs` leaves `ltc_incarnations` too.
//  6. Live migrations (ClusterConfig::migrations, queued by nova_admin): one whose range
//     changed owner or owner epoch since it was queued, whose source or destination is not
//     live, or whose destination is draining is dropped, and so is a running one older than
//     `migration_timeout_ms`; then queued ones start, in order, while fewer than
//     `max_concurrent_migrations` run. The destination LTC finishes one itself.
//  7. StoCs the caller names in `removed_stocs` (gone for longer than the StoC grace period)
//     that are not live leave `stocs`, so the LTCs repair the table copies they held onto
//     the others (docs/coordinator.md, "StoCs coming and going"); but only while a strict
//     majority of the StoCs in the configuration (after rule 1) are live
//     (StocRemovalHoldReason), so a cluster-wide outage (a power cut, a partition of the
//     coordinator) never strips the configuration, and never the last StoC. One that comes
//     back later joins again by rule 1 as a new member. `draining_stocs` is left as it is:
//     a removed StoC that was draining stays draining (a restarted process with its id is
//     never used for new data), one that was not comes back usable. Rule 1 never touches
//     `draining_stocs` either: a draining StoC that registers is listed but stays draining.
//  Every owner change bumps the range's owner_epoch (RangeAssignment::SetOwner).
//
// Thread safety: stateless functions.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "coordinator/cluster_config.h"

namespace nova::coordinator {

// Live members by kind: id -> main address.
struct LiveMembers {
  std::map<std::string, std::string> ltcs;
  // The incarnation each live LTC registered with (absent: an LTC that publishes none).
  std::map<std::string, std::string> ltc_incarnations;
  std::map<std::string, std::string> logcs;
  std::map<std::string, std::string> stocs;
};

struct AssignmentOptions {
  // Do not assign before this many LTCs are live, so that a cluster started with N LTCs
  // spreads its ranges over all N rather than giving everything to the first to register.
  size_t min_ltcs = 1;
  // Dead LTCs whose ranges move to live LTCs now (rule 3), and ones to drop (rule 4).
  std::set<std::string> failed;
  std::set<std::string> removed;
  // Dead StoCs to drop from `stocs` (rule 7).
  std::set<std::string> removed_stocs;
  // Live migrations (ClusterConfig::migrations, rule 6): at most this many run at once; a
  // running one started more than migration_timeout_ms before now_ms (wall clock, ms) is
  // dropped, which rolls it back (the source serves on).
  size_t max_concurrent_migrations = 4;
  uint64_t migration_timeout_ms = 60000;
  uint64_t now_ms = 0;
};

// Why rule 6 drops migration `m` of `config` now ("" if it does not).
std::string MigrationDropReason(const ClusterConfig& config, const LiveMembers& live,
                                const AssignmentOptions& options, const RangeMigration& m);

// Why rule 7 removes no StoC now ("" if it may): fewer than a strict majority of the StoCs
// of `config` plus the live ones joining are live.
std::string StocRemovalHoldReason(const ClusterConfig& config, const LiveMembers& live);

// Returns the next configuration (same epoch as `current`: the caller bumps it when it
// publishes), or nullopt when the policy changes nothing.
// REQUIRES: current.Validate().ok().
std::optional<ClusterConfig> PlanNextConfig(const ClusterConfig& current, const LiveMembers& live,
                                            const AssignmentOptions& options);

// ---- Scaling (nova_admin; docs/coordinator.md, "Moving ranges") ----------------------
//
// A move gives a range to another LTC with its owner epoch bumped: the new owner fences the
// range at the StoCs and LogCs and recovers it from the MANIFEST and the logs, while the old
// owner, on the same new configuration, closes it (its writes from then on are refused).
// That loses nothing only when the memtables are logged: every planner below refuses with
// InvalidArgument when the cluster's log_mode is none (or unset).

struct RangeMove {
  uint32_t range = 0;
  std::string from;
  std::string to;
};

// The next configuration and the moves it makes (same epoch as `current`: the caller bumps
// it when it publishes). No moves: nothing to do (already there / already balanced).
struct MovePlan {
  ClusterConfig next;
  std::vector<RangeMove> moves;
};

// How a planned move is carried out.
enum class MoveMode {
  // The owner changes in the plan's configuration at once: the new owner recovers the range
  // from the MANIFEST and replays its logs (refused with log_mode=none).
  kReopen,
  // The plan's configuration queues a live migration per move (ClusterConfig::migrations)
  // and leaves the owners as they are: the destination copies the memtables from the
  // source and takes the range over itself (any log mode). A range already migrating to
  // the same LTC keeps its entry; one queued elsewhere is re-aimed; InvalidArgument if one
  // is running elsewhere.
  kLive,
};

// Moves range `range` to live LTC `to`. NotFound for an unknown range; InvalidArgument if
// `to` is not a live LTC of the configuration or is draining, or the log mode is none.
Result<MovePlan> PlanMigration(const ClusterConfig& current, const LiveMembers& live,
                               uint32_t range, const std::string& to,
                               MoveMode mode = MoveMode::kReopen);
// Marks `ltc` draining and moves each of its ranges to the live, not draining LTC owning
// the fewest. InvalidArgument if `ltc` is not in the configuration, no other LTC can take
// its ranges, or the log mode is none.
Result<MovePlan> PlanDrain(const ClusterConfig& current, const LiveMembers& live,
                           const std::string& ltc, MoveMode mode = MoveMode::kReopen);
// Evens out the ranges over the live, not draining LTCs: while the most loaded owns two or
// more than the least loaded, its highest-numbered range moves to the least loaded (ties:
// smallest id). Ranges of LTCs that are not live are left to failover. InvalidArgument if
// the log mode is none and a move is needed.
Result<MovePlan> PlanRebalance(const ClusterConfig& current, const LiveMembers& live,
                               MoveMode mode = MoveMode::kReopen);

// ---- StoCs (nova_admin drain-stoc / remove-stoc; docs/coordinator.md, "StoCs coming and
// going") --------------------------------------------------------------------------------

// Marks StoC `stoc` draining (ClusterConfig::draining_stocs): the LTCs place nothing new on
// it and move the table copies it holds elsewhere. Returns the next configuration (same
// epoch: the caller bumps it; equal to `current` if already draining, or already removed
// from `stocs` while draining). InvalidArgument if `stoc` is not in the configuration, or
// no other StoC that is not draining would remain to take its copies.
Result<ClusterConfig> PlanStocDrain(const ClusterConfig& current, const std::string& stoc);
// PlanStocDrain, and `stoc` leaves `stocs` (it stays in draining_stocs, so a process with its
// id that still runs or restarts is listed again by rule 1 but never used for new data).
// REQUIRES (not checked here): every LTC reported the StoC drained (LtcStatus).
Result<ClusterConfig> PlanStocRemoval(const ClusterConfig& current, const std::string& stoc);

}  // namespace nova::coordinator
