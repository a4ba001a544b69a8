// ltc_engine_bench: the LTC's LSM-tree engine (one RangeEngine, in process) over a
// StocTableStore whose StoCs are kStocs real nova_stoc processes (loopback, data directories
// on a real disk, as stoc_bench does). It measures:
//  - W100 put throughput: 16 B keys ("user" + 12 digits), 1 KiB values, kWriterThreads
//    writers, keys uniform or scrambled zipfian 0.99 over --keyspace_keys, for theta = 1 and
//    theta = 64 Dranges; memtables small enough that flushes to the StoCs run all the time
//    (--w100_memtable_kib, --w100_memtables_theta1/64); rho = 3, power-of-d placement;
//  - the write-stall percentage of each W100 case: the time writers waited for a free
//    memtable or for Level 0 (EngineStats::stall_micros) over writers x elapsed time;
//  - the in-memory put path: 16 B keys, 100 B values, kWriterThreads writers, theta 64,
//    memtables so large that nothing is flushed while it is measured;
//  - get throughput, one thread, uniform over --get_keys loaded keys, with the lookup index
//    (EngineOptions::lookup_index) on and off.
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
// Prints a table, or with --json one JSON object (names carry units: _ops is operations per
// second, _pct a percentage).
#include <fcntl.h>
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <linux/magic.h>
#include <stdlib.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/rpc/rpc_endpoint.h"
#include "common/status.h"
#include "common/transport/transport.h"
#include "common/zipfian.h"
#include "ltc/engine_options.h"
#include "ltc/range_engine.h"
#include "ltc/stoc_table_store.h"
#include "stoc/file_names.h"
#include "stoc/placement.h"
#include "stoc/stoc_client.h"
#include "tests/util/external_daemon.h"
#include "tests/util/test_util.h"

DEFINE_bool(json, false, "Print one JSON object instead of a table");
DEFINE_double(seconds_per_case, 5.0,
              "Measuring time of each case, seconds (its warm-up and settling come on top)");
DEFINE_uint64(keyspace_keys, 1000000,
              "Distinct keys the W100 and in-memory cases choose from (uniformly, or scrambled "
              "zipfian with constant 0.99), keys. At most 10^12 (12 digits in a 16 B key)");
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
             "theta = 64 Dranges, and in the get cases");
DEFINE_uint64(w100_l0_stop_writes_mib, 256,
              "Level-0 size at which writes stop until compaction catches up, in the W100 and "
              "get cases (EngineOptions::l0_stop_writes_bytes, whose default is 256 MiB), MiB");
DEFINE_uint64(get_keys, 200000,
              "Keys loaded (1 KiB values, each written once) before each get case, keys; the "
              "gets choose uniformly among them");
DEFINE_string(stoc_dir_base, "/tmp",
              "Directory under which the StoCs' data directories are made (and removed at "
              "the end). If left at its default and /tmp is a tmpfs, /var/tmp is used instead "
              "(fdatasync on tmpfs is free and would flatter the figures)");
DEFINE_bool(keep_going, false,
            "When a case fails, report it and go on with the next (exit status is still 1)");

