// batch_bench: NovaClient::Write latency and throughput of batches spread over every range
// of a cluster (multi-range: split by range, every part checked against its LTC's limits,
// then the parts sent in parallel) against batches of the same size within one range.
//
// For each shape and each client thread count (1, then --threads) it writes batches of
// --batch_ops puts of --value_bytes for --seconds, each thread waiting for its Write
// before the next, and reports batches/s, puts/s, MB/s (10^6 bytes of keys and values)
// and the latency of one Write (p50, p99). Keys are fresh each time (no overwrites).
//
// It needs a running cluster: benchmarks/batch_bench.sh starts a local one
// (deploy/local_cluster.sh: 2 LTCs, 8 ranges, 3 StoCs) and runs it.
//
//   build/bin/batch_bench --uri nova://127.0.0.1:2181/local [--json]
#include <algorithm>
#include <atomic>
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
DEFINE_int32(value_bytes, 1000, "Bytes per value");
DEFINE_double(seconds, 5.0, "Measuring time per case, seconds");
DEFINE_int32(threads, 4, "Client threads of the throughput cases (the latency cases use 1)");
DEFINE_bool(json, false, "Print one JSON object instead of a table");

namespace {

using namespace nova;
using nova::bench::DeadlineAfter;
using nova::bench::Percentile;
using nova::bench::SecondsSince;

struct CaseResult {
  double batches_per_s = 0;
  double puts_per_s = 0;
  double mb_per_s = 0;
  double p50_ms = 0;
  double p99_ms = 0;
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
// a single-range batch) until the measuring time is up.
Result<CaseResult> Measure(client::NovaClient* c, const std::vector<std::string>& prefixes,
                           int threads, const std::string& tag) {
  const std::string value(static_cast<size_t>(FLAGS_value_bytes), 'v');
  std::mutex mu;
  std::vector<double> latencies_ms;
  Status first_error;
  std::atomic<uint64_t> batches{0};
  uint64_t bytes_per_batch = 0;
  const MonoTime start = MonoNow();
  const MonoTime stop_at = DeadlineAfter(FLAGS_seconds);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      std::vector<double> mine;
      uint64_t n = 0;
      while (MonoNow() < stop_at) {
        std::vector<ltc::BatchEntry> batch;
        uint64_t bytes = 0;
        for (int i = 0; i < FLAGS_batch_ops; ++i) {
          std::string key = prefixes[static_cast<size_t>(i) % prefixes.size()] + tag + "/" +
                            std::to_string(t) + "/" + std::to_string(n) + "/" +
                            std::to_string(i);
          bytes += key.size() + value.size();
          batch.push_back({ltc::BatchOp::kPut, std::move(key), value});
        }
        const uint64_t t0 = MonoNanos();
        Status s = c->Write(batch);
        mine.push_back(static_cast<double>(MonoNanos() - t0) / 1e6);
        if (!s.ok()) {
          std::lock_guard l(mu);
          if (first_error.ok()) first_error = s;
          return;
        }
        ++n;
        ++batches;
        if (t == 0 && n == 1) {
          std::lock_guard l(mu);
          bytes_per_batch = bytes;
        }
      }
      std::lock_guard l(mu);
      latencies_ms.insert(latencies_ms.end(), mine.begin(), mine.end());
    });
  }
  for (auto& w : workers) w.join();
  if (!first_error.ok()) return first_error;
  const double secs = SecondsSince(start);
  CaseResult r;
  r.batches_per_s = static_cast<double>(batches.load()) / secs;
  r.puts_per_s = r.batches_per_s * FLAGS_batch_ops;
  r.mb_per_s = r.batches_per_s * static_cast<double>(bytes_per_batch) / 1e6;
  r.p50_ms = Percentile(latencies_ms, 50);
  r.p99_ms = Percentile(latencies_ms, 99);
  return r;
}

int Run() {
  if (FLAGS_uri.empty() || FLAGS_batch_ops <= 0 || FLAGS_value_bytes < 0 || FLAGS_threads <= 0) {
    std::fprintf(stderr, "batch_bench: --uri is required; --batch_ops and --threads must be "
                         "positive\n");
    return 2;
  }
  auto where = client::ParseClusterUri(FLAGS_uri);
  if (!where.ok()) {
    std::fprintf(stderr, "batch_bench: %s\n", where.status().ToString().c_str());
    return 2;
  }
  auto conn = client::ConnectToCluster(where.value(), client::ClientOptions());
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
  struct Row {
    std::string shape;
    int threads;
    CaseResult r;
  };
  std::vector<Row> rows;
  const std::vector<std::pair<std::string, std::vector<std::string>>> shapes = {
      {"single_range", {prefixes.value()[0]}}, {"multi_range", prefixes.value()}};
  std::vector<int> thread_counts{1};
  if (FLAGS_threads > 1) thread_counts.push_back(FLAGS_threads);
  for (int threads : thread_counts) {
    for (const auto& [shape, shape_prefixes] : shapes) {
      const std::string name = shape + "_" + std::to_string(threads) + "t";
      auto r = Measure(c, shape_prefixes, threads, name);
      if (!r.ok()) {
        std::fprintf(stderr, "batch_bench: %s: %s\n", name.c_str(),
                     r.status().ToString().c_str());
        return 1;
      }
      out[name + "_batches_per_s"] = r->batches_per_s;
      out[name + "_puts_per_s"] = r->puts_per_s;
      out[name + "_MBps"] = r->mb_per_s;
      out[name + "_p50_ms"] = r->p50_ms;
      out[name + "_p99_ms"] = r->p99_ms;
      rows.push_back({shape, threads, r.value()});
    }
  }
  if (FLAGS_json) {
    std::printf("%s\n", out.dump().c_str());
    return 0;
  }
  std::printf("batch_bench: batches of %d puts of %d B; multi-range: spread over %zu ranges "
              "on %zu LTCs; %.0f s per case\n",
              FLAGS_batch_ops, FLAGS_value_bytes, table.routes.size(), ltcs.size(),
              FLAGS_seconds);
  std::printf("%-14s %7s %11s %10s %8s %8s %8s\n", "shape", "threads", "batches/s", "puts/s",
              "MB/s", "p50 ms", "p99 ms");
  for (const Row& row : rows) {
    std::printf("%-14s %7d %11.0f %10.0f %8.1f %8.2f %8.2f\n", row.shape.c_str(), row.threads,
                row.r.batches_per_s, row.r.puts_per_s, row.r.mb_per_s, row.r.p50_ms,
                row.r.p99_ms);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  gflags::SetUsageMessage("NovaClient::Write: multi-range vs single-range batches");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  return Run();
}
