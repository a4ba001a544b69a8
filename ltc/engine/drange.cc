#include "ltc/engine/drange.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace nova::ltc {

int CompareBounds(const leveldb::Comparator* cmp, const KeyBound& a, const KeyBound& b) {
  if (a.min || b.min) return a.min == b.min ? 0 : (a.min ? -1 : 1);
  const int r = cmp->Compare(a.key, b.key);
  if (r != 0) return r;
  if (a.after == b.after) return 0;
  return a.after ? 1 : -1;
}

bool KeyAtOrAfter(const leveldb::Comparator* cmp, const leveldb::Slice& k, const KeyBound& b) {
  if (b.min) return true;
  const int r = cmp->Compare(k, b.key);
  return b.after ? r > 0 : r >= 0;
}

uint64_t Drange::Writes() const {
  uint64_t w = 0;
  for (const Trange& t : tranges) w += t.writes.load(std::memory_order_relaxed);
  return w;
}

DrangeLayout::DrangeLayout(const leveldb::Comparator* cmp, uint64_t generation)
    : cmp_(cmp), generation_(generation) {
  Drange d;
  d.lower = KeyBound::Min();
  d.tranges.emplace_back(KeyBound::Min());
  dranges_.push_back(std::move(d));
}

DrangeLayout::DrangeLayout(const leveldb::Comparator* cmp, uint64_t generation,
                           std::vector<Drange> dranges)
    : cmp_(cmp), generation_(generation), dranges_(std::move(dranges)) {}

