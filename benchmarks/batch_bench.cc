// batch_bench: NovaClient::Write latency and throughput of batches spread over every range
// of a cluster (multi-range: split by range, every part checked against its LTC's limits,
// then the parts sent in parallel) against batches of the same size within one range.
//
// For each shape and each client thread count (1, then --threads) it writes batches of
// --batch_ops puts of --value_bytes for --seconds, each thread waiting for its Write
// before the next, and reports batches/s, puts/s, MB/s (10^6 bytes of keys and values)
// and the latency of one Write (p50, p99). Keys are fresh each time (no overwrites). The
// cases run --rounds times, each round in a rotated order, and their figures are pooled:
// the flushes and compactions one case leaves behind fall on every case alike.
//
// It needs a running cluster: benchmarks/batch_bench.sh starts a local one
// (deploy/local_cluster.sh: 2 LTCs, 8 ranges, 3 StoCs) and runs it.
//
//   build/bin/batch_bench --uri nova://127.0.0.1:2181/local [--json]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gflags/gflags.h>
#include <nlohmann/json.hpp>

#include "benchmarks/bench_util.h"
#include "client/cluster_uri.h"
#include "client/nova_client.h"
#include "common/clock.h"

DEFINE_string(uri, "", "The cluster: nova://ltc=host:port[,...] or nova://zkhost:port/cluster");
DEFINE_int32(batch_ops, 64, "Puts per batch");
DEFINE_int32(value_bytes, 100, "Bytes per value");
DEFINE_double(seconds, 2.0, "Measuring time per case and round, seconds");
DEFINE_int32(rounds, 3, "Rounds over all cases (each in a rotated order)");
DEFINE_int32(timeout_ms, 30000, "Client timeout of one Write, ms");
DEFINE_int32(threads, 4, "Client threads of the throughput cases (the latency cases use 1)");
DEFINE_bool(json, false, "Print one JSON object instead of a table");

namespace {

using namespace nova;
using nova::bench::DeadlineAfter;
using nova::bench::Percentile;
using nova::bench::SecondsSince;

// What the runs of one case measured, pooled over the rounds.
struct CaseSamples {
  uint64_t batches = 0;
  uint64_t bytes = 0;  // of keys and values
  double seconds = 0;
  std::vector<double> latencies_ms;
};

// A key prefix inside each range: its start, then a 0 byte (the smallest extension, so
// that the range's first keys are used whatever its end), then the benchmark's name.
Result<std::vector<std::string>> RangePrefixes(const client::RoutingTable& t) {
  std::vector<std::string> prefixes;
  for (const auto& route : t.routes) {
    std::string p = route.range.keys.start + std::string(1, '\0') + "batch_bench/";
    if (t.Find(p) != &route) {
      return Status::IllegalState("no key with prefix '" + p + "' in range " +
                                  std::to_string(route.range.id));
    }
    prefixes.push_back(std::move(p));
  }
  if (prefixes.empty()) return Status::Unavailable("the cluster routes no range");
  return prefixes;
}

// `threads` threads writing batches whose keys go round-robin over `prefixes` (one prefix:
// a single-range batch) for --seconds; adds what they measured to *out.
Status Measure(client::NovaClient* c, const std::vector<std::string>& prefixes, int threads,
               const std::string& tag, CaseSamples* out) {
  const std::string value(static_cast<size_t>(FLAGS_value_bytes), 'v');
  std::mutex mu;
  Status first_error;
  const MonoTime start = MonoNow();
  const MonoTime stop_at = DeadlineAfter(FLAGS_seconds);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      std::vector<double> latencies_ms;
      uint64_t batches = 0;
      uint64_t bytes = 0;
      while (MonoNow() < stop_at) {
        std::vector<ltc::BatchEntry> batch;
        for (int i = 0; i < FLAGS_batch_ops; ++i) {
          std::string key = prefixes[static_cast<size_t>(i) % prefixes.size()] + tag + "/" +
                            std::to_string(t) + "/" + std::to_string(batches) + "/" +
                            std::to_string(i);
          bytes += key.size() + value.size();
          batch.push_back({ltc::BatchOp::kPut, std::move(key), value});
        }
        const uint64_t t0 = MonoNanos();
        Status s = c->Write(batch);
        if (!s.ok()) {
          std::lock_guard l(mu);
          if (first_error.ok()) first_error = s;
          return;
        }
        latencies_ms.push_back(static_cast<double>(MonoNanos() - t0) / 1e6);
        ++batches;
      }
      std::lock_guard l(mu);
      out->batches += batches;
      out->bytes += bytes;
      out->latencies_ms.insert(out->latencies_ms.end(), latencies_ms.begin(),
                               latencies_ms.end());
    });
  }
  for (auto& w : workers) w.join();
  out->seconds += SecondsSince(start);
  return first_error;
}

