#include "benchmarks/ycsb/generators.h"

#include <cmath>

namespace nova::ycsb {

uint64_t YcsbHash(uint64_t v) {
  const uint64_t h = FnvHash64(v);
  // Math.abs of the signed value: negate (two's complement) when the sign bit is set.
  return (h >> 63) != 0 ? ~h + 1 : h;
}

// ---------------------------------------------------------------------------------------
// YcsbZipfianGenerator

double YcsbZipfianGenerator::Zeta(uint64_t st, uint64_t n, double theta, double initial_sum) {
  double sum = initial_sum;
  for (uint64_t i = st; i < n; ++i) sum += 1.0 / std::pow(static_cast<double>(i + 1), theta);
  return sum;
}

YcsbZipfianGenerator::YcsbZipfianGenerator(uint64_t min, uint64_t max, double theta)
    : YcsbZipfianGenerator(min, max, theta, Zeta(0, max - min + 1, theta, 0)) {}

YcsbZipfianGenerator::YcsbZipfianGenerator(uint64_t min, uint64_t max, double theta,
                                           double zetan)
    : base_(min),
      items_(max - min + 1),
      theta_(theta),
      zeta2theta_(Zeta(0, 2, theta, 0)),
      alpha_(1.0 / (1.0 - theta)),
      count_for_zeta_(items_),
      zetan_(zetan) {
  eta_ = (1 - std::pow(2.0 / static_cast<double>(items_), 1 - theta_)) /
         (1 - zeta2theta_ / zetan_);
}

uint64_t YcsbZipfianGenerator::NextBounded(Rng* rng, uint64_t itemcount) {
  double zetan, eta;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (itemcount > count_for_zeta_) {
      // Incremental: only the new terms are summed, so a slowly growing key space costs
      // O(new items) per call, not O(items).
      zetan_ = Zeta(count_for_zeta_, itemcount, theta_, zetan_);
      count_for_zeta_ = itemcount;
      eta_ = (1 - std::pow(2.0 / static_cast<double>(itemcount), 1 - theta_)) /
             (1 - zeta2theta_ / zetan_);
    }
    zetan = zetan_;
    eta = eta_;
  }
  const double u = UniformDouble(rng);
  const double uz = u * zetan;
  if (uz < 1.0) return base_;
  if (uz < 1.0 + std::pow(0.5, theta_)) return base_ + 1;
  const uint64_t v = static_cast<uint64_t>(static_cast<double>(itemcount) *
                                           std::pow(eta * u - eta + 1, alpha_));
  return base_ + (v < itemcount ? v : itemcount - 1);
}

// ---------------------------------------------------------------------------------------
// ScrambledZipfianGenerator

ScrambledZipfianGenerator::ScrambledZipfianGenerator(uint64_t min, uint64_t max)
    : min_(min), itemcount_(max - min + 1), gen_(0, kItemCount - 1, kZipfianConstant, kZetan) {}

uint64_t ScrambledZipfianGenerator::Next(Rng* rng) {
  return min_ + YcsbHash(gen_.Next(rng)) % itemcount_;
}

// ---------------------------------------------------------------------------------------
// HotspotGenerator

HotspotGenerator::HotspotGenerator(uint64_t lb, uint64_t ub, double hot_data_fraction,
                                   double hot_op_fraction)
    : lb_(lb),
      hot_interval_(static_cast<uint64_t>(static_cast<double>(ub - lb + 1) * hot_data_fraction)),
      cold_interval_(ub - lb + 1 - hot_interval_),
      hot_op_fraction_(hot_op_fraction) {}

uint64_t HotspotGenerator::Next(Rng* rng) {
  // An empty hot or cold set sends every draw to the other one.
  const bool hot = cold_interval_ == 0 ||
                   (hot_interval_ > 0 && UniformDouble(rng) < hot_op_fraction_);
  if (hot) return lb_ + UniformBelow(rng, hot_interval_);
  return lb_ + hot_interval_ + UniformBelow(rng, cold_interval_);
}

// ---------------------------------------------------------------------------------------
// AcknowledgedCounterGenerator

AcknowledgedCounterGenerator::AcknowledgedCounterGenerator(uint64_t start)
    : next_(start), limit_(start - 1) {}

void AcknowledgedCounterGenerator::Acknowledge(uint64_t value) {
  std::lock_guard<std::mutex> l(mu_);
  uint64_t limit = limit_.load(std::memory_order_relaxed);
  if (value != limit + 1) {
    pending_.insert(value);
    return;
  }
  ++limit;
  // Absorb the acknowledgements that were waiting for this one.
  for (auto it = pending_.begin(); it != pending_.end() && *it == limit + 1;
       it = pending_.erase(it)) {
    ++limit;
  }
  limit_.store(limit, std::memory_order_release);
}

// ---------------------------------------------------------------------------------------
// SkewedLatestGenerator

SkewedLatestGenerator::SkewedLatestGenerator(const AcknowledgedCounterGenerator* basis)
    : basis_(basis), zipf_(0, basis->Last() - 1) {}

uint64_t SkewedLatestGenerator::Next(Rng* rng) {
  const uint64_t max = basis_->Last();
  return max - zipf_.NextBounded(rng, max);
}

}  // namespace nova::ycsb
