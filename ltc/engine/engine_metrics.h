// EngineMetrics: exports one range engine's EngineStats to a MetricsRegistry (and so to
// /metrics) as gauges named ltc_range<id>_<stat>, and its Drange layout as the debug section
// "ltc range <id> dranges" (GET /debug). Labels are not supported by the registry, so the
// range id is part of each name.
//
// A scrape reads the stats once (GetStats takes the engine's lock briefly) and every gauge
// of the range answers from that copy.
//
//   EngineMetrics m(&registry, &engine, /*range_id=*/3);  // registers
//   ...                                                    // scrapes see ltc_range3_*
//   // ~EngineMetrics unregisters; destroy it before the engine.
//
// Thread safety: construction and destruction must not race with each other; scrapes may
// run concurrently with anything.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/metrics.h"
#include "common/mutex.h"
#include "ltc/engine/range_engine.h"

namespace nova::ltc {

class EngineMetrics {
 public:
  // `registry` and `engine` must outlive this.
  EngineMetrics(MetricsRegistry* registry, const RangeEngine* engine, uint32_t range_id);
  ~EngineMetrics();
  EngineMetrics(const EngineMetrics&) = delete;
  EngineMetrics& operator=(const EngineMetrics&) = delete;

  // The names this registers (for tests and docs).
  const std::vector<std::string>& names() const { return names_; }

 private:
  // The engine's stats, re-read when the cached copy is older than one scrape.
  EngineStats Stats() EXCLUDES(mu_);

  MetricsRegistry* const registry_;
  const RangeEngine* const engine_;
  const std::string debug_section_;
  std::vector<std::string> names_;

  Mutex mu_;
  EngineStats cached_ GUARDED_BY(mu_);
  MonoTime cached_at_ GUARDED_BY(mu_){};
};

}  // namespace nova::ltc