namespace {

using namespace nova;
using nova::ltc::EngineOptions;
using nova::ltc::EngineStats;
using nova::ltc::RangeEngine;
using nova::ltc::StocTableStore;
using nova::ltc::StocTableStoreOptions;

constexpr uint64_t kKiB = 1ull << 10;
constexpr uint64_t kMiB = 1ull << 20;

// StoCs started: every table is scattered over all of them (rho = kStocs).
constexpr uint32_t kStocs = 3;
constexpr uint32_t kScatterWidth = kStocs;
// The largest StoC block: a memtable flushed whole is one table of rho fragments, so the
// in-memory case's warm-up memtable (about 15 MiB) must fit in rho blocks with room to spare.
constexpr uint64_t kMaxBlockBytes = 16 * kMiB;
// Lanes per peer; the daemons and the client must agree.
constexpr int kXchgThreads = 2;
constexpr auto kDaemonStartTimeout = std::chrono::seconds(20);
constexpr auto kDaemonShutdownTimeout = std::chrono::seconds(10);
constexpr char kDefaultDirBase[] = "/tmp";
constexpr char kFallbackDirBase[] = "/var/tmp";

// The workloads.
constexpr int kWriterThreads = 2;
constexpr char kKeyPrefix[] = "user";
constexpr size_t kKeyPrefixBytes = sizeof(kKeyPrefix) - 1;
constexpr size_t kKeyBytes = 16;
constexpr uint64_t kMaxKeyspaceKeys = 1000000000000ull;  // 10^12: 12 digits after the prefix
constexpr size_t kW100ValueBytes = 1 * kKiB;
constexpr size_t kInMemoryValueBytes = 100;
constexpr size_t kGetValueBytes = 1 * kKiB;
constexpr int kThetaValues[] = {1, 64};
constexpr int kInMemoryTheta = 64;
constexpr int kGetTheta = 64;
// In-memory case: memtables this large never fill while measured. --max_puts_per_case
// (10^7 by default) puts of ~150 B in memory spread over 64 Dranges is ~25 MiB per Drange.
constexpr uint64_t kInMemoryMemtableBytes = 256 * kMiB;
constexpr int kInMemoryMemtables = 2 * kInMemoryTheta;  // one active + one spare per Drange
// Values are slices of this much random data (incompressible, varied).
constexpr size_t kValuePoolBytes = 1 * kMiB;

// Bounds besides the measuring time: warm-up and load (each may take this long before the
// case fails); settling after them (the case goes on, with a note, if the engine neither
// settled nor went quiet); how long writers may stay stalled in Put past a deadline before
// the run is abandoned (Bench::abandon); the gets of one case.
constexpr auto kWarmupTimeout = std::chrono::seconds(120);
constexpr auto kSettleTimeout = std::chrono::seconds(120);
// No flush or compaction finished for this long: the engine will do nothing more by itself.
// Longer than one Level-0 compaction of this benchmark takes on 2 cores.
constexpr auto kQuietPeriod = std::chrono::seconds(10);
constexpr auto kStuckTimeout = std::chrono::seconds(60);
constexpr uint64_t kMaxGetsPerCase = 10000000;

// ---- Small helpers --------------------------------------------------------------------

MonoTime DeadlineAfter(double seconds) {
  return MonoNow() +
         std::chrono::duration_cast<MonoClock::duration>(std::chrono::duration<double>(seconds));
}

double SecondsSince(MonoTime start) {
  return std::chrono::duration<double>(MonoNow() - start).count();
}

// Writes the kKeyBytes key of `n` ("user" + 12 zero-padded digits) to out.
// REQUIRES: n < kMaxKeyspaceKeys.
void FormatKey(uint64_t n, char* out) {
  std::memcpy(out, kKeyPrefix, kKeyPrefixBytes);
  for (size_t i = kKeyBytes; i > kKeyPrefixBytes; --i) {
    out[i - 1] = static_cast<char>('0' + n % 10);
    n /= 10;
  }
}

// Incompressible bytes values are cut from. Immutable after construction.
class ValuePool {
 public:
  ValuePool() : bytes_(kValuePoolBytes, '\0') {
    std::mt19937_64 rng(1);
    for (char& c : bytes_) c = static_cast<char>(rng());
  }
  // Fills out[0, n) with pool bytes chosen by `salt`, the first 8 bytes being `key`'s
  // number, so a reader can tell the value belongs to the key. REQUIRES: 8 <= n < pool size.
  void Fill(uint64_t key, uint64_t salt, size_t n, char* out) const {
    std::memcpy(out, bytes_.data() + salt % (bytes_.size() - n), n);
    std::memcpy(out, &key, sizeof(key));
  }

 private:
  std::string bytes_;
};

enum class KeyDist { kUniform, kZipfian };

const char* DistName(KeyDist d) { return d == KeyDist::kUniform ? "uniform" : "zipf"; }

// Chooses key numbers in [0, keys): uniformly or scrambled zipfian 0.99.
// Thread-safe: immutable; Next() uses the caller's rng.
class KeyChooser {
 public:
  KeyChooser(KeyDist dist, uint64_t keys)
      : keys_(keys),
        zipf_(dist == KeyDist::kZipfian ? std::make_unique<ScrambledZipfianGenerator>(keys)
                                        : nullptr) {}
  uint64_t Next(std::mt19937_64* rng) const {
    if (zipf_) return zipf_->Next(rng);
    return (*rng)() % keys_;  // the modulo bias is below 10^-7 for keys <= 10^12
  }

