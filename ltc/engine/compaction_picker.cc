#include "ltc/engine/compaction_picker.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace nova::ltc {

namespace {

constexpr double kLevelMultiplier = 10;

}  // namespace

std::optional<CompactionPick> CompactionPicker::Pick(const Version& v, int num_dranges,
                                                     const OlderVersionsInMemory& older_in_memory) {
  auto busy = [&](const TableRef& t) { return compacting_.count(t->meta().number) != 0; };
  auto overlapping = [&](int lvl, const std::string& lo, const std::string& hi) {
    return Overlapping(v, lvl, lo, hi);
  };

  // Level 0: clusters of overlapping tables. Dranges keep them apart, so each Drange's
  // Level-0 tables form their own cluster, compacted independently and in parallel.
  std::vector<std::vector<TableRef>> clusters;
  std::vector<std::pair<std::string, std::string>> cluster_ranges;
  Level0Clusters(v, &clusters, &cluster_ranges);

  const uint64_t l0_full = std::max<uint64_t>(
      1, std::min(options_.l0_slowdown_writes_bytes, options_.l0_stop_writes_bytes));
  const double l0_bytes_score = 2.0 * static_cast<double>(v.LevelBytes(0)) / l0_full;
  size_t largest_cluster = 0;
  for (const auto& c : clusters) largest_cluster = std::max(largest_cluster, c.size());
  double l0_score = std::max(l0_bytes_score, static_cast<double>(largest_cluster) /
                                                 std::max(1, options_.l0_compaction_trigger));
  // Once writes are being slowed down, Level 0 goes first whatever the other levels say.
  if (l0_bytes_score >= 2.0) l0_score = std::numeric_limits<double>::infinity();
  std::vector<std::pair<double, int>> due;  // (score, level)
  if (l0_score >= 1.0) due.emplace_back(l0_score, 0);
  const uint64_t level1 = std::max<uint64_t>(
      options_.level1_bytes, static_cast<uint64_t>(num_dranges) * options_.sstable_bytes);
  for (int l = 1; l + 1 < lsm::kNumLevels; ++l) {
    const double target = static_cast<double>(level1) * std::pow(kLevelMultiplier, l - 1);
    const double score = static_cast<double>(v.LevelBytes(l)) / target;
    if (score > 1.0) due.emplace_back(score, l);
  }
  std::stable_sort(due.begin(), due.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });

  for (const auto& [score, lvl] : due) {
    if (lvl == 0) {
      for (size_t c = 0; c < clusters.size(); ++c) {
        std::vector<TableRef>& cluster = clusters[c];
        const auto& [lo, hi] = cluster_ranges[c];
        // Below its trigger, a cluster goes only when Level 0 as a whole is due by bytes.
        if (static_cast<int>(cluster.size()) < options_.l0_compaction_trigger &&
            l0_bytes_score < 1.0) {
          continue;
        }
        if (std::any_of(cluster.begin(), cluster.end(), busy)) continue;
        std::vector<TableRef> below = overlapping(1, lo, hi);
        if (std::any_of(below.begin(), below.end(), busy)) continue;
        if (older_in_memory(cluster, lo, hi)) continue;
        return CompactionPick{0, std::move(cluster), std::move(below)};
      }
      continue;
    }
    // Round-robin: every part of the level moves down in turn instead of the first
    // tables again and again.
    const std::vector<TableRef>& tables = v.levels[lvl];
    const std::string& pointer = compact_pointer_[lvl];
    size_t start = 0;
    if (!pointer.empty()) {
      while (start < tables.size() &&
             options_.comparator->Compare(lsm::ExtractUserKey(tables[start]->meta().smallest),
                                          pointer) <= 0) {
        ++start;
      }
    }
    for (size_t i = 0; i < tables.size(); ++i) {
      const TableRef& t = tables[(start + i) % tables.size()];
      if (busy(t)) continue;
      const std::string lo = lsm::ExtractUserKey(t->meta().smallest).ToString();
      const std::string hi = lsm::ExtractUserKey(t->meta().largest).ToString();
      std::vector<TableRef> below = overlapping(lvl + 1, lo, hi);
      if (std::any_of(below.begin(), below.end(), busy)) continue;
      compact_pointer_[lvl] = hi;
      return CompactionPick{lvl, {t}, std::move(below)};
    }
  }
  return std::nullopt;
}

