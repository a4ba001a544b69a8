#include "benchmarks/ycsb/measurements.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>

namespace nova::ycsb {

namespace {

constexpr const char* kOpTypeNames[kNumOpTypes] = {
    "INSERT", "READ", "UPDATE", "SCAN", "READ-MODIFY-WRITE", "DELETE", "VERIFY", "CLEANUP"};
constexpr const char* kReturnCodeNames[kNumReturnCodes] = {"OK", "NOT_FOUND", "ERROR",
                                                           "UNEXPECTED_STATE"};
// YCSB's default measurement.histogram.percentiles (95, 99), and the median.
constexpr int kReportedPercentiles[] = {50, 95, 99};

// Lowest value of bucket i.
uint64_t BucketLow(size_t i) {
  if (i < HistogramSnapshot::kLinearMax) return i;
  return i == 0 ? 0 : HistogramSnapshot::BucketHigh(i - 1) + 1;
}

// Formats a double the way Java prints one in YCSB's report (enough digits, no
// trailing zeros beyond one decimal).
std::string FormatDouble(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.6f", v);
  std::string s(buf);
  while (s.size() > 1 && s.back() == '0' && s[s.size() - 2] != '.') s.pop_back();
  return s;
}

// Java DecimalFormat("#.##").
std::string FormatTwoDecimals(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.2f", v);
  std::string s(buf);
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

}  // namespace

const char* OpTypeName(OpType op) { return kOpTypeNames[static_cast<int>(op)]; }
const char* ReturnCodeName(ReturnCode rc) { return kReturnCodeNames[static_cast<int>(rc)]; }

// ---------------------------------------------------------------------------------------
// HistogramSnapshot

size_t HistogramSnapshot::BucketOf(uint64_t value) {
  if (value < kLinearMax) return static_cast<size_t>(value);
  const int msb = 63 - std::countl_zero(value);  // >= kSubBucketBits + 1
  const int shift = msb - kSubBucketBits;
  const uint64_t top = value >> shift;  // in [64, 128)
  return kLinearMax + static_cast<size_t>(msb - kSubBucketBits - 1) * (uint64_t{1} << kSubBucketBits) +
         static_cast<size_t>(top - (uint64_t{1} << kSubBucketBits));
}

uint64_t HistogramSnapshot::BucketHigh(size_t i) {
  if (i < kLinearMax) return i;
  const size_t j = i - kLinearMax;
  const int msb = static_cast<int>(j >> kSubBucketBits) + kSubBucketBits + 1;
  const uint64_t top = (uint64_t{1} << kSubBucketBits) + (j & ((uint64_t{1} << kSubBucketBits) - 1));
  const int shift = msb - kSubBucketBits;
  return ((top + 1) << shift) - 1;  // wraps to UINT64_MAX for the last bucket, as intended
}

uint64_t HistogramSnapshot::Percentile(double p) const {
  if (count_ == 0) return 0;
  p = std::clamp(p, 0.0, 100.0);
  uint64_t rank = static_cast<uint64_t>(std::ceil(p / 100.0 * static_cast<double>(count_)));
  rank = std::clamp<uint64_t>(rank, 1, count_);
  uint64_t seen = 0;
  for (size_t i = 0; i < kNumBuckets; ++i) {
    seen += buckets_[i];
    if (seen >= rank) return std::min(BucketHigh(i), max_);
  }
  return max_;
}

HistogramSnapshot HistogramSnapshot::Minus(const HistogramSnapshot& earlier) const {
  HistogramSnapshot d;
  d.count_ = count_ - earlier.count_;
  d.sum_ = sum_ - earlier.sum_;
  d.min_ = UINT64_MAX;
  d.max_ = 0;
  for (size_t i = 0; i < kNumBuckets; ++i) {
    d.buckets_[i] = buckets_[i] - earlier.buckets_[i];
    if (d.buckets_[i] == 0) continue;
    d.min_ = std::min(d.min_, std::max(BucketLow(i), min()));
    d.max_ = std::max(d.max_, std::min(BucketHigh(i), max_));
  }
  return d;
}

// ---------------------------------------------------------------------------------------
// LatencyHistogram

LatencyHistogram::LatencyHistogram() : buckets_(HistogramSnapshot::kNumBuckets) {
  for (auto& b : buckets_) b.store(0, std::memory_order_relaxed);
}

void LatencyHistogram::Record(uint64_t v) {
  sum_.fetch_add(v, std::memory_order_relaxed);
  uint64_t cur = min_.load(std::memory_order_relaxed);
  while (v < cur && !min_.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
  cur = max_.load(std::memory_order_relaxed);
  while (v > cur && !max_.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
  // Release after min/max/sum: a snapshot that sees this bucket also sees them.
  buckets_[HistogramSnapshot::BucketOf(v)].fetch_add(1, std::memory_order_release);
}

HistogramSnapshot LatencyHistogram::Snapshot() const {
  HistogramSnapshot s;
  for (size_t i = 0; i < buckets_.size(); ++i) {
    s.buckets_[i] = buckets_[i].load(std::memory_order_acquire);
    s.count_ += s.buckets_[i];
  }
  s.sum_ = sum_.load(std::memory_order_relaxed);
  s.min_ = min_.load(std::memory_order_relaxed);
  s.max_ = max_.load(std::memory_order_relaxed);
  return s;
}

// ---------------------------------------------------------------------------------------
// Measurements

void Measurements::Measure(OpType op, ReturnCode rc, uint64_t latency_us) {
  const int o = static_cast<int>(op);
  // YCSB times every verification under VERIFY, whatever its outcome.
  const bool failed = rc != ReturnCode::kOk && op != OpType::kVerify;
  latency_[o][failed ? 1 : 0].Record(latency_us);
  returns_[o][static_cast<int>(rc)].fetch_add(1, std::memory_order_relaxed);
}

MeasurementsSnapshot Measurements::Snapshot() const {
  MeasurementsSnapshot s;
  for (int o = 0; o < kNumOpTypes; ++o) {
    for (int f = 0; f < 2; ++f) s.latency[o][f] = latency_[o][f].Snapshot();
    for (int r = 0; r < kNumReturnCodes; ++r) {
      s.returns[o][r] = returns_[o][r].load(std::memory_order_relaxed);
    }
  }
  return s;
}

std::string ExportText(const MeasurementsSnapshot& m, uint64_t runtime_us, uint64_t operations) {
  std::string out;
  auto line = [&out](const std::string& section, const std::string& name,
                     const std::string& value) {
    out += "[" + section + "], " + name + ", " + value + "\n";
  };
  constexpr uint64_t kMicrosPerMilli = 1000;
  line("OVERALL", "RunTime(ms)", std::to_string(runtime_us / kMicrosPerMilli));
  const double throughput =
      runtime_us == 0 ? 0.0 : 1e6 * static_cast<double>(operations) / static_cast<double>(runtime_us);
  line("OVERALL", "Throughput(ops/sec)", FormatDouble(throughput));
  // Not in YCSB's report: the count the throughput was computed from, so that scripts can
  // relate per-run counters (context switches, CPU) to operations without the rounding of
  // RunTime(ms).
  line("OVERALL", "Operations", std::to_string(operations));

  auto latency_lines = [&](const std::string& section, const HistogramSnapshot& h) {
    line(section, "Operations", std::to_string(h.count()));
    if (h.count() == 0) return;
    line(section, "AverageLatency(us)", FormatDouble(h.Mean()));
    line(section, "MinLatency(us)", std::to_string(h.min()));
    line(section, "MaxLatency(us)", std::to_string(h.max()));
    for (int p : kReportedPercentiles) {
      line(section, std::to_string(p) + "thPercentileLatency(us)",
           std::to_string(h.Percentile(p)));
    }
  };
  for (int o = 0; o < kNumOpTypes; ++o) {
    const std::string name = kOpTypeNames[o];
    uint64_t returns = 0;
    for (uint64_t r : m.returns[o]) returns += r;
    const HistogramSnapshot& ok = m.latency[o][0];
    const HistogramSnapshot& failed = m.latency[o][1];
    if (ok.count() > 0 || returns > 0) {
      latency_lines(name, ok);
      for (int r = 0; r < kNumReturnCodes; ++r) {
        if (m.returns[o][r] > 0) {
          line(name, std::string("Return=") + kReturnCodeNames[r], std::to_string(m.returns[o][r]));
        }
      }
    }
    if (failed.count() > 0) latency_lines(name + "-FAILED", failed);
  }
  return out;
}

std::string StatusSummary(const std::string& name, const HistogramSnapshot& h) {
  if (h.count() == 0) return "";
  return "[" + name + ": Count=" + std::to_string(h.count()) +
         ", Max=" + std::to_string(h.max()) + ", Min=" + std::to_string(h.min()) +
         ", Avg=" + FormatTwoDecimals(h.Mean()) + ", 90=" + std::to_string(h.Percentile(90)) +
         ", 99=" + std::to_string(h.Percentile(99)) +
         ", 99.9=" + std::to_string(h.Percentile(99.9)) +
         ", 99.99=" + std::to_string(h.Percentile(99.99)) + "]";
}

std::string FormatRemaining(uint64_t seconds) {
  std::string out;
  auto part = [&out](uint64_t n, const char* unit) {
    out += std::to_string(n) + " " + unit + (n == 1 ? "" : "s") + " ";
  };
  constexpr uint64_t kDay = 86400, kHour = 3600, kMinute = 60;
  if (seconds >= kDay) part(seconds / kDay, "day");
  seconds %= kDay;
  if (seconds >= kHour) part(seconds / kHour, "hour");
  seconds %= kHour;
  if (seconds >= kMinute) part(seconds / kMinute, "minute");
  seconds %= kMinute;
  if (out.empty() || seconds > 0) part(seconds, "second");
  out.pop_back();
  return out;
}

}  // namespace nova::ycsb