 private:
  const uint64_t keys_;
  const std::unique_ptr<ScrambledZipfianGenerator> zipf_;  // null for uniform
};

// ---- Where the data directories go (as stoc_bench) -----------------------------------

bool IsTmpfs(const std::string& path) {
  struct statfs st {};
  return ::statfs(path.c_str(), &st) == 0 && st.f_type == TMPFS_MAGIC;
}

// "<fstype> (<device> mounted on <mount point>)" for the mount holding `path`, from
// /proc/self/mounts (the longest mount point that prefixes the path).
std::string DescribeFilesystem(const std::string& path) {
  std::error_code ec;
  const std::string real = std::filesystem::canonical(path, ec).string();
  std::ifstream mounts("/proc/self/mounts");
  std::string line, best_point, best;
  while (std::getline(mounts, line)) {
    std::istringstream fields(line);
    std::string device, point, type;
    if (!(fields >> device >> point >> type)) continue;
    const bool under =
        real == point || point == "/" ||
        (real.rfind(point, 0) == 0 && real.size() > point.size() && real[point.size()] == '/');
    if (under && point.size() >= best_point.size()) {
      best_point = point;
      best = type + " (" + device + " mounted on " + point + ")";
    }
  }
  return best.empty() ? "unknown filesystem" : best;
}

// The --stoc_dir_base to use: the flag as given, or its default unless that is a tmpfs.
std::string ChooseDirBase() {
  const bool is_default = gflags::GetCommandLineFlagInfoOrDie("stoc_dir_base").is_default;
  if (!is_default || !IsTmpfs(kDefaultDirBase)) {
    if (IsTmpfs(FLAGS_stoc_dir_base)) {
      std::fprintf(stderr,
                   "ltc_engine_bench: warning: %s is a tmpfs; flush figures will be "
                   "flattered (fdatasync is free there)\n",
                   FLAGS_stoc_dir_base.c_str());
    }
    return FLAGS_stoc_dir_base;
  }
  if (!IsTmpfs(kFallbackDirBase)) return kFallbackDirBase;
  return test::BinDir();  // the build directory, normally on a real disk
}

// ---- The StoC processes and the client -----------------------------------------------

// kStocs nova_stoc processes under one scratch directory. The destructor stops them and
// removes the directory (Stop()), on every path out of the benchmark; the one path that
// cannot unwind (writers stuck in the engine, see Bench::abandon) calls Stop() itself.
// Not thread-safe.
class StocCluster {
 public:
  StocCluster() = default;
  ~StocCluster() { Stop(); }
  StocCluster(const StocCluster&) = delete;
  StocCluster& operator=(const StocCluster&) = delete;

  // Makes <base>/nova-ltc-engine-bench-XXXXXX, writes the cluster secret (mode 0600) and
  // starts StoCs 1..kStocs with their default file buffers.
  Status Start(const std::string& base) {
    std::string tmpl = base + "/nova-ltc-engine-bench-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) return Status::FromErrno("mkdtemp " + tmpl, errno);
    root_ = tmpl;
    auto secret_file = test::WriteClusterSecret(root_);
    if (!secret_file.ok()) return secret_file.status();
    std::ifstream in(secret_file.value());
    std::getline(in, secret_);  // the daemons strip the trailing newline too
    if (secret_.empty()) return Status::IOError("cannot read back " + secret_file.value());
    for (uint32_t id = 1; id <= kStocs; ++id) {
      test::ExternalDaemonOptions o;
      o.binary = "nova_stoc";
      o.id = "stoc-" + std::to_string(id);
      o.data_dir = root_ + "/" + o.id;
      o.data_dir_flag = "stoc_dir";
      o.cluster_secret_file = secret_file.value();
      o.extra_flags = {"--stoc_id=" + std::to_string(id),
                       "--stoc_max_block_mb=" + std::to_string(kMaxBlockBytes / kMiB),
                       "--xchg_threads=" + std::to_string(kXchgThreads),
                       "--minloglevel=1"};  // warnings and errors, into <data_dir>/<id>.log
      o.start_timeout = kDaemonStartTimeout;
      o.shutdown_timeout = kDaemonShutdownTimeout;
      daemons_.push_back(std::make_unique<test::ExternalDaemon>(o));
      NOVA_RETURN_NOT_OK(daemons_.back()->Start());
    }
    return Status::OK();
  }

