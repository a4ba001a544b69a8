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
//  3. Nothing is ever taken away: the ranges of an LTC that is no longer live stay with it
//     and members stay in the configuration. Reassigning them is failover, which needs the
//     LTCs to recover ranges from MANIFEST + logs first (a later issue); moving ranges to a
//     newly joined LTC is migration (also later).
//
// Thread safety: stateless functions.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "coordinator/cluster_config.h"

namespace nova::coordinator {

// Live members by kind: id -> main address.
struct LiveMembers {
  std::map<std::string, std::string> ltcs;
  std::map<std::string, std::string> logcs;
  std::map<std::string, std::string> stocs;
};

struct AssignmentOptions {
  // Do not assign before this many LTCs are live, so that a cluster started with N LTCs
  // spreads its ranges over all N rather than giving everything to the first to register.
  size_t min_ltcs = 1;
};

// Returns the next configuration (same epoch as `current`: the caller bumps it when it
// publishes), or nullopt when the policy changes nothing.
// REQUIRES: current.Validate().ok().
std::optional<ClusterConfig> PlanNextConfig(const ClusterConfig& current, const LiveMembers& live,
                                            const AssignmentOptions& options);

// LTCs of `config` that own ranges but are not in `live` (for failover, later: today the
// coordinator only reports them).
std::vector<std::string> LostLtcs(const ClusterConfig& config, const LiveMembers& live);

}  // namespace nova::coordinator
