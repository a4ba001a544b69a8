// YCSB's number generators (site.ycsb.generator), as CoreWorkload uses them to choose keys,
// operations, scan lengths and field lengths. Each follows YCSB's definition; where this
// code departs from it the comment says so (docs/ycsb.md lists every deviation).
//
// Randomness comes from the caller: Next() takes the calling thread's Rng, so one
// generator is shared by all client threads (as in YCSB, where they share one workload
// object and use ThreadLocalRandom).
//
// Thread safety: every class here is thread-safe unless its comment says otherwise.
#pragma once

#include <atomic>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "common/thread_annotations.h"
#include "common/zipfian.h"

namespace nova::ycsb {

using Rng = std::mt19937_64;

// YCSB's Utils.fnvhash64: FNV-1a over the 8 bytes of v, then Math.abs of the result read
// as a signed 64-bit integer. (Java's Math.abs(Long.MIN_VALUE) stays negative; here it is
// 2^63. It happens for one input in 2^64.)
uint64_t YcsbHash(uint64_t v);

// Uniform 64-bit integer in [0, n). REQUIRES: n > 0.
inline uint64_t UniformBelow(Rng* rng, uint64_t n) {
  return std::uniform_int_distribution<uint64_t>(0, n - 1)(*rng);
}
// Uniform double in [0, 1).
inline double UniformDouble(Rng* rng) {
  return std::uniform_real_distribution<double>(0.0, 1.0)(*rng);
}

// A source of integers (a key number, a length).
class NumberGenerator {
 public:
  virtual ~NumberGenerator() = default;
  virtual uint64_t Next(Rng* rng) = 0;
};

// Uniform over [lb, ub] (YCSB UniformLongGenerator). REQUIRES: lb <= ub.
class UniformGenerator : public NumberGenerator {
 public:
  UniformGenerator(uint64_t lb, uint64_t ub) : lb_(lb), interval_(ub - lb + 1) {}
  uint64_t Next(Rng* rng) override { return lb_ + UniformBelow(rng, interval_); }

 private:
  const uint64_t lb_, interval_;
};

// Always the same value (YCSB ConstantIntegerGenerator).
class ConstantGenerator : public NumberGenerator {
 public:
  explicit ConstantGenerator(uint64_t v) : v_(v) {}
  uint64_t Next(Rng*) override { return v_; }

 private:
  const uint64_t v_;
};

// zeta(n, theta) = sum_{i=1..n} 1/i^theta, the normalizer of a zipfian over n items. Sums
// the terms for n <= kZetaExactTerms (what YCSB's loop computes); above, sums the first
// kZetaExactTerms and adds the rest in closed form (Euler-Maclaurin: the integral plus
// correction terms, whose error at 2^20 terms is below 1e-30), so that zeta over YCSB's 10^10
// items costs milliseconds instead of minutes, for any constant.
// REQUIRES: theta > 0, theta != 1 (ValidZipfianConstant).
double ZipfianZeta(uint64_t n, double theta);
// Terms ZipfianZeta sums one by one (2^20: about 20 ms, once per generator).
constexpr uint64_t kZetaExactTerms = uint64_t{1} << 20;

// True for a zipfian constant the generators accept: finite, > 0 and != 1 (Gray's method
// divides by 1 - theta).
bool ValidZipfianConstant(double theta);

// YCSB's ZipfianGenerator over [min, max]: item min is the most popular, popularity of the
// i-th item ~ 1/i^theta (Gray et al.). NextBounded(itemcount) draws over the first
// `itemcount` items, growing zeta incrementally when the count grows (what
// SkewedLatestGenerator needs as inserts arrive).
//
// Next() and NextBounded(items) draw over the construction's item count without a lock
// (the zeta computed once at construction); only a grown count takes mu_.
//
// Deviation: when the item count grows, YCSB recomputes eta with the item count given at
// construction (an old bug); this uses the current count, which is what the formula means.
class YcsbZipfianGenerator : public NumberGenerator {
 public:
  // Computes zeta(max - min + 1) (ZipfianZeta: O(min(items, 2^20))).
  // REQUIRES: min <= max, ValidZipfianConstant(theta).
  YcsbZipfianGenerator(uint64_t min, uint64_t max, double theta = kZipfianConstant);
  // With a precomputed zeta(items) (YCSB does this for the 10^10 items of the scrambled
  // generator).
  YcsbZipfianGenerator(uint64_t min, uint64_t max, double theta, double zetan);

  uint64_t Next(Rng* rng) override { return Draw(rng, items_, zetan_items_, eta_items_); }
  // REQUIRES: itemcount >= 1.
  uint64_t NextBounded(Rng* rng, uint64_t itemcount) EXCLUDES(mu_);

  // zeta(n, theta) = sum_{i=1..n} 1/i^theta, continued from zeta(st) = initial_sum.
  static double Zeta(uint64_t st, uint64_t n, double theta, double initial_sum);

 private:
  // Gray's eta for `itemcount` items whose zeta is `zetan`.
  double Eta(uint64_t itemcount, double zetan) const;
  // One draw over [base_, base_ + itemcount) given zeta(itemcount) and its eta.
  uint64_t Draw(Rng* rng, uint64_t itemcount, double zetan, double eta) const;