  // Stops the StoCs (SIGTERM, then SIGKILL after kDaemonShutdownTimeout) and removes the
  // scratch directory. Idempotent.
  void Stop() {
    for (auto& d : daemons_) {
      Status s = d->Shutdown();
      if (!s.ok()) std::fprintf(stderr, "ltc_engine_bench: %s\n", s.ToString().c_str());
    }
    daemons_.clear();
    if (!root_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(root_, ec);
      if (ec)
        std::fprintf(stderr, "ltc_engine_bench: cannot remove %s: %s\n", root_.c_str(),
                     ec.message().c_str());
      root_.clear();
    }
  }

  const std::string& root() const { return root_; }
  const std::string& secret() const { return secret_; }
  // StoC `id` (1-based). REQUIRES: Start() succeeded.
  const std::string& address(uint32_t id) const { return daemons_[id - 1]->address(); }

 private:
  std::string root_;
  std::string secret_;
  std::vector<std::unique_ptr<test::ExternalDaemon>> daemons_;
};

// The LTC process's side: transport, RPC endpoint and a StocClient that knows every StoC.
// Thread-safe after Init() (the StocClient is).
class BenchClient {
 public:
  BenchClient() = default;
  ~BenchClient() {
    if (transport_) transport_->Shutdown();  // no completion runs after this
  }
  BenchClient(const BenchClient&) = delete;
  BenchClient& operator=(const BenchClient&) = delete;

  Status Init(const StocCluster& cluster) {
    transport::TransportOptions o;
    o.node_name = "ltc-engine-bench";
    o.cluster_secret = cluster.secret();
    o.xchg_threads = kXchgThreads;
    auto t = transport::NewTransport(o, &endpoint_);
    if (!t.ok()) return t.status();
    transport_ = std::move(t.value());
    endpoint_.Attach(transport_.get());
    client_ = std::make_unique<stoc::StocClient>(&endpoint_);  // before the transport starts
    NOVA_RETURN_NOT_OK(transport_->Init());
    NOVA_RETURN_NOT_OK(transport_->Start());
    for (uint32_t id = 1; id <= kStocs; ++id) {
      NOVA_RETURN_NOT_OK(client_->AddStoc(id, cluster.address(id)));
      stocs_.push_back(id);
    }
    return Status::OK();
  }

  stoc::StocClient* client() { return client_.get(); }
  const std::vector<uint32_t>& stocs() const { return stocs_; }

 private:
  rpc::RpcEndpoint endpoint_;  // outlives transport_ and client_
  std::unique_ptr<transport::Transport> transport_;
  std::unique_ptr<stoc::StocClient> client_;
  std::vector<uint32_t> stocs_;
};

// One case's engine: a StocTableStore for a fresh range id over every StoC and a
// RangeEngine on it, opened. The destructor stops the engine (it waits for a running flush
// or compaction), then deletes every StoC file of the range (table fragments, MANIFESTs),
// however the case ended, so the next case starts on clean StoCs and the disk use stays
// bounded. Not thread-safe itself; engine() is.
class CaseEngine {
 public:
  // `bench` must outlive this.
  explicit CaseEngine(BenchClient* bench) : bench_(bench) {}
  ~CaseEngine() {
    engine_.reset();
    store_.reset();
    if (range_id_ == 0) return;
    for (uint32_t id : bench_->stocs()) {
      auto files = bench_->client()->List(id);
      if (!files.ok()) {
        std::fprintf(stderr, "ltc_engine_bench: listing StoC %u: %s\n", id,
                     files.status().ToString().c_str());
        continue;
      }
      for (const auto& f : files.value()) {
        const stoc::ParsedFileName p = stoc::ParseStocFileName(f.name);
        if (p.type == stoc::StocFileType::kUnknown || p.range_id != range_id_) continue;
        Status s = bench_->client()->Delete(id, f.name);
        if (!s.ok() && !s.IsNotFound()) {
          std::fprintf(stderr, "ltc_engine_bench: deleting %s at StoC %u: %s\n", f.name.c_str(), id,
                       s.ToString().c_str());
        }
      }
    }
  }
  CaseEngine(const CaseEngine&) = delete;
  CaseEngine& operator=(const CaseEngine&) = delete;

  // Opens an empty range with `options` (its range_id must be one no earlier case used).
  // REQUIRES: called once.
  Status Open(const EngineOptions& options) {
    range_id_ = options.range_id;
    StocTableStoreOptions so;
    so.range_id = options.range_id;
    so.stocs = bench_->stocs();
    so.placement = stoc::PlacementPolicy::kPowerOfD;
    store_ = std::make_unique<StocTableStore>(bench_->client(), so);
    NOVA_RETURN_NOT_OK_PREPEND(store_->Init(), "table store");
    engine_ = std::make_unique<RangeEngine>(options, store_.get());
    NOVA_RETURN_NOT_OK_PREPEND(engine_->Open(), "opening the range");
    return Status::OK();
  }

