#include "ltc/engine/range_index.h"

#include <algorithm>
#include <sstream>

#include "common/lsm/internal_key.h"

namespace nova::ltc {

KeyInterval KeyInterval::Closed(const leveldb::Slice& smallest, const leveldb::Slice& largest) {
  return KeyInterval{KeyBound::At(smallest.ToString()), KeyBound::After(largest.ToString())};
}

KeyInterval KeyInterval::OfDrange(const DrangeLayout& layout, int d) {
  const leveldb::Comparator* cmp = layout.comparator();
  KeyInterval out;
  out.lower = layout.drange(d).lower;
  // Route() sends a key to the last Drange whose lower bound it is at or after (or one of
  // that Drange's duplicates), so a Drange's keys end where a different lower bound starts.
  for (int j = d + 1; j < layout.size(); ++j) {
    if (CompareBounds(cmp, layout.drange(j).lower, out.lower) != 0) {
      out.upper = layout.drange(j).lower;
      break;
    }
  }
  return out;
}

namespace {

// The partition holding bound b: the last one whose lower bound is <= b.
int PartitionOfBound(const leveldb::Comparator* cmp, const std::vector<KeyBound>& lowers,
                     const KeyBound& b) {
  auto it = std::upper_bound(lowers.begin(), lowers.end(), b,
                             [cmp](const KeyBound& x, const KeyBound& l) {
                               return CompareBounds(cmp, x, l) < 0;
                             });
  return static_cast<int>(it - lowers.begin()) - 1;  // lowers[0] is the minimum: >= 0
}

// The last partition starting before `upper` (an exclusive bound; none: the last one).
int LastPartitionBefore(const leveldb::Comparator* cmp, const std::vector<KeyBound>& lowers,
                        const std::optional<KeyBound>& upper) {
  if (!upper) return static_cast<int>(lowers.size()) - 1;
  auto it = std::lower_bound(lowers.begin(), lowers.end(), *upper,
                             [cmp](const KeyBound& l, const KeyBound& x) {
                               return CompareBounds(cmp, l, x) < 0;
                             });
  return static_cast<int>(it - lowers.begin()) - 1;
}

std::string BoundString(const KeyBound& b) {
  if (b.min) return "-inf";
  return (b.after ? "after " : "") + b.key;
}

}  // namespace

std::shared_ptr<const RangeIndex> RangeIndex::Build(const leveldb::Comparator* cmp,
                                                    std::vector<KeyBound> boundaries,
                                                    RangeIndexSources sources) {
  boundaries.push_back(KeyBound::Min());
  std::sort(boundaries.begin(), boundaries.end(), [cmp](const KeyBound& a, const KeyBound& b) {
    return CompareBounds(cmp, a, b) < 0;
  });
  boundaries.erase(std::unique(boundaries.begin(), boundaries.end(),
                               [cmp](const KeyBound& a, const KeyBound& b) {
                                 return CompareBounds(cmp, a, b) == 0;
                               }),
                   boundaries.end());

  std::shared_ptr<RangeIndex> index(new RangeIndex(cmp));
  std::vector<Partition> cut(boundaries.size());
  for (size_t i = 0; i < boundaries.size(); ++i) cut[i].lower = boundaries[i];

  // Each source goes into every partition its interval overlaps: from the partition holding
  // its lower bound to the last one starting before its upper bound.
  auto place = [&](const KeyInterval& iv, bool memtable, uint32_t pos) {
    const int first = PartitionOfBound(cmp, boundaries, iv.lower);
    const int last = LastPartitionBefore(cmp, boundaries, iv.upper);
    for (int p = first; p <= last; ++p) {
      (memtable ? cut[p].memtables : cut[p].tables).push_back(pos);
    }
  };
  for (auto& m : sources.memtables) {
    place(m.interval, true, static_cast<uint32_t>(index->memtables_.size()));
    index->memtables_.push_back(std::move(m.mem));
  }
  for (auto& t : sources.level0) {
    const KeyInterval iv = KeyInterval::Closed(lsm::ExtractUserKey(t->meta().smallest),
                                               lsm::ExtractUserKey(t->meta().largest));
    place(iv, false, static_cast<uint32_t>(index->tables_.size()));
    index->tables_.push_back(std::move(t));
  }

  // Merge neighbours with the same sources: a scan then changes sources only where they do.
  for (Partition& p : cut) {
    if (!index->partitions_.empty() && index->partitions_.back().memtables == p.memtables &&
        index->partitions_.back().tables == p.tables) {
      continue;
    }
    index->partitions_.push_back(std::move(p));
  }
  return index;
}

int RangeIndex::Find(const leveldb::Slice& key) const {
  // Last partition whose lower bound the key is at or after (partition 0 starts at -inf).
  auto it = std::upper_bound(partitions_.begin() + 1, partitions_.end(), key,
                             [this](const leveldb::Slice& k, const Partition& p) {
                               return !KeyAtOrAfter(cmp_, k, p.lower);
                             });
  return static_cast<int>(it - partitions_.begin()) - 1;
}

bool RangeIndex::Contains(int i, const leveldb::Slice& key) const {
  if (!KeyAtOrAfter(cmp_, key, partitions_[i].lower)) return false;
  const KeyBound* upper = UpperBound(i);
  return upper == nullptr || !KeyAtOrAfter(cmp_, key, *upper);
}

size_t RangeIndex::entries() const {
  size_t n = 0;
  for (const Partition& p : partitions_) n += p.memtables.size() + p.tables.size();
  return n;
}

std::string RangeIndex::DebugString() const {
  std::ostringstream os;
  for (int i = 0; i < size(); ++i) {
    const KeyBound* up = UpperBound(i);
    os << "[" << BoundString(partitions_[i].lower) << ", " << (up ? BoundString(*up) : "+inf")
       << "):";
    for (uint32_t m : partitions_[i].memtables) os << " m" << memtables_[m]->id();
    for (uint32_t t : partitions_[i].tables) os << " t" << tables_[t]->meta().number;
    os << "\n";
  }
  return os.str();
}

}  // namespace nova::ltc
