// The YCSB client: runs a workload's load or run phase on N threads against a binding,
// throttled to a target rate, bounded by an operation count and/or a time limit, with a
// status line every status.interval seconds and an optional per-second time series.
//
// Thread safety: RunClient is called by one thread; it starts and joins its own.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>

#include "benchmarks/ycsb/core_workload.h"
#include "benchmarks/ycsb/db.h"
#include "benchmarks/ycsb/measurements.h"
#include "benchmarks/ycsb/properties.h"
#include "common/status.h"

namespace nova::ycsb {

struct ClientOptions {
  int threads = 1;                 // threadcount / -threads
  double target_ops_per_sec = 0;   // target / -target; 0: as fast as possible
  bool do_transactions = true;     // -run (true) or -load (false)
  // Operations over all threads (the run phase's operationcount, the load phase's
  // insertcount); 0 means until max_execution_time_s.
  int64_t operation_count = 0;
  int64_t max_execution_time_s = 0;  // maxexecutiontime; 0: unbounded
  bool status = false;               // -s
  int64_t status_interval_s = 10;    // status.interval
  std::string label;                 // -l: prefix of status lines
  std::string timeseries_path;       // timeseries=FILE
  uint64_t seed = 0;                 // seed; 0: random

  // Reads threadcount, target, dotransactions, operationcount/insertcount/recordcount,
  // maxexecutiontime, status, status.interval, label, timeseries, seed. InvalidArgument on
  // bad values (e.g. a run phase with neither operationcount nor maxexecutiontime).
  static Result<ClientOptions> FromProperties(const Properties& props);
};

struct ClientResult {
  uint64_t runtime_us = 0;
  uint64_t operations = 0;  // every operation the threads ran, failed ones too
  MeasurementsSnapshot measurements;
};

// Runs the phase. Status lines go to `status_out` (YCSB writes them to stderr). Returns
// the figures, or the first error from a DB's Init/Cleanup, NewDB or the time-series file.
// `workload`, `binding` and `measurements` must outlive the call.
Result<ClientResult> RunClient(const ClientOptions& options, CoreWorkload* workload,
                               Binding* binding, Measurements* measurements,
                               std::ostream* status_out);

// The time series CSV header and one row (exposed for tests): second since start,
// client operations that second (a read-modify-write counts once), failed ones among
// them, then per operation type its ops, p50_us and p99_us (a read-modify-write also
// counts in read and update, as in the final report).
std::string TimeseriesHeader();
std::string TimeseriesRow(double second, uint64_t operations, const MeasurementsSnapshot& interval);

}  // namespace nova::ycsb
