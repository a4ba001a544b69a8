#include "common/zipfian.h"

namespace nova {

namespace {
double Zeta(uint64_t n, double theta) {
  double sum = 0;
  for (uint64_t i = 1; i <= n; ++i) sum += 1.0 / std::pow(static_cast<double>(i), theta);
  return sum;
}
}  // namespace

ZipfianGenerator::ZipfianGenerator(uint64_t items, double theta)
    : items_(items == 0 ? 1 : items), theta_(theta) {
  zetan_ = Zeta(items_, theta_);
  const double zeta2 = Zeta(2, theta_);
  alpha_ = 1.0 / (1.0 - theta_);
  eta_ = (1 - std::pow(2.0 / static_cast<double>(items_), 1 - theta_)) / (1 - zeta2 / zetan_);
  half_pow_theta_ = 1 + std::pow(0.5, theta_);
}

uint64_t ZipfianGenerator::Next(std::mt19937_64* rng) const {
  const double u = std::uniform_real_distribution<double>(0.0, 1.0)(*rng);
  const double uz = u * zetan_;
  if (uz < 1.0) return 0;
  if (uz < half_pow_theta_) return 1 < items_ ? 1 : 0;
  const uint64_t v = static_cast<uint64_t>(static_cast<double>(items_) *
                                           std::pow(eta_ * u - eta_ + 1, alpha_));
  return v < items_ ? v : items_ - 1;
}

uint64_t FnvHash64(uint64_t v) {
  constexpr uint64_t kOffset = 0xCBF29CE484222325ull;
  constexpr uint64_t kPrime = 1099511628211ull;
  uint64_t h = kOffset;
  for (int i = 0; i < 8; ++i) {
    const uint64_t octet = v & 0xff;
    v >>= 8;
    h ^= octet;
    h *= kPrime;
  }
  return h;
}

}  // namespace nova
