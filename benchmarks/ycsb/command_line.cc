#include "benchmarks/ycsb/command_line.h"

namespace nova::ycsb {

Result<CommandLine> ParseCommandLine(const std::vector<std::string>& args) {
  CommandLine cl;
  Properties files, overrides;
  int phases = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](std::string* out) -> Status {
      if (i + 1 >= args.size()) return Status::InvalidArgument("missing value after " + a);
      *out = args[++i];
      return Status::OK();
    };
    std::string v;
    if (a == "-h" || a == "-help" || a == "--help") {
      cl.help = true;
      return cl;
    } else if (a == "-load") {
      overrides.Set("dotransactions", "false");
      ++phases;
    } else if (a == "-run" || a == "-t") {
      overrides.Set("dotransactions", "true");
      ++phases;
    } else if (a == "-db") {
      NOVA_RETURN_NOT_OK(value(&v));
      overrides.Set("db", v);
    } else if (a == "-P") {
      NOVA_RETURN_NOT_OK(value(&v));
      NOVA_RETURN_NOT_OK(files.LoadFile(v));
    } else if (a == "-p") {
      NOVA_RETURN_NOT_OK(value(&v));
      NOVA_RETURN_NOT_OK(overrides.ParseAssignment(v));
    } else if (a == "-threads") {
      NOVA_RETURN_NOT_OK(value(&v));
      overrides.Set("threadcount", v);
    } else if (a == "-target") {
      NOVA_RETURN_NOT_OK(value(&v));
      overrides.Set("target", v);
    } else if (a == "-s") {
      overrides.Set("status", "true");
    } else if (a == "-l") {
      NOVA_RETURN_NOT_OK(value(&v));
      overrides.Set("label", v);
    } else {
      return Status::InvalidArgument("unknown argument '" + a + "' (see --help)");
    }
  }
  if (phases != 1) {
    return Status::InvalidArgument("give exactly one of -load and -run (see --help)");
  }
  cl.props = std::move(files);
  cl.props.MergeFrom(overrides);
  return cl;
}

std::string UsageText(const std::string& bindings) {
  return R"(nova_ycsb: the YCSB core workload against Nova-LSM, LevelDB or RocksDB.

Usage: nova_ycsb -load|-run -db NAME [-P workloadfile]... [-p name=value]... [options]

Flags (as YCSB's):
  -load              load phase: insert records insertstart..insertstart+insertcount-1
  -run, -t           run phase: operationcount operations of the workload's mix
  -db NAME           binding (below)
  -P FILE            workload file (Java properties); several allowed, later ones win
  -p NAME=VALUE      set a property; overrides every -P file
  -threads N         client threads (property threadcount, default 1)
  -target OPS        throttle to OPS operations/s over all threads (property target;
                     default 0 = unthrottled)
  -s                 print a status line to stderr every status.interval seconds
  -l LABEL           prefix status lines with LABEL
  -h, --help         this text

Workload properties (YCSB CoreWorkload; defaults in brackets):
  recordcount [0, must be > 0]    records in the database (key numbers 0..recordcount-1)
  operationcount [0]              run-phase operations over all threads
  insertstart [0], insertcount [recordcount-insertstart]
                                  the load phase's key numbers (for loading in parts)
  insertorder [hashed]            hashed: key = "user" + fnvhash64(n); ordered: "user" + n
  zeropadding [1]                 pad the key number with zeros to this many digits
  table [usertable]               table name passed to the binding
  fieldcount [10], fieldnameprefix [field]
  fieldlength [100], minfieldlength [1]
  fieldlengthdistribution [constant]   constant | uniform | zipfian
  readallfields [true]            reads fetch every field (false: one random field)
  writeallfields [false]          updates write every field (false: one random field)
  readproportion [0.95], updateproportion [0.05], insertproportion [0],
  scanproportion [0], readmodifywriteproportion [0]
  requestdistribution [uniform]   uniform | zipfian (YCSB's scrambled: hot keys scattered) |
                                  orderedzipfian (key insertstart hottest, then its
                                  neighbours) | latest (skewed to recent inserts) | hotspot
  zipfianconstant [0.99]          theta of every zipfian draw (keys, latest, scan and
                                  field lengths): > 0 and != 1
  hotspotdatafraction [0.2], hotspotopnfraction [0.8]
  minscanlength [1], maxscanlength [1000]
  scanlengthdistribution [uniform]     uniform | zipfian
  dataintegrity [false]           values derived from key+field; every read verified
                                  ([VERIFY] Return=OK|UNEXPECTED_STATE|ERROR)
  core_workload_insertion_retry_limit [0], core_workload_insertion_retry_interval [3] (s)

Client properties:
  threadcount [1], target [0], maxexecutiontime [0 = none] (seconds)
  status [false] (= -s), status.interval [10] (seconds), label [""]
  timeseries [none]               FILE: CSV, one row per second: ops and per-operation
                                  ops / p50 / p99 latency (benchmarks/plot_timeseries)
  exportfile [stdout]             write the final report to FILE instead of stdout
  seed [random]                   seed the client threads' generators (reproducible runs)

Output: YCSB's text format on stdout ([OVERALL], RunTime(ms) / Throughput(ops/sec) /
Operations (every operation run, failed ones too); per operation Operations,
Average/Min/Max/50th/95th/99thPercentileLatency(us), Return=...; failed operations'
latencies as [READ-FAILED] etc.). See docs/ycsb.md.

Bindings:
)" + bindings;
}

}  // namespace nova::ycsb
