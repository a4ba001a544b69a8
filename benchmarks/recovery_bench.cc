// recovery_bench: how fast an LTC rebuilds a range's memtables from its logs, and what each
// log mode costs a Put (docs/durability.md, docs/benchmarks.md).
//
// Case "replay": a LogC (in this process, over loopback TCP like any peer) holds
// --volumes_mb of memory logs, one per --memtable_mb memtable, filled with log records of
// --value_bytes values; then, for each --threads count, a fresh RangeEngine opens the range:
// it READs every log (one one-sided READ per log segment) and replays the records into
// memtables with that many threads. Reports the READ time and MB/s, the replay (parse and
// memtable insert) time and MB/s, and MB/s per core (threads capped at the machine's cores).
//
// Case "latency": a RangeEngine over an in-memory table store logs its Puts through a
// LogClient to three LogCs, for each log mode (none, memory, disk) and replica count
// (--replicas); reports Put latency p50/p99 and throughput of --writers threads.
//
// Prints a table, or with --json one JSON object (names carry units; MB = 10^6 bytes).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gflags/gflags.h>
#include <glog/logging.h>
#include <nlohmann/json.hpp>

#include "benchmarks/bench_util.h"
#include "common/clock.h"
#include "common/lsm/memory_table_store.h"
#include "common/metrics.h"
#include "common/rpc/rpc_endpoint.h"
#include "common/split.h"
#include "common/transport/transport.h"
#include "logc/client/log_client.h"
#include "logc/server/logc_server.h"
#include "ltc/engine/log_record.h"
#include "ltc/engine/logc_memtable_log.h"
#include "ltc/engine/range_engine.h"

DEFINE_string(cases, "replay,latency", "Cases to run: replay, latency");
DEFINE_string(volumes_mb, "256,1024,4096", "replay: log volumes to recover, MiB");
DEFINE_string(threads, "1,2,4", "replay: --ltc_recovery_threads values");
DEFINE_uint64(memtable_mb, 16, "Memtable size (tau) and so log size, MiB");
DEFINE_uint32(value_bytes, 1024, "Value size of the logged writes");
DEFINE_string(modes, "none,memory,disk", "latency: log modes");
DEFINE_string(replicas, "1,2,3", "latency: log replica counts");
DEFINE_uint64(puts, 20000, "latency: Puts per configuration");
DEFINE_int32(writers, 1, "latency: threads issuing Puts");
DEFINE_string(logc_dir_base, "/var/tmp",
              "Where the LogCs' data directories go (disk mode fdatasyncs: use a real disk)");
DEFINE_bool(json, false, "Print one JSON object instead of a table");

namespace nova::bench {
namespace {

constexpr char kSecret[] = "recovery-bench-secret";
constexpr uint64_t kMiB = 1ull << 20;

// A comma-separated list of numbers; exits with the reason on a bad one.
std::vector<uint64_t> ParseList(const std::string& s) {
  std::vector<uint64_t> out;
  for (const std::string& item : SplitNonEmpty(s, ',')) {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(item.c_str(), &end, 10);
    if (end == item.c_str() || *end != '\0') {
      std::fprintf(stderr, "recovery_bench: '%s' is not a number\n", item.c_str());
      std::exit(2);
    }
    out.push_back(v);
  }
  return out;
}

std::vector<std::string> ParseNames(const std::string& s) { return SplitNonEmpty(s, ','); }

// LogCs in this process and a client process's side (transport, endpoint, LogClient).
class LogRig {
 public:
  LogRig(int logcs, const std::string& dir, uint64_t memory_limit, logc::LogClientOptions co)
      : dir_(dir) {
    for (int i = 0; i < logcs; ++i) {
      logc::LogcOptions o;
      o.logc_id = std::to_string(i);
      o.dir = dir + "/logc-" + std::to_string(i);
      std::filesystem::create_directories(o.dir);
      o.persist = true;
      o.transport.cluster_secret = kSecret;
      o.memory_limit_bytes = memory_limit;
      o.max_segment_bytes = 1ull << 30;
      metrics_.push_back(std::make_unique<MetricsRegistry>());
      servers_.push_back(std::make_unique<logc::LogcServer>(o, metrics_.back().get()));
      Check(servers_.back()->Init(), "LogC init");
      Check(servers_.back()->Start(), "LogC start");
    }
    transport::TransportOptions to;
    to.node_name = "ltc-bench";
    to.cluster_secret = kSecret;
    auto t = transport::NewTransport(to, &endpoint_);
    Check(t.status(), "transport");
    transport_ = std::move(t.value());
    endpoint_.Attach(transport_.get());
    client_ = std::make_unique<logc::LogClient>(co, &endpoint_, nullptr);
    Check(transport_->Init(), "transport init");
    Check(transport_->Start(), "transport start");
    std::map<std::string, std::string> logcs_map;
    for (int i = 0; i < logcs; ++i) logcs_map[std::to_string(i)] = servers_[i]->address();
    client_->SetLogcs(logcs_map);
  }
  ~LogRig() {
    transport_->Shutdown();
    client_.reset();
    for (auto& s : servers_) s->Shutdown();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  logc::LogClient* client() { return client_.get(); }

  static void Check(const Status& s, const char* what) {
    if (!s.ok()) {
      std::fprintf(stderr, "recovery_bench: %s: %s\n", what, s.ToString().c_str());
      std::exit(1);
    }
  }

 private:
  const std::string dir_;
  std::vector<std::unique_ptr<MetricsRegistry>> metrics_;
  std::vector<std::unique_ptr<logc::LogcServer>> servers_;
  rpc::RpcEndpoint endpoint_;
  std::unique_ptr<transport::Transport> transport_;
  std::unique_ptr<logc::LogClient> client_;
};

// Reads through to the LogCs but never drops a log: every thread count replays the same.
class KeepLogs final : public ltc::MemtableLog {
 public:
  explicit KeepLogs(ltc::MemtableLog* inner) : inner_(inner) {}
  Status Append(uint64_t, std::string_view, bool* reached) override {
    *reached = false;
    return Status::NotSupported("read only");
  }
  void Drop(const std::vector<uint64_t>&) override {}
  using ltc::MemtableLog::ReadAll;
  Status ReadAll(int threads, bool new_range, const ReadFilter& read,
                 std::vector<Recovered>* logs) override {
    return inner_->ReadAll(threads, new_range, read, logs);
  }

