// Dynamic ranges (Dranges) and tiny ranges (Tranges) of one range (paper 4.4.1).
//
// A range's key space is split into theta Dranges, each with its own active memtable, so a
// write goes to the memtable of the Drange holding its key, different versions of a key never
// spread over all memtables, and Level-0 tables of different Dranges do not overlap (their
// compactions run in parallel). Each Drange holds up to gamma Tranges, each counting the
// writes that fall into it (Definition 4.4.1-4.4.2).
//
//  - A minor reorganization (Definition 4.4.3) moves boundary Tranges of a Drange whose share
//    of writes exceeds the fair share 1/theta by more than a threshold to a lighter neighbour.
//  - A major reorganization (Definition 4.4.4) rebuilds Dranges and Tranges from sampled keys
//    so each Drange gets about 1/theta of the writes. A key whose own share is at least that
//    large becomes a *point* Drange [k, k], duplicated once per fair share it carries; writes
//    to it are spread round-robin over its duplicates (and so over their memtables).
//
// Bounds: a Drange covers [lower, next Drange's lower). A bound is a user key, or "just after"
// a user key (needed after a point Drange: the next Drange starts right after k without
// needing a successor key, which a custom comparator may not have).
//
// Every layout has a generation; the engine marks active memtables immutable and starts new
// ones tagged with the new generation when the layout changes (paper: older generations
// flush first).
//
// Thread safety: a DrangeLayout's structure is immutable; Route() and the write counters are
// safe to use from many threads (relaxed atomics). Reorganizations build a new layout.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <leveldb/comparator.h>
#include <leveldb/slice.h>

namespace nova::ltc {

// A position in user-key order: `key`, or just after `key` when `after` is set. The
// minimum bound (everything) is {"" , false} with `min` set.
struct KeyBound {
  std::string key;
  bool after = false;
  bool min = false;  // before every key (the first Drange's lower bound)

  static KeyBound Min() { return KeyBound{"", false, true}; }
  static KeyBound At(std::string k) { return KeyBound{std::move(k), false, false}; }
  static KeyBound After(std::string k) { return KeyBound{std::move(k), true, false}; }
};

// <0, 0, >0 as bound a orders before, with, after bound b.
int CompareBounds(const leveldb::Comparator* cmp, const KeyBound& a, const KeyBound& b);
// True if user key k lies at or after bound b.
bool KeyAtOrAfter(const leveldb::Comparator* cmp, const leveldb::Slice& k, const KeyBound& b);

struct Trange {
  KeyBound lower;
  mutable std::atomic<uint64_t> writes{0};
  Trange() = default;
  explicit Trange(KeyBound l) : lower(std::move(l)) {}
  Trange(const Trange& o) : lower(o.lower), writes(o.writes.load(std::memory_order_relaxed)) {}
  Trange& operator=(const Trange& o) {
    lower = o.lower;
    writes.store(o.writes.load(std::memory_order_relaxed), std::memory_order_relaxed);
    return *this;
  }
};

struct Drange {
  KeyBound lower;              // == tranges.front().lower
  std::vector<Trange> tranges;  // at least one
  bool point = false;          // covers exactly one key (lower.key)
  uint64_t Writes() const;
};

struct DrangeLoad {
  std::vector<uint64_t> writes;  // per Drange
  uint64_t total = 0;
  // Standard deviation of each Drange's share of writes (the paper's load-imbalance figure);
  // 0 when there were no writes.
  double imbalance = 0;
};

class DrangeLayout {
 public:
  // One Drange covering everything, with one Trange (before any write was sampled).
  DrangeLayout(const leveldb::Comparator* cmp, uint64_t generation);
  DrangeLayout(const leveldb::Comparator* cmp, uint64_t generation, std::vector<Drange> dranges);

  // The Drange a write of `key` goes to; counts the write in its Trange. For a duplicated
  // point Drange, successive writes rotate over the duplicates.
  int Route(const leveldb::Slice& key) const;
  // The Drange(s) that may hold `key`, without counting: [first, last] (several only for a
  // duplicated point).
  std::pair<int, int> Find(const leveldb::Slice& key) const;

  int size() const { return static_cast<int>(dranges_.size()); }
  const Drange& drange(int i) const { return dranges_[i]; }
  uint64_t generation() const { return generation_; }
  const leveldb::Comparator* comparator() const { return cmp_; }
  // [lower, upper) of Drange i; upper of the last is unbounded (nullptr).
  const KeyBound* UpperBound(int i) const;

  DrangeLoad Load() const;
  void ResetCounters() const;
  // "[lower, upper) writes ..." per Drange, for debug dumps and /metrics text.
  std::string DebugString() const;

 private:
  const leveldb::Comparator* const cmp_;  // must outlive this
  const uint64_t generation_;
  std::vector<Drange> dranges_;
  mutable std::atomic<uint64_t> rotate_{0};
};

// A sampled key and how many writes it stands for.
struct KeySample {
  std::string key;
  uint64_t weight = 1;
};

// Builds theta Dranges of up to gamma Tranges each from samples (any order; equal keys are
// merged). Returns the one-Drange layout if there are no samples.
std::unique_ptr<DrangeLayout> MajorReorganize(const leveldb::Comparator* cmp,
                                              std::vector<KeySample> samples, int theta,
                                              int gamma, uint64_t generation);

// Moves boundary Tranges from Dranges whose share of writes exceeds (1 + threshold)/theta
// to a lighter neighbour, using the current counters. Returns the new layout (generation + 1,
// counters kept) or nullptr when nothing could be moved.
std::unique_ptr<DrangeLayout> MinorReorganize(const DrangeLayout& current, double threshold);

}  // namespace nova::ltc
