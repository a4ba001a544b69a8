// Metrics: counters, gauges and histograms kept in a MetricsRegistry and exported in the
// Prometheus text format (see metrics_http.h) or as a human-readable table.
//
// There is no global registry: each daemon owns one MetricsRegistry and hands a pointer
// to its components, which look up their metrics once (at construction) and keep the
// returned pointers. Updating a metric is then a few relaxed atomic operations.
//
//   Counter* puts = registry->GetCounter("ltc_puts_total", "Puts accepted by this LTC");
//   Histogram* lat = registry->GetHistogram("ltc_put_latency_us", "Put latency");
//   puts->Increment();
//   lat->Record(elapsed_us);
//
// Naming: names must match the Prometheus pattern [a-zA-Z_:][a-zA-Z0-9_:]* and should end
// in their unit (_us, _bytes, _total for counters). Labels are not supported: a metric
// that varies by peer or range encodes it in its name.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/mutex.h"

namespace nova {

// A monotonically increasing count. Thread-safe: all methods may be called concurrently.
class Counter {
 public:
  Counter() = default;
  Counter(const Counter&) = delete;
  Counter& operator=(const Counter&) = delete;

  void Increment(uint64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

// A value that goes up and down. It holds a double: integers are exact up to 2^53, which
// covers every count or byte size we export. Thread-safe: all methods may be called
// concurrently; concurrent Add()s never lose an update.
class Gauge {
 public:
  Gauge() = default;
  Gauge(const Gauge&) = delete;
  Gauge& operator=(const Gauge&) = delete;

  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  void Add(double delta) { value_.fetch_add(delta, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0.0};
};

// The bucket layout shared by every Histogram (so any two histograms can be merged).
//
// Bucket 0 holds exactly the value 0. Bucket i > 0 holds the values in the half-open range
// (Lower(i), Upper(i)]: upper-inclusive so that every power of two is a bucket's upper
// bound, which makes Prometheus "le" (less-or-equal) boundaries at powers of two exact.
// Values 1..8 get one bucket each; above that every power-of-two range (2^k, 2^(k+1)] is
// cut into kSubBuckets equal parts, so a bucket is never wider than 1/8 of the values it
// holds: any percentile estimate is off by at most max(1, value/8).
class HistogramBuckets {
 public:
  // 8 linear sub-buckets per power of two: at most 12.5% relative error, 497 buckets
  // (about 4 KiB per histogram) to cover the whole uint64 range.
  static constexpr int kSubBucketBits = 3;
  static constexpr uint64_t kSubBuckets = uint64_t{1} << kSubBucketBits;
  static constexpr size_t kCount = 1 + kSubBuckets + (64 - kSubBucketBits) * kSubBuckets;

  // Returns the index in [0, kCount) of the bucket holding `value`.
  static size_t Index(uint64_t value);
  // Exclusive lower and inclusive upper bound of bucket i (both 0 for bucket 0). Doubles,
  // because the last bucket's upper bound is 2^64.
  // REQUIRES: i < kCount
  static double Lower(size_t i);
  static double Upper(size_t i);
};

// An immutable copy of a Histogram's state, with the statistics computed from it.
// A value type: thread-compatible (const methods may be called concurrently).
class HistogramSnapshot {
 public:
  HistogramSnapshot() = default;

  uint64_t count() const { return count_; }
  // Sum of recorded values (wraps around on overflow of uint64).
  uint64_t sum() const { return sum_; }
  // Smallest and largest recorded value; 0 when count() == 0.
  uint64_t min() const { return count_ == 0 ? 0 : min_; }
  uint64_t max() const { return max_; }
  // sum() / count(); 0 when count() == 0.
  double Mean() const;
  // The p-th percentile, p in [0, 100] (clamped), by nearest rank and interpolated
  // linearly within the bucket holding that rank, then clamped to [min(), max()].
  // Off from the exact value by at most that bucket's width (see HistogramBuckets).
  // Returns 0 when count() == 0.
  double Percentile(double p) const;
  // Number of recorded values <= bound. Exact when bound is a bucket's upper bound (every
  // power of two and every value <= 8 is); otherwise it also counts the rest of the bucket
  // holding bound.
  uint64_t CountAtMost(uint64_t bound) const;
  uint64_t bucket_count(size_t i) const { return buckets_[i]; }

  // Adds other's values to this snapshot.
  void Merge(const HistogramSnapshot& other);

 private:
  friend class Histogram;

  std::array<uint64_t, HistogramBuckets::kCount> buckets_{};
  uint64_t count_ = 0;
  uint64_t sum_ = 0;
  uint64_t min_ = UINT64_MAX;
  uint64_t max_ = 0;
};

// A distribution of uint64 values (latencies in microseconds, sizes in bytes) in
// exponential buckets (see HistogramBuckets). Thread-safe: Record() is lock-free (relaxed
// atomic adds plus a compare-and-swap when a new min or max is seen) and may run
// concurrently with everything else. A Snapshot() taken during concurrent Record()s is
// not a single point in time: sum() may include a value whose bucket it missed.
class Histogram {
 public:
  Histogram() = default;
  Histogram(const Histogram&) = delete;
  Histogram& operator=(const Histogram&) = delete;

  void Record(uint64_t value);
  // Adds every value of `snapshot` (e.g. from a per-thread or per-run histogram).
  void MergeFrom(const HistogramSnapshot& snapshot);
  // Returns a copy of the current state. O(HistogramBuckets::kCount).
  HistogramSnapshot Snapshot() const;

  // Shorthands for Snapshot().x(); each takes a snapshot, so prefer one Snapshot() when
  // several statistics are needed together.
  uint64_t Count() const { return Snapshot().count(); }
  uint64_t Sum() const { return sum_.load(std::memory_order_relaxed); }
  uint64_t Min() const { return Snapshot().min(); }
  uint64_t Max() const { return Snapshot().max(); }
  double Mean() const { return Snapshot().Mean(); }
  double Percentile(double p) const { return Snapshot().Percentile(p); }

 private:
  // Record() updates sum_, min_ and max_ (relaxed) before its bucket (release); Snapshot()
  // loads the buckets (acquire) first, so a snapshot that counts a value also sees it in
  // min_ and max_. The count is the sum of the buckets, so it always matches them.
  std::array<std::atomic<uint64_t>, HistogramBuckets::kCount> buckets_{};
  std::atomic<uint64_t> sum_{0};
  std::atomic<uint64_t> min_{UINT64_MAX};
  std::atomic<uint64_t> max_{0};
};

// The named metrics of one process. Thread-safe: all methods may be called concurrently.
//
// Metrics live as long as the registry: the pointers returned by Get*() stay valid until
// it is destroyed, and a metric cannot be removed (only callback gauges can).
//
// Invalid names are CHECK failures, not Status errors: names are compile-time constants
// (or built from them and integers), so a bad one is a programming error that the first
// test run finds. Code that builds names from outside input must check IsValidName()
// first. Asking for an existing name with a different metric type, or a name that would
// collide with a histogram's exported series (<h>_bucket, <h>_sum, <h>_count,
// <h>_quantile), is likewise a CHECK failure.
//
// Prometheus export (DumpPrometheus):
//   - a counter as `name value` (# TYPE counter), a gauge as `name value` (# TYPE gauge);
//   - a histogram as `name_bucket{le="B"}` with B = 1, 2, 4, ..., 2^40 and +Inf (exact,
//     see HistogramBuckets), `name_sum` and `name_count` (# TYPE histogram); plus a gauge
//     family `name_quantile{quantile="Q"}` for Q in 0.5, 0.9, 0.99, 0.999, estimated from
//     the fine-grained buckets (NaN while the histogram is empty), because the coarse
//     Prometheus buckets give poor quantiles.
// Families appear sorted by name.
//
// Lock order: callback_mu_ before mu_.
class MetricsRegistry {
 public:
  MetricsRegistry();
  ~MetricsRegistry();
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  // Get-or-create. Returns the metric named `name`, creating it with `help` if absent
  // (if present, `help` is ignored). The registry owns the metric; the pointer is never
  // null and lives as long as the registry.
  // REQUIRES: IsValidName(name); the name is not used by a metric of another type.
  Counter* GetCounter(std::string_view name, std::string_view help);
  Gauge* GetGauge(std::string_view name, std::string_view help);
  Histogram* GetHistogram(std::string_view name, std::string_view help);

  // Exports a gauge whose value `fn` computes at each dump (e.g. a load-imbalance
  // figure a component derives from its state). Registering an existing callback gauge
  // replaces its function. `fn` runs on the dumping thread with no registry lock held
  // except callback_mu_, so it may use the registry's Get*() but not (Un)Register.
  // Anything `fn` captures must stay alive until UnregisterCallbackGauge(name) returns
  // or the registry is destroyed.
  // REQUIRES: IsValidName(name); the name is not used by a metric of another type.
  void RegisterCallbackGauge(std::string_view name, std::string_view help,
                             std::function<double()> fn);
  // Removes a callback gauge; a no-op if there is none of that name. When it returns, the
  // function is not running and will not run again.
  // REQUIRES: the caller holds no lock that the gauge's function acquires.
  void UnregisterCallbackGauge(std::string_view name);

  // Debug sections: named blocks of text `fn` renders at each DumpDebug() (e.g. an LTC
  // range's Drange boundaries), for what does not fit a number. Same lifetime rules as
  // callback gauges: `fn` runs with callback_mu_ held; registering a name again replaces
  // its function.
  void RegisterDebugSection(std::string_view name, std::function<std::string()> fn);
  void UnregisterDebugSection(std::string_view name);
  // Every section as "== name ==\n<text>\n", sorted by name.
  std::string DumpDebug() const;

  // The Prometheus text exposition format (version 0.0.4), described above.
  std::string DumpPrometheus() const;
  // One line per metric, aligned, for logs and debugging; histograms show count, mean,
  // min, p50, p90, p99, p99.9 and max.
  std::string DumpText() const;

  // True iff `name` matches [a-zA-Z_:][a-zA-Z0-9_:]*.
  static bool IsValidName(std::string_view name);

 private:
  enum class Type { kCounter, kGauge, kHistogram, kCallbackGauge };
  struct Entry {
    Type type;
    std::string help;
    // Exactly one of these is set, according to type.
    std::unique_ptr<Counter> counter;
    std::unique_ptr<Gauge> gauge;
    std::unique_ptr<Histogram> histogram;
    std::function<double()> callback;  // written under both callback_mu_ and mu_
  };
  // A metric's value, read for a dump.
  struct Row;

  // Returns the entry for `name`, creating an empty one of `type` if absent.
  // CHECK-fails on an invalid name, a type mismatch or a histogram series collision.
  Entry* GetOrCreateLocked(std::string_view name, std::string_view help, Type type) REQUIRES(mu_);
  // Reads every metric, running callback gauges.
  std::vector<Row> Collect() const;

  // Held while a callback gauge's function may run or be changed, so that
  // UnregisterCallbackGauge can promise the function is no longer running.
  // Lock order: callback_mu_ before mu_.
  mutable Mutex callback_mu_ ACQUIRED_BEFORE(mu_);
  mutable Mutex mu_;
  // Map nodes never move, so Entry pointers stay valid until the entry is erased (only
  // callback gauges are).
  std::map<std::string, Entry, std::less<>> entries_ GUARDED_BY(mu_);
  std::map<std::string, std::function<std::string()>, std::less<>> debug_sections_
      GUARDED_BY(callback_mu_);
};

// The process's resource usage (getrusage(RUSAGE_SELF)): CPU time of all its threads
// since it started, and its context switches. A value type.
struct ProcessUsage {
  double user_seconds = 0;
  double system_seconds = 0;
  uint64_t voluntary_switches = 0;    // the process waited (I/O, a lock, a condition)
  uint64_t involuntary_switches = 0;  // the kernel preempted it
};
// Reads the usage now (one system call). All zero if getrusage fails (it cannot for
// RUSAGE_SELF).
ProcessUsage ReadProcessUsage();

// Registers callback gauges computed at each dump from ReadProcessUsage():
// process_cpu_user_seconds, process_cpu_system_seconds, process_voluntary_context_switches
// and process_involuntary_context_switches. Their functions capture nothing: they never
// need unregistering, and registering again (another component of the process) is harmless.
void RegisterProcessGauges(MetricsRegistry* registry);

}  // namespace nova
