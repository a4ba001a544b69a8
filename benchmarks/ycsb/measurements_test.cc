// Histogram accuracy and YCSB's output format.
#include "benchmarks/ycsb/measurements.h"

#include <gtest/gtest.h>

#include <random>
#include <sstream>

#include "benchmarks/ycsb/client.h"

namespace nova::ycsb {
namespace {

TEST(HistogramTest, BucketsCoverEveryValue) {
  for (uint64_t v : {0ull, 1ull, 127ull, 128ull, 129ull, 1000ull, 65535ull, 1ull << 40,
                     ~0ull}) {
    const size_t b = HistogramSnapshot::BucketOf(v);
    ASSERT_LT(b, HistogramSnapshot::kNumBuckets) << v;
    EXPECT_GE(HistogramSnapshot::BucketHigh(b), v);
    if (b > 0) {
      EXPECT_LT(HistogramSnapshot::BucketHigh(b - 1), v) << v;
    }
  }
}

TEST(HistogramTest, PercentilesWithinOnePercentAndExactStats) {
  LatencyHistogram h;
  std::vector<uint64_t> values;
  std::mt19937_64 rng(42);
  std::lognormal_distribution<double> d(6.0, 1.0);
  for (int i = 0; i < 100000; ++i) values.push_back(static_cast<uint64_t>(d(rng)));
  uint64_t sum = 0;
  for (uint64_t v : values) {
    h.Record(v);
    sum += v;
  }
  std::sort(values.begin(), values.end());
  const HistogramSnapshot s = h.Snapshot();
  EXPECT_EQ(s.count(), values.size());
  EXPECT_EQ(s.min(), values.front());
  EXPECT_EQ(s.max(), values.back());
  EXPECT_DOUBLE_EQ(s.Mean(), static_cast<double>(sum) / values.size());
  for (double p : {50.0, 95.0, 99.0}) {
    const uint64_t exact = values[static_cast<size_t>(std::ceil(p / 100 * values.size())) - 1];
    const double got = static_cast<double>(s.Percentile(p));
    EXPECT_GE(got, static_cast<double>(exact)) << p;
    EXPECT_LE(got, exact * (1 + 1.0 / 64) + 1) << p;
  }
}

TEST(HistogramTest, MinusGivesTheInterval) {
  LatencyHistogram h;
  for (int i = 0; i < 10; ++i) h.Record(5);
  const HistogramSnapshot a = h.Snapshot();
  for (int i = 0; i < 4; ++i) h.Record(1000);
  const HistogramSnapshot d = h.Snapshot().Minus(a);
  EXPECT_EQ(d.count(), 4u);
  EXPECT_DOUBLE_EQ(d.Mean(), 1000.0);
  EXPECT_GE(d.min(), 990u);
  EXPECT_EQ(d.max(), 1000u);
}

TEST(ExportTest, YcsbTextFormat) {
  Measurements m;
  for (int i = 1; i <= 100; ++i) m.Measure(OpType::kRead, ReturnCode::kOk, i);
  m.Measure(OpType::kRead, ReturnCode::kNotFound, 7);
  m.Measure(OpType::kUpdate, ReturnCode::kOk, 10);
  m.Measure(OpType::kUpdate, ReturnCode::kError, 20);
  m.Measure(OpType::kVerify, ReturnCode::kOk, 1);
  m.Measure(OpType::kVerify, ReturnCode::kUnexpectedState, 2);
  const std::string out = ExportText(m.Snapshot(), 2000000, 104);
  const char* expected[] = {
      "[OVERALL], RunTime(ms), 2000\n",
      "[OVERALL], Throughput(ops/sec), 52.0\n",
      "[OVERALL], Operations, 104\n",
      "[READ], Operations, 100\n",
      "[READ], AverageLatency(us), 50.5\n",
      "[READ], MinLatency(us), 1\n",
      "[READ], MaxLatency(us), 100\n",
      "[READ], 50thPercentileLatency(us), 50\n",
      "[READ], 95thPercentileLatency(us), 95\n",
      "[READ], 99thPercentileLatency(us), 99\n",
      "[READ], Return=OK, 100\n",
      "[READ], Return=NOT_FOUND, 1\n",
      "[READ-FAILED], Operations, 1\n",
      "[UPDATE], Return=OK, 1\n",
      "[UPDATE], Return=ERROR, 1\n",
      "[UPDATE-FAILED], Operations, 1\n",
      "[VERIFY], Operations, 2\n",
      "[VERIFY], Return=OK, 1\n",
      "[VERIFY], Return=UNEXPECTED_STATE, 1\n",
  };
  for (const char* line : expected) EXPECT_NE(out.find(line), std::string::npos) << line << out;
  EXPECT_EQ(out.find("VERIFY-FAILED"), std::string::npos) << out;
  EXPECT_EQ(out.find("[SCAN]"), std::string::npos) << out;  // unused series are not printed
  EXPECT_EQ(out.rfind("[OVERALL], RunTime(ms)", 0), 0u);
}

TEST(ExportTest, StatusSummaryAndRemaining) {
  LatencyHistogram h;
  h.Record(3);
  h.Record(5);
  EXPECT_EQ(StatusSummary("READ", h.Snapshot()),
            "[READ: Count=2, Max=5, Min=3, Avg=4, 90=5, 99=5, 99.9=5, 99.99=5]");
  EXPECT_EQ(StatusSummary("READ", HistogramSnapshot()), "");
  EXPECT_EQ(FormatRemaining(0), "0 seconds");
  EXPECT_EQ(FormatRemaining(61), "1 minute 1 second");
  EXPECT_EQ(FormatRemaining(7200), "2 hours");
}

TEST(ExportTest, TimeseriesRowMatchesHeader) {
  Measurements m;
  m.Measure(OpType::kRead, ReturnCode::kOk, 10);
  m.Measure(OpType::kRead, ReturnCode::kOk, 30);
  m.Measure(OpType::kUpdate, ReturnCode::kError, 30);
  const std::string header = TimeseriesHeader();
  const std::string row = TimeseriesRow(3, 3, m.Snapshot());
  EXPECT_EQ(std::count(header.begin(), header.end(), ','), std::count(row.begin(), row.end(), ','));
  EXPECT_EQ(header.rfind("second,ops,failed_ops,read_ops,read_p50_us,read_p99_us,update_ops", 0), 0u);
  EXPECT_EQ(row.rfind("3.000,3,1,2,10,30,1,0,0", 0), 0u) << row;
}

}  // namespace
}  // namespace nova::ycsb
