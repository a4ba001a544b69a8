#include "benchmarks/ltc_engine_bench_w100.h"

#include <charconv>
#include <cstdio>
#include <system_error>
#include <string>

#include "common/split.h"
#include "common/status.h"

namespace nova::ltc_bench {

namespace {

constexpr int kMaxW100Theta = 1024;

std::string W100Name(KeyDist dist, int theta) {
  return std::string(DistName(dist)) + "_theta" + std::to_string(theta);
}

struct W100Result {
  double ops = 0;
  // Of the writers' time (writers x elapsed): waiting for a free memtable or for Level 0
  // (EngineStats::stall_micros), and delayed by the Level-0 slow-down (slowdown_micros).
  double stall_pct = 0;
  double slowdown_pct = 0;
  // Immutable memtables flushed, and merged into their Drange's active memtable instead.
  uint64_t flushes = 0, merges = 0;
  uint64_t compactions = 0, stalls = 0;
  uint64_t l0_tables = 0;  // at the end of the measurement
};

Result<W100Result> MeasureW100(Bench* b, KeyDist dist, int theta) {
  const std::string name = "W100 " + W100Name(dist, theta);
  const EngineOptions o = W100Options(b->next_range_id++, theta);
  CaseEngine ce(b->conn);
  NOVA_RETURN_NOT_OK(ce.Open(o));
  RangeEngine* engine = ce.engine();
  const KeyChooser chooser(dist, FLAGS_keyspace_keys);
  const KeyFn key_of = [&](int, uint64_t, std::mt19937_64* rng) { return chooser.Next(rng); };
  // Once the Dranges are built, fill every memtable of the range once: the measurement then
  // starts where memtables fill and flush, not with delta empty memtables to fill first.
  const uint64_t fill_puts =
      static_cast<uint64_t>(o.memtables) * o.memtable_bytes / (kKeyBytes + kW100ValueBytes);
  NOVA_RETURN_NOT_OK(WarmUp(b, engine, o, key_of, kW100ValueBytes, fill_puts, name));

  const EngineStats before = engine->GetStats();
  auto run = RunPuts(b, engine, key_of, kW100ValueBytes, FLAGS_max_puts_per_case,
                     bench::DeadlineAfter(FLAGS_seconds_per_case), o.range_id, name);
  if (!run.ok()) return run.status();
  const EngineStats after = engine->GetStats();
  const double writer_micros = kWriterThreads * run->seconds * 1e6;
  W100Result r;
  r.ops = static_cast<double>(run->puts) / run->seconds;
  r.stall_pct = static_cast<double>(after.stall_micros - before.stall_micros) / writer_micros * 100.0;
  r.slowdown_pct =
      static_cast<double>(after.slowdown_micros - before.slowdown_micros) / writer_micros * 100.0;
  r.flushes = after.flushes - before.flushes;
  r.merges = after.memtable_merges - before.memtable_merges;
  r.compactions = after.compactions - before.compactions;
  r.stalls = after.stalls - before.stalls;
  r.l0_tables = after.level_tables[0];
  if (r.flushes == 0) b->report->AddNote(name + ": no flush while measured");
  return r;
}

}  // namespace

Result<std::vector<KeyDist>> ParseW100Keys(const std::string& list) {
  std::vector<KeyDist> dists;
  for (const std::string& name : SplitNonEmpty(list, ',')) {
    bool known = false;
    for (KeyDist d : {KeyDist::kUniform, KeyDist::kZipfian, KeyDist::kScrambledZipfian}) {
      if (name == DistName(d)) {
        dists.push_back(d);
        known = true;
      }
    }
    if (!known) return Status::InvalidArgument("unknown W100 key distribution: " + name);
  }
  if (dists.empty()) return Status::InvalidArgument("no W100 key distribution named");
  return dists;
}

Result<std::vector<int>> ParseW100Thetas(const std::string& list) {
  std::vector<int> thetas;
  for (const std::string& item : SplitNonEmpty(list, ',')) {
    int theta = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), theta);
    if (ec != std::errc() || end != item.data() + item.size() || theta < 1 ||
        theta > kMaxW100Theta) {
      return Status::InvalidArgument("W100 theta not in 1.." + std::to_string(kMaxW100Theta) +
                                     ": " + item);
    }
    thetas.push_back(theta);
  }
  if (thetas.empty()) return Status::InvalidArgument("no W100 theta named");
  return thetas;
}

void RunW100Cases(Bench* b, bench::CaseFailures* failures) {
  nlohmann::ordered_json& out = b->report->out();
  const auto dists = ParseW100Keys(FLAGS_w100_keys);     // checked at start-up
  const auto thetas = ParseW100Thetas(FLAGS_w100_thetas);  // checked at start-up
  for (int theta : thetas.value()) {
    for (KeyDist dist : dists.value()) {
      if (failures->stop()) return;
      const std::string name = W100Name(dist, theta);
      auto r = MeasureW100(b, dist, theta);
      if (!failures->Ok("W100 " + name, r.status())) continue;
      out["w100_" + name + "_ops"] = r->ops;
      out["stall_pct_" + name] = r->stall_pct;
      out["slowdown_pct_" + name] = r->slowdown_pct;
      out["w100_" + name + "_flushes"] = r->flushes;
      out["w100_" + name + "_merges"] = r->merges;
      out["w100_" + name + "_compactions"] = r->compactions;
      out["w100_" + name + "_stalls"] = r->stalls;
      out["w100_" + name + "_l0_tables"] = r->l0_tables;
    }
  }
}

void PrintW100Table(const bench::Report& report) {
  std::printf(
      "W100: %zu B keys, %zu B values, %d writer threads, %llu keys, memtables %llu KiB "
      "(delta %d at theta 1, %d at other thetas), writes stop at %llu MiB in L0\n",
      kKeyBytes, kW100ValueBytes, kWriterThreads,
      static_cast<unsigned long long>(FLAGS_keyspace_keys),
      static_cast<unsigned long long>(FLAGS_w100_memtable_kib), FLAGS_w100_memtables_theta1,
      FLAGS_w100_memtables_theta64, static_cast<unsigned long long>(FLAGS_w100_l0_stop_writes_mib));
  std::printf("%-8s %6s %10s %8s %9s %8s %7s %12s %7s %10s\n", "keys", "theta", "puts/s",
              "stall %", "slowdn %", "flushes", "merges", "compactions", "stalls", "L0 tables");
  const auto dists = ParseW100Keys(FLAGS_w100_keys);     // checked at start-up
  const auto thetas = ParseW100Thetas(FLAGS_w100_thetas);  // checked at start-up
  for (KeyDist dist : dists.value()) {
    for (int theta : thetas.value()) {
      const std::string n = W100Name(dist, theta);
      std::printf("%-8s %6d %10s %8s %9s %8s %7s %12s %7s %10s\n", DistName(dist), theta,
                  report.Cell("w100_" + n + "_ops", "%.0f").c_str(),
                  report.Cell("stall_pct_" + n, "%.1f").c_str(),
                  report.Cell("slowdown_pct_" + n, "%.1f").c_str(),
                  report.Cell("w100_" + n + "_flushes", "%.0f").c_str(),
                  report.Cell("w100_" + n + "_merges", "%.0f").c_str(),
                  report.Cell("w100_" + n + "_compactions", "%.0f").c_str(),
                  report.Cell("w100_" + n + "_stalls", "%.0f").c_str(),
                  report.Cell("w100_" + n + "_l0_tables", "%.0f").c_str());
    }
  }
}

}  // namespace nova::ltc_bench
