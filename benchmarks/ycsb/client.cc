#include "benchmarks/ycsb/client.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <mutex>
#include <ostream>
#include <random>
#include <thread>
#include <vector>

namespace nova::ycsb {

namespace {

using Clock = std::chrono::steady_clock;

// The series the time series shows, with their CSV column prefixes.
constexpr std::pair<OpType, const char*> kTimeseriesOps[] = {
    {OpType::kRead, "read"},
    {OpType::kUpdate, "update"},
    {OpType::kInsert, "insert"},
    {OpType::kScan, "scan"},
    {OpType::kReadModifyWrite, "read_modify_write"},
};
// Series a status line summarizes (all but CLEANUP, which happens once per thread).
constexpr OpType kStatusOps[] = {OpType::kInsert, OpType::kRead,   OpType::kUpdate,
                                 OpType::kScan,   OpType::kReadModifyWrite,
                                 OpType::kDelete, OpType::kVerify};
// Seeds of the client threads, when -p seed is given, are seed + i * this (any odd
// constant keeps them distinct).
constexpr uint64_t kSeedStride = 0x9E3779B97F4A7C15ull;

Status Invalid(const std::string& what) { return Status::InvalidArgument(what); }

MeasurementsSnapshot Diff(const MeasurementsSnapshot& now, const MeasurementsSnapshot& before) {
  MeasurementsSnapshot d;
  for (int o = 0; o < kNumOpTypes; ++o) {
    for (int f = 0; f < 2; ++f) d.latency[o][f] = now.latency[o][f].Minus(before.latency[o][f]);
    for (int r = 0; r < kNumReturnCodes; ++r) d.returns[o][r] = now.returns[o][r] - before.returns[o][r];
  }
  return d;
}

// YCSB's status timestamp: "yyyy-MM-dd HH:mm:ss:SSS".
std::string Timestamp() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()) % 1000;
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &tm);
  char out[80];
  std::snprintf(out, sizeof(out), "%s:%03d", buf, static_cast<int>(ms.count()));
  return out;
}

std::string FormatRate(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.2f", v);
  std::string s(buf);
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

// State shared by the client threads and the reporter.
struct Shared {
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> ops_done{0};
  std::mutex mu;
  std::condition_variable cv;
  bool workers_done = false;  // GUARDED_BY(mu)
};

void RunThread(const ClientOptions& options, int index, uint64_t op_count, CoreWorkload* workload,
               DB* db, Measurements* measurements, Shared* shared, Status* status) {
  Rng rng(options.seed != 0 ? options.seed + kSeedStride * static_cast<uint64_t>(index)
                            : std::random_device()());
  *status = db->Init();
  if (!status->ok()) return;

  // Throttling as YCSB's ClientThread: operation n is not started before start + n * tick;
  // the first is delayed by a random fraction of a tick so threads do not fire together.
  const double per_thread = options.target_ops_per_sec / options.threads;
  const auto tick = per_thread > 0 ? std::chrono::nanoseconds(static_cast<int64_t>(1e9 / per_thread))
                                   : std::chrono::nanoseconds(0);
  if (tick.count() > 0) {
    std::this_thread::sleep_for(std::chrono::nanoseconds(UniformBelow(&rng, tick.count())));
  }
  const Clock::time_point start = Clock::now();
  uint64_t done = 0;
  while (!shared->stop.load(std::memory_order_relaxed) && (op_count == 0 || done < op_count)) {
    const bool ok = options.do_transactions ? workload->DoTransaction(db, &rng)
                                            : workload->DoInsert(db, &rng);
    if (!ok) break;
    ++done;
    shared->ops_done.fetch_add(1, std::memory_order_relaxed);
    if (tick.count() > 0) std::this_thread::sleep_until(start + tick * done);
  }

  const Clock::time_point cleanup_start = Clock::now();
  *status = db->Cleanup();
  measurements->Measure(
      OpType::kCleanup, status->ok() ? ReturnCode::kOk : ReturnCode::kError,
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                Clock::now() - cleanup_start).count()));
}

