#include "ltc/engine/engine_metrics.h"

#include <functional>
#include <utility>

namespace nova::ltc {

namespace {

// Gauges of one scrape answer from one GetStats(); a copy younger than this is reused.
constexpr auto kStatsMaxAge = std::chrono::milliseconds(200);

struct StatGauge {
  const char* name;
  const char* help;
  std::function<double(const EngineStats&)> value;
};

std::vector<StatGauge> StatGauges() {
  auto u = [](uint64_t EngineStats::*field) {
    return [field](const EngineStats& s) { return static_cast<double>(s.*field); };
  };
  std::vector<StatGauge> g = {
      {"puts_total", "Puts accepted", u(&EngineStats::puts)},
      {"deletes_total", "Deletes accepted", u(&EngineStats::deletes)},
      {"gets_total", "Gets served", u(&EngineStats::gets)},
      {"flushes_total", "Immutable memtables written as Level-0 tables", u(&EngineStats::flushes)},
      {"compactions_total", "Compactions installed", u(&EngineStats::compactions)},
      {"table_moves_total", "Compactions that moved their one table down a level instead of rewriting it",
       u(&EngineStats::table_moves)},
      {"compactions_offloaded_total", "Compactions executed by a StoC",
       u(&EngineStats::compactions_offloaded)},
      {"compaction_offload_fallbacks_total", "Offloaded compactions that failed and ran here",
       u(&EngineStats::compaction_offload_fallbacks)},
      {"memtable_merges_total",
       "Immutable memtables with few unique keys merged back instead of flushed",
       u(&EngineStats::memtable_merges)},
      {"merged_entries_total", "Entries those merges carried over",
       u(&EngineStats::merged_entries)},
      {"flush_failures_total", "Failed flushes (retried after a backoff)",
       u(&EngineStats::flush_failures)},
      {"compaction_failures_total", "Failed compactions (retried after a backoff)",
       u(&EngineStats::compaction_failures)},
      {"manifest_failures_total", "MANIFEST appends that failed for good (edit dropped)",
       u(&EngineStats::manifest_failures)},
      {"orphans_collected_total", "Unreferenced tables deleted at Open",
       u(&EngineStats::orphans_collected)},
      {"stalls_total", "Writes that waited for a free memtable or for Level 0",
       u(&EngineStats::stalls)},
      {"stall_us_total", "Time those writes waited", u(&EngineStats::stall_micros)},
      {"l0_stop_stalls_total",
       "Of stalls_total: writes that waited for Level 0 to drop below its stop",
       u(&EngineStats::l0_stop_stalls)},
      {"l0_stop_stall_us_total", "Of stall_us_total: time waited for Level 0",
       u(&EngineStats::l0_stop_stall_micros)},
      {"slowdowns_total", "Writes delayed because Level 0 neared its stop",
       u(&EngineStats::slowdowns)},
      {"slowdown_us_total", "Time those writes were delayed", u(&EngineStats::slowdown_micros)},
      {"major_reorganizations_total", "Drange major reorganizations",
       u(&EngineStats::major_reorganizations)},
      {"minor_reorganizations_total", "Drange minor reorganizations",
       u(&EngineStats::minor_reorganizations)},
      {"drange_imbalance", "Std. dev. of the Dranges' shares of writes (last window)",
       [](const EngineStats& s) { return s.drange_imbalance; }},
      {"dranges", "Dranges", [](const EngineStats& s) { return static_cast<double>(s.dranges); }},
      {"immutable_memtables", "Immutable memtables waiting for a flush",
       [](const EngineStats& s) { return static_cast<double>(s.immutable_memtables); }},
      {"lookup_index_hits_total", "Gets answered through the lookup index",
       u(&EngineStats::lookup_index_hits)},
      {"lookup_index_entries", "Keys in the lookup index", u(&EngineStats::lookup_index_entries)},
      {"last_sequence", "Last visible sequence number", u(&EngineStats::last_sequence)},
      {"log_failures_total", "Writes whose log append failed (answered with the error)",
       u(&EngineStats::log_failures)},
      {"recovered_logs", "Memtables rebuilt from their logs when the range opened",
       u(&EngineStats::recovered_logs)},
      {"recovered_entries", "Entries replayed into them", u(&EngineStats::recovered_entries)},
      {"recovered_log_bytes", "Log bytes replayed", u(&EngineStats::recovered_log_bytes)},
      {"recovery_ignored_bytes", "Log bytes ignored after torn or damaged records",
       u(&EngineStats::recovery_ignored_bytes)},
      {"recovery_us", "Time the range's recovery took (READs included)",
       u(&EngineStats::recovery_micros)},
      {"migrated_memtables", "Memtables adopted from a live migration when the range opened",
       u(&EngineStats::migrated_memtables)},
      {"migrated_entries", "Entries they held", u(&EngineStats::migrated_entries)},
      {"relocation_copies_at_risk", "Copies of current tables still on evacuated StoCs",
       u(&EngineStats::relocation_copies_at_risk)},
      {"relocation_tables_at_risk", "Current tables with a copy on an evacuated StoC",
       u(&EngineStats::relocation_tables_at_risk)},
      {"relocated_tables_total", "Tables whose copies were moved off evacuated StoCs",
       u(&EngineStats::relocated_tables)},
      {"relocated_bytes_total", "Bytes those relocations copied",
       u(&EngineStats::relocated_bytes)},
      {"relocation_failures_total", "Relocations that failed (retried after a backoff)",
       u(&EngineStats::relocation_failures)},
      {"sweeps_total", "Sweeps of garbage table files completed", u(&EngineStats::sweeps)},
      {"swept_files_total", "Garbage table files those sweeps deleted",
       u(&EngineStats::swept_files)},
  };
  for (int l = 0; l < lsm::kNumLevels; ++l) {
    static const std::string kTables[] = {"l0_tables", "l1_tables", "l2_tables", "l3_tables",
                                          "l4_tables", "l5_tables", "l6_tables"};
    static const std::string kBytes[] = {"l0_bytes", "l1_bytes", "l2_bytes", "l3_bytes",
                                         "l4_bytes", "l5_bytes", "l6_bytes"};
    static_assert(sizeof(kTables) / sizeof(kTables[0]) == lsm::kNumLevels);
    g.push_back({kTables[l].c_str(), "Tables in this level",
                 [l](const EngineStats& s) { return static_cast<double>(s.level_tables[l]); }});
    g.push_back({kBytes[l].c_str(), "Bytes of the tables in this level",
                 [l](const EngineStats& s) { return static_cast<double>(s.level_bytes[l]); }});
  }
  return g;
}

}  // namespace

EngineMetrics::EngineMetrics(MetricsRegistry* registry, const RangeEngine* engine,
                             uint32_t range_id)
    : registry_(registry),
      engine_(engine),
      debug_section_("ltc range " + std::to_string(range_id) + " dranges") {
  const std::string prefix = "ltc_range" + std::to_string(range_id) + "_";
  for (StatGauge& g : StatGauges()) {
    names_.push_back(prefix + g.name);
    registry_->RegisterCallbackGauge(names_.back(), g.help,
                                     [this, fn = std::move(g.value)] { return fn(Stats()); });
  }
  registry_->RegisterDebugSection(debug_section_, [this] { return engine_->DrangeDebugString(); });
}

EngineMetrics::~EngineMetrics() {
  registry_->UnregisterDebugSection(debug_section_);
  for (const std::string& n : names_) registry_->UnregisterCallbackGauge(n);
}

EngineStats EngineMetrics::Stats() {
  MutexLock lock(&mu_);
  const MonoTime now = MonoNow();
  if (cached_at_ == MonoTime{} || now - cached_at_ > kStatsMaxAge) {
    cached_ = engine_->GetStats();
    cached_at_ = now;
  }
  return cached_;
}

}  // namespace nova::ltc