  // REQUIRES: Open() succeeded.
  RangeEngine* engine() { return engine_.get(); }

 private:
  BenchClient* const bench_;  // must outlive this
  uint32_t range_id_ = 0;
  std::unique_ptr<StocTableStore> store_;
  std::unique_ptr<RangeEngine> engine_;  // declared after store_: destroyed first
};

// ---- The report and what the cases share ---------------------------------------------

std::string Cell(const nlohmann::ordered_json& out, const std::string& key, const char* fmt) {
  if (!out.contains(key)) return "-";
  char buf[32];
  std::snprintf(buf, sizeof(buf), fmt, out[key].get<double>());
  return buf;
}

std::string W100Name(KeyDist dist, int theta) {
  return std::string(DistName(dist)) + "_theta" + std::to_string(theta);
}

// The figures and notes measured so far; prints them as a table or (--json) one JSON object.
// Not thread-safe: the main thread fills it.
class Report {
 public:
  nlohmann::ordered_json& out() { return out_; }
  void AddNote(std::string note) { notes_.push_back(std::move(note)); }

  void Print() const {
    if (FLAGS_json) {
      nlohmann::ordered_json j = out_;
      j["notes"] = notes_;
      std::printf("%s\n", j.dump().c_str());
      return;
    }
    std::printf(
        "ltc_engine_bench: 1 RangeEngine in process, %u nova_stoc processes over loopback "
        "(tcp, %d xchg threads), rho = %u, power-of-d; %.1f s per case; machine: %u cores\n",
        kStocs, kXchgThreads, kScatterWidth, FLAGS_seconds_per_case,
        std::thread::hardware_concurrency());
    std::printf("data dirs under %s: %s\n", out_["data_dir"].get<std::string>().c_str(),
                out_["data_dir_fs"].get<std::string>().c_str());
    std::printf(
        "W100: %zu B keys, %zu B values, %d writer threads, %llu keys, memtables %llu KiB "
        "(delta %d at theta 1, %d at theta 64), writes stop at %llu MiB in L0\n",
        kKeyBytes, kW100ValueBytes, kWriterThreads,
        static_cast<unsigned long long>(FLAGS_keyspace_keys),
        static_cast<unsigned long long>(FLAGS_w100_memtable_kib), FLAGS_w100_memtables_theta1,
        FLAGS_w100_memtables_theta64,
        static_cast<unsigned long long>(FLAGS_w100_l0_stop_writes_mib));
    std::printf("%-8s %6s %10s %8s %8s %12s %7s %10s\n", "keys", "theta", "puts/s", "stall %",
                "flushes", "compactions", "stalls", "L0 tables");
    for (KeyDist dist : {KeyDist::kUniform, KeyDist::kZipfian}) {
      for (int theta : kThetaValues) {
        const std::string n = W100Name(dist, theta);
        std::printf("%-8s %6d %10s %8s %8s %12s %7s %10s\n", DistName(dist), theta,
                    Cell(out_, "w100_" + n + "_ops", "%.0f").c_str(),
                    Cell(out_, "stall_pct_" + n, "%.1f").c_str(),
                    Cell(out_, "w100_" + n + "_flushes", "%.0f").c_str(),
                    Cell(out_, "w100_" + n + "_compactions", "%.0f").c_str(),
                    Cell(out_, "w100_" + n + "_stalls", "%.0f").c_str(),
                    Cell(out_, "w100_" + n + "_l0_tables", "%.0f").c_str());
      }
    }
    std::printf(
        "in-memory put path (%zu B keys, %zu B values, %d threads, theta %d, no flush): %s "
        "puts/s\n",
        kKeyBytes, kInMemoryValueBytes, kWriterThreads, kInMemoryTheta,
        Cell(out_, "inmemory_put_ops", "%.0f").c_str());
    std::printf("gets (1 thread, uniform over %llu loaded keys, %zu B values, theta %d):\n",
                static_cast<unsigned long long>(FLAGS_get_keys), kGetValueBytes, kGetTheta);
    std::printf("  lookup index on:  %s gets/s\n",
                Cell(out_, "get_ops_lookup_index_on", "%.0f").c_str());
    std::printf("  lookup index off: %s gets/s\n",
                Cell(out_, "get_ops_lookup_index_off", "%.0f").c_str());
    for (const auto& n : notes_) std::printf("  (%s)\n", n.c_str());
  }

