// What the cases of ltc_engine_bench share (ltc_engine_bench.cc runs them; the W100 cases
// are in ltc_engine_bench_w100.cc): the workload's keys and values, one fresh engine per
// case over the benchmark's StoCs (CaseEngine), writer threads driving an engine
// (RunPuts), and waiting for the engine to settle after a load (WaitUntilSettled, WarmUp).
// See ltc_engine_bench.cc for what is measured.
#pragma once

#include <gflags/gflags.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>

#include "benchmarks/bench_util.h"
#include "common/clock.h"
#include "common/status.h"
#include "common/zipfian.h"
#include "ltc/engine/engine_options.h"
#include "ltc/engine/range_engine.h"
#include "stoc/client/stoc_table_store.h"

// Defined in ltc_engine_bench.cc (see their help there).
DECLARE_double(seconds_per_case);
DECLARE_uint64(keyspace_keys);
DECLARE_string(w100_keys);
DECLARE_string(w100_thetas);
DECLARE_uint64(max_puts_per_case);
DECLARE_uint64(w100_memtable_kib);
DECLARE_int32(w100_memtables_theta1);
DECLARE_int32(w100_memtables_theta64);
DECLARE_uint64(w100_l0_stop_writes_mib);

namespace nova::ltc_bench {

using bench::kKiB;
using bench::kMiB;
using ltc::EngineOptions;
using ltc::EngineStats;
using ltc::RangeEngine;

// StoCs started: every table is scattered over all of them (rho = kStocs).
constexpr uint32_t kStocs = 3;
constexpr uint32_t kScatterWidth = kStocs;

// The workloads.
constexpr int kWriterThreads = 2;
constexpr size_t kKeyBytes = 16;
constexpr uint64_t kMaxKeyspaceKeys = 1000000000000ull;  // 10^12: 12 digits after "user"
constexpr size_t kW100ValueBytes = 1 * kKiB;
// Warm-up and load may take this long before the case fails.
constexpr auto kWarmupTimeout = std::chrono::seconds(120);

// Writes the kKeyBytes key of `n` ("user" + 12 zero-padded digits) to out.
// REQUIRES: n < kMaxKeyspaceKeys.
void FormatKey(uint64_t n, char* out);

// Incompressible bytes values are cut from. Immutable after construction.
class ValuePool {
 public:
  ValuePool();
  // Fills out[0, n) with pool bytes chosen by `salt`, the first 8 bytes being `key`'s
  // number, so a reader can tell the value belongs to the key. REQUIRES: 8 <= n < pool size.
  void Fill(uint64_t key, uint64_t salt, size_t n, char* out) const;

 private:
  std::string bytes_;
};

// kZipfian is zipfian 0.99 with key number i the i-th most popular key, as in the paper's
// evaluation (its Drange [0,0] holds key 0, the most popular): the hot keys are neighbours in
// key order. kScrambledZipfian has the same popularities spread over the key space by a hash
// (YCSB's ScrambledZipfianGenerator), so hot keys have cold neighbours.
enum class KeyDist { kUniform, kZipfian, kScrambledZipfian };

// "uniform", "zipf" or "szipf".
const char* DistName(KeyDist d);

// Chooses key numbers in [0, keys) as `dist` says.
// Thread-safe: immutable; Next() uses the caller's rng.
class KeyChooser {
 public:
  KeyChooser(KeyDist dist, uint64_t keys);
  uint64_t Next(std::mt19937_64* rng) const;

 private:
  const uint64_t keys_;
  const bool scramble_;
  const std::unique_ptr<ZipfianGenerator> zipf_;  // null for uniform
};

// One case's engine: a stoc::StocTableStore for a fresh range id over every StoC and a
// RangeEngine on it, opened. The destructor stops the engine (it waits for a running flush
// or compaction), then deletes every StoC file of the range (table fragments, MANIFESTs),
// however the case ended, so the next case starts on clean StoCs and the disk use stays
// bounded. Not thread-safe itself; engine() is.
class CaseEngine {
 public:
  // `conn` must outlive this.
  explicit CaseEngine(bench::BenchStocConnection* conn) : conn_(conn) {}
  ~CaseEngine();
  CaseEngine(const CaseEngine&) = delete;
  CaseEngine& operator=(const CaseEngine&) = delete;

  // Opens an empty range with `options` (its range_id must be one no earlier case used).
  // Returns OK, or the failure of the table store or of RangeEngine::Open().
  // REQUIRES: called once.
  Status Open(const EngineOptions& options);

  // REQUIRES: Open() succeeded.
  RangeEngine* engine() { return engine_.get(); }

 private:
  bench::BenchStocConnection* const conn_;  // must outlive this
  uint32_t range_id_ = 0;
  std::unique_ptr<stoc::StocTableStore> store_;
  std::unique_ptr<RangeEngine> engine_;  // declared after store_: destroyed first
};

// What the cases share. Not thread-safe: the main thread runs the cases.
struct Bench {
  bench::BenchStocConnection* conn = nullptr;  // must outlive the cases
  const ValuePool* pool = nullptr;
  bench::Report* report = nullptr;
  // Ends the process when writers are stuck inside an engine, which then cannot be
  // destroyed under them: prints the report with `why`, stops the StoCs, removes their
  // directories and exits with status 1. Does not return.
  std::function<void(const std::string& why)> abandon;
  uint32_t next_range_id = 1;  // a fresh range per case
};

// "3 immutable memtables, 12 L0 tables (40 MiB), ..." for notes.
std::string Describe(const EngineStats& s);

// The engine options of a W100 case at `theta` Dranges (the get and range-index cases
// start from them too): --w100_memtable_kib memtables, delta from
// --w100_memtables_theta1/64, rho = kScatterWidth, --w100_l0_stop_writes_mib.
EngineOptions W100Options(uint32_t range_id, int theta);

// Which key thread `thread` writes in its i-th put.
using KeyFn = std::function<uint64_t(int thread, uint64_t i, std::mt19937_64* rng)>;

struct PutRun {
  uint64_t puts = 0;
  double seconds = 0;  // from the start to the last writer's end
};

// Runs kWriterThreads writers putting `value_bytes`-byte values under the keys `key_of`
// gives, together up to `max_puts` puts, until `deadline`. Returns what they did, or the
// first failed put's error. A put blocks while its write stalls; if the writers are still
// inside the engine kStuckTimeout after the deadline, the run is abandoned (b->abandon).
Result<PutRun> RunPuts(Bench* b, RangeEngine* engine, const KeyFn& key_of, size_t value_bytes,
                       uint64_t max_puts, MonoTime deadline, uint64_t seed,
                       const std::string& what);

// Waits, polling, up to kSettleTimeout until no memtable waits for a flush and Level 0 is
// below its compaction trigger, or until no flush or compaction has finished for
// kQuietPeriod (the engine does nothing more by itself). Adds a note unless it settled.
void WaitUntilSettled(Bench* b, RangeEngine* engine, const EngineOptions& o,
                      const std::string& what);

// Puts o.reorganize_every_writes keys from `key_of` (with theta > 1 the engine builds its
// Dranges at the end of them), then `fill_puts` more, then waits for the engine to settle.
// Returns OK, or the failure or TimedOut (not all puts within kWarmupTimeout) of the puts.
// Adds a note if it did not settle or has not built its Dranges.
Status WarmUp(Bench* b, RangeEngine* engine, const EngineOptions& o, const KeyFn& key_of,
              size_t value_bytes, uint64_t fill_puts, const std::string& name);

}  // namespace nova::ltc_bench