void CompactionPicker::Level0Clusters(
    const Version& v, std::vector<std::vector<TableRef>>* clusters,
    std::vector<std::pair<std::string, std::string>>* ranges) const {
  std::vector<TableRef> rest = v.levels[0];
  while (!rest.empty()) {
    std::vector<TableRef> cluster = {rest.front()};
    rest.erase(rest.begin());
    std::string lo, hi;
    for (bool grew = true; grew;) {
      grew = false;
      UserKeyRange(options_.comparator, cluster, &lo, &hi);
      for (auto it = rest.begin(); it != rest.end();) {
        if ((*it)->Overlaps(lo, hi)) {
          cluster.push_back(*it);
          it = rest.erase(it);
          grew = true;
        } else {
          ++it;
        }
      }
    }
    clusters->push_back(std::move(cluster));
    ranges->emplace_back(std::move(lo), std::move(hi));
  }
}

std::vector<TableRef> CompactionPicker::Overlapping(const Version& v, int level,
                                                    const std::string& lo,
                                                    const std::string& hi) const {
  std::vector<TableRef> out;
  for (const TableRef& t : v.levels[level]) {
    if (t->Overlaps(lo, hi)) out.push_back(t);
  }
  return out;
}

bool CompactionPicker::Busy(const std::vector<TableRef>& tables) const {
  return std::any_of(tables.begin(), tables.end(), [this](const TableRef& t) {
    return compacting_.count(t->meta().number) != 0;
  });
}

std::optional<CompactionPick> CompactionPicker::PickManual(
    const Version& v, int level, std::set<uint64_t>* todo, uint64_t max_bytes,
    const OlderVersionsInMemory& older_in_memory, bool* wait) {
  *wait = false;
  // Forget what left the level.
  std::set<uint64_t> present;
  for (const TableRef& t : v.levels[level]) present.insert(t->meta().number);
  for (auto it = todo->begin(); it != todo->end();) {
    it = present.count(*it) != 0 ? std::next(it) : todo->erase(it);
  }
  if (todo->empty()) return std::nullopt;
  if (level == 0) {
    std::vector<std::vector<TableRef>> clusters;
    std::vector<std::pair<std::string, std::string>> ranges;
    Level0Clusters(v, &clusters, &ranges);
    for (size_t c = 0; c < clusters.size(); ++c) {
      const std::vector<TableRef>& cluster = clusters[c];
      if (std::none_of(cluster.begin(), cluster.end(),
                       [&](const TableRef& t) { return todo->count(t->meta().number) != 0; })) {
        continue;
      }
      std::vector<TableRef> below = Overlapping(v, 1, ranges[c].first, ranges[c].second);
      if (Busy(cluster) || Busy(below) ||
          older_in_memory(cluster, ranges[c].first, ranges[c].second)) {
        *wait = true;
        return std::nullopt;
      }
      for (const TableRef& t : cluster) todo->erase(t->meta().number);
      return CompactionPick{0, cluster, std::move(below)};
    }
    todo->clear();  // (unreachable: every number in *todo is in some cluster)
    return std::nullopt;
  }
  const std::vector<TableRef>& tables = v.levels[level];
  size_t first = 0;
  while (todo->count(tables[first]->meta().number) == 0) ++first;  // *todo is not empty
  std::vector<TableRef> inputs;
  uint64_t bytes = 0;
  for (size_t i = first; i < tables.size() && todo->count(tables[i]->meta().number) != 0 &&
                         (inputs.empty() || bytes < max_bytes);
       ++i) {
    inputs.push_back(tables[i]);
    bytes += tables[i]->meta().layout.file_size;
  }
  const std::string lo = lsm::ExtractUserKey(inputs.front()->meta().smallest).ToString();
  const std::string hi = lsm::ExtractUserKey(inputs.back()->meta().largest).ToString();
  std::vector<TableRef> below = Overlapping(v, level + 1, lo, hi);
  if (Busy(inputs) || Busy(below)) {
    *wait = true;
    return std::nullopt;
  }
  for (const TableRef& t : inputs) todo->erase(t->meta().number);
  return CompactionPick{level, std::move(inputs), std::move(below)};
}

void CompactionPicker::Start(const CompactionPick& pick) {
  for (const auto& t : pick.inputs) compacting_.insert(t->meta().number);
  for (const auto& t : pick.next) compacting_.insert(t->meta().number);
}

void CompactionPicker::Finish(const CompactionPick& pick) {
  for (const auto& t : pick.inputs) compacting_.erase(t->meta().number);
  for (const auto& t : pick.next) compacting_.erase(t->meta().number);
}

}  // namespace nova::ltc
