#include "ltc/engine/drange_reorganizer.h"

#include <algorithm>
#include <string>

#include "common/lsm/internal_key.h"

namespace nova::ltc {

bool DrangeReorganizer::TryBegin() {
  if (options_.dranges <= 1 || running_.exchange(true)) return false;
  writes_since_ = 0;
  return true;
}

std::unique_ptr<DrangeLayout> DrangeReorganizer::Plan(
    const DrangeLayout& current, const std::vector<std::shared_ptr<MemTable>>& mems, bool* major) {
  const DrangeLoad load = current.Load();
  // The window ends here (counters are reset or a new layout starts from zero): keep its
  // figure for the engine's stats, which would otherwise see a window just begun.
  if (load.total > 0) last_window_imbalance_.store(load.imbalance, std::memory_order_relaxed);
  *major = current.size() < options_.dranges ||
           load.imbalance > options_.imbalance_threshold / options_.dranges;
  if (!*major) {
    std::unique_ptr<DrangeLayout> next = MinorReorganize(current, options_.imbalance_threshold);
    if (next == nullptr) current.ResetCounters();
    return next;
  }
  // Sample the keys in memory: every version counts, so hot keys weigh more.
  std::vector<KeySample> samples;
  uint64_t entries = 0;
  for (const auto& m : mems) entries += m->num_entries();
  const uint64_t step =
      std::max<uint64_t>(1, entries / std::max<uint64_t>(1, options_.max_samples));
  uint64_t i = 0;
  for (const auto& m : mems) {
    std::unique_ptr<leveldb::Iterator> it(m->NewIterator());
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      if (i++ % step == 0) samples.push_back({lsm::ExtractUserKey(it->key()).ToString(), 1});
    }
  }
  return MajorReorganize(options_.comparator, std::move(samples), options_.dranges,
                         options_.tranges_per_drange, current.generation() + 1);
}

}  // namespace nova::ltc
