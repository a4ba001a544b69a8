// RangeEngine: keeping the range index (paper 4.4.1.2) and building internal iterators over
// it. (range_engine.cc has the read and write paths; they call these.)
#include <unordered_set>

#include "common/lsm/merging_iterator.h"
#include "ltc/engine/concatenating_iterator.h"
#include "ltc/engine/range_engine.h"
#include "ltc/engine/range_index_iterator.h"

namespace nova::ltc {

void RangeEngine::RebuildRangeIndexLocked() {
  if (!options_.range_index) return;
  const std::shared_ptr<const DrangeRouting> routing = router_.Current();
  if (routing == nullptr) return;
  const DrangeLayout& layout = *routing->layout;
  // A memtable holds only keys routed to the Drange it is the active memtable of (the write
  // path routes by the layout whose Drange states it locks), so that Drange's interval,
  // taken while it is active, bounds it for its whole life.
  for (int d = 0; d < static_cast<int>(routing->states.size()) && d < layout.size(); ++d) {
    range_index_.memtable_intervals.try_emplace(ActiveUnderMu(*routing->states[d])->id(),
                                                KeyInterval::OfDrange(layout, d));
  }
  RangeIndexSources sources;
  std::unordered_set<uint64_t> live_ids;
  for (const auto& m : live_) {
    live_ids.insert(m->id());
    auto it = range_index_.memtable_intervals.find(m->id());
    // Not known (not created as a Drange's active memtable): it may hold any key.
    sources.memtables.push_back(
        {m, it != range_index_.memtable_intervals.end() ? it->second : KeyInterval::All()});
  }
  std::erase_if(range_index_.memtable_intervals,
                [&](const auto& e) { return live_ids.count(e.first) == 0; });
  sources.level0 = versions_.current()->levels[0];
  std::vector<KeyBound> boundaries;
  for (int d = 0; d < layout.size(); ++d) boundaries.push_back(layout.drange(d).lower);
  range_index_.index =
      RangeIndex::Build(options_.comparator, std::move(boundaries), std::move(sources));
}

leveldb::Iterator* RangeEngine::NewInternalIterator(
    const std::vector<std::shared_ptr<MemTable>>& mems, std::shared_ptr<const RangeIndex> rindex,
    const std::shared_ptr<Version>& version) {
  std::vector<leveldb::Iterator*> children;
  if (rindex != nullptr) {
    children.push_back(NewRangeIndexIterator(&icmp_, std::move(rindex)));
  } else {
    for (const auto& m : mems) children.push_back(m->NewIterator());  // pins its memtable
    for (const TableRef& t : version->levels[0]) {
      auto it = t->NewIterator();
      children.push_back(it.ok() ? it.value()
                                 : leveldb::NewErrorIterator(
                                       leveldb::Status::IOError(it.status().ToString())));
    }
  }
  // Levels 1..6: one concatenating iterator each, opening a table when it gets there.
  for (int level = 1; level < lsm::kNumLevels; ++level) {
    if (!version->levels[level].empty())
      children.push_back(NewLevelIterator(&icmp_, version, level));
  }
  return lsm::NewMergingIterator(&icmp_, std::move(children), options_.read_pool);
}

}  // namespace nova::ltc