// The reporter: once a second, the time series row; every status.interval seconds a
// status line; enforces maxexecutiontime. Returns when the workers are done.
Status RunReporter(const ClientOptions& options, Measurements* measurements, Shared* shared,
                   Clock::time_point start, std::ostream* status_out) {
  std::ofstream timeseries;
  if (!options.timeseries_path.empty()) {
    timeseries.open(options.timeseries_path, std::ios::trunc);
    if (!timeseries) {
      shared->stop = true;
      return Status::IOError("cannot write timeseries file " + options.timeseries_path);
    }
    timeseries << TimeseriesHeader() << "\n";
  }
  // Measurements start empty with the run (the workers may already have recorded some by
  // now, and those belong to the first second).
  MeasurementsSnapshot last_second;
  MeasurementsSnapshot last_status;
  uint64_t ops_last_second = 0, ops_last_status = 0;
  Clock::time_point last_status_time = start;

  auto status_line = [&](Clock::time_point now) {
    const MeasurementsSnapshot snap = measurements->Snapshot();
    const uint64_t ops = shared->ops_done.load();
    const double elapsed = std::chrono::duration<double>(now - start).count();
    const double interval = std::chrono::duration<double>(now - last_status_time).count();
    std::string line = options.label + Timestamp() + " " +
                       std::to_string(static_cast<uint64_t>(elapsed)) + " sec: " +
                       std::to_string(ops) + " operations; ";
    if (ops > 0 && interval > 0) {
      line += FormatRate(static_cast<double>(ops - ops_last_status) / interval) +
              " current ops/sec; ";
    }
    if (options.operation_count > 0 && ops > 0 &&
        ops < static_cast<uint64_t>(options.operation_count)) {
      const double remaining =
          elapsed / static_cast<double>(ops) * static_cast<double>(options.operation_count - ops);
      line += "est completion in " + FormatRemaining(static_cast<uint64_t>(remaining)) + " ";
    }
    const MeasurementsSnapshot d = Diff(snap, last_status);
    for (OpType op : kStatusOps) {
      const std::string s = StatusSummary(OpTypeName(op), d.latency[static_cast<int>(op)][0]);
      if (!s.empty()) line += s + " ";
      const std::string f = StatusSummary(std::string(OpTypeName(op)) + "-FAILED",
                                          d.latency[static_cast<int>(op)][1]);
      if (!f.empty()) line += f + " ";
    }
    *status_out << line << std::endl;
    last_status = snap;
    ops_last_status = ops;
    last_status_time = now;
  };

  for (uint64_t second = 1;; ++second) {
    bool finished;
    {
      std::unique_lock<std::mutex> l(shared->mu);
      finished = shared->cv.wait_until(l, start + std::chrono::seconds(second),
                                       [shared] { return shared->workers_done; });
    }
    const Clock::time_point now = Clock::now();
    if (timeseries.is_open()) {
      const MeasurementsSnapshot snap = measurements->Snapshot();
      const uint64_t ops = shared->ops_done.load();
      // The last row covers the fraction of a second before the end.
      const double at = finished ? std::chrono::duration<double>(now - start).count()
                                 : static_cast<double>(second);
      if (!finished || ops > ops_last_second) {
        timeseries << TimeseriesRow(at, ops - ops_last_second, Diff(snap, last_second)) << "\n";
      }
      timeseries.flush();
      last_second = snap;
      ops_last_second = ops;
    }
    if (finished) {
      if (options.status) status_line(now);  // YCSB prints a last status line at the end
      break;
    }
    if (options.status && second % static_cast<uint64_t>(options.status_interval_s) == 0) {
      status_line(now);
    }
    if (options.max_execution_time_s > 0 &&
        second >= static_cast<uint64_t>(options.max_execution_time_s)) {
      shared->stop = true;  // workers finish their current operation and exit
    }
  }
  if (timeseries.is_open() && !timeseries) {
    return Status::IOError("error writing timeseries file " + options.timeseries_path);
  }
  return Status::OK();
}

}  // namespace

