#include "common/metrics.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/metrics_http.h"

namespace nova {
namespace {

// Returns the value on the line of `text` that starts with `series` + ' ', or NaN.
double SeriesValue(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() > series.size() && line.compare(0, series.size(), series) == 0 &&
        line[series.size()] == ' ') {
      return std::stod(line.substr(series.size() + 1));
    }
  }
  return std::nan("");
}

TEST(HistogramBucketsTest, BoundsContainTheirValues) {
  EXPECT_EQ(HistogramBuckets::Index(0), 0u);
  EXPECT_EQ(HistogramBuckets::Index(UINT64_MAX), HistogramBuckets::kCount - 1);
  std::vector<uint64_t> values = {1, 2, 7, 8, 9, 10, 15, 16, 17, 1000, 1023, 1024, 1025};
  values.push_back((uint64_t{1} << 40) - 1);
  values.push_back((uint64_t{1} << 63) + (uint64_t{1} << 12));  // exact as a double
  values.push_back(UINT64_MAX);
  for (int b = 0; b < 64; ++b) values.push_back(uint64_t{1} << b);
  for (uint64_t v : values) {
    size_t i = HistogramBuckets::Index(v);
    ASSERT_LT(i, HistogramBuckets::kCount) << v;
    auto d = static_cast<double>(v);
    EXPECT_LT(HistogramBuckets::Lower(i), d) << v;
    EXPECT_GE(HistogramBuckets::Upper(i), d) << v;
    // A bucket is at most 1/8 of its values wide (or 1).
    EXPECT_LE(HistogramBuckets::Upper(i) - HistogramBuckets::Lower(i), std::max(1.0, d / 8)) << v;
  }
  // Every power of two is an upper bound: Prometheus "le" boundaries are exact.
  for (int b = 0; b < 64; ++b) {
    uint64_t v = uint64_t{1} << b;
    EXPECT_EQ(HistogramBuckets::Upper(HistogramBuckets::Index(v)), static_cast<double>(v));
  }
  // Buckets tile the number line without gaps.
  for (size_t i = 1; i + 1 < HistogramBuckets::kCount; ++i) {
    ASSERT_EQ(HistogramBuckets::Upper(i), HistogramBuckets::Lower(i + 1)) << i;
  }
}

TEST(HistogramTest, EmptyAndBasicStatistics) {
  Histogram h;
  EXPECT_EQ(h.Count(), 0u);
  EXPECT_EQ(h.Min(), 0u);
  EXPECT_EQ(h.Max(), 0u);
  EXPECT_EQ(h.Mean(), 0);
  EXPECT_EQ(h.Percentile(50), 0);

  for (uint64_t v : {0, 3, 5, 100, 12}) h.Record(v);
  HistogramSnapshot s = h.Snapshot();
  EXPECT_EQ(s.count(), 5u);
  EXPECT_EQ(s.sum(), 120u);
  EXPECT_EQ(s.min(), 0u);
  EXPECT_EQ(s.max(), 100u);
  EXPECT_DOUBLE_EQ(s.Mean(), 24.0);
  EXPECT_EQ(s.Percentile(0), 0);
  EXPECT_EQ(s.Percentile(100), 100);
  EXPECT_EQ(s.Percentile(50), 5);  // values up to 8 have exact buckets
  EXPECT_EQ(s.CountAtMost(4), 2u);
  EXPECT_EQ(s.CountAtMost(8), 3u);
  EXPECT_EQ(s.CountAtMost(128), 5u);
}

TEST(HistogramTest, PercentilesMatchSortedVector) {
  const unsigned seed = std::random_device()();
  std::printf("seed=%u\n", seed);
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);

  // Uniform over a wide range, log-uniform (latency-like) and a narrow cluster.
  std::vector<std::function<uint64_t()>> distributions = {
      [&] { return std::uniform_int_distribution<uint64_t>(0, 1'000'000)(rng); },
      [&] {
        return static_cast<uint64_t>(std::exp(std::uniform_real_distribution<double>(0, 25)(rng)));
      },
      [&] { return std::uniform_int_distribution<uint64_t>(950, 1050)(rng); },
  };
  for (size_t d = 0; d < distributions.size(); ++d) {
    SCOPED_TRACE("distribution " + std::to_string(d));
    Histogram h;
    std::vector<uint64_t> values(1 + rng() % 20000);
    for (uint64_t& v : values) {
      v = distributions[d]();
      h.Record(v);
    }
    std::sort(values.begin(), values.end());
    HistogramSnapshot s = h.Snapshot();
    ASSERT_EQ(s.count(), values.size());
    EXPECT_EQ(s.min(), values.front());
    EXPECT_EQ(s.max(), values.back());
    for (double p : {1.0, 10.0, 25.0, 50.0, 75.0, 90.0, 99.0, 99.9, 99.99}) {
      // Nearest rank, as the histogram defines it.
      auto rank = static_cast<size_t>(std::ceil(p / 100 * static_cast<double>(values.size())));
      auto exact = static_cast<double>(values[std::clamp<size_t>(rank, 1, values.size()) - 1]);
      double estimate = s.Percentile(p);
      EXPECT_LE(std::abs(estimate - exact), std::max(1.0, exact / 8))
          << "p" << p << " exact " << exact << " estimate " << estimate;
    }
  }
}