  // Constant after construction.
  const uint64_t base_, items_;
  const double theta_, zeta2theta_, alpha_, half_pow_theta_;
  const double zetan_items_, eta_items_;  // for items_ items
  // The count grown to by NextBounded (starts at items_) and its zeta and eta.
  Mutex mu_;
  uint64_t count_for_zeta_ GUARDED_BY(mu_);
  double zetan_ GUARDED_BY(mu_);
  double eta_ GUARDED_BY(mu_);
};

// YCSB's ScrambledZipfianGenerator over [min, max]: draws a zipfian(theta) item out of
// 10^10 items (so the popularity of an item does not depend on the key-space size) and
// scatters it over the key space as min + fnvhash64(item) % itemcount. The hot keys are thus
// spread out, not clustered at the start. With YCSB's constant 0.99 the zeta is YCSB's
// precomputed kZetan; with another constant ZipfianZeta computes it (YCSB sums 10^10 terms,
// which takes minutes).
//
// Note: common/zipfian.h's ScrambledZipfianGenerator draws over `items` itself (and hashes
// without YCSB's abs); this one is byte-for-byte YCSB's choice of key numbers.
class ScrambledZipfianGenerator : public NumberGenerator {
 public:
  static constexpr uint64_t kItemCount = 10'000'000'000ull;  // YCSB's ITEM_COUNT
  static constexpr double kZetan = 26.46902820178302;        // zeta(kItemCount, 0.99)

  // REQUIRES: min <= max, ValidZipfianConstant(theta).
  ScrambledZipfianGenerator(uint64_t min, uint64_t max, double theta = kZipfianConstant);
  uint64_t Next(Rng* rng) override;

 private:
  const uint64_t min_, itemcount_;
  YcsbZipfianGenerator gen_;
};

// YCSB's HotspotIntegerGenerator: a fraction `hot_op_fraction` of draws falls uniformly in
// the first `hot_data_fraction` of [lb, ub], the rest uniformly in the remainder.
// REQUIRES: lb <= ub; both fractions in [0, 1].
class HotspotGenerator : public NumberGenerator {
 public:
  HotspotGenerator(uint64_t lb, uint64_t ub, double hot_data_fraction, double hot_op_fraction);
  uint64_t Next(Rng* rng) override;

 private:
  const uint64_t lb_, hot_interval_, cold_interval_;
  const double hot_op_fraction_;
};

// YCSB's CounterGenerator: hands out start, start+1, ... (the load phase's key numbers).
class CounterGenerator {
 public:
  explicit CounterGenerator(uint64_t start) : next_(start) {}
  uint64_t Next() { return next_.fetch_add(1, std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> next_;
};

// YCSB's AcknowledgedCounterGenerator: run-phase inserts take key numbers from Next() and
// Acknowledge() them when the insert finished (successfully or not); Last() is the largest
// number below which every number has been acknowledged. Readers choose keys <= Last(), so
// they never ask for a key whose insert has not completed.
class AcknowledgedCounterGenerator {
 public:
  explicit AcknowledgedCounterGenerator(uint64_t start);
  uint64_t Next() { return next_.fetch_add(1, std::memory_order_relaxed); }
  void Acknowledge(uint64_t value) EXCLUDES(mu_);
  // Before any acknowledgement: start - 1 (as in YCSB; with start == 0 that is 2^64-1, and
  // callers must not use it as a bound: CoreWorkload starts the counter at recordcount).
  uint64_t Last() const { return limit_.load(std::memory_order_acquire); }

 private:
  std::atomic<uint64_t> next_;
  std::atomic<uint64_t> limit_;
  Mutex mu_;  // serializes Acknowledge; limit_ is written only under it
  std::set<uint64_t> pending_ GUARDED_BY(mu_);  // acknowledged, above limit_ + 1
};

// YCSB's SkewedLatestGenerator: zipfian over the key numbers inserted so far, with the
// most recently inserted (basis->Last()) the most popular: Last() - zipfian(Last()).
class SkewedLatestGenerator : public NumberGenerator {
 public:
  // `basis` must outlive this generator.
  // REQUIRES: basis->Last() >= 1, ValidZipfianConstant(theta).
  explicit SkewedLatestGenerator(const AcknowledgedCounterGenerator* basis,
                                 double theta = kZipfianConstant);
  uint64_t Next(Rng* rng) override;

 private:
  const AcknowledgedCounterGenerator* const basis_;
  YcsbZipfianGenerator zipf_;
};

// YCSB's DiscreteGenerator: picks one of several values with probability proportional to
// its weight (the operation chooser). Add() all values before the first Next().
template <typename T>
class DiscreteGenerator {
 public:
  void Add(double weight, T value) {
    if (weight <= 0) return;
    total_ += weight;
    values_.emplace_back(weight, std::move(value));
  }
  bool empty() const { return values_.empty(); }
  // REQUIRES: !empty()
  const T& Next(Rng* rng) const {
    double u = UniformDouble(rng) * total_;
    for (const auto& [w, v] : values_) {
      if (u < w) return v;
      u -= w;
    }
    return values_.back().second;  // rounding: u landed exactly on total_
  }

 private:
  double total_ = 0;
  std::vector<std::pair<double, T>> values_;
};

}  // namespace nova::ycsb
