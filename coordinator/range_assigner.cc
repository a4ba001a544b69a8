#include "coordinator/range_assigner.h"

#include <algorithm>
#include <utility>

namespace nova::coordinator {

namespace {

void MergeMembers(const std::map<std::string, std::string>& live,
                  std::map<std::string, std::string>* members) {
  for (const auto& [id, address] : live) (*members)[id] = address;
}

}  // namespace

std::optional<ClusterConfig> PlanNextConfig(const ClusterConfig& current, const LiveMembers& live,
                                            const AssignmentOptions& options) {
  ClusterConfig next = current;
  MergeMembers(live.ltcs, &next.ltcs);
  MergeMembers(live.logcs, &next.logcs);
  MergeMembers(live.stocs, &next.stocs);

  std::vector<size_t> unassigned;
  for (size_t i = 0; i < next.ranges.size(); i++) {
    const std::string& owner = next.ranges[i].ltc;
    // A failed owner's ranges are given out like unassigned ones (but never all at once as
    // contiguous blocks: the others keep theirs).
    if (owner.empty() || (options.failed.count(owner) > 0 && live.ltcs.count(owner) == 0)) {
      unassigned.push_back(i);
    }
  }
  const size_t n_ltcs = live.ltcs.size();
  const bool all_unassigned =
      std::all_of(next.ranges.begin(), next.ranges.end(),
                  [](const RangeAssignment& r) { return r.ltc.empty(); });
  // min_ltcs holds back the first spread only: failover goes to whoever is live.
  if (!unassigned.empty() && n_ltcs > 0 && (!all_unassigned || n_ltcs >= options.min_ltcs)) {
    std::vector<std::string> ids;
    for (const auto& [id, address] : live.ltcs) ids.push_back(id);
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
      // Ranges of a failed LTC are scattered one at a time, so its load spreads evenly.
      for (size_t i : unassigned) {
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
  if (next == current) return std::nullopt;
  return next;
}

std::vector<std::string> LostLtcs(const ClusterConfig& config, const LiveMembers& live) {
  std::vector<std::string> lost;
  for (const auto& [id, address] : config.ltcs) {
    if (live.ltcs.count(id) == 0 && !config.RangesOf(id).empty()) lost.push_back(id);
  }
  return lost;
}

}  // namespace nova::coordinator