 private:
  nlohmann::ordered_json out_;
  std::vector<std::string> notes_;
};

// What the cases share. Not thread-safe: the main thread runs the cases.
struct Bench {
  BenchClient* client = nullptr;  // must outlive the cases
  const ValuePool* pool = nullptr;
  Report* report = nullptr;
  // Ends the process when writers are stuck inside an engine, which then cannot be
  // destroyed under them: prints the report with `why`, stops the StoCs, removes their
  // directories and exits with status 1. Does not return.
  std::function<void(const std::string& why)> abandon;
  uint32_t next_range_id = 1;  // a fresh range per case
};

// "3 immutable memtables, 12 L0 tables (40 MiB), ..." for notes.
std::string Describe(const EngineStats& s) {
  uint64_t deeper = 0;
  for (int l = 1; l < ltc::kNumLevels; ++l) deeper += s.level_tables[l];
  return std::to_string(s.dranges) + " Dranges, " + std::to_string(s.immutable_memtables) +
         " immutable memtables, " + std::to_string(s.level_tables[0]) + " L0 tables (" +
         std::to_string(s.level_bytes[0] / kMiB) + " MiB), " + std::to_string(deeper) +
         " tables in L1+, " + std::to_string(s.flushes) + " flushes, " +
         std::to_string(s.compactions) + " compactions, " + std::to_string(s.stalls) +
         " stalls so far";
}

// ---- Workload drivers -----------------------------------------------------------------

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

// Waits, polling, up to kSettleTimeout until no memtable waits for a flush and Level 0 is
// below its compaction trigger, or until no flush or compaction has finished for
// kQuietPeriod (the engine does nothing more by itself). Adds a note unless it settled.
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

// Puts o.reorganize_every_writes keys from `key_of` (with theta > 1 the engine builds its
// Dranges at the end of them), then `fill_puts` more, then waits for the engine to settle.
// Adds a note if it did not settle or has not built its Dranges.
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

// ---- Cases ----------------------------------------------------------------------------

struct W100Result {
  double ops = 0;
  double stall_pct = 0;
  uint64_t flushes = 0, compactions = 0, stalls = 0;
  uint64_t l0_tables = 0;  // at the end of the measurement
};

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

Result<W100Result> MeasureW100(Bench* b, KeyDist dist, int theta) {
  const std::string name = "W100 " + W100Name(dist, theta);
  const EngineOptions o = W100Options(b->next_range_id++, theta);
  CaseEngine ce(b->client);
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
                     DeadlineAfter(FLAGS_seconds_per_case), o.range_id, name);
  if (!run.ok()) return run.status();
  const EngineStats after = engine->GetStats();
  W100Result r;
  r.ops = static_cast<double>(run->puts) / run->seconds;
  r.stall_pct = static_cast<double>(after.stall_micros - before.stall_micros) /
                (kWriterThreads * run->seconds * 1e6) * 100.0;
  r.flushes = after.flushes - before.flushes;
  r.compactions = after.compactions - before.compactions;
  r.stalls = after.stalls - before.stalls;
  r.l0_tables = after.level_tables[0];
  if (r.flushes == 0) b->report->AddNote(name + ": no flush while measured");
  return r;
}