Result<ClientOptions> ClientOptions::FromProperties(const Properties& p) {
  ClientOptions o;
  Result<int64_t> threads = p.GetInt("threadcount", 1);
  if (!threads.ok()) return threads.status();
  if (*threads < 1) return Invalid("threadcount (-threads) must be > 0");
  o.threads = static_cast<int>(*threads);
  Result<double> target = p.GetDouble("target", 0);
  if (!target.ok()) return target.status();
  if (*target < 0) return Invalid("target (-target) must be >= 0");
  o.target_ops_per_sec = *target;
  Result<bool> tx = p.GetBool("dotransactions", true);
  if (!tx.ok()) return tx.status();
  o.do_transactions = *tx;
  // YCSB: the load phase inserts insertcount records if given, else recordcount.
  const char* count_name =
      o.do_transactions ? "operationcount" : (p.Has("insertcount") ? "insertcount" : "recordcount");
  Result<int64_t> count = p.GetInt(count_name, 0);
  if (!count.ok()) return count.status();
  if (*count < 0) return Invalid(std::string(count_name) + " must be >= 0");
  o.operation_count = *count;
  Result<int64_t> max_time = p.GetInt("maxexecutiontime", 0);
  if (!max_time.ok()) return max_time.status();
  if (*max_time < 0) return Invalid("maxexecutiontime must be >= 0");
  o.max_execution_time_s = *max_time;
  if (o.operation_count == 0 && o.max_execution_time_s == 0) {
    return Invalid(std::string("nothing bounds the ") + (o.do_transactions ? "run" : "load") +
                   ": set " + count_name + " or maxexecutiontime");
  }
  Result<bool> status = p.GetBool("status", false);
  if (!status.ok()) return status.status();
  o.status = *status;
  Result<int64_t> interval = p.GetInt("status.interval", 10);
  if (!interval.ok()) return interval.status();
  if (*interval < 1) return Invalid("status.interval must be >= 1 (seconds)");
  o.status_interval_s = *interval;
  o.label = p.Get("label");
  o.timeseries_path = p.Get("timeseries");
  Result<int64_t> seed = p.GetInt("seed", 0);
  if (!seed.ok()) return seed.status();
  o.seed = static_cast<uint64_t>(*seed);
  return o;
}

std::string TimeseriesHeader() {
  std::string h = "second,ops,failed_ops";
  for (const auto& [op, name] : kTimeseriesOps) {
    h += std::string(",") + name + "_ops," + name + "_p50_us," + name + "_p99_us";
  }
  return h;
}

std::string TimeseriesRow(double second, uint64_t operations, const MeasurementsSnapshot& d) {
  char at[32];
  std::snprintf(at, sizeof(at), "%.3f", second);
  uint64_t failed = 0;
  for (OpType op : {OpType::kInsert, OpType::kRead, OpType::kUpdate, OpType::kScan,
                    OpType::kDelete}) {
    failed += d.latency[static_cast<int>(op)][1].count();
  }
  std::string row = std::string(at) + "," + std::to_string(operations) + "," + std::to_string(failed);
  for (const auto& [op, name] : kTimeseriesOps) {
    HistogramSnapshot all = d.latency[static_cast<int>(op)][0];
    const HistogramSnapshot& bad = d.latency[static_cast<int>(op)][1];
    const uint64_t n = all.count() + bad.count();
    // Percentiles over successful operations (failures are usually much faster or slower
    // and have their own count).
    row += "," + std::to_string(n) + "," + std::to_string(all.Percentile(50)) + "," +
           std::to_string(all.Percentile(99));
  }
  return row;
}

Result<ClientResult> RunClient(const ClientOptions& options, CoreWorkload* workload,
                               Binding* binding, Measurements* measurements,
                               std::ostream* status_out) {
  std::vector<std::unique_ptr<DB>> dbs;
  for (int i = 0; i < options.threads; ++i) {
    Result<std::unique_ptr<DB>> db = binding->NewDB();
    if (!db.ok()) return db.status().Prepend("creating DB for client thread " + std::to_string(i));
    dbs.push_back(std::move(*db));
  }
  Shared shared;
  std::vector<Status> statuses(static_cast<size_t>(options.threads));
  std::vector<std::thread> threads;
  const auto total = static_cast<uint64_t>(options.operation_count);
  const auto n = static_cast<uint64_t>(options.threads);
  const Clock::time_point start = Clock::now();
  for (uint64_t i = 0; i < n; ++i) {
    // YCSB's split: opcount / threads each, the first opcount % threads one more.
    const uint64_t count = total / n + (i < total % n ? 1 : 0);
    if (total > 0 && count == 0) continue;  // more threads than operations
    threads.emplace_back(RunThread, std::cref(options), static_cast<int>(i), count, workload,
                         dbs[i].get(), measurements, &shared, &statuses[i]);
  }
  Status reporter_status;
  std::thread reporter([&] {
    reporter_status = RunReporter(options, measurements, &shared, start, status_out);
  });
  for (std::thread& t : threads) t.join();
  const Clock::time_point end = Clock::now();
  {
    std::lock_guard<std::mutex> l(shared.mu);
    shared.workers_done = true;
  }
  shared.cv.notify_all();
  reporter.join();
  for (size_t i = 0; i < statuses.size(); ++i) {
    if (!statuses[i].ok()) return statuses[i].Prepend("client thread " + std::to_string(i));
  }
  NOVA_RETURN_NOT_OK(reporter_status);

  ClientResult result;
  result.runtime_us = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(end - start).count());
  result.operations = shared.ops_done.load();
  result.measurements = measurements->Snapshot();
  return result;
}

}  // namespace nova::ycsb
