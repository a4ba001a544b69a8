#include "ltc/engine/engine_metrics.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>

#include "common/lsm/memory_table_store.h"
#include "tests/util/test_util.h"

namespace nova::ltc {
namespace {

// The value of series `name` in a Prometheus dump, or -1.
double Series(const std::string& dump, const std::string& name) {
  const std::string line = "\n" + name + " ";
  const size_t at = dump.find(line);
  if (at == std::string::npos) return -1;
  return std::stod(dump.substr(at + line.size()));
}

TEST(EngineMetricsTest, ExportsStatsAndDrangesAndUnregisters) {
  lsm::MemoryTableStore store;
  EngineOptions o;
  o.dranges = 4;
  o.reorganize_every_writes = 200;
  o.memtable_bytes = 8 << 10;
  RangeEngine engine(o, &store);
  ASSERT_TRUE(engine.Open().ok());
  MetricsRegistry registry;
  {
    EngineMetrics metrics(&registry, &engine, 7);
    for (int i = 0; i < 1000; ++i) {
      ASSERT_TRUE(engine.Put("key" + std::to_string(i % 300), std::string(100, 'v')).ok());
    }
    ASSERT_TRUE(engine.FlushAll().ok());
    ASSERT_TRUE(engine.WaitForCompactions().ok());  // nothing changes the stats after this
    const EngineStats st = engine.GetStats();
    // Stats are cached for a moment; wait until the dump shows the writes.
    std::string dump;
    ASSERT_TRUE(test::WaitFor(
        [&] {
          dump = registry.DumpPrometheus();
          return Series(dump, "ltc_range7_puts_total") == 1000;
        },
        std::chrono::seconds(10)));
    EXPECT_EQ(Series(dump, "ltc_range7_puts_total"), 1000);
    EXPECT_EQ(Series(dump, "ltc_range7_dranges"), st.dranges);
    EXPECT_EQ(Series(dump, "ltc_range7_major_reorganizations_total"),
              static_cast<double>(st.major_reorganizations));
    EXPECT_GE(Series(dump, "ltc_range7_drange_imbalance"), 0);
    EXPECT_EQ(Series(dump, "ltc_range7_l0_tables"), static_cast<double>(st.level_tables[0]));
    EXPECT_GT(Series(dump, "ltc_range7_flushes_total"), 0);
    for (const std::string& n : metrics.names()) {
      EXPECT_GE(Series(dump, n), 0) << n;
    }
    const std::string debug = registry.DumpDebug();
    EXPECT_NE(debug.find("== ltc range 7 dranges =="), std::string::npos) << debug;
    EXPECT_NE(debug.find(engine.DrangeDebugString()), std::string::npos) << debug;
  }
  EXPECT_EQ(registry.DumpPrometheus().find("ltc_range7_"), std::string::npos);
  EXPECT_EQ(registry.DumpDebug(), "");
}

}  // namespace
}  // namespace nova::ltc
