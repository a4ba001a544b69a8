#include "benchmarks/ycsb/generators.h"

#include <cmath>

namespace nova::ycsb {

uint64_t YcsbHash(uint64_t v) {
  const uint64_t h = FnvHash64(v);
  // Math.abs of the signed value: negate (two's complement) when the sign bit is set.
  return (h >> 63) != 0 ? ~h + 1 : h;
}

// ---------------------------------------------------------------------------------------
// Zeta

bool ValidZipfianConstant(double theta) {
  return std::isfinite(theta) && theta > 0 && theta != 1;
}

double ZipfianZeta(uint64_t n, double theta) {
  if (n <= kZetaExactTerms) return YcsbZipfianGenerator::Zeta(0, n, theta, 0);
  const double head = YcsbZipfianGenerator::Zeta(0, kZetaExactTerms, theta, 0);
  // Euler-Maclaurin for sum_{i=m+1..n} f(i), f(x) = x^-theta:
  //   integral_m^n f + (f(n) - f(m)) / 2 + sum_k B_2k / (2k)! (f^(2k-1)(n) - f^(2k-1)(m))
  // with B_2 / 2! = 1/12 and B_4 / 4! = -1/720. The next term is of order m^-(theta+5),
  // below 1e-30 at m = 2^20.
  const double m = static_cast<double>(kZetaExactTerms);
  const double x = static_cast<double>(n);
  // integral = (x^(1-theta) - m^(1-theta)) / (1-theta), written with expm1 so that a
  // constant close to 1 does not cancel.
  const double integral =
      std::pow(m, 1 - theta) * std::expm1((1 - theta) * std::log(x / m)) / (1 - theta);
  auto f = [theta](double v) { return std::pow(v, -theta); };
  // First and third derivatives: -theta v^-(theta+1), -theta (theta+1) (theta+2) v^-(theta+3).
  const double c1 = -theta;
  const double c3 = c1 * (theta + 1) * (theta + 2);
  auto d1 = [&](double v) { return c1 * std::pow(v, -theta - 1); };
  auto d3 = [&](double v) { return c3 * std::pow(v, -theta - 3); };
  constexpr double kB2 = 1.0 / 12, kB4 = -1.0 / 720;
  const double tail =
      integral + (f(x) - f(m)) / 2 + kB2 * (d1(x) - d1(m)) + kB4 * (d3(x) - d3(m));
  return head + tail;
}

// ---------------------------------------------------------------------------------------
// YcsbZipfianGenerator

double YcsbZipfianGenerator::Zeta(uint64_t st, uint64_t n, double theta, double initial_sum) {
  double sum = initial_sum;
  for (uint64_t i = st; i < n; ++i) sum += 1.0 / std::pow(static_cast<double>(i + 1), theta);
  return sum;
}

YcsbZipfianGenerator::YcsbZipfianGenerator(uint64_t min, uint64_t max, double theta)
    : YcsbZipfianGenerator(min, max, theta, ZipfianZeta(max - min + 1, theta)) {}

YcsbZipfianGenerator::YcsbZipfianGenerator(uint64_t min, uint64_t max, double theta,
                                           double zetan)
    : base_(min),
      items_(max - min + 1),
      theta_(theta),
      zeta2theta_(Zeta(0, 2, theta, 0)),
      alpha_(1.0 / (1.0 - theta)),
      half_pow_theta_(std::pow(0.5, theta)),
      zetan_items_(zetan),
      eta_items_(Eta(items_, zetan)),
      count_for_zeta_(items_),
      zetan_(zetan),
      eta_(eta_items_) {}

double YcsbZipfianGenerator::Eta(uint64_t itemcount, double zetan) const {
  return (1 - std::pow(2.0 / static_cast<double>(itemcount), 1 - theta_)) /
         (1 - zeta2theta_ / zetan);
}

uint64_t YcsbZipfianGenerator::NextBounded(Rng* rng, uint64_t itemcount) {
  if (itemcount == items_) return Draw(rng, items_, zetan_items_, eta_items_);
  double zetan, eta;
  {
    MutexLock l(&mu_);
    if (itemcount > count_for_zeta_) {
      // Incremental: only the new terms are summed, so a slowly growing key space costs
      // O(new items) per call, not O(items).
      zetan_ = Zeta(count_for_zeta_, itemcount, theta_, zetan_);
      count_for_zeta_ = itemcount;
      eta_ = Eta(itemcount, zetan_);
    }
    zetan = zetan_;
    eta = eta_;
  }
  return Draw(rng, itemcount, zetan, eta);
}

uint64_t YcsbZipfianGenerator::Draw(Rng* rng, uint64_t itemcount, double zetan,
                                    double eta) const {
  const double u = UniformDouble(rng);
  const double uz = u * zetan;
  if (uz < 1.0) return base_;
  if (uz < 1.0 + half_pow_theta_) return base_ + 1;
  const double x = static_cast<double>(itemcount) * std::pow(eta * u - eta + 1, alpha_);
  // x is in [0, itemcount] for every valid constant; an extreme one (e.g. 50, where zeta(n)
  // and zeta(2) are equal in double precision) can make eta infinite and x NaN, which must
  // not reach the conversion to an integer.
  if (!(x >= 0)) return base_;
  if (x >= static_cast<double>(itemcount)) return base_ + itemcount - 1;
  const auto v = static_cast<uint64_t>(x);
  return base_ + (v < itemcount ? v : itemcount - 1);
}

// ---------------------------------------------------------------------------------------
// ScrambledZipfianGenerator

ScrambledZipfianGenerator::ScrambledZipfianGenerator(uint64_t min, uint64_t max, double theta)
    : min_(min),
      itemcount_(max - min + 1),
      // YCSB compares the constant exactly, too: 0.99 uses the precomputed zeta.
      gen_(0, kItemCount - 1, theta,
           theta == kZipfianConstant ? kZetan : ZipfianZeta(kItemCount, theta)) {}

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
  MutexLock l(&mu_);
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

SkewedLatestGenerator::SkewedLatestGenerator(const AcknowledgedCounterGenerator* basis,
                                             double theta)
    : basis_(basis), zipf_(0, basis->Last() - 1, theta) {}

uint64_t SkewedLatestGenerator::Next(Rng* rng) {
  const uint64_t max = basis_->Last();
  return max - zipf_.NextBounded(rng, max);
}

}  // namespace nova::ycsb
