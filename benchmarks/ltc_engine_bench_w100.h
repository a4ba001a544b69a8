// The W100 cases of ltc_engine_bench (100% puts, uniform and zipfian keys, theta 1 and 64
// Dranges by default; see ltc_engine_bench.cc): running them into the report, and their table.
#pragma once

#include <string>
#include <vector>

#include "benchmarks/bench_util.h"
#include "benchmarks/ltc_engine_bench_harness.h"
#include "common/status.h"

namespace nova::ltc_bench {

// The distributions a --w100_keys list names ("uniform", "zipf", "szipf"), in its order;
// InvalidArgument for an empty list or an unknown name.
Result<std::vector<KeyDist>> ParseW100Keys(const std::string& list);

// The thetas a --w100_thetas list names, in its order; InvalidArgument for an empty list or
// a value outside 1..1024.
Result<std::vector<int>> ParseW100Thetas(const std::string& list);

// Runs the W100 cases: each theta of --w100_thetas (in its order) for each distribution of
// --w100_keys, adding per case <name> (e.g. "zipf_theta64") the figures w100_<name>_ops
// (puts/s), stall_pct_<name>, slowdown_pct_<name>, w100_<name>_flushes, _merges,
// _compactions, _stalls and _l0_tables to b->report.
// A failed case goes to `failures`; none starts once failures->stop().
void RunW100Cases(Bench* b, bench::CaseFailures* failures);

// Prints the W100 part of the table: the setup line and one row per case ("-" for a
// figure a case did not produce).
void PrintW100Table(const bench::Report& report);

}  // namespace nova::ltc_bench
