// iterator_bench: latency of the leveldb::DB adapter's iterators (client/nova_db.h) on a
// running cluster. benchmarks/iterator_bench.sh starts local clusters of 4 and 64 ranges
// and runs it on each; docs/benchmarks.md has the figures.
//
// Cases, each repeated --reps times with a new iterator (created and deleted inside the
// timed region, so its per-range snapshots are taken and released each time):
//   new_iterator   NewIterator alone (one snapshot per range, all requested at once)
//   seek_next      NewIterator, Seek(random key), --steps x Next
//   last_prev      NewIterator, SeekToLast, --steps x Prev
//   seek_prev      NewIterator, Seek(random key), --steps x Prev (a backward page mid-range)
// and, --walk_reps times, a whole walk of the key space forward and backward (one
// iterator each), to compare the two directions' cost per key. For what taking the ranges'
// snapshots at once saves, a NovaClient of its own also times one snapshot per range
// taken one after the other (GetSnapshot in a loop: the old way) and all at once
// (GetSnapshots), --reps times each, releases included.
//
//   build/bin/iterator_bench --uri=nova://127.0.0.1:2181/local [--load] [--json]
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "benchmarks/bench_util.h"
#include "client/cluster_uri.h"
#include "client/nova_db.h"
#include "common/clock.h"
#include "leveldb/write_batch.h"

DEFINE_string(uri, "", "the cluster: nova://zkhost:port/name or nova://ltc=host:port,...");
DEFINE_bool(load, true, "write --keys random keys first (else use what the cluster holds)");
DEFINE_int32(keys, 100000, "keys written by --load (8 random bytes each: every range gets some)");
DEFINE_int32(value_bytes, 100, "value size written by --load");
DEFINE_int32(reps, 200, "repetitions of each timed case");
DEFINE_int32(steps, 100, "Next/Prev calls per repetition");
DEFINE_int32(walk_reps, 3, "whole forward and backward walks");
DEFINE_int32(page_pairs, 1000, "NovaDBOptions::iterator_page_pairs (the adapter's default)");
DEFINE_uint64(seed, 1, "random keys and seek targets");
DEFINE_bool(json, false, "print one JSON object of the figures instead of the table");