std::pair<int, int> DrangeLayout::Find(const leveldb::Slice& key) const {
  // Last Drange whose lower bound the key is at or after.
  int lo = 0, hi = size() - 1;
  while (lo < hi) {
    const int mid = lo + (hi - lo + 1) / 2;
    if (KeyAtOrAfter(cmp_, key, dranges_[mid].lower)) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  int first = lo;
  if (dranges_[lo].point) {
    while (first > 0 && dranges_[first - 1].point &&
           CompareBounds(cmp_, dranges_[first - 1].lower, dranges_[lo].lower) == 0) {
      --first;
    }
  }
  return {first, lo};
}

int DrangeLayout::Route(const leveldb::Slice& key) const {
  auto [first, last] = Find(key);
  int d = first;
  if (last > first) {
    d = first + static_cast<int>(rotate_.fetch_add(1, std::memory_order_relaxed) %
                                 static_cast<uint64_t>(last - first + 1));
  }
  const std::vector<Trange>& ts = dranges_[d].tranges;
  // Last Trange whose lower bound the key is at or after.
  auto it = std::upper_bound(ts.begin() + 1, ts.end(), key,
                             [this](const leveldb::Slice& k, const Trange& t) {
                               return !KeyAtOrAfter(cmp_, k, t.lower);
                             });
  (it - 1)->writes.fetch_add(1, std::memory_order_relaxed);
  return d;
}

const KeyBound* DrangeLayout::UpperBound(int i) const {
  return i + 1 < size() ? &dranges_[i + 1].lower : nullptr;
}

DrangeLoad DrangeLayout::Load() const {
  DrangeLoad l;
  for (const Drange& d : dranges_) {
    l.writes.push_back(d.Writes());
    l.total += l.writes.back();
  }
  if (l.total == 0 || l.writes.empty()) return l;
  const double n = static_cast<double>(l.writes.size());
  const double mean = 1.0 / n;
  double var = 0;
  for (uint64_t w : l.writes) {
    const double share = static_cast<double>(w) / static_cast<double>(l.total);
    var += (share - mean) * (share - mean);
  }
  l.imbalance = std::sqrt(var / n);
  return l;
}

void DrangeLayout::ResetCounters() const {
  for (const Drange& d : dranges_) {
    for (const Trange& t : d.tranges) t.writes.store(0, std::memory_order_relaxed);
  }
}

namespace {
std::string BoundString(const KeyBound& b) {
  if (b.min) return "-inf";
  return (b.after ? "after " : "") + b.key;
}
}  // namespace

std::string DrangeLayout::DebugString() const {
  std::ostringstream os;
  os << "generation " << generation_ << ", " << size() << " Dranges\n";
  for (int i = 0; i < size(); ++i) {
    const KeyBound* up = UpperBound(i);
    os << "  [" << BoundString(dranges_[i].lower) << ", " << (up ? BoundString(*up) : "+inf")
       << ") " << (dranges_[i].point ? "point " : "") << dranges_[i].tranges.size()
       << " Tranges, " << dranges_[i].Writes() << " writes\n";
  }
  return os.str();
}

// ---- Major reorganization -------------------------------------------------------------
//
// Plan: a key carrying at least kDuplicateShares fair shares (1/theta of the writes) becomes
// round(weight / fair) duplicated point Dranges. The keys between two such keys form a
// segment; segments share the remaining slots in proportion to their weight (largest
// remainder, at least one each, since every part of the key space needs an owner), and each
// segment is cut into its Dranges by weight at key boundaries. Lighter hot keys stay in their
// segment, where the cut rule tends to give them a Drange of their own.

namespace {

constexpr double kDuplicateShares = 1.5;

// Splits samples [begin, end) of one Drange into up to gamma Tranges of similar weight.
void BuildTranges(const std::vector<KeySample>& samples, size_t begin, size_t end, int gamma,
                  Drange* d) {
  d->tranges.clear();
  d->tranges.emplace_back(d->lower);
  uint64_t total = 0;
  for (size_t i = begin; i < end; ++i) total += samples[i].weight;
  if (gamma <= 1 || total == 0) return;
  const double per = static_cast<double>(total) / gamma;
  double acc = 0;
  for (size_t i = begin; i < end; ++i) {
    // Cut before sample i once the current Trange holds its share (never at the first).
    if (i > begin && acc >= per * static_cast<double>(d->tranges.size()) &&
        static_cast<int>(d->tranges.size()) < gamma) {
      d->tranges.emplace_back(KeyBound::At(samples[i].key));
    }
    acc += static_cast<double>(samples[i].weight);
  }
}

struct Segment {
  KeyBound lower;
  size_t begin = 0, end = 0;  // samples
  uint64_t weight = 0;
  int dranges = 0;
};

// Cuts one segment into seg.dranges Dranges of similar weight.
void CutSegment(const std::vector<KeySample>& keys, const Segment& seg, int gamma,
                std::vector<Drange>* out) {
  const double target = seg.dranges > 0 ? static_cast<double>(seg.weight) / seg.dranges : 0;
  Drange cur;
  cur.lower = seg.lower;
  size_t cur_begin = seg.begin;
  double done = 0;  // weight in closed Dranges of this segment
  double acc = 0;   // weight in the current one
  int made = 0;
  for (size_t i = seg.begin; i < seg.end; ++i) {
    const double w = static_cast<double>(keys[i].weight);
    const double goal = target * (made + 1) - done;  // what the current Drange should hold
    // Close before key i if adding it overshoots the goal more than stopping undershoots.
    if (acc > 0 && made + 1 < seg.dranges && (acc >= goal || acc + w - goal > goal - acc)) {
      BuildTranges(keys, cur_begin, i, gamma, &cur);
      out->push_back(std::move(cur));
      cur = Drange();
      cur.lower = KeyBound::At(keys[i].key);
      cur_begin = i;
      done += acc;
      acc = 0;
      ++made;
    }
    acc += w;
  }
  BuildTranges(keys, cur_begin, seg.end, gamma, &cur);
  out->push_back(std::move(cur));
}

}  // namespace

std::unique_ptr<DrangeLayout> MajorReorganize(const leveldb::Comparator* cmp,
                                              std::vector<KeySample> samples, int theta,
                                              int gamma, uint64_t generation) {
  theta = std::max(1, theta);
  std::sort(samples.begin(), samples.end(), [cmp](const KeySample& a, const KeySample& b) {
    return cmp->Compare(a.key, b.key) < 0;
  });
  std::vector<KeySample> keys;  // distinct, in key order
  uint64_t total = 0;
  for (KeySample& s : samples) {
    total += s.weight;
    if (!keys.empty() && cmp->Compare(keys.back().key, s.key) == 0) {
      keys.back().weight += s.weight;
    } else {
      keys.push_back(std::move(s));
    }
  }
  if (keys.empty() || total == 0) return std::make_unique<DrangeLayout>(cmp, generation);
  const double fair = static_cast<double>(total) / theta;

  // Duplicated hot keys, heaviest first, while slots remain for the segments around them.
  std::vector<size_t> hot;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (static_cast<double>(keys[i].weight) >= kDuplicateShares * fair) hot.push_back(i);
  }
  std::sort(hot.begin(), hot.end(),
            [&](size_t a, size_t b) { return keys[a].weight > keys[b].weight; });
  std::vector<int> copies(keys.size(), 0);
  int point_slots = 0, points = 0;
  for (size_t i : hot) {
    // m points make m + 1 segments, each needing at least one slot: clamp the copies.
    const int room = theta - point_slots - (points + 2);
    const int c = std::min(
        room, static_cast<int>(std::lround(static_cast<double>(keys[i].weight) / fair)));
    if (c < 2) break;
    copies[i] = c;
    point_slots += c;
    ++points;
  }

  // Segments between duplicated keys.
  std::vector<Segment> segs;
  Segment seg;
  seg.lower = KeyBound::Min();
  for (size_t i = 0; i <= keys.size(); ++i) {
    if (i == keys.size() || copies[i] > 0) {
      seg.end = i;
      segs.push_back(seg);
      if (i < keys.size()) {
        seg = Segment();
        seg.lower = KeyBound::After(keys[i].key);
        seg.begin = i + 1;
      }
      continue;
    }
    seg.weight += keys[i].weight;
  }
  // Slots: at least one per segment, the rest by largest remainder of weight.
  const int slots = std::max(static_cast<int>(segs.size()), theta - point_slots);
  uint64_t seg_total = 0;
  for (const Segment& s : segs) seg_total += s.weight;
  std::vector<std::pair<double, size_t>> remainders;
  int given = 0;
  for (size_t j = 0; j < segs.size(); ++j) {
    const double exact = seg_total == 0 ? 0
                                        : static_cast<double>(segs[j].weight) * slots /
                                              static_cast<double>(seg_total);
    segs[j].dranges = std::max(1, static_cast<int>(exact));
    given += segs[j].dranges;
    remainders.emplace_back(exact - std::floor(exact), j);
  }
  std::sort(remainders.rbegin(), remainders.rend());
  for (size_t r = 0; given < slots && r < remainders.size(); ++r, ++given) {
    ++segs[remainders[r].second].dranges;
  }
  // Light segments rounded up to their one slot can leave more Dranges than slots: take
  // the excess from the segments with the most (slots >= segments, so this ends).
  while (given > slots) {
    size_t most = 0;
    for (size_t j = 1; j < segs.size(); ++j) {
      if (segs[j].dranges > segs[most].dranges) most = j;
    }
    if (segs[most].dranges <= 1) break;
    --segs[most].dranges;
    --given;
  }

  std::vector<Drange> dranges;
  for (size_t j = 0; j < segs.size(); ++j) {
    CutSegment(keys, segs[j], gamma, &dranges);
    if (j + 1 < segs.size()) {
      const size_t k = segs[j].end;  // the duplicated key between segments j and j+1
      for (int c = 0; c < copies[k]; ++c) {
        Drange p;
        p.point = true;
        p.lower = KeyBound::At(keys[k].key);
        p.tranges.emplace_back(p.lower);
        dranges.push_back(std::move(p));
      }
    }
  }
  return std::make_unique<DrangeLayout>(cmp, generation, std::move(dranges));
}