// In-memory put path: puts/s with memtables that do not fill while measured.
Result<double> MeasureInMemoryPuts(Bench* b) {
  const std::string name = "in-memory puts";
  EngineOptions o;
  o.range_id = b->next_range_id++;
  o.memtable_bytes = kInMemoryMemtableBytes;
  o.memtables = kInMemoryMemtables;
  o.dranges = kInMemoryTheta;
  o.scatter_width = kScatterWidth;
  CaseEngine ce(b->client);
  NOVA_RETURN_NOT_OK(ce.Open(o));
  RangeEngine* engine = ce.engine();
  const KeyChooser chooser(KeyDist::kUniform, FLAGS_keyspace_keys);
  const KeyFn key_of = [&](int, uint64_t, std::mt19937_64* rng) { return chooser.Next(rng); };
  // The warm-up's single memtable is retired when the Dranges are built; it is flushed
  // before measuring.
  NOVA_RETURN_NOT_OK(WarmUp(b, engine, o, key_of, kInMemoryValueBytes, /*fill_puts=*/0, name));

  const EngineStats before = engine->GetStats();
  auto run = RunPuts(b, engine, key_of, kInMemoryValueBytes, FLAGS_max_puts_per_case,
                     DeadlineAfter(FLAGS_seconds_per_case), o.range_id, name);
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

// Loads --get_keys keys (each once, in random order), lets the engine settle, then one
// thread gets uniformly chosen loaded keys, checking each value. Returns gets/s.
Result<double> MeasureGets(Bench* b, bool lookup_index) {
  const std::string name = std::string("gets, lookup index ") + (lookup_index ? "on" : "off");
  EngineOptions o = W100Options(b->next_range_id++, kGetTheta);
  o.lookup_index = lookup_index;
  CaseEngine ce(b->client);
  NOVA_RETURN_NOT_OK(ce.Open(o));
  RangeEngine* engine = ce.engine();

  // The same load order for both cases.
  std::vector<uint64_t> order(FLAGS_get_keys);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937_64(42));
  const KeyFn key_of = [&](int thread, uint64_t i, std::mt19937_64*) {
    return order[i * kWriterThreads + thread];
  };
  auto load = RunPuts(b, engine, key_of, kGetValueBytes, order.size(), MonoNow() + kWarmupTimeout,
                      /*seed=*/11, name + " load");
  if (!load.ok()) return load.status().Prepend("load");
  if (load->puts < order.size()) {
    return Status::TimedOut("load: " + std::to_string(load->puts) + " of " +
                            std::to_string(order.size()) + " puts in " +
                            std::to_string(load->seconds) + " s");
  }
  WaitUntilSettled(b, engine, o, name + " load");
  b->report->AddNote(name + ": measured with " + Describe(engine->GetStats()));

  std::mt19937_64 rng(o.range_id);
  std::string value;
  uint64_t gets = 0;
  const MonoTime start = MonoNow();
  const MonoTime deadline = DeadlineAfter(FLAGS_seconds_per_case);
  char key[kKeyBytes];
  for (; gets < kMaxGetsPerCase && MonoNow() < deadline; ++gets) {
    const uint64_t k = rng() % order.size();
    FormatKey(k, key);
    NOVA_RETURN_NOT_OK_PREPEND(engine->Get(leveldb::Slice(key, kKeyBytes), &value),
                               "get " + std::string(key, kKeyBytes));
    uint64_t stored = 0;
    if (value.size() == kGetValueBytes) std::memcpy(&stored, value.data(), sizeof(stored));
    if (value.size() != kGetValueBytes || stored != k) {
      return Status::Corruption("get " + std::string(key, kKeyBytes) + ": wrong value (" +
                                std::to_string(value.size()) + " bytes)");
    }
  }
  return static_cast<double>(gets) / SecondsSince(start);
}

// ---- Driver ---------------------------------------------------------------------------

// Runs the cases, filling the report; returns the number of failed cases (each reported on
// stderr), stopping at the first unless --keep_going. The W100 cases with theta 64 run
// last: if writers get stuck in an engine the run ends there (Bench::abandon), and the
// other figures are in by then.
int RunCases(Bench* b) {
  nlohmann::ordered_json& out = b->report->out();
  int failures = 0;
  auto failed = [&](const std::string& what, const Status& s) {
    std::fprintf(stderr, "ltc_engine_bench: %s failed: %s\n", what.c_str(), s.ToString().c_str());
    b->report->AddNote(what + " failed: " + s.ToString());
    ++failures;
    return !FLAGS_keep_going;
  };
  auto inmem = MeasureInMemoryPuts(b);
  if (!inmem.ok()) {
    if (failed("in-memory puts", inmem.status())) return failures;
  } else {
    out["inmemory_put_ops"] = inmem.value();
  }
  for (bool index : {true, false}) {
    const std::string key = std::string("get_ops_lookup_index_") + (index ? "on" : "off");
    auto r = MeasureGets(b, index);
    if (!r.ok()) {
      if (failed(key, r.status())) return failures;
      continue;
    }
    out[key] = r.value();
  }
  for (int theta : kThetaValues) {
    for (KeyDist dist : {KeyDist::kUniform, KeyDist::kZipfian}) {
      const std::string name = W100Name(dist, theta);
      auto r = MeasureW100(b, dist, theta);
      if (!r.ok()) {
        if (failed("W100 " + name, r.status())) return failures;
        continue;
      }
      out["w100_" + name + "_ops"] = r->ops;
      out["stall_pct_" + name] = r->stall_pct;
      out["w100_" + name + "_flushes"] = r->flushes;
      out["w100_" + name + "_compactions"] = r->compactions;
      out["w100_" + name + "_stalls"] = r->stalls;
      out["w100_" + name + "_l0_tables"] = r->l0_tables;
    }
  }
  return failures;
}