TEST(HistogramTest, MergeAddsEverything) {
  Histogram a;
  Histogram b;
  for (uint64_t v = 1; v <= 100; ++v) a.Record(v);
  for (uint64_t v = 1000; v <= 1100; ++v) b.Record(v);
  HistogramSnapshot merged = a.Snapshot();
  merged.Merge(b.Snapshot());
  EXPECT_EQ(merged.count(), 201u);
  EXPECT_EQ(merged.min(), 1u);
  EXPECT_EQ(merged.max(), 1100u);
  EXPECT_EQ(merged.sum(), a.Sum() + b.Sum());

  a.MergeFrom(b.Snapshot());
  HistogramSnapshot s = a.Snapshot();
  EXPECT_EQ(s.count(), 201u);
  EXPECT_EQ(s.max(), 1100u);
  EXPECT_EQ(s.Percentile(50), merged.Percentile(50));

  Histogram empty;
  empty.MergeFrom(HistogramSnapshot());
  EXPECT_EQ(empty.Count(), 0u);
  EXPECT_EQ(empty.Min(), 0u);
}

TEST(MetricsRegistryTest, GetOrCreateReturnsTheSameMetric) {
  MetricsRegistry r;
  Counter* c = r.GetCounter("puts_total", "Puts");
  EXPECT_EQ(r.GetCounter("puts_total", "ignored"), c);
  EXPECT_NE(r.GetCounter("gets_total", "Gets"), c);
  Gauge* g = r.GetGauge("memtables", "Memtables");
  EXPECT_EQ(r.GetGauge("memtables", ""), g);
  Histogram* h = r.GetHistogram("put_latency_us", "Put latency");
  EXPECT_EQ(r.GetHistogram("put_latency_us", ""), h);

  c->Increment();
  c->Increment(4);
  EXPECT_EQ(c->value(), 5u);
  g->Set(3);
  g->Add(-1.5);
  EXPECT_DOUBLE_EQ(g->value(), 1.5);
}

TEST(MetricsRegistryTest, ValidNames) {
  EXPECT_TRUE(MetricsRegistry::IsValidName("a"));
  EXPECT_TRUE(MetricsRegistry::IsValidName("_a:b_9"));
  EXPECT_TRUE(MetricsRegistry::IsValidName("nova:ltc_puts_total"));
  EXPECT_FALSE(MetricsRegistry::IsValidName(""));
  EXPECT_FALSE(MetricsRegistry::IsValidName("9a"));
  EXPECT_FALSE(MetricsRegistry::IsValidName("a-b"));
  EXPECT_FALSE(MetricsRegistry::IsValidName("a b"));
  EXPECT_FALSE(MetricsRegistry::IsValidName("a.b"));
}

TEST(MetricsRegistryDeathTest, ProgrammingErrorsCheckFail) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  MetricsRegistry r;
  r.GetCounter("x_total", "");
  r.GetHistogram("lat_us", "");
  EXPECT_DEATH(r.GetCounter("bad-name", ""), "invalid metric name 'bad-name'");
  EXPECT_DEATH(r.GetGauge("x_total", ""), "already exists with another type");
  EXPECT_DEATH(r.GetCounter("lat_us_count", ""), "collides with the series of histogram");
  r.GetGauge("depth_sum", "");
  EXPECT_DEATH(r.GetHistogram("depth", ""), "would collide with metric 'depth_sum'");
}

TEST(MetricsRegistryTest, ConcurrentUpdatesAreNotLost) {
  MetricsRegistry r;
  constexpr int kThreads = 4;
  constexpr int kPerThread = 100000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&r, t] {
      // Every thread also looks the metrics up itself: get-or-create races too.
      Counter* c = r.GetCounter("ops_total", "Ops");
      Gauge* g = r.GetGauge("level", "Level");
      Histogram* h = r.GetHistogram("size_bytes", "Sizes");
      for (int i = 0; i < kPerThread; ++i) {
        c->Increment();
        g->Add(1);
        h->Record(static_cast<uint64_t>(t * kPerThread + i));
      }
    });
  }
  std::string dump;
  while (dump.size() < 10) dump = r.DumpPrometheus();  // dumps run alongside the writers
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(r.GetCounter("ops_total", "")->value(), uint64_t{kThreads} * kPerThread);
  EXPECT_DOUBLE_EQ(r.GetGauge("level", "")->value(), double{kThreads} * kPerThread);
  HistogramSnapshot s = r.GetHistogram("size_bytes", "")->Snapshot();
  EXPECT_EQ(s.count(), uint64_t{kThreads} * kPerThread);
  EXPECT_EQ(s.min(), 0u);
  EXPECT_EQ(s.max(), uint64_t{kThreads} * kPerThread - 1);
}

