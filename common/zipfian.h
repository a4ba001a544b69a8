// Zipfian key generators as YCSB defines them (Gray et al., "Quickly generating
// billion-record synthetic databases"): item 0 is the most popular; zipfian constant 0.99 by
// default. ScrambledZipfian spreads the popular items over the key space with an FNV-1a hash,
// as YCSB's ScrambledZipfianGenerator does.
//
// Thread safety: generators are immutable after construction; Next() takes the caller's rng.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>

namespace nova {

constexpr double kZipfianConstant = 0.99;

class ZipfianGenerator {
 public:
  // Items in [0, items). Construction is O(items) (computes zeta).
  explicit ZipfianGenerator(uint64_t items, double theta = kZipfianConstant);
  uint64_t Next(std::mt19937_64* rng) const;
  uint64_t items() const { return items_; }

 private:
  uint64_t items_;
  double theta_, alpha_, zetan_, eta_, half_pow_theta_;
};

// 64-bit FNV-1a of the 8 bytes of v (YCSB's Utils.fnvhash64).
uint64_t FnvHash64(uint64_t v);

class ScrambledZipfianGenerator {
 public:
  explicit ScrambledZipfianGenerator(uint64_t items, double theta = kZipfianConstant)
      : items_(items), zipf_(items, theta) {}
  uint64_t Next(std::mt19937_64* rng) const { return FnvHash64(zipf_.Next(rng)) % items_; }

 private:
  uint64_t items_;
  ZipfianGenerator zipf_;
};

}  // namespace nova