int Run() {
  if (FLAGS_seconds_per_case <= 0 || FLAGS_keyspace_keys < 1 ||
      FLAGS_keyspace_keys > kMaxKeyspaceKeys || FLAGS_max_puts_per_case < 1 ||
      FLAGS_w100_memtable_kib < 1 || FLAGS_w100_memtables_theta1 < 2 ||
      FLAGS_w100_memtables_theta64 < 1 || FLAGS_w100_l0_stop_writes_mib < 1 || FLAGS_get_keys < 1 ||
      FLAGS_get_keys > kMaxKeyspaceKeys) {
    std::fprintf(stderr,
                 "ltc_engine_bench: need --seconds_per_case > 0, 1 <= --keyspace_keys <= 10^12, "
                 "--max_puts_per_case >= 1, --w100_memtable_kib >= 1, "
                 "--w100_memtables_theta1 >= 2, --w100_memtables_theta64 >= 1, "
                 "--w100_l0_stop_writes_mib >= 1, 1 <= --get_keys <= 10^12\n");
    return 2;
  }
  const std::string base = ChooseDirBase();
  StocCluster cluster;  // declared before the client: stopped after it
  Status s = cluster.Start(base);
  if (!s.ok()) {
    std::fprintf(stderr, "ltc_engine_bench: starting the StoCs: %s\n", s.ToString().c_str());
    return 1;
  }
  BenchClient client;
  s = client.Init(cluster);
  if (!s.ok()) {
    std::fprintf(stderr, "ltc_engine_bench: client: %s\n", s.ToString().c_str());
    return 1;
  }

  Report report;
  nlohmann::ordered_json& out = report.out();
  out["stocs"] = kStocs;
  out["cores"] = std::thread::hardware_concurrency();
  out["seconds_per_case"] = FLAGS_seconds_per_case;
  out["writer_threads"] = kWriterThreads;
  out["keyspace_keys"] = FLAGS_keyspace_keys;
  out["w100_memtable_kib"] = FLAGS_w100_memtable_kib;
  out["w100_memtables_theta1"] = FLAGS_w100_memtables_theta1;
  out["w100_memtables_theta64"] = FLAGS_w100_memtables_theta64;
  out["w100_l0_stop_writes_mib"] = FLAGS_w100_l0_stop_writes_mib;
  out["get_keys"] = FLAGS_get_keys;
  out["data_dir"] = cluster.root();
  out["data_dir_fs"] = DescribeFilesystem(cluster.root());

  const ValuePool pool;
  Bench bench;
  bench.client = &client;
  bench.pool = &pool;
  bench.report = &report;
  bench.abandon = [&](const std::string& why) {
    std::fprintf(stderr, "ltc_engine_bench: giving up: %s\n", why.c_str());
    report.AddNote("ABANDONED: " + why);
    report.Print();
    std::fflush(stdout);
    std::fflush(stderr);
    // The engine's threads go on and would log every failed StoC call while the StoCs stop.
    const int null_fd = ::open("/dev/null", O_WRONLY);
    if (null_fd >= 0) ::dup2(null_fd, STDERR_FILENO);
    cluster.Stop();  // the engine's threads are stuck: no destructor may run
    std::_Exit(1);
  };
  const int failures = RunCases(&bench);
  report.Print();
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "Measures the LTC engine (one RangeEngine in process) over 3 nova_stoc processes: W100 "
      "put throughput and write stalls (uniform and zipfian keys, theta 1 and 64), the "
      "in-memory put path, and gets with the lookup index on and off.\nUsage: "
      "ltc_engine_bench [--json] [--seconds_per_case=S] [--stoc_dir_base=DIR]");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  FLAGS_logtostderr = true;
  FLAGS_minloglevel = 1;  // keep the table readable
  google::InitGoogleLogging(argv[0]);
  return Run();
}