TEST(MetricsRegistryTest, PrometheusFormat) {
  MetricsRegistry r;
  r.GetCounter("puts_total", "Puts accepted")->Increment(7);
  r.GetGauge("ratio", "A \\ ratio\nover two lines")->Set(0.25);
  Histogram* h = r.GetHistogram("lat_us", "Latency");
  h->Record(4);
  h->Record(5);
  h->Record(3000);
  r.GetHistogram("empty_us", "Nothing yet");
  std::string out = r.DumpPrometheus();
  SCOPED_TRACE(out);

  EXPECT_NE(out.find("# HELP puts_total Puts accepted\n# TYPE puts_total counter\n"
                     "puts_total 7\n"),
            std::string::npos);
  EXPECT_NE(out.find("# HELP ratio A \\\\ ratio\\nover two lines\n# TYPE ratio gauge\n"
                     "ratio 0.25\n"),
            std::string::npos);
  EXPECT_NE(out.find("# TYPE lat_us histogram\n"), std::string::npos);
  EXPECT_NE(out.find("# TYPE lat_us_quantile gauge\n"), std::string::npos);

  // Buckets are cumulative and exact at their (power-of-two) bounds.
  EXPECT_EQ(SeriesValue(out, "lat_us_bucket{le=\"2\"}"), 0);
  EXPECT_EQ(SeriesValue(out, "lat_us_bucket{le=\"4\"}"), 1);
  EXPECT_EQ(SeriesValue(out, "lat_us_bucket{le=\"8\"}"), 2);
  EXPECT_EQ(SeriesValue(out, "lat_us_bucket{le=\"2048\"}"), 2);
  EXPECT_EQ(SeriesValue(out, "lat_us_bucket{le=\"4096\"}"), 3);
  EXPECT_EQ(SeriesValue(out, "lat_us_bucket{le=\"1099511627776\"}"), 3);
  EXPECT_EQ(SeriesValue(out, "lat_us_bucket{le=\"+Inf\"}"), 3);
  EXPECT_EQ(SeriesValue(out, "lat_us_sum"), 3009);
  EXPECT_EQ(SeriesValue(out, "lat_us_count"), 3);
  EXPECT_EQ(SeriesValue(out, "lat_us_quantile{quantile=\"0.5\"}"), 5);
  EXPECT_NEAR(SeriesValue(out, "lat_us_quantile{quantile=\"0.999\"}"), 3000, 3000 / 8);
  EXPECT_TRUE(std::isnan(SeriesValue(out, "empty_us_quantile{quantile=\"0.99\"}")));
  EXPECT_EQ(SeriesValue(out, "empty_us_count"), 0);

  // Every line is a comment or "<series> <number>", and families come sorted.
  std::istringstream in(out);
  std::string line;
  std::vector<std::string> families;
  while (std::getline(in, line)) {
    ASSERT_FALSE(line.empty());
    if (line.rfind("# TYPE ", 0) == 0) {
      families.push_back(line.substr(7, line.find(' ', 7) - 7));
      continue;
    }
    if (line[0] == '#') continue;
    size_t space = line.rfind(' ');
    ASSERT_NE(space, std::string::npos) << line;
    std::string series = line.substr(0, space);
    std::string name = series.substr(0, series.find('{'));
    EXPECT_TRUE(MetricsRegistry::IsValidName(name)) << line;
  }
  EXPECT_TRUE(std::is_sorted(families.begin(), families.end()));
}

TEST(MetricsRegistryTest, CallbackGauges) {
  MetricsRegistry r;
  double value = 1.5;
  r.RegisterCallbackGauge("imbalance", "Load imbalance", [&value] { return value; });
  EXPECT_EQ(SeriesValue(r.DumpPrometheus(), "imbalance"), 1.5);
  value = 2;
  EXPECT_EQ(SeriesValue(r.DumpPrometheus(), "imbalance"), 2);

  // A callback may read other metrics through the registry.
  r.GetCounter("base_total", "")->Increment(3);
  r.RegisterCallbackGauge("derived", "", [&r] {
    return static_cast<double>(r.GetCounter("base_total", "")->value()) * 2;
  });
  EXPECT_EQ(SeriesValue(r.DumpPrometheus(), "derived"), 6);

  r.UnregisterCallbackGauge("imbalance");
  r.UnregisterCallbackGauge("never_registered");
  std::string out = r.DumpPrometheus();
  EXPECT_EQ(out.find("imbalance"), std::string::npos);
  // The name is free again.
  r.GetGauge("imbalance", "now a plain gauge")->Set(4);
  EXPECT_EQ(SeriesValue(r.DumpPrometheus(), "imbalance"), 4);
}

