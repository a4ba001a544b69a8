// ltc_engine_bench: the LTC's LSM-tree engine (one RangeEngine, in process) over a
// stoc::StocTableStore whose StoCs are kStocs real nova_stoc processes (loopback, data directories
// on a real disk, as stoc_bench does). It measures:
//  - W100 put throughput: 16 B keys ("user" + 12 digits), 1 KiB values, kWriterThreads
//    writers, keys uniform, zipfian 0.99 in popularity order (as the paper's evaluation) or
//    scrambled zipfian 0.99 over --keyspace_keys (--w100_keys), for theta = 1 and
//    theta = 64 Dranges (--w100_thetas); memtables small enough that flushes to the StoCs
//    run all the time
//    (--w100_memtable_kib, --w100_memtables_theta1/64); rho = 3, power-of-d placement;
//  - the write-stall percentage of each W100 case: the time writers waited for a free
//    memtable or for Level 0 (EngineStats::stall_micros) over writers x elapsed time; the
//    slow-down percentage likewise (writes delayed once Level 0 passes its slow-down size,
//    EngineStats::slowdown_micros); and the immutable memtables merged into their Drange's
//    active memtable instead of flushed (EngineStats::memtable_merges);
//  - the in-memory put path: 16 B keys, 100 B values, kWriterThreads writers, theta 64,
//    memtables so large that nothing is flushed while it is measured;
//  - get throughput, one thread, uniform over --get_keys loaded keys, with the lookup index
//    (EngineOptions::lookup_index) on and off;
//  - the range index (EngineOptions::range_index) on and off with many memtables and
//    Level-0 tables: --scan_keys keys loaded at theta 64 into --scan_memtable_kib memtables,
//    Level-0 compaction off (so Level 0 keeps every flushed table), then one thread doing
//    scans of 10 pairs from a uniformly chosen loaded key (Scan(), a new iterator each), and
//    gets with the lookup index off (each searches the partition of its key).
//
// Every case runs a fresh engine on a fresh range id, and the range's StoC files are
// deleted when the case ends, so no case sees another's data. The put cases first warm up
// with EngineOptions::reorganize_every_writes puts of their own workload (with theta 64
// that is what builds the 64 Dranges: the engine starts with one), the W100 cases then with
// enough further puts to fill every memtable of the range once (delta x tau bytes), and wait,
// bounded, until no memtable waits for a flush and Level 0 is under its compaction trigger;
// then they measure for --seconds_per_case or --max_puts_per_case puts, whichever ends
// first. The get cases load their keys, wait the same way, and measure.
//
// The W100 cases are in ltc_engine_bench_w100.cc, what the cases share in
// ltc_engine_bench_harness.{h,cc}, the StoC processes and the report in bench_util.h.
//
// Prints a table, or with --json one JSON object (names carry units: _ops is operations per
// second, _pct a percentage).
#include <fcntl.h>
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "benchmarks/bench_util.h"
#include "benchmarks/ltc_engine_bench_harness.h"
#include "benchmarks/ltc_engine_bench_w100.h"
#include "common/clock.h"
#include "common/status.h"

DEFINE_bool(json, false, "Print one JSON object instead of a table");
DEFINE_double(seconds_per_case, 5.0,
              "Measuring time of each case, seconds (its warm-up and settling come on top)");
DEFINE_uint64(keyspace_keys, 1000000,
              "Distinct keys the W100 and in-memory cases choose from (as --w100_keys says; "
              "the in-memory case uniformly), keys. At most 10^12 (12 digits in a 16 B key)");
DEFINE_string(w100_keys, "uniform,zipf,szipf",
              "Comma-separated key distributions of the W100 cases: uniform; zipf (zipfian "
              "0.99, key i the i-th most popular, so hot keys are neighbours, as in the "
              "paper's evaluation); szipf (the same popularities scattered over the key space "
              "by a hash, as YCSB's scrambled zipfian)");
DEFINE_string(w100_thetas, "1,64",
              "Comma-separated Drange counts (theta, 1..1024) of the W100 cases, run in this "
              "order; theta 1 gets --w100_memtables_theta1 memtables, any other "
              "--w100_memtables_theta64 (which must be at least the largest such theta)");
DEFINE_uint64(max_puts_per_case, 10000000,
              "Bound on the puts measured in one W100 or in-memory case besides "
              "--seconds_per_case, puts (all writer threads together)");