namespace nova::bench {
namespace {

// Keys written per batch while loading (well under --ltc_max_batch_ops per range).
constexpr int kLoadBatch = 1000;
constexpr int kKeyBytes = 8;

double MicrosSince(MonoTime start) {
  return std::chrono::duration<double, std::micro>(MonoNow() - start).count();
}

std::string RandomKey(std::mt19937_64* rnd) {
  std::string k(kKeyBytes, '\0');
  for (char& c : k) c = static_cast<char>((*rnd)() & 0xff);
  return k;
}

int Run() {
  if (FLAGS_uri.empty()) {
    std::fprintf(stderr, "iterator_bench: --uri is required\n");
    return 2;
  }
  client::NovaDBOptions o;
  o.iterator_page_pairs = static_cast<size_t>(FLAGS_page_pairs);
  leveldb::DB* raw = nullptr;
  leveldb::Status s = client::OpenDB(leveldb::Options(), FLAGS_uri, o, &raw);
  if (!s.ok()) {
    std::fprintf(stderr, "iterator_bench: %s\n", s.ToString().c_str());
    return 1;
  }
  std::unique_ptr<leveldb::DB> db(raw);
  std::string ranges = "?";
  db->GetProperty("nova.num-ranges", &ranges);
  std::mt19937_64 rnd(FLAGS_seed);
  if (FLAGS_load) {
    const std::string value(static_cast<size_t>(FLAGS_value_bytes), 'v');
    for (int i = 0; i < FLAGS_keys; i += kLoadBatch) {
      leveldb::WriteBatch b;
      for (int j = i; j < std::min(FLAGS_keys, i + kLoadBatch); ++j) b.Put(RandomKey(&rnd), value);
      s = db->Write(leveldb::WriteOptions(), &b);
      if (!s.ok()) {
        std::fprintf(stderr, "iterator_bench: loading: %s\n", s.ToString().c_str());
        return 1;
      }
    }
  }

  // One timed case: `body` runs on a new iterator; false (an error) stops the benchmark.
  bool failed = false;
  auto time_case = [&](const std::function<bool(leveldb::Iterator*)>& body) {
    std::vector<double> us;
    for (int r = 0; r < FLAGS_reps && !failed; ++r) {
      const MonoTime start = MonoNow();
      std::unique_ptr<leveldb::Iterator> it(db->NewIterator(leveldb::ReadOptions()));
      const bool ok = body(it.get()) && it->status().ok();
      if (!ok) {
        std::fprintf(stderr, "iterator_bench: %s\n", it->status().ToString().c_str());
        failed = true;
      }
      it.reset();
      us.push_back(MicrosSince(start));
    }
    return us;
  };
  auto steps = [](leveldb::Iterator* it, bool forward) {
    for (int i = 0; i < FLAGS_steps && it->Valid(); ++i) forward ? it->Next() : it->Prev();
    return true;
  };
  std::map<std::string, std::vector<double>> cases;
  cases["new_iterator"] = time_case([](leveldb::Iterator*) { return true; });
  cases["seek_next"] = time_case([&](leveldb::Iterator* it) {
    it->Seek(RandomKey(&rnd));
    return steps(it, true);
  });
  cases["last_prev"] = time_case([&](leveldb::Iterator* it) {
    it->SeekToLast();
    return steps(it, false);
  });
  cases["seek_prev"] = time_case([&](leveldb::Iterator* it) {
    it->Seek(RandomKey(&rnd));
    return steps(it, false);
  });
  if (failed) return 1;

  // Snapshots of every range: one after the other, then all at once.
  auto where = client::ParseClusterUri(FLAGS_uri);
  auto conn = where.ok() ? client::ConnectToCluster(where.value(), o.client)
                         : Result<std::unique_ptr<client::ClusterConnection>>(where.status());
  if (!conn.ok()) {
    std::fprintf(stderr, "iterator_bench: %s\n", conn.status().ToString().c_str());
    return 1;
  }
  client::NovaClient* nc = conn.value()->client.get();
  std::vector<std::string> starts;
  for (const auto& r : nc->routing().routes) starts.push_back(r.range.keys.start);
  for (bool pipelined : {false, true}) {
    std::vector<double>& us = cases[pipelined ? "snapshots_at_once" : "snapshots_one_by_one"];
    for (int r = 0; r < FLAGS_reps; ++r) {
      const MonoTime start = MonoNow();
      std::vector<Result<client::NovaClient::Snapshot>> taken;
      if (pipelined) {
        taken = nc->GetSnapshots(starts);
      } else {
        for (const std::string& k : starts) taken.push_back(nc->GetSnapshot(k));
      }
      for (const auto& t : taken) {
        if (!t.ok()) {
          std::fprintf(stderr, "iterator_bench: %s\n", t.status().ToString().c_str());
          return 1;
        }
        nc->ReleaseSnapshotAsync(t.value());
      }
      us.push_back(MicrosSince(start));
    }
  }

  std::vector<double> forward_ms, backward_ms;
  uint64_t walked = 0;
  for (int r = 0; r < FLAGS_walk_reps; ++r) {
    for (bool forward : {true, false}) {
      const MonoTime start = MonoNow();
      std::unique_ptr<leveldb::Iterator> it(db->NewIterator(leveldb::ReadOptions()));
      uint64_t n = 0;
      if (forward) {
        for (it->SeekToFirst(); it->Valid(); it->Next()) ++n;
      } else {
        for (it->SeekToLast(); it->Valid(); it->Prev()) ++n;
      }
      if (!it->status().ok()) {
        std::fprintf(stderr, "iterator_bench: walk: %s\n", it->status().ToString().c_str());
        return 1;
      }
      walked = n;
      (forward ? forward_ms : backward_ms).push_back(MicrosSince(start) / 1000);
    }
  }

  nlohmann::ordered_json j;
  j["ranges"] = ranges;
  j["keys"] = walked;
  j["page_pairs"] = FLAGS_page_pairs;
  j["steps"] = FLAGS_steps;
  j["reps"] = FLAGS_reps;
  for (const auto& [name, us] : cases) {
    j[name + "_us_p50"] = Percentile(us, 50);
    j[name + "_us_p99"] = Percentile(us, 99);
  }
  j["walk_forward_ms_p50"] = Percentile(forward_ms, 50);
  j["walk_backward_ms_p50"] = Percentile(backward_ms, 50);
  if (FLAGS_json) {
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf("%s ranges, %llu keys, pages of %d pairs, %d steps, %d reps\n", ranges.c_str(),
              static_cast<unsigned long long>(walked), FLAGS_page_pairs, FLAGS_steps,
              FLAGS_reps);
  std::printf("%-20s %10s %10s\n", "case", "p50 us", "p99 us");
  for (const char* name : {"new_iterator", "seek_next", "last_prev", "seek_prev",
                           "snapshots_one_by_one", "snapshots_at_once"}) {
    std::printf("%-20s %10.0f %10.0f\n", name, Percentile(cases[name], 50),
                Percentile(cases[name], 99));
  }
  std::printf("whole walk: forward %.0f ms, backward %.0f ms (median of %d)\n",
              Percentile(forward_ms, 50), Percentile(backward_ms, 50), FLAGS_walk_reps);
  return 0;
}

}  // namespace
}  // namespace nova::bench

int main(int argc, char** argv) {
  gflags::SetUsageMessage("latency of NewIterator + Next and SeekToLast + Prev (see the source)");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  FLAGS_logtostderr = true;
  FLAGS_minloglevel = std::max(FLAGS_minloglevel, 1);  // keep the table readable
  google::InitGoogleLogging(argv[0]);
  return nova::bench::Run();
}