// The process gauges read getrusage at each dump: CPU time burnt shows up in them.
TEST(MetricsRegistryTest, ProcessGauges) {
  MetricsRegistry r;
  RegisterProcessGauges(&r);
  RegisterProcessGauges(&r);  // again: harmless
  const ProcessUsage before = ReadProcessUsage();
  // Spin until the kernel has charged us more user time (its accounting may be per tick).
  volatile uint64_t sink = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (ReadProcessUsage().user_seconds <= before.user_seconds &&
         std::chrono::steady_clock::now() < deadline) {
    for (int i = 0; i < 100000; ++i) sink = sink + static_cast<uint64_t>(i);
  }
  const std::string out = r.DumpPrometheus();
  EXPECT_GT(SeriesValue(out, "process_cpu_user_seconds"), before.user_seconds);
  EXPECT_GE(SeriesValue(out, "process_cpu_system_seconds"), 0);
  EXPECT_GE(SeriesValue(out, "process_voluntary_context_switches"),
            static_cast<double>(before.voluntary_switches));
  EXPECT_GE(SeriesValue(out, "process_involuntary_context_switches"),
            static_cast<double>(before.involuntary_switches));
}

TEST(MetricsRegistryTest, DumpText) {
  MetricsRegistry r;
  r.GetCounter("puts_total", "")->Increment(3);
  r.GetGauge("a_long_gauge_name", "")->Set(2.5);
  Histogram* h = r.GetHistogram("lat_us", "");
  for (uint64_t v = 1; v <= 100; ++v) h->Record(v);
  std::string out = r.DumpText();
  SCOPED_TRACE(out);
  EXPECT_NE(out.find("puts_total"), std::string::npos);
  EXPECT_NE(out.find("counter    3\n"), std::string::npos);
  EXPECT_NE(out.find("gauge      2.5\n"), std::string::npos);
  EXPECT_NE(out.find("count=100 mean=50.5 min=1 p50=50.0"), std::string::npos);
  EXPECT_NE(out.find("max=100\n"), std::string::npos);
}

TEST(MetricsHttpServerTest, ServesMetricsAndHealth) {
  MetricsRegistry r;
  r.GetCounter("scraped_total", "A counter")->Increment(42);
  MetricsHttpServer server(&r, "127.0.0.1", 0);
  EXPECT_EQ(server.port(), -1);
  ASSERT_TRUE(server.Start().ok());
  ASSERT_GT(server.port(), 0);
  EXPECT_EQ(server.Start().code(), Status::Code::kIllegalState);

  httplib::Client client("127.0.0.1", server.port());
  auto res = client.Get("/metrics");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type").rfind("text/plain; version=0.0.4", 0), 0u);
  EXPECT_EQ(SeriesValue(res->body, "scraped_total"), 42);

  res = client.Get("/healthz");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, "ok");

  r.RegisterDebugSection("range 7 dranges", [] { return std::string("[min, k) 10 writes"); });
  res = client.Get("/debug");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body, "== range 7 dranges ==\n[min, k) 10 writes\n");
  r.UnregisterDebugSection("range 7 dranges");
  res = client.Get("/debug");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->body, "");

  res = client.Get("/nothing");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);

  server.Shutdown();
  server.Shutdown();
  EXPECT_FALSE(client.Get("/healthz"));
  EXPECT_EQ(server.Start().code(), Status::Code::kIllegalState);
}

TEST(MetricsHttpServerTest, BindFailureNamesHostAndPort) {
  MetricsRegistry r;
  MetricsHttpServer first(&r, "127.0.0.1", 0);
  ASSERT_TRUE(first.Start().ok());
  MetricsHttpServer second(&r, "127.0.0.1", first.port());
  Status s = second.Start();
  EXPECT_EQ(s.code(), Status::Code::kIOError) << s.ToString();
  EXPECT_NE(s.message().find("127.0.0.1:" + std::to_string(first.port())), std::string::npos)
      << s.ToString();
  EXPECT_EQ(second.port(), -1);
  second.Shutdown();  // harmless after a failed Start

  MetricsHttpServer never_started(&r, "127.0.0.1", 0);
  never_started.Shutdown();
}

}  // namespace
}  // namespace nova