DEFINE_uint64(w100_memtable_kib, 4096,
              "tau: size at which a memtable becomes immutable in the W100 and get cases, KiB");
DEFINE_int32(w100_memtables_theta1, 16,
             "delta: memtables of the range (active + immutable) in the W100 cases with "
             "theta = 1 Drange");
DEFINE_int32(w100_memtables_theta64, 64,
             "delta: memtables of the range (active + immutable) in the W100 cases with "
             "theta = 64 Dranges (and any other theta of --w100_thetas but 1), and in the get "
             "cases");
DEFINE_uint64(w100_l0_stop_writes_mib, 256,
              "Level-0 size at which writes stop until compaction catches up, in the W100 and "
              "get cases (EngineOptions::l0_stop_writes_bytes, whose default is 256 MiB), MiB");
DEFINE_uint64(get_keys, 200000,
              "Keys loaded (1 KiB values, each written once) before each get case, keys; the "
              "gets choose uniformly among them");
DEFINE_string(stoc_dir_base, nova::bench::kDefaultStocDirBase, nova::bench::kStocDirBaseHelp);
DEFINE_uint64(scan_keys, 100000,
              "Keys loaded (1 KiB values, each written once) before each range-index case, "
              "keys; scans start at and gets read uniformly chosen ones");
DEFINE_uint64(scan_memtable_kib, 256,
              "tau in the range-index cases: small, so the load leaves many memtables and "
              "Level-0 tables, KiB");
DEFINE_string(cases, "inmemory,gets,range_index,w100",
              "Comma-separated groups of cases to run: inmemory (in-memory puts), gets (lookup "
              "index on/off), range_index (scans and gets, range index on/off), w100");
DEFINE_bool(keep_going, false,
            "When a case fails, report it and go on with the next (exit status is still 1)");

