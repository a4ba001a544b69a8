#include "common/metrics.h"

#include <sys/resource.h>

#include <glog/logging.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace nova {

namespace {

// Prometheus "le" boundaries are 2^0 .. 2^kPrometheusMaxLeLog2, then +Inf: up to about
// 12 days in microseconds or 1 TiB in bytes, in 42 series per histogram.
constexpr int kPrometheusMaxLeLog2 = 40;

// Quantiles exported as <name>_quantile gauges and shown by DumpText, with their labels.
struct Quantile {
  double percentile;
  const char* label;       // Prometheus quantile label, in [0, 1]
  const char* text_label;  // DumpText column name
};
constexpr Quantile kQuantiles[] = {
    {50.0, "0.5", "p50"},
    {90.0, "0.9", "p90"},
    {99.0, "0.99", "p99"},
    {99.9, "0.999", "p999"},
};

// Suffixes of the series a histogram exports besides its own name.
constexpr std::string_view kHistogramSuffixes[] = {"_bucket", "_sum", "_count", "_quantile"};

// Shortest text that reads back as the same double, in Prometheus' spelling of the
// special values.
std::string FormatDouble(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  DCHECK(ec == std::errc());
  return std::string(buf, end);
}

// HELP text escapes backslash and newline (exposition format 0.0.4).
std::string EscapeHelp(std::string_view help) {
  std::string out;
  out.reserve(help.size());
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

void AppendHeader(std::string* out, std::string_view name, std::string_view help,
                  const char* type) {
  *out += "# HELP ";
  *out += name;
  *out += ' ';
  *out += EscapeHelp(help);
  *out += "\n# TYPE ";
  *out += name;
  *out += ' ';
  *out += type;
  *out += '\n';
}

void AtomicMin(std::atomic<uint64_t>* a, uint64_t v) {
  uint64_t cur = a->load(std::memory_order_relaxed);
  while (v < cur && !a->compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}

void AtomicMax(std::atomic<uint64_t>* a, uint64_t v) {
  uint64_t cur = a->load(std::memory_order_relaxed);
  while (v > cur && !a->compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------
// HistogramBuckets

size_t HistogramBuckets::Index(uint64_t value) {
  if (value == 0) return 0;
  // Upper-inclusive buckets: place value - 1 in lower-inclusive ones, shifted by one.
  uint64_t w = value - 1;
  if (w < kSubBuckets) return 1 + w;
  int k = std::bit_width(w) - 1;  // 2^k <= w < 2^(k+1), k >= kSubBucketBits
  uint64_t sub = (w >> (k - kSubBucketBits)) & (kSubBuckets - 1);
  return 1 + kSubBuckets + static_cast<size_t>(k - kSubBucketBits) * kSubBuckets + sub;
}

double HistogramBuckets::Lower(size_t i) {
  DCHECK_LT(i, kCount);
  if (i == 0) return 0;
  if (i <= kSubBuckets) return static_cast<double>(i - 1);
  size_t j = i - 1 - kSubBuckets;
  int k = kSubBucketBits + static_cast<int>(j / kSubBuckets);
  double width = std::ldexp(1.0, k - kSubBucketBits);
  return std::ldexp(1.0, k) + static_cast<double>(j % kSubBuckets) * width;
}

double HistogramBuckets::Upper(size_t i) {
  DCHECK_LT(i, kCount);
  if (i == 0) return 0;
  if (i <= kSubBuckets) return static_cast<double>(i);
  size_t j = i - 1 - kSubBuckets;
  int k = kSubBucketBits + static_cast<int>(j / kSubBuckets);
  return Lower(i) + std::ldexp(1.0, k - kSubBucketBits);
}

// ---------------------------------------------------------------------------------------
// HistogramSnapshot

double HistogramSnapshot::Mean() const {
  return count_ == 0 ? 0.0 : static_cast<double>(sum_) / static_cast<double>(count_);
}

double HistogramSnapshot::Percentile(double p) const {
  if (count_ == 0) return 0;
  if (p <= 0) return static_cast<double>(min());
  if (p >= 100) return static_cast<double>(max_);
  // Nearest rank: the smallest r such that r / count >= p / 100.
  auto rank = static_cast<uint64_t>(std::ceil(p / 100.0 * static_cast<double>(count_)));
  rank = std::clamp<uint64_t>(rank, 1, count_);
  uint64_t before = 0;
  for (size_t i = 0; i < buckets_.size(); ++i) {
    uint64_t n = buckets_[i];
    if (n == 0) continue;
    if (before + n >= rank) {
      // Spread the bucket's n values evenly over (lower, upper]: the r-th of them sits
      // at lower + r / n * width.
      double lower = HistogramBuckets::Lower(i);
      double upper = HistogramBuckets::Upper(i);
      double fraction = static_cast<double>(rank - before) / static_cast<double>(n);
      double v = lower + fraction * (upper - lower);
      return std::clamp(v, static_cast<double>(min()), static_cast<double>(max_));
    }
    before += n;
  }
  return static_cast<double>(max_);  // only if buckets and count_ disagree
}

uint64_t HistogramSnapshot::CountAtMost(uint64_t bound) const {
  size_t last = HistogramBuckets::Index(bound);
  uint64_t n = 0;
  for (size_t i = 0; i <= last; ++i) n += buckets_[i];
  return n;
}

void HistogramSnapshot::Merge(const HistogramSnapshot& other) {
  for (size_t i = 0; i < buckets_.size(); ++i) buckets_[i] += other.buckets_[i];
  count_ += other.count_;
  sum_ += other.sum_;
  min_ = std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
}

// ---------------------------------------------------------------------------------------
// Histogram

void Histogram::Record(uint64_t value) {
  sum_.fetch_add(value, std::memory_order_relaxed);
  AtomicMin(&min_, value);
  AtomicMax(&max_, value);
  buckets_[HistogramBuckets::Index(value)].fetch_add(1, std::memory_order_release);
}

void Histogram::MergeFrom(const HistogramSnapshot& snapshot) {
  if (snapshot.count() == 0) return;
  sum_.fetch_add(snapshot.sum(), std::memory_order_relaxed);
  AtomicMin(&min_, snapshot.min());
  AtomicMax(&max_, snapshot.max());
  for (size_t i = 0; i < buckets_.size(); ++i) {
    uint64_t n = snapshot.bucket_count(i);
    if (n != 0) buckets_[i].fetch_add(n, std::memory_order_release);
  }
}

HistogramSnapshot Histogram::Snapshot() const {
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
// MetricsRegistry

struct MetricsRegistry::Row {
  std::string name;
  std::string help;
  Type type;
  uint64_t counter = 0;
  double gauge = 0;
  HistogramSnapshot histogram;
};

MetricsRegistry::MetricsRegistry() = default;
MetricsRegistry::~MetricsRegistry() = default;

bool MetricsRegistry::IsValidName(std::string_view name) {
  if (name.empty()) return false;
  auto is_start = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
  };
  if (!is_start(name[0])) return false;
  return std::all_of(name.begin() + 1, name.end(),
                     [&](char c) { return is_start(c) || (c >= '0' && c <= '9'); });
}

MetricsRegistry::Entry* MetricsRegistry::GetOrCreateLocked(std::string_view name,
                                                           std::string_view help, Type type) {
  CHECK(IsValidName(name)) << "invalid metric name '" << name
                           << "': must match [a-zA-Z_:][a-zA-Z0-9_:]*";
  auto it = entries_.find(name);
  if (it != entries_.end()) {
    CHECK(it->second.type == type) << "metric '" << name << "' already exists with another type";
    return &it->second;
  }
  // A new name must not shadow a histogram's series, nor a histogram another's name.
  for (std::string_view suffix : kHistogramSuffixes) {
    if (name.size() > suffix.size() && name.ends_with(suffix)) {
      auto base = entries_.find(name.substr(0, name.size() - suffix.size()));
      CHECK(base == entries_.end() || base->second.type != Type::kHistogram)
          << "metric '" << name << "' collides with the series of histogram '" << base->first
          << "'";
    }
    if (type == Type::kHistogram) {
      std::string series = std::string(name) + std::string(suffix);
      CHECK(entries_.find(series) == entries_.end())
          << "histogram '" << name << "' would collide with metric '" << series << "'";
    }
  }
  Entry& e = entries_[std::string(name)];
  e.type = type;
  e.help = std::string(help);
  return &e;
}

Counter* MetricsRegistry::GetCounter(std::string_view name, std::string_view help) {
  MutexLock l(&mu_);
  Entry* e = GetOrCreateLocked(name, help, Type::kCounter);
  if (!e->counter) e->counter = std::make_unique<Counter>();
  return e->counter.get();
}

Gauge* MetricsRegistry::GetGauge(std::string_view name, std::string_view help) {
  MutexLock l(&mu_);
  Entry* e = GetOrCreateLocked(name, help, Type::kGauge);
  if (!e->gauge) e->gauge = std::make_unique<Gauge>();
  return e->gauge.get();
}

Histogram* MetricsRegistry::GetHistogram(std::string_view name, std::string_view help) {
  MutexLock l(&mu_);
  Entry* e = GetOrCreateLocked(name, help, Type::kHistogram);
  if (!e->histogram) e->histogram = std::make_unique<Histogram>();
  return e->histogram.get();
}

void MetricsRegistry::RegisterCallbackGauge(std::string_view name, std::string_view help,
                                            std::function<double()> fn) {
  CHECK(fn) << "callback gauge '" << name << "' needs a function";
  MutexLock cl(&callback_mu_);
  MutexLock l(&mu_);
  Entry* e = GetOrCreateLocked(name, help, Type::kCallbackGauge);
  e->help = std::string(help);
  e->callback = std::move(fn);
}

void MetricsRegistry::UnregisterCallbackGauge(std::string_view name) {
  MutexLock cl(&callback_mu_);
  MutexLock l(&mu_);
  auto it = entries_.find(name);
  if (it == entries_.end()) return;
  CHECK(it->second.type == Type::kCallbackGauge)
      << "metric '" << name << "' is not a callback gauge";
  entries_.erase(it);
}

void MetricsRegistry::RegisterDebugSection(std::string_view name,
                                           std::function<std::string()> fn) {
  CHECK(fn) << "debug section '" << name << "' needs a function";
  MutexLock cl(&callback_mu_);
  debug_sections_.insert_or_assign(std::string(name), std::move(fn));
}

void MetricsRegistry::UnregisterDebugSection(std::string_view name) {
  MutexLock cl(&callback_mu_);
  auto it = debug_sections_.find(name);
  if (it != debug_sections_.end()) debug_sections_.erase(it);
}

std::string MetricsRegistry::DumpDebug() const {
  MutexLock cl(&callback_mu_);
  std::string out;
  for (const auto& [name, fn] : debug_sections_) {
    out += "== " + name + " ==\n" + fn() + "\n";
  }
  return out;
}

std::vector<MetricsRegistry::Row> MetricsRegistry::Collect() const {
  std::vector<Row> rows;
  // Callback functions run with callback_mu_ held (so Unregister waits for them) but not
  // mu_ (so they may call Get*()); callback_mu_ also keeps their entries in place.
  MutexLock cl(&callback_mu_);
  std::vector<std::pair<size_t, const std::function<double()>*>> callbacks;
  {
    MutexLock l(&mu_);
    rows.reserve(entries_.size());
    for (const auto& [name, e] : entries_) {
      Row row;
      row.name = name;
      row.help = e.help;
      row.type = e.type;
      switch (e.type) {
        case Type::kCounter:
          row.counter = e.counter->value();
          break;
        case Type::kGauge:
          row.gauge = e.gauge->value();
          break;
        case Type::kHistogram:
          row.histogram = e.histogram->Snapshot();
          break;
        case Type::kCallbackGauge:
          callbacks.emplace_back(rows.size(), &e.callback);
          break;
      }
      rows.push_back(std::move(row));
    }
  }
  for (const auto& [index, fn] : callbacks) rows[index].gauge = (*fn)();
  return rows;
}

std::string MetricsRegistry::DumpPrometheus() const {
  std::string out;
  for (const Row& row : Collect()) {
    const std::string& name = row.name;
    switch (row.type) {
      case Type::kCounter:
        AppendHeader(&out, name, row.help, "counter");
        out += name + ' ' + std::to_string(row.counter) + '\n';
        break;
      case Type::kGauge:
      case Type::kCallbackGauge:
        AppendHeader(&out, name, row.help, "gauge");
        out += name + ' ' + FormatDouble(row.gauge) + '\n';
        break;
      case Type::kHistogram: {
        const HistogramSnapshot& h = row.histogram;
        AppendHeader(&out, name, row.help, "histogram");
        for (int b = 0; b <= kPrometheusMaxLeLog2; ++b) {
          uint64_t le = uint64_t{1} << b;
          out += name + "_bucket{le=\"" + std::to_string(le) + "\"} " +
                 std::to_string(h.CountAtMost(le)) + '\n';
        }
        out += name + "_bucket{le=\"+Inf\"} " + std::to_string(h.count()) + '\n';
        out += name + "_sum " + std::to_string(h.sum()) + '\n';
        out += name + "_count " + std::to_string(h.count()) + '\n';
        std::string qname = name + "_quantile";
        AppendHeader(&out, qname, row.help + " (quantiles estimated from " + name + ")", "gauge");
        for (const Quantile& q : kQuantiles) {
          double v = h.count() == 0 ? std::nan("") : h.Percentile(q.percentile);
          out += qname + "{quantile=\"" + q.label + "\"} " + FormatDouble(v) + '\n';
        }
        break;
      }
    }
  }
  return out;
}

std::string MetricsRegistry::DumpText() const {
  std::vector<Row> rows = Collect();
  size_t width = 0;
  for (const Row& row : rows) width = std::max(width, row.name.size());
  std::string out;
  char buf[64];
  for (const Row& row : rows) {
    const char* type = "";
    std::string value;
    switch (row.type) {
      case Type::kCounter:
        type = "counter";
        value = std::to_string(row.counter);
        break;
      case Type::kGauge:
      case Type::kCallbackGauge:
        type = "gauge";
        value = FormatDouble(row.gauge);
        break;
      case Type::kHistogram: {
        type = "histogram";
        const HistogramSnapshot& h = row.histogram;
        std::snprintf(buf, sizeof(buf), "count=%llu mean=%.1f min=%llu",
                      static_cast<unsigned long long>(h.count()), h.Mean(),
                      static_cast<unsigned long long>(h.min()));
        value = buf;
        for (const Quantile& q : kQuantiles) {
          std::snprintf(buf, sizeof(buf), " %s=%.1f", q.text_label, h.Percentile(q.percentile));
          value += buf;
        }
        value += " max=" + std::to_string(h.max());
        break;
      }
    }
    std::string line = row.name;
    line.resize(width + 2, ' ');
    std::snprintf(buf, sizeof(buf), "%-11s", type);
    out += line + buf + value + '\n';
  }
  return out;
}

ProcessUsage ReadProcessUsage() {
  ProcessUsage u;
  struct rusage ru {};
  if (::getrusage(RUSAGE_SELF, &ru) != 0) return u;
  const auto seconds = [](const struct timeval& tv) {
    return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
  };
  u.user_seconds = seconds(ru.ru_utime);
  u.system_seconds = seconds(ru.ru_stime);
  u.voluntary_switches = static_cast<uint64_t>(ru.ru_nvcsw);
  u.involuntary_switches = static_cast<uint64_t>(ru.ru_nivcsw);
  return u;
}

void RegisterProcessGauges(MetricsRegistry* registry) {
  registry->RegisterCallbackGauge("process_cpu_user_seconds",
                                  "User CPU time of the whole process since it started",
                                  [] { return ReadProcessUsage().user_seconds; });
  registry->RegisterCallbackGauge("process_cpu_system_seconds",
                                  "System CPU time of the whole process since it started",
                                  [] { return ReadProcessUsage().system_seconds; });
  registry->RegisterCallbackGauge(
      "process_voluntary_context_switches",
      "Voluntary context switches of the process (a thread waited: I/O, a lock, a condition)",
      [] { return static_cast<double>(ReadProcessUsage().voluntary_switches); });
  registry->RegisterCallbackGauge(
      "process_involuntary_context_switches",
      "Involuntary context switches of the process (a thread was preempted)",
      [] { return static_cast<double>(ReadProcessUsage().involuntary_switches); });
}

}  // namespace nova
