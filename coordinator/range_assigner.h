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
//     old owner, if it is only paused, is fenced off (docs/coordinator.md).
//  4. LTCs the caller names in `removed` (gone for longer than the grace period) that are
//     not live and own nothing leave the configuration; one that comes back later registers
//     as a new, empty member. Other members stay.
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