int Run() {
  if (FLAGS_uri.empty() || FLAGS_batch_ops <= 0 || FLAGS_value_bytes < 0 || FLAGS_threads <= 0 ||
      FLAGS_seconds <= 0 || FLAGS_timeout_ms <= 0) {
    std::fprintf(stderr, "batch_bench: --uri is required; --batch_ops, --threads, --seconds "
                         "and --timeout_ms must be positive\n");
    return 2;
  }
  auto where = client::ParseClusterUri(FLAGS_uri);
  if (!where.ok()) {
    std::fprintf(stderr, "batch_bench: %s\n", where.status().ToString().c_str());
    return 2;
  }
  client::ClientOptions options;
  options.timeout = std::chrono::milliseconds(FLAGS_timeout_ms);
  auto conn = client::ConnectToCluster(where.value(), options);
  if (!conn.ok()) {
    std::fprintf(stderr, "batch_bench: %s\n", conn.status().ToString().c_str());
    return 1;
  }
  client::NovaClient* c = conn.value()->client.get();
  const client::RoutingTable table = c->routing();
  auto prefixes = RangePrefixes(table);
  if (!prefixes.ok()) {
    std::fprintf(stderr, "batch_bench: %s\n", prefixes.status().ToString().c_str());
    return 1;
  }
  std::set<std::string> ltcs;
  for (const auto& r : table.routes) ltcs.insert(r.ltc_address);

  nlohmann::ordered_json out;
  out["ranges"] = table.routes.size();
  out["ltcs"] = ltcs.size();
  out["batch_ops"] = FLAGS_batch_ops;
  out["value_bytes"] = FLAGS_value_bytes;
  struct Case {
    std::string shape;
    std::vector<std::string> prefixes;
    int threads;
    CaseSamples samples;
    std::string Name() const { return shape + "_" + std::to_string(threads) + "t"; }
  };
  std::vector<Case> cases;
  std::vector<int> thread_counts{1};
  if (FLAGS_threads > 1) thread_counts.push_back(FLAGS_threads);
  for (int threads : thread_counts) {
    cases.push_back({"single_range", {prefixes.value()[0]}, threads, {}});
    cases.push_back({"multi_range", prefixes.value(), threads, {}});
  }
  for (int round = 0; round < std::max(1, FLAGS_rounds); ++round) {
    for (size_t i = 0; i < cases.size(); ++i) {
      Case& k = cases[(i + static_cast<size_t>(round)) % cases.size()];
      Status s = Measure(c, k.prefixes, k.threads, k.Name() + "/r" + std::to_string(round),
                         &k.samples);
      if (!s.ok()) {
        std::fprintf(stderr, "batch_bench: %s: %s\n", k.Name().c_str(), s.ToString().c_str());
        return 1;
      }
    }
  }
  for (const Case& k : cases) {
    const CaseSamples& m = k.samples;
    out[k.Name() + "_batches_per_s"] = static_cast<double>(m.batches) / m.seconds;
    out[k.Name() + "_puts_per_s"] = static_cast<double>(m.batches) * FLAGS_batch_ops / m.seconds;
    out[k.Name() + "_MBps"] = static_cast<double>(m.bytes) / m.seconds / 1e6;
    out[k.Name() + "_p50_ms"] = Percentile(m.latencies_ms, 50);
    out[k.Name() + "_p99_ms"] = Percentile(m.latencies_ms, 99);
  }
  if (FLAGS_json) {
    std::printf("%s\n", out.dump().c_str());
    return 0;
  }
  std::printf("batch_bench: batches of %d puts of %d B; multi-range: spread over %zu ranges "
              "on %zu LTCs; %d rounds of %.0f s per case\n",
              FLAGS_batch_ops, FLAGS_value_bytes, table.routes.size(), ltcs.size(),
              std::max(1, FLAGS_rounds), FLAGS_seconds);
  std::printf("%-14s %7s %11s %10s %8s %8s %8s\n", "shape", "threads", "batches/s", "puts/s",
              "MB/s", "p50 ms", "p99 ms");
  for (const Case& k : cases) {
    const std::string n = k.Name();
    std::printf("%-14s %7d %11.0f %10.0f %8.1f %8.2f %8.2f\n", k.shape.c_str(), k.threads,
                out[n + "_batches_per_s"].get<double>(), out[n + "_puts_per_s"].get<double>(),
                out[n + "_MBps"].get<double>(), out[n + "_p50_ms"].get<double>(),
                out[n + "_p99_ms"].get<double>());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  gflags::SetUsageMessage("NovaClient::Write: multi-range vs single-range batches");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  return Run();
}
