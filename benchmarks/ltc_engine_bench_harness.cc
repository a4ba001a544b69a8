#include "benchmarks/ltc_engine_bench_harness.h"

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "ltc/engine/manifest.h"
#include "stoc/client/file_names.h"
#include "stoc/client/placement.h"
#include "tests/util/test_util.h"

namespace nova::ltc_bench {

using bench::SecondsSince;

namespace {

constexpr char kKeyPrefix[] = "user";
constexpr size_t kKeyPrefixBytes = sizeof(kKeyPrefix) - 1;
// Values are slices of this much random data (incompressible, varied).
constexpr size_t kValuePoolBytes = 1 * kMiB;
// Settling after a warm-up or load may take this long (the case goes on, with a note, if
// the engine neither settled nor went quiet).
constexpr auto kSettleTimeout = std::chrono::seconds(120);
// No flush or compaction finished for this long: the engine will do nothing more by itself.
// Longer than one Level-0 compaction of this benchmark takes on 2 cores.
constexpr auto kQuietPeriod = std::chrono::seconds(10);
// How long writers may stay stalled in Put past a deadline before the run is abandoned
// (Bench::abandon).
constexpr auto kStuckTimeout = std::chrono::seconds(60);

}  // namespace

void FormatKey(uint64_t n, char* out) {
  std::memcpy(out, kKeyPrefix, kKeyPrefixBytes);
  for (size_t i = kKeyBytes; i > kKeyPrefixBytes; --i) {
    out[i - 1] = static_cast<char>('0' + n % 10);
    n /= 10;
  }
}

ValuePool::ValuePool() : bytes_(kValuePoolBytes, '\0') {
  std::mt19937_64 rng(1);
  for (char& c : bytes_) c = static_cast<char>(rng());
}

void ValuePool::Fill(uint64_t key, uint64_t salt, size_t n, char* out) const {
  std::memcpy(out, bytes_.data() + salt % (bytes_.size() - n), n);
  std::memcpy(out, &key, sizeof(key));
}

const char* DistName(KeyDist d) {
  switch (d) {
    case KeyDist::kUniform:
      return "uniform";
    case KeyDist::kZipfian:
      return "zipf";
    case KeyDist::kScrambledZipfian:
      return "szipf";
  }
  return "?";
}

KeyChooser::KeyChooser(KeyDist dist, uint64_t keys)
    : keys_(keys),
      scramble_(dist == KeyDist::kScrambledZipfian),
      zipf_(dist == KeyDist::kUniform ? nullptr : std::make_unique<ZipfianGenerator>(keys)) {}

uint64_t KeyChooser::Next(std::mt19937_64* rng) const {
  if (zipf_) {
    const uint64_t rank = zipf_->Next(rng);
    return scramble_ ? FnvHash64(rank) % keys_ : rank;
  }
  return (*rng)() % keys_;  // the modulo bias is below 10^-7 for keys <= 10^12
}

// ---- CaseEngine ---------------------------------------------------------------------------

CaseEngine::~CaseEngine() {
  engine_.reset();
  store_.reset();
  if (range_id_ == 0) return;
  for (uint32_t id : conn_->stocs()) {
    auto files = conn_->client()->List(id);
    if (!files.ok()) {
      std::fprintf(stderr, "ltc_engine_bench: listing StoC %u: %s\n", id,
                   files.status().ToString().c_str());
      continue;
    }
    for (const auto& f : files.value()) {
      const stoc::ParsedFileName p = stoc::ParseStocFileName(f.name);
      if (p.type == stoc::StocFileType::kUnknown || p.range_id != range_id_) continue;
      Status s = conn_->client()->Delete(id, f.name);
      if (!s.ok() && !s.IsNotFound()) {
        std::fprintf(stderr, "ltc_engine_bench: deleting %s at StoC %u: %s\n", f.name.c_str(), id,
                     s.ToString().c_str());
      }
    }
  }
}

Status CaseEngine::Open(const EngineOptions& options) {
  range_id_ = options.range_id;
  stoc::StocTableStoreOptions so;
  so.range_id = options.range_id;
  so.stocs = conn_->stocs();
  so.placement = lsm::PlacementPolicy::kPowerOfD;
  so.validate_manifest = ltc::ValidateManifest;
  store_ = std::make_unique<stoc::StocTableStore>(conn_->client(), so);
  NOVA_RETURN_NOT_OK_PREPEND(store_->Init(), "table store");
  engine_ = std::make_unique<RangeEngine>(options, store_.get());
  NOVA_RETURN_NOT_OK_PREPEND(engine_->Open(), "opening the range");
  return Status::OK();
}

// ---- Workload drivers ---------------------------------------------------------------------

std::string Describe(const EngineStats& s) {
  uint64_t deeper = 0;
  for (int l = 1; l < lsm::kNumLevels; ++l) deeper += s.level_tables[l];
  return std::to_string(s.dranges) + " Dranges, " + std::to_string(s.immutable_memtables) +
         " immutable memtables, " + std::to_string(s.level_tables[0]) + " L0 tables (" +
         std::to_string(s.level_bytes[0] / kMiB) + " MiB), " + std::to_string(deeper) +
         " tables in L1+, " + std::to_string(s.flushes) + " flushes, " +
         std::to_string(s.compactions) + " compactions, " + std::to_string(s.stalls) +
         " stalls so far";
}

EngineOptions W100Options(uint32_t range_id, int theta) {
  EngineOptions o;
  o.range_id = range_id;
  o.memtable_bytes = FLAGS_w100_memtable_kib * kKiB;
  o.memtables = theta == 1 ? FLAGS_w100_memtables_theta1 : FLAGS_w100_memtables_theta64;
  o.dranges = theta;
  o.scatter_width = kScatterWidth;
  o.l0_stop_writes_bytes = FLAGS_w100_l0_stop_writes_mib * kMiB;
  return o;
}

Result<PutRun> RunPuts(Bench* b, RangeEngine* engine, const KeyFn& key_of, size_t value_bytes,
                       uint64_t max_puts, MonoTime deadline, uint64_t seed,
                       const std::string& what) {
  struct PerThread {
    Status status;
    uint64_t puts = 0;
    MonoTime end;
  };
  std::vector<PerThread> results(kWriterThreads);
  std::mutex mu;
  std::condition_variable cv;
  int done = 0;  // protected by mu
  std::vector<std::thread> workers;
  const MonoTime start = MonoNow();
  for (int t = 0; t < kWriterThreads; ++t) {
    workers.emplace_back([&, t] {
      PerThread& r = results[t];
      std::mt19937_64 rng(seed * 1000 + t);
      char key[kKeyBytes];
      std::string value(value_bytes, '\0');
      // This thread's share of max_puts: the first (max_puts % threads) take one more.
      const uint64_t mine =
          max_puts / kWriterThreads + (static_cast<uint64_t>(t) < max_puts % kWriterThreads);
      for (uint64_t i = 0; i < mine && MonoNow() < deadline; ++i) {
        const uint64_t k = key_of(t, i, &rng);
        FormatKey(k, key);
        b->pool->Fill(k, rng(), value_bytes, value.data());
        r.status = engine->Put(leveldb::Slice(key, kKeyBytes), value);
        if (!r.status.ok()) break;
        ++r.puts;
      }
      r.end = MonoNow();
      std::lock_guard l(mu);
      ++done;
      cv.notify_all();
    });
  }
  {
    std::unique_lock l(mu);
    if (!cv.wait_until(l, deadline + kStuckTimeout, [&] { return done == kWriterThreads; })) {
      l.unlock();
      b->abandon(what + ": writers still stalled in Put " + std::to_string(kStuckTimeout.count()) +
                 " s after the deadline (" + Describe(engine->GetStats()) + ")");
      std::_Exit(1);  // not reached: abandon does not return
    }
  }
  for (auto& w : workers) w.join();
  PutRun run;
  MonoTime end = start;
  for (auto& r : results) {
    NOVA_RETURN_NOT_OK_PREPEND(r.status, "put");
    run.puts += r.puts;
    end = std::max(end, r.end);
  }
  run.seconds = std::chrono::duration<double>(end - start).count();
  return run;
}

void WaitUntilSettled(Bench* b, RangeEngine* engine, const EngineOptions& o,
                      const std::string& what) {
  EngineStats s;
  bool settled = false;
  uint64_t progress = UINT64_MAX;
  MonoTime last_progress = MonoNow();
  const MonoTime start = MonoNow();
  test::WaitFor(
      [&] {
        s = engine->GetStats();
        settled = s.immutable_memtables == 0 &&
                  s.level_tables[0] < static_cast<uint64_t>(o.l0_compaction_trigger);
        if (s.flushes + s.compactions != progress) {
          progress = s.flushes + s.compactions;
          last_progress = MonoNow();
        }
        return settled || MonoNow() - last_progress >= kQuietPeriod;
      },
      std::chrono::duration_cast<std::chrono::milliseconds>(kSettleTimeout));
  if (!settled) {
    b->report->AddNote(what + ": not settled; measured anyway after " +
                       std::to_string(static_cast<int>(SecondsSince(start))) + " s (" +
                       Describe(s) + ")");
  }
}

Status WarmUp(Bench* b, RangeEngine* engine, const EngineOptions& o, const KeyFn& key_of,
              size_t value_bytes, uint64_t fill_puts, const std::string& name) {
  const uint64_t puts = o.reorganize_every_writes + fill_puts;
  auto run = RunPuts(b, engine, key_of, value_bytes, puts, MonoNow() + kWarmupTimeout,
                     /*seed=*/7, name + " warm-up");
  if (!run.ok()) return run.status().Prepend("warm-up");
  if (run->puts < puts) {
    return Status::TimedOut("warm-up: " + std::to_string(run->puts) + " of " +
                            std::to_string(puts) + " puts in " + std::to_string(run->seconds) +
                            " s");
  }
  WaitUntilSettled(b, engine, o, name + " warm-up");
  const EngineStats s = engine->GetStats();
  if (s.dranges != o.dranges) {
    b->report->AddNote(name + ": " + std::to_string(s.dranges) + " Dranges after warm-up, not " +
                       std::to_string(o.dranges));
  }
  return Status::OK();
}

}  // namespace nova::ltc_bench
