// Measurements: per-operation latency histograms and return-code counts, exported in
// YCSB's text format (TextMeasurementsExporter with HdrHistogram):
//
//   [OVERALL], RunTime(ms), 10110
//   [OVERALL], Throughput(ops/sec), 98.91
//   [OVERALL], Operations, 1000            (not in YCSB's: the operations counted)
//   [READ], Operations, 511
//   [READ], AverageLatency(us), 465.56
//   [READ], MinLatency(us), 265
//   [READ], MaxLatency(us), 10791
//   [READ], 50thPercentileLatency(us), 431
//   [READ], 95thPercentileLatency(us), 649
//   [READ], 99thPercentileLatency(us), 1017
//   [READ], Return=OK, 511
//
// As in YCSB's DBWrapper, a failed operation's latency goes to "<OP>-FAILED" while its
// return code is counted under "<OP>" ([READ], Return=NOT_FOUND, 3).
//
// Thread safety: LatencyHistogram and Measurements are thread-safe (lock-free recording);
// snapshots are values.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace nova::ycsb {

// The measured series. DO NOT reorder without updating kSeriesNames in the .cc.
enum class OpType : int {
  kInsert = 0,
  kRead,
  kUpdate,
  kScan,
  kReadModifyWrite,
  kDelete,
  kVerify,   // dataintegrity checks (their latency and OK/UNEXPECTED_STATE/ERROR)
  kCleanup,  // per-thread DB cleanup, as YCSB measures it
};
constexpr int kNumOpTypes = 8;
// "INSERT", "READ", ..., "READ-MODIFY-WRITE", ...
const char* OpTypeName(OpType op);

// YCSB's Status names that a measurement can report.
enum class ReturnCode : int { kOk = 0, kNotFound, kError, kUnexpectedState };
constexpr int kNumReturnCodes = 4;
const char* ReturnCodeName(ReturnCode rc);

// A latency distribution (microseconds) in log-linear buckets: values below 128 exact,
// above that 64 buckets per power of two, so a reported percentile is within 1/64 (1.6%)
// of the true value. ~30 KiB.
class HistogramSnapshot {
 public:
  static constexpr int kSubBucketBits = 6;  // 64 buckets per power of two
  static constexpr uint64_t kLinearMax = uint64_t{2} << kSubBucketBits;  // 128: exact below
  static constexpr size_t kNumBuckets =
      kLinearMax + (64 - kSubBucketBits - 1) * (uint64_t{1} << kSubBucketBits);

  static size_t BucketOf(uint64_t value);
  // Largest value that lands in bucket i (what HdrHistogram reports as a percentile:
  // "highest equivalent value").
  static uint64_t BucketHigh(size_t i);

  uint64_t count() const { return count_; }
  uint64_t min() const { return count_ == 0 ? 0 : min_; }
  uint64_t max() const { return max_; }
  double Mean() const { return count_ == 0 ? 0.0 : static_cast<double>(sum_) / count_; }
  // The value at percentile p (0..100] by nearest rank, as its bucket's highest value
  // clamped to max(). 0 when empty.
  uint64_t Percentile(double p) const;
  // This minus an earlier snapshot of the same histogram (for per-interval figures).
  // min/max of the difference are estimated from the buckets.
  HistogramSnapshot Minus(const HistogramSnapshot& earlier) const;

 private:
  friend class LatencyHistogram;
  std::vector<uint64_t> buckets_ = std::vector<uint64_t>(kNumBuckets, 0);
  uint64_t count_ = 0, sum_ = 0, min_ = UINT64_MAX, max_ = 0;
};

class LatencyHistogram {
 public:
  LatencyHistogram();
  LatencyHistogram(const LatencyHistogram&) = delete;
  LatencyHistogram& operator=(const LatencyHistogram&) = delete;

  void Record(uint64_t value_us);
  HistogramSnapshot Snapshot() const;

 private:
  std::vector<std::atomic<uint64_t>> buckets_;
  std::atomic<uint64_t> sum_{0};
  std::atomic<uint64_t> min_{UINT64_MAX};
  std::atomic<uint64_t> max_{0};
};

// A point-in-time copy of every series.
struct MeasurementsSnapshot {
  // [op][failed ? 1 : 0]
  std::array<std::array<HistogramSnapshot, 2>, kNumOpTypes> latency;
  std::array<std::array<uint64_t, kNumReturnCodes>, kNumOpTypes> returns{};
};

class Measurements {
 public:
  Measurements() = default;
  Measurements(const Measurements&) = delete;
  Measurements& operator=(const Measurements&) = delete;

  // Records one operation: its latency under OP or OP-FAILED (anything but OK is a
  // failure, as YCSB's Status.isOk()) and its return code under OP.
  void Measure(OpType op, ReturnCode rc, uint64_t latency_us);
  MeasurementsSnapshot Snapshot() const;

 private:
  std::array<std::array<LatencyHistogram, 2>, kNumOpTypes> latency_;
  std::array<std::array<std::atomic<uint64_t>, kNumReturnCodes>, kNumOpTypes> returns_{};
};

// YCSB's final report (format above). `operations` counts every operation the client
// threads ran (failed ones too), as YCSB's throughput does. The run time is given in
// microseconds so that the throughput of a very short run is not a division by 0 ms.
std::string ExportText(const MeasurementsSnapshot& m, uint64_t runtime_us, uint64_t operations);

// One series' part of a status line, YCSB style:
// "[READ: Count=10, Max=12, Min=3, Avg=5.2, 90=8, 99=12, 99.9=12, 99.99=12]".
// Returns "" when the interval saw no operation of that series.
std::string StatusSummary(const std::string& name, const HistogramSnapshot& interval);

// YCSB's "est completion in 1 minute 4 seconds" wording of a duration.
std::string FormatRemaining(uint64_t seconds);

}  // namespace nova::ycsb