 private:
  ltc::MemtableLog* inner_;
};

std::string ScratchDir(const char* what) {
  return FLAGS_logc_dir_base + "/recovery_bench-" + what + "-" + std::to_string(::getpid());
}

int Cores() { return std::max(1u, std::thread::hardware_concurrency()); }

void RunReplay(Report* report) {
  const uint64_t memtable = FLAGS_memtable_mb * kMiB;
  for (uint64_t volume_mb : ParseList(FLAGS_volumes_mb)) {
    const uint64_t volume = volume_mb * kMiB;
    logc::LogClientOptions co;
    co.mode = logc::LogMode::kMemory;
    co.replicas = 1;
    co.segment_bytes = memtable + memtable / 4;
    LogRig rig(1, ScratchDir("replay"), volume + volume / 2 + 64 * kMiB, co);
    // Fill: one log per memtable of records like the engine's (one Put each).
    const uint64_t logs = std::max<uint64_t>(1, volume / memtable);
    const std::string value(FLAGS_value_bytes, 'v');
    uint64_t seq = 0, bytes = 0;
    const MonoTime fill_start = MonoNow();
    for (uint64_t m = 1; m <= logs; ++m) {
      uint64_t in_log = 0;
      std::string chunk;
      while (in_log < memtable) {
        char key[32];
        const int n =
            std::snprintf(key, sizeof(key), "user%016llx",
                          static_cast<unsigned long long>((++seq * 0x9E3779B97F4A7C15ull) >> 8));
        const size_t before = chunk.size();
        ltc::AppendLogRecord(&chunk, {ltc::LogEntry{m, seq, 1, std::string_view(key, n), value}});
        in_log += chunk.size() - before;
        if (chunk.size() >= kMiB || in_log >= memtable) {
          LogRig::Check(rig.client()->Append(0, m, chunk), "filling the log");
          bytes += chunk.size();
          chunk.clear();
        }
      }
    }
    const double fill_s = SecondsSince(fill_start);
    ltc::LogcMemtableLog log(rig.client(), 0);
    KeepLogs keep(&log);
    for (uint64_t threads : ParseList(FLAGS_threads)) {
      lsm::MemoryTableStore store;
      ltc::EngineOptions eo;
      eo.memtable_bytes = memtable;
      eo.memtables = static_cast<int>(logs) + 4;
      eo.compaction_threads = 1;
      eo.log = &keep;
      eo.recovery_threads = static_cast<int>(threads);
      const MonoTime start = MonoNow();
      ltc::EngineStats st;
      {
        ltc::RangeEngine engine(eo, &store);
        LogRig::Check(engine.Open(), "opening the range");
        st = engine.GetStats();
      }  // (the destructor waits for the first flush the rebuilt memtables started)
      const double open_s = st.recovery_micros / 1e6;
      const double read_s = st.recovery_read_micros / 1e6;
      const double replay_s = std::max(1e-9, open_s - read_s);
      (void)start;
      const std::string k =
          "replay_" + std::to_string(volume_mb) + "mib_t" + std::to_string(threads);
      auto& out = report->out();
      out[k + "_logs"] = logs;
      out[k + "_log_mb"] = static_cast<double>(st.recovered_log_bytes) / 1e6;
      out[k + "_entries"] = st.recovered_entries;
      out[k + "_read_s"] = read_s;
      out[k + "_read_mb_per_s"] = st.recovered_log_bytes / 1e6 / std::max(1e-9, read_s);
      out[k + "_replay_s"] = replay_s;
      out[k + "_replay_mb_per_s"] = st.recovered_log_bytes / 1e6 / replay_s;
      out[k + "_replay_mb_per_s_per_core"] =
          st.recovered_log_bytes / 1e6 / replay_s / std::min<double>(threads, Cores());
      out[k + "_total_s"] = open_s;
      if (!FLAGS_json) {
        std::printf(
            "replay %6llu MiB (%4llu logs) threads %llu: READ %.2f s (%.0f MB/s), replay %.2f s "
            "(%.0f MB/s, %.0f MB/s per core), total %.2f s\n",
            static_cast<unsigned long long>(volume_mb), static_cast<unsigned long long>(logs),
            static_cast<unsigned long long>(threads), read_s,
            out[k + "_read_mb_per_s"].get<double>(), replay_s,
            out[k + "_replay_mb_per_s"].get<double>(),
            out[k + "_replay_mb_per_s_per_core"].get<double>(), open_s);
        std::fflush(stdout);
      }
    }
    report->out()["replay_" + std::to_string(volume_mb) + "mib_fill_mb_per_s"] =
        bytes / 1e6 / fill_s;
  }
}

void RunLatency(Report* report) {
  for (const std::string& mode_name : ParseNames(FLAGS_modes)) {
    logc::LogMode mode;
    LogRig::Check(logc::ParseLogMode(mode_name, &mode), "--modes");
    std::vector<uint64_t> replica_counts = ParseList(FLAGS_replicas);
    if (mode == logc::LogMode::kNone) replica_counts = {0};
    for (uint64_t replicas : replica_counts) {
      logc::LogClientOptions co;
      co.mode = mode == logc::LogMode::kNone ? logc::LogMode::kMemory : mode;
      co.replicas = static_cast<int>(std::max<uint64_t>(1, replicas));
      co.segment_bytes = 5 * kMiB;
      LogRig rig(3, ScratchDir("latency"), 2048 * kMiB, co);
      ltc::LogcMemtableLog log(rig.client(), 0);
      lsm::MemoryTableStore store;
      ltc::EngineOptions eo;
      eo.memtable_bytes = 4 * kMiB;
      eo.log = mode == logc::LogMode::kNone ? nullptr : &log;
      ltc::RangeEngine engine(eo, &store);
      LogRig::Check(engine.Open(), "opening the range");
      const std::string value(FLAGS_value_bytes, 'v');
      std::vector<std::vector<double>> lat(FLAGS_writers);
      std::atomic<uint64_t> next{0};
      const MonoTime start = MonoNow();
      std::vector<std::thread> writers;
      for (int w = 0; w < FLAGS_writers; ++w) {
        writers.emplace_back([&, w] {
          for (uint64_t i = next.fetch_add(1); i < FLAGS_puts; i = next.fetch_add(1)) {
            char key[32];
            const int n =
                std::snprintf(key, sizeof(key), "user%012llu",
                              static_cast<unsigned long long>((i * 2654435761u) % 1000000007));
            const MonoTime t0 = MonoNow();
            LogRig::Check(engine.Put(leveldb::Slice(key, n), value), "Put");
            lat[w].push_back(std::chrono::duration<double, std::micro>(MonoNow() - t0).count());
          }
        });
      }
      for (auto& t : writers) t.join();
      const double secs = SecondsSince(start);
      std::vector<double> all;
      for (auto& l : lat) all.insert(all.end(), l.begin(), l.end());
      const std::string k = "put_" + mode_name +
                            (mode == logc::LogMode::kNone ? "" : "_r" + std::to_string(replicas));
      auto& out = report->out();
      out[k + "_p50_us"] = Percentile(all, 50);
      out[k + "_p99_us"] = Percentile(all, 99);
      out[k + "_ops"] = FLAGS_puts / secs;
      if (!FLAGS_json) {
        std::printf("put %-14s p50 %7.1f us  p99 %7.1f us  %8.0f puts/s (%d writers)\n",
                    k.c_str() + 4, Percentile(all, 50), Percentile(all, 99), FLAGS_puts / secs,
                    FLAGS_writers);
        std::fflush(stdout);
      }
    }
  }
}

}  // namespace
}  // namespace nova::bench

int main(int argc, char** argv) {
  gflags::SetUsageMessage(
      "Log replay speed and per-mode Put latency, with in-process LogCs over loopback.\n"
      "Usage: recovery_bench [--json] [--cases=replay,latency] [--volumes_mb=256,1024,4096] "
      "[--threads=1,2,4] [--modes=none,memory,disk] [--replicas=1,2,3]");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  FLAGS_minloglevel = std::max(FLAGS_minloglevel, 1);  // warnings and errors only
  google::InitGoogleLogging(argv[0]);
  nova::bench::Report report;
  report.out()["value_bytes"] = FLAGS_value_bytes;
  report.out()["memtable_mib"] = FLAGS_memtable_mb;
  report.out()["cores"] = nova::bench::Cores();
  for (const std::string& c : nova::bench::ParseNames(FLAGS_cases)) {
    if (c == "replay") {
      nova::bench::RunReplay(&report);
    } else if (c == "latency") {
      nova::bench::RunLatency(&report);
    } else {
      std::fprintf(stderr, "recovery_bench: unknown case '%s' (replay, latency)\n", c.c_str());
      return 2;
    }
  }
  if (FLAGS_json) report.PrintJson(false);
  return 0;
}