namespace nova::ltc_bench {
namespace {

using bench::BenchStocCluster;
using bench::BenchStocClusterOptions;
using bench::BenchStocConnection;
using bench::CaseFailures;
using bench::StartAndConnect;
using bench::Report;

// The largest StoC block: a memtable flushed whole is one table of rho fragments, so the
// in-memory case's warm-up memtable (about 15 MiB) must fit in rho blocks with room to spare.
constexpr uint64_t kMaxBlockBytes = 16 * kMiB;
// Lanes per peer (the daemons' and the client's).
constexpr int kXchgThreads = 2;

constexpr size_t kInMemoryValueBytes = 100;
constexpr size_t kGetValueBytes = 1 * kKiB;
constexpr int kInMemoryTheta = 64;
constexpr int kGetTheta = 64;
// In-memory case: memtables this large never fill while measured. --max_puts_per_case
// (10^7 by default) puts of ~150 B in memory spread over 64 Dranges is ~25 MiB per Drange.
constexpr uint64_t kInMemoryMemtableBytes = 256 * kMiB;
constexpr int kInMemoryMemtables = 2 * kInMemoryTheta;  // one active + one spare per Drange
// Bound on the gets (or scans) of one case besides the measuring time.
constexpr uint64_t kMaxGetsPerCase = 10000000;
// Range-index cases: theta 64 with 4 memtables per Drange; Level-0 compaction never
// triggers (so Level 0 keeps what was flushed); Dranges are built after this many puts (the
// single Drange's memtables before that become tables spanning every partition: few) and
// then stay (an imbalance threshold no uniform load reaches: no further reorganization).
constexpr int kScanTheta = 64;
constexpr int kScanMemtables = 4 * kScanTheta;
constexpr int kScanNoL0Compaction = 1 << 30;
constexpr uint64_t kScanReorganizeEveryWrites = 1000;
constexpr double kScanImbalanceThreshold = 100;
constexpr size_t kScanPairs = 10;

// ---- Cases ----------------------------------------------------------------------------

// In-memory put path: puts/s with memtables that do not fill while measured.
Result<double> MeasureInMemoryPuts(Bench* b) {
  const std::string name = "in-memory puts";
  EngineOptions o;
  o.range_id = b->next_range_id++;
  o.memtable_bytes = kInMemoryMemtableBytes;
  o.memtables = kInMemoryMemtables;
  o.dranges = kInMemoryTheta;
  o.scatter_width = kScatterWidth;
  CaseEngine ce(b->conn);
  NOVA_RETURN_NOT_OK(ce.Open(o));
  RangeEngine* engine = ce.engine();
  const KeyChooser chooser(KeyDist::kUniform, FLAGS_keyspace_keys);
  const KeyFn key_of = [&](int, uint64_t, std::mt19937_64* rng) { return chooser.Next(rng); };
  // The warm-up's single memtable is retired when the Dranges are built; it is flushed
  // before measuring.
  NOVA_RETURN_NOT_OK(WarmUp(b, engine, o, key_of, kInMemoryValueBytes, /*fill_puts=*/0, name));

  const EngineStats before = engine->GetStats();
  auto run = RunPuts(b, engine, key_of, kInMemoryValueBytes, FLAGS_max_puts_per_case,
                     bench::DeadlineAfter(FLAGS_seconds_per_case), o.range_id, name);
  if (!run.ok()) return run.status();
  const EngineStats after = engine->GetStats();
  if (after.flushes != before.flushes || after.stalls != before.stalls ||
      after.immutable_memtables != 0) {
    b->report->AddNote(
        name + ": WARNING: not flush-free: " + std::to_string(after.flushes - before.flushes) +
        " flushes, " + std::to_string(after.stalls - before.stalls) + " stalls, " +
        std::to_string(after.immutable_memtables) + " immutable memtables while measured");
  }
  return static_cast<double>(run->puts) / run->seconds;
}

// Opens `ce` with `o`, puts keys 0..keys-1 into it, each once with a kGetValueBytes value,
// in an order shuffled with `order_seed` (so cases with the same seed load alike), waits
// for the engine to settle and notes its state. Returns the engine, or the failure of the
// open or of a put, or TimedOut (not all puts within kWarmupTimeout).
Result<RangeEngine*> OpenAndLoad(Bench* b, CaseEngine* ce, const EngineOptions& o, uint64_t keys,
                                 uint64_t order_seed, uint64_t put_seed, const std::string& name) {
  NOVA_RETURN_NOT_OK(ce->Open(o));
  RangeEngine* engine = ce->engine();
  std::vector<uint64_t> order(keys);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937_64(order_seed));
  const KeyFn key_of = [&](int thread, uint64_t i, std::mt19937_64*) {
    return order[i * kWriterThreads + thread];
  };
  auto load = RunPuts(b, engine, key_of, kGetValueBytes, order.size(), MonoNow() + kWarmupTimeout,
                      put_seed, name + " load");
  if (!load.ok()) return load.status().Prepend("load");
  if (load->puts < order.size()) {
    return Status::TimedOut("load: " + std::to_string(load->puts) + " of " +
                            std::to_string(order.size()) + " puts in " +
                            std::to_string(load->seconds) + " s");
  }
  WaitUntilSettled(b, engine, o, name + " load");
  b->report->AddNote(name + ": measured with " + Describe(engine->GetStats()));
  return engine;
}

// True if `value`, read for key number k, is the kGetValueBytes value OpenAndLoad() put for
// it.
bool ValueBelongsTo(uint64_t k, const std::string& value) {
  uint64_t stored = 0;
  if (value.size() == kGetValueBytes) std::memcpy(&stored, value.data(), sizeof(stored));
  return value.size() == kGetValueBytes && stored == k;
}

// One thread gets keys chosen uniformly by `rng` among 0..keys-1 (loaded by OpenAndLoad())
// for --seconds_per_case, checking each value. Returns gets/s, or the first failure.
Result<double> MeasureGetOps(RangeEngine* engine, uint64_t keys, std::mt19937_64* rng) {
  std::string value;
  uint64_t gets = 0;
  const MonoTime start = MonoNow();
  const MonoTime deadline = bench::DeadlineAfter(FLAGS_seconds_per_case);
  char key[kKeyBytes];
  for (; gets < kMaxGetsPerCase && MonoNow() < deadline; ++gets) {
    const uint64_t k = (*rng)() % keys;
    FormatKey(k, key);
    NOVA_RETURN_NOT_OK_PREPEND(engine->Get(leveldb::Slice(key, kKeyBytes), &value),
                               "get " + std::string(key, kKeyBytes));
    if (!ValueBelongsTo(k, value)) {
      return Status::Corruption("get " + std::string(key, kKeyBytes) + ": wrong value (" +
                                std::to_string(value.size()) + " bytes)");
    }
  }
  return static_cast<double>(gets) / bench::SecondsSince(start);
}

// Loads --get_keys keys (each once, in random order), lets the engine settle, then one
// thread gets uniformly chosen loaded keys, checking each value. Returns gets/s.
Result<double> MeasureGets(Bench* b, bool lookup_index) {
  const std::string name = std::string("gets, lookup index ") + (lookup_index ? "on" : "off");
  EngineOptions o = W100Options(b->next_range_id++, kGetTheta);
  o.lookup_index = lookup_index;
  CaseEngine ce(b->conn);
  // The same load order for both cases.
  auto engine = OpenAndLoad(b, &ce, o, FLAGS_get_keys, /*order_seed=*/42, /*put_seed=*/11, name);
  if (!engine.ok()) return engine.status();
  std::mt19937_64 rng(o.range_id);
  return MeasureGetOps(engine.value(), FLAGS_get_keys, &rng);
}

struct RangeIndexResult {
  double scan_ops = 0;  // scans of kScanPairs pairs per second
  double get_ops = 0;   // gets per second, lookup index off
};

// Loads --scan_keys keys into an engine with many small memtables and no Level-0
// compaction, then measures scans and gets (lookup index off) for --seconds_per_case each,
// checking every result.
Result<RangeIndexResult> MeasureRangeIndex(Bench* b, bool range_index) {
  const std::string name = std::string("range index ") + (range_index ? "on" : "off");
  EngineOptions o = W100Options(b->next_range_id++, kScanTheta);
  o.memtable_bytes = FLAGS_scan_memtable_kib * kKiB;
  o.memtables = kScanMemtables;
  o.l0_compaction_trigger = kScanNoL0Compaction;
  o.reorganize_every_writes = kScanReorganizeEveryWrites;
  o.drange_imbalance_threshold = kScanImbalanceThreshold;
  o.lookup_index = false;
  o.range_index = range_index;
  CaseEngine ce(b->conn);
  // The same load order for both cases.
  auto loaded = OpenAndLoad(b, &ce, o, FLAGS_scan_keys, /*order_seed=*/43, /*put_seed=*/13, name);
  if (!loaded.ok()) return loaded.status();
  RangeEngine* engine = loaded.value();

  RangeIndexResult r;
  std::mt19937_64 rng(o.range_id);
  char key[kKeyBytes];
  std::vector<std::pair<std::string, std::string>> pairs;
  uint64_t scans = 0;
  const MonoTime start = MonoNow();
  const MonoTime deadline = bench::DeadlineAfter(FLAGS_seconds_per_case);
  for (; scans < kMaxGetsPerCase && MonoNow() < deadline; ++scans) {
    const uint64_t k = rng() % FLAGS_scan_keys;
    FormatKey(k, key);
    NOVA_RETURN_NOT_OK_PREPEND(engine->Scan(leveldb::Slice(key, kKeyBytes), kScanPairs, &pairs),
                               "scan from " + std::string(key, kKeyBytes));
    const size_t want = std::min<uint64_t>(kScanPairs, FLAGS_scan_keys - k);
    for (size_t i = 0; i < want; ++i) {
      char expect[kKeyBytes];
      FormatKey(k + i, expect);
      if (pairs.size() != want || pairs[i].first != std::string(expect, kKeyBytes) ||
          !ValueBelongsTo(k + i, pairs[i].second)) {
        return Status::Corruption("scan from " + std::string(key, kKeyBytes) + ": wrong pairs");
      }
    }
  }
  r.scan_ops = static_cast<double>(scans) / bench::SecondsSince(start);

  auto gets = MeasureGetOps(engine, FLAGS_scan_keys, &rng);
  if (!gets.ok()) return gets.status();
  r.get_ops = gets.value();
  return r;
}

// ---- Driver ---------------------------------------------------------------------------

// Prints the report as a table, or (--json) as one JSON object with the notes.
void PrintReport(const Report& report) {
  if (FLAGS_json) {
    report.PrintJson(/*with_notes=*/true);
    return;
  }
  std::printf(
      "ltc_engine_bench: 1 RangeEngine in process, %u nova_stoc processes over loopback "
      "(tcp, %d xchg threads), rho = %u, power-of-d; %.1f s per case; machine: %u cores\n",
      kStocs, kXchgThreads, kScatterWidth, FLAGS_seconds_per_case,
      std::thread::hardware_concurrency());
  report.PrintDataDirLine();
  PrintW100Table(report);
  std::printf(
      "in-memory put path (%zu B keys, %zu B values, %d threads, theta %d, no flush): %s "
      "puts/s\n",
      kKeyBytes, kInMemoryValueBytes, kWriterThreads, kInMemoryTheta,
      report.Cell("inmemory_put_ops", "%.0f").c_str());
  std::printf("gets (1 thread, uniform over %llu loaded keys, %zu B values, theta %d):\n",
              static_cast<unsigned long long>(FLAGS_get_keys), kGetValueBytes, kGetTheta);
  std::printf("  lookup index on:  %s gets/s\n",
              report.Cell("get_ops_lookup_index_on", "%.0f").c_str());
  std::printf("  lookup index off: %s gets/s\n",
              report.Cell("get_ops_lookup_index_off", "%.0f").c_str());
  std::printf(
      "range index (1 thread, %llu keys, %zu B values, theta %d, %llu KiB memtables, no "
      "L0 compaction):\n",
      static_cast<unsigned long long>(FLAGS_scan_keys), kGetValueBytes, kScanTheta,
      static_cast<unsigned long long>(FLAGS_scan_memtable_kib));
  for (const char* mode : {"on", "off"}) {
    std::printf("  range index %-3s: %s scans of %zu/s, %s gets/s (lookup index off)\n", mode,
                report.Cell(std::string("scan10_ops_range_index_") + mode, "%.0f").c_str(),
                kScanPairs,
                report.Cell(std::string("get_ops_range_index_") + mode, "%.0f").c_str());
  }
  report.PrintNotes();
}

// Runs the cases of the groups in --cases, filling the report; returns the number of failed
// cases (each reported on stderr and as a note), stopping at the first unless --keep_going.
// The W100 cases run last: if writers get stuck in an engine the run ends there
// (Bench::abandon), and the other figures are in by then.
int RunCases(Bench* b) {
  nlohmann::ordered_json& out = b->report->out();
  CaseFailures failures("ltc_engine_bench", FLAGS_keep_going, b->report);
  auto wanted = [](const std::string& group) {
    const std::string list = "," + FLAGS_cases + ",";
    return list.find("," + group + ",") != std::string::npos;
  };
  if (wanted("inmemory")) {
    auto inmem = MeasureInMemoryPuts(b);
    if (failures.Ok("in-memory puts", inmem.status())) out["inmemory_put_ops"] = inmem.value();
  }
  for (bool index : {true, false}) {
    if (!wanted("gets") || failures.stop()) break;
    const std::string key = std::string("get_ops_lookup_index_") + (index ? "on" : "off");
    auto r = MeasureGets(b, index);
    if (failures.Ok(key, r.status())) out[key] = r.value();
  }
  for (bool index : {true, false}) {
    if (!wanted("range_index") || failures.stop()) break;
    const std::string mode = index ? "on" : "off";
    auto r = MeasureRangeIndex(b, index);
    if (!failures.Ok("range index " + mode, r.status())) continue;
    out["scan10_ops_range_index_" + mode] = r->scan_ops;
    out["get_ops_range_index_" + mode] = r->get_ops;
  }
  if (wanted("w100")) RunW100Cases(b, &failures);
  return failures.count();
}

// --w100_thetas parses, and every theta but 1 has a memtable per Drange at least.
bool W100ThetasFit() {
  const auto thetas = ParseW100Thetas(FLAGS_w100_thetas);
  if (!thetas.ok()) return false;
  for (int theta : thetas.value()) {
    if (theta != 1 && theta > FLAGS_w100_memtables_theta64) return false;
  }
  return true;
}

int Run() {
  if (FLAGS_seconds_per_case <= 0 || FLAGS_keyspace_keys < 1 ||
      FLAGS_keyspace_keys > kMaxKeyspaceKeys || FLAGS_max_puts_per_case < 1 ||
      FLAGS_w100_memtable_kib < 1 || FLAGS_w100_memtables_theta1 < 2 ||
      FLAGS_w100_memtables_theta64 < 1 || FLAGS_w100_l0_stop_writes_mib < 1 || FLAGS_get_keys < 1 ||
      FLAGS_get_keys > kMaxKeyspaceKeys || FLAGS_scan_keys < 1 ||
      FLAGS_scan_keys > kMaxKeyspaceKeys || FLAGS_scan_memtable_kib < 1 ||
      !ParseW100Keys(FLAGS_w100_keys).ok() || !W100ThetasFit()) {
    std::fprintf(stderr,
                 "ltc_engine_bench: need --seconds_per_case > 0, 1 <= --keyspace_keys <= 10^12, "
                 "--max_puts_per_case >= 1, --w100_memtable_kib >= 1, "
                 "--w100_memtables_theta1 >= 2, --w100_memtables_theta64 >= 1, "
                 "--w100_l0_stop_writes_mib >= 1, 1 <= --get_keys <= 10^12, "
                 "1 <= --scan_keys <= 10^12, --scan_memtable_kib >= 1, --w100_keys a "
                 "non-empty list of uniform, zipf, szipf, --w100_thetas a non-empty list of "
                 "1..1024 none above --w100_memtables_theta64 but 1\n");
    return 2;
  }
  BenchStocClusterOptions co;
  co.program = "ltc_engine_bench";
  co.flattered_figures = "flush figures";
  co.dir_base_flag = FLAGS_stoc_dir_base;
  co.dir_base_is_default = gflags::GetCommandLineFlagInfoOrDie("stoc_dir_base").is_default;
  co.stocs = kStocs;
  co.max_block_bytes = kMaxBlockBytes;
  co.xchg_threads = kXchgThreads;
  BenchStocCluster cluster(co);  // declared before the connection: stopped after it
  BenchStocConnection conn;
  if (!StartAndConnect(&cluster, &conn)) return 1;

  Report report;
  nlohmann::ordered_json& out = report.out();
  out["stocs"] = kStocs;
  out["cores"] = std::thread::hardware_concurrency();
  out["seconds_per_case"] = FLAGS_seconds_per_case;
  out["writer_threads"] = kWriterThreads;
  out["keyspace_keys"] = FLAGS_keyspace_keys;
  out["w100_keys"] = FLAGS_w100_keys;
  out["w100_thetas"] = FLAGS_w100_thetas;
  out["w100_memtable_kib"] = FLAGS_w100_memtable_kib;
  out["w100_memtables_theta1"] = FLAGS_w100_memtables_theta1;
  out["w100_memtables_theta64"] = FLAGS_w100_memtables_theta64;
  out["w100_l0_stop_writes_mib"] = FLAGS_w100_l0_stop_writes_mib;
  out["get_keys"] = FLAGS_get_keys;
  out["scan_keys"] = FLAGS_scan_keys;
  out["scan_memtable_kib"] = FLAGS_scan_memtable_kib;
  report.AddDataDir(cluster.root());

  const ValuePool pool;
  Bench bench;
  bench.conn = &conn;
  bench.pool = &pool;
  bench.report = &report;
  bench.abandon = [&](const std::string& why) {
    std::fprintf(stderr, "ltc_engine_bench: giving up: %s\n", why.c_str());
    report.AddNote("ABANDONED: " + why);
    PrintReport(report);
    std::fflush(stdout);
    std::fflush(stderr);
    // The engine's threads go on and would log every failed StoC call while the StoCs stop.
    const int null_fd = ::open("/dev/null", O_WRONLY);
    if (null_fd >= 0) ::dup2(null_fd, STDERR_FILENO);
    cluster.Stop();  // the engine's threads are stuck: no destructor may run
    std::_Exit(1);
  };
  const int failures = RunCases(&bench);
  PrintReport(report);
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace nova::ltc_bench

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "Measures the LTC engine (one RangeEngine in process) over 3 nova_stoc processes: W100 "
      "put throughput and write stalls (uniform, zipfian and scrambled zipfian keys, theta 1 and "
      "64), the "
      "in-memory put path, gets with the lookup index on and off, and scans and gets with the "
      "range index on and off.\nUsage: "
      "ltc_engine_bench [--json] [--seconds_per_case=S] [--stoc_dir_base=DIR]");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  FLAGS_logtostderr = true;
  FLAGS_minloglevel = 1;  // keep the table readable
  google::InitGoogleLogging(argv[0]);
  return nova::ltc_bench::Run();
}