// ---- Minor reorganization -------------------------------------------------------------

std::unique_ptr<DrangeLayout> MinorReorganize(const DrangeLayout& current, double threshold) {
  const int n = current.size();
  if (n < 2) return nullptr;
  std::vector<Drange> ds;
  for (int i = 0; i < n; ++i) ds.push_back(current.drange(i));
  auto load = [&](int i) { return ds[i].Writes(); };
  uint64_t total = 0;
  for (int i = 0; i < n; ++i) total += load(i);
  if (total == 0) return nullptr;
  const double limit = (1.0 + threshold) * static_cast<double>(total) / n;
  bool moved = false;
  for (int i = 0; i < n; ++i) {
    if (ds[i].point) continue;
    while (static_cast<double>(load(i)) > limit && ds[i].tranges.size() > 1) {
      const bool left_ok = i > 0 && !ds[i - 1].point;
      const bool right_ok = i + 1 < n && !ds[i + 1].point;
      if (!left_ok && !right_ok) break;
      const bool to_left = left_ok && (!right_ok || load(i - 1) <= load(i + 1));
      const Trange& t = to_left ? ds[i].tranges.front() : ds[i].tranges.back();
      const uint64_t tw = t.writes.load(std::memory_order_relaxed);
      const uint64_t neighbour = to_left ? load(i - 1) : load(i + 1);
      // Only move if the neighbour stays lighter than this Drange is now.
      if (neighbour + tw >= load(i)) break;
      if (to_left) {
        ds[i - 1].tranges.push_back(t);
        ds[i].tranges.erase(ds[i].tranges.begin());
        ds[i].lower = ds[i].tranges.front().lower;
      } else {
        ds[i + 1].tranges.insert(ds[i + 1].tranges.begin(), t);
        ds[i + 1].lower = t.lower;
        ds[i].tranges.pop_back();
      }
      moved = true;
    }
  }
  if (!moved) return nullptr;
  return std::make_unique<DrangeLayout>(current.comparator(), current.generation() + 1,
                                        std::move(ds));
}

}  // namespace nova::ltc
