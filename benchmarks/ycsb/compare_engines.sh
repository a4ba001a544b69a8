#!/usr/bin/env bash
# YCSB W100, RW50 and SW50 (the Nova-LSM paper's workloads, benchmarks/ycsb/workloads/),
# each with uniform and zipfian access (--distributions), against four engines with the
# same memory budget:
#
#   nova         a local cluster (deploy/local_cluster.sh): 1 LTC, 3 StoCs, the Nova engine
#   ltc-leveldb  the same cluster with the LTC's --engine=leveldb (a LevelDB per range)
#   leveldb      nova_ycsb's embedded LevelDB binding
#   rocksdb      nova_ycsb's embedded RocksDB binding
#
#   benchmarks/ycsb/compare_engines.sh [--records N] [--seconds S] [--threads T]
#       [--engines nova,ltc-leveldb,leveldb,rocksdb] [--distributions uniform,zipfian]
#       [--zipfianconstant C] [--memtable_mb M] [--cache_mb C] [--cache_per_range]
#       [--ranges R] [--tau_mb T]
#       [--theta N] [--table_availability MODE] [--cluster_flag F ...] [--abba]
#       [--workdir DIR] [--out FILE] [--keep]
#   benchmarks/ycsb/compare_engines.sh --latency [--records N] [--seconds S]
#       [--engines nova,ltc-leveldb] [same memory options] [--workdir DIR] [--out FILE] [--keep]
#
# Per engine: one load of N records (default 1,000,000; 1 KiB: one 1024-byte field, ordered
# zero-padded keys, as the workload files define), then the runs in the order w100, rw50,
# sw50, each with every distribution of --distributions (default uniform,zipfian; also
# orderedzipfian: key 0 the hottest, then its neighbours, as in the paper), on the loaded
# database, for S seconds each (default 20; maxexecutiontime; the operation count is left
# unbounded), with T client threads (default 4). --zipfianconstant C passes
# -p zipfianconstant=C to every nova_ycsb (default: nova_ycsb's, YCSB's 0.99). Prints one
# markdown table (rows: load and workload x distribution; columns: engines) and the exact
# commands. Smoke run: --records 20000 --seconds 2.
#
# Each run's cell: ops/s, the p99 latency of each operation type, and the machine's system
# CPU share and context switches per operation during the run, e.g.
#   41,053 (p99 us: U 431; sys 45%, 9.1 cs/op)
# Both come from /proc/stat, read just before and just after the run's nova_ycsb (so the
# window includes its start and clean-up, a fraction of a second): sys% = delta(system + irq
# + softirq) / delta(user + nice + system + idle + iowait + irq + softirq + steal), the
# figure vmstat's "sy" column shows (procps' vmstat.c: sy = system + irq + softirq over
# that total; guest time is already inside user), and cs/op = delta(ctxt) / the run's
# operations ([OVERALL], Operations of its report). Both count the whole machine: the
# cluster's processes, the client, and anything else running.
#
# --abba: every engine twice, in the order of --engines and then in the reverse order (A B B
# A), each time with a fresh cluster and load. On this machine the engine that runs first is
# often the slower one (the background work of whatever ran before), so single runs of two
# engines compare their places as much as the engines. Prints the table of each pass, then
# one of the means of both passes (ops/s only) with the ratio of the first two engines.
#
# Ping-pong: at the start and at the end, deploy/testbed/rtt.py times 2000 round trips of
# 64 bytes between two processes over loopback TCP; both lines go above the table ("ping-pong
# 64 B loopback TCP: start p50 X us p99 Y us, end ..."), so that figures from different days
# can be compared (issue 18: this machine's wake-ups are slow on some days).
#
# --latency: what a LevelDB application switching to the adapter sees. Per engine (default
# nova,ltc-leveldb; leveldb and rocksdb work too, as a reference), a fresh cluster loaded with
# N records (default 10,000 x 1 KiB: they fit in the memtables), then S seconds of 100% reads
# (readproportion=1, uniform over the loaded keys) from one client thread, one request at a
# time. Prints per engine the Get p50 and p99 in us, ops/s, sys% and cs/op, with the
# ping-pong line. --threads and --distributions do not apply.
#
# Memory budget, the same for every engine: M MiB of memtables and C MiB of block cache
# (defaults 64 and 64), at most, summed over the engine's ranges:
#   nova:        R ranges x delta memtables of tau MiB (delta = M / (R x tau)), one block
#                cache of C MiB shared by the LTC's ranges (--ltc_shared_block_cache_mb;
#                with --cache_per_range: C / R MiB per range, --ltc_block_cache_mb)
#   ltc-leveldb: R ranges x a LevelDB write buffer of M / (2R) MiB (LevelDB keeps at most
#                two memtables: the active one and one being flushed), the block cache as
#                nova's
#   leveldb, rocksdb: write buffer M / 2 (two memtables, RocksDB's max_write_buffer_number
#                default), block cache C
# Copies: ltc-leveldb, leveldb and rocksdb keep one copy of each table on the local disk;
# nova keeps its tables on the StoCs with the cluster's default table availability (hybrid:
# data fragments plus a parity fragment, index and filter copied, so a table survives the
# loss of a StoC), or as --table_availability says (none, replicas, parity, hybrid: the
# cluster setting table_availability, docs/stoc.md); none is one copy, as the others keep.
#
# --cluster_flag F (repeatable) passes F to deploy/local_cluster.sh start for nova and
# ltc-leveldb (every component gets it; each ignores flags it does not define), e.g.
# --cluster_flag=--ltc_local_reads=false for an A/B.
#
# Index and filter blocks outside the block cache, the Nova engine's lookup and range
# indexes and the OS page cache are not counted, for any engine. Every engine uses 10-bit
# bloom filters and no compression (the Nova engine's tables have none).
#
# Key distribution: the workloads' keys are "user" + a 10-digit zero-padded number, so all
# of them share the first byte and the default single-byte split points would put every
# key in one range. The cluster's R ranges are split at key numbers N*i/R instead
# (nova_admin --split_points), which spreads the loaded keys evenly.
#
# Binaries: $NOVA_BUILD_DIR/bin (default build/bin). Every process this script starts is
# stopped on exit (the cluster through local_cluster.sh stop), and the work directory is
# removed unless --keep. Exit status: 0, or 1 with the reason on stderr.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
build=${NOVA_BUILD_DIR:-$root/build}
bin=$build/bin
cluster_sh=$root/deploy/local_cluster.sh
rtt_py=$root/deploy/testbed/rtt.py
workloads_dir=$root/benchmarks/ycsb/workloads

records="" seconds=20 threads=4 engines="" distributions=uniform,zipfian zipfianconstant=""
memtable_mb=64 cache_mb=64 ranges=4 tau_mb=4 theta=2 workdir="" out="" keep=0 latency=0
cache_per_range=0 table_availability="" cluster_flags=() abba=0
# Records of a run (default) and of a --latency run (they fit in the memtables).
readonly kDefaultRecords=1000000 kDefaultLatencyRecords=10000
# An operation count no run reaches: maxexecutiontime ends every run.
readonly kUnboundedOps=2000000000
# Bounds on each step, beyond its own duration: a load of N records, a run's start and
# clean-up, a cluster start.
readonly kLoadTimeoutSeconds=3600 kRunSlackSeconds=120
# The ping-pong: rtt.py's round trips, and a bound on the whole measurement.
readonly kRttRoundTrips=2000 kRttTimeoutSeconds=60

# The header above, without its "# ".
usage() {
  awk 'NR == 1 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0" >&2
  exit 1
}
die() { echo "compare_engines.sh: $*" >&2; exit 1; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --records) records=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --engines) engines=$2; shift 2 ;;
    --distributions) distributions=$2; shift 2 ;;
    --zipfianconstant) zipfianconstant=$2; shift 2 ;;
    --memtable_mb) memtable_mb=$2; shift 2 ;;
    --cache_mb) cache_mb=$2; shift 2 ;;
    --ranges) ranges=$2; shift 2 ;;
    --tau_mb) tau_mb=$2; shift 2 ;;
    --theta) theta=$2; shift 2 ;;
    --workdir) workdir=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    --cache_per_range) cache_per_range=1; shift ;;
    --table_availability) table_availability=$2; shift 2 ;;
    --cluster_flag) cluster_flags+=("$2"); shift 2 ;;
    --cluster_flag=*) cluster_flags+=("${1#--cluster_flag=}"); shift ;;
    --latency) latency=1; shift ;;
    --abba) abba=1; shift ;;
    -h|--help) usage ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done
((!(latency && abba))) || die "--abba applies to the workload runs, not to --latency"
if ((latency)); then
  records=${records:-$kDefaultLatencyRecords}
  engines=${engines:-nova,ltc-leveldb}
  threads=1
else
  records=${records:-$kDefaultRecords}
  engines=${engines:-nova,ltc-leveldb,leveldb,rocksdb}
fi
for n in "$records" "$seconds" "$threads" "$memtable_mb" "$cache_mb" "$ranges" "$tau_mb" \
    "$theta"; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || die "numeric options want a positive integer, got '$n'"
done
((memtable_mb % (2 * ranges) == 0)) || die "--memtable_mb must be a multiple of 2 x --ranges"
((memtable_mb % (ranges * tau_mb) == 0)) || die "--memtable_mb must be a multiple of ranges x tau"
((cache_mb % ranges == 0)) || die "--cache_mb must be a multiple of --ranges"
delta=$((memtable_mb / (ranges * tau_mb)))
((theta <= delta)) || die "--theta ($theta) must be <= delta ($delta memtables per range)"
for f in "${cluster_flags[@]+"${cluster_flags[@]}"}"; do
  [[ "$f" == --?* ]] || die "--cluster_flag wants a flag such as --ltc_local_reads=false, got '$f'"
done
case "$table_availability" in
  ""|none|replicas|parity|hybrid) ;;
  *) die "--table_availability must be none, replicas, parity or hybrid, got '$table_availability'" ;;
esac
IFS=, read -r -a engine_list <<< "$engines"
for e in "${engine_list[@]}"; do
  case "$e" in nova|ltc-leveldb|leveldb|rocksdb) ;; *) die "unknown engine $e" ;; esac
done
IFS=, read -r -a dist_list <<< "$distributions"
((${#dist_list[@]} > 0)) || die "--distributions is empty"
for d in "${dist_list[@]}"; do
  case "$d" in
    uniform|zipfian|orderedzipfian) ;;
    *) die "unknown distribution '$d' (allowed: uniform, zipfian, orderedzipfian)" ;;
  esac
done
# nova_ycsb checks the constant (a number > 0 and != 1) and says so; a malformed one fails
# the first nova_ycsb, before any load.
zipf_props=()
[[ -z "$zipfianconstant" ]] || zipf_props=(-p "zipfianconstant=$zipfianconstant")
[[ -x $bin/nova_ycsb ]] || die "$bin/nova_ycsb not found: build first (or set NOVA_BUILD_DIR)"

if [[ -z "$workdir" ]]; then
  workdir=$(mktemp -d /tmp/compare_engines.XXXXXX)
else
  mkdir -p "$workdir"
  workdir=$(cd "$workdir" && pwd)
fi

# ---- clean-up: the running nova_ycsb, the ping-pong server, the cluster, the work directory

child=""        # pid of the nova_ycsb running now
rtt_server=""   # pid of the rtt.py server running now
cluster_dir=""  # set while a cluster runs
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  local pid
  for pid in "$child" "$rtt_server"; do
    if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
    fi
  done
  if [[ -n "$cluster_dir" ]]; then
    "$cluster_sh" stop --dir "$cluster_dir" >/dev/null 2>&1 || true
  fi
  if ((keep)); then
    echo "compare_engines.sh: kept $workdir" >&2
  else
    rm -rf "$workdir"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---- helpers ------------------------------------------------------------------------------

commands=$workdir/commands.txt
: > "$commands"
reports=$workdir/reports
mkdir -p "$reports"

# Runs nova_ycsb with the given arguments, bounded by $1 seconds, writing its report to
# $2; logs the command. Fails (with the tail of its stderr) if nova_ycsb does.
ycsb() {
  local limit=$1 report=$2; shift 2
  cut -d' ' -f1 /proc/loadavg >> "$workdir/load.txt"
  printf '%q ' "$bin/nova_ycsb" "$@" >> "$commands"
  echo >> "$commands"
  timeout -k 10 "$limit" "$bin/nova_ycsb" "$@" > "$report" 2> "$report.err" &
  child=$!
  local rc=0
  wait "$child" || rc=$?
  child=""
  if ((rc != 0)); then
    tail -n 20 "$report.err" >&2
    die "nova_ycsb failed (exit $rc): $*"
  fi
}

# The machine's CPU time and context switches so far, from /proc/stat: "user nice system
# idle iowait irq softirq steal ctxt" (the cpu line's first 8 fields, then ctxt).
proc_stat() {
  awk '$1 == "cpu" { c = $2 " " $3 " " $4 " " $5 " " $6 " " $7 " " $8 " " $9 }
       $1 == "ctxt" { x = $2 }
       END { print c, x }' /proc/stat
}

# "SYS_PERCENT CS_PER_OP" between proc_stat samples $1 and $2 over $3 operations: sys% as
# vmstat's "sy" (system + irq + softirq over all 8 fields), context switches per operation.
cpu_figures() {
  awk -v a="$1" -v b="$2" -v ops="$3" 'BEGIN {
    split(a, x, " "); split(b, y, " ")
    total = 0
    for (i = 1; i <= 8; i++) { d[i] = y[i] - x[i]; total += d[i] }
    sys = d[3] + d[6] + d[7]
    pct = (total > 0) ? 100 * sys / total : 0
    per_op = (ops > 0) ? (y[9] - x[9]) / ops : 0
    printf "%.0f %.1f\n", pct, per_op
  }'
}

# ycsb for a run phase: also writes "SYS_PERCENT CS_PER_OP" of the run to $2.cpu.
ycsb_run() {
  local report=$2 before after
  before=$(proc_stat)
  ycsb "$@"
  after=$(proc_stat)
  cpu_figures "$before" "$after" "$(field "$report" OVERALL Operations)" > "$report.cpu"
}

# The value of "[SECTION], NAME, value" in report $1, or "" if absent.
field() { awk -F', ' -v s="[$2]" -v n="$3" '$1 == s && $2 == n { print $3; exit }' "$1"; }

# Operations that did not return OK in report $1 (summed over sections).
failures() {
  awk -F', ' '$2 ~ /^Return=/ && $2 != "Return=OK" { n += $3 } END { print n + 0 }' "$1"
}

# "12,345" from a floating-point ops/s figure.
ops_fmt() { printf '%.0f' "$1" | sed ':a;s/\B[0-9]\{3\}\>/,&/;ta'; }

# One table cell from report $1: ops/s, then the p99 of each operation type that ran, then
# (runs only) sys% and context switches per operation.
cell() {
  local r=$1 s p sec lat="" fails extra=""
  s=$(ops_fmt "$(field "$r" OVERALL 'Throughput(ops/sec)')")
  for sec in INSERT READ UPDATE SCAN; do
    p=$(field "$r" "$sec" '99thPercentileLatency(us)')
    [[ -z "$p" ]] || lat+="${lat:+ / }${sec:0:1} $p"
  done
  [[ -z "$lat" ]] || extra="p99 us: $lat"
  if [[ -f "$r.cpu" ]]; then
    local sys cs
    read -r sys cs < "$r.cpu"
    extra+="${extra:+; }sys $sys%, $cs cs/op"
  fi
  [[ -z "$extra" ]] || s+=" ($extra)"
  fails=$(failures "$r")
  ((fails == 0)) || s+=" **$fails failed**"
  echo "$s"
}

# One ping-pong measurement over loopback (deploy/testbed/rtt.py): sets rtt_line to
# rtt.py's line "rtt_us n=.. min=.. p50=.. p99=.. max=..", or to "unavailable: REASON" (the
# benchmark goes on without it). $1 names the measurement (start, end). Not run in a
# subshell, so that cleanup() knows the server's pid.
rtt_line=""
ping_pong() {
  local dir=$workdir/rtt.$1 port="" line deadline=$((SECONDS + kRttTimeoutSeconds))
  mkdir -p "$dir"
  if ! command -v python3 >/dev/null; then rtt_line="unavailable: no python3"; return; fi
  # Port 0: the server binds a free port and prints it ("LISTEN 127.0.0.1:PORT").
  python3 "$rtt_py" serve 127.0.0.1 0 > "$dir/serve.out" 2> "$dir/serve.err" &
  rtt_server=$!
  while true; do
    port=$(sed -n 's/^LISTEN [0-9.]*:\([0-9]*\)$/\1/p' "$dir/serve.out")
    [[ -z "$port" ]] || break
    if ! kill -0 "$rtt_server" 2>/dev/null || ((SECONDS > deadline)); then
      kill "$rtt_server" 2>/dev/null || true
      wait "$rtt_server" 2>/dev/null || true
      rtt_server=""
      rtt_line="unavailable: the rtt.py server did not start ($(tail -n 1 "$dir/serve.err"))"
      return
    fi
    sleep 0.05
  done
  if line=$(timeout "$kRttTimeoutSeconds" python3 "$rtt_py" ping 127.0.0.1 "$port" \
      "$kRttRoundTrips" 2> "$dir/ping.err") && [[ "$line" == rtt_us* ]]; then
    rtt_line=$line
  else
    rtt_line="unavailable: rtt.py ping failed ($(tail -n 1 "$dir/ping.err"))"
  fi
  # The server exits when its client leaves (or after its own idle timeout).
  wait "$rtt_server" 2>/dev/null || true
  rtt_server=""
}

# "p50 X us p99 Y us" from a ping_pong line, or the line itself if it has no figures.
ping_pong_short() {
  local s
  s=$(sed -n 's/.* p50=\([0-9]*\) p99=\([0-9]*\).*/p50 \1 us p99 \2 us/p' <<< "$1")
  echo "${s:-$1}"
}

# Split points at key numbers records*i/ranges, hex-encoded, one a line (nova_admin
# --split_points). The key format is the workload files': "user" + 10-digit zero padding.
split_points() {
  local i
  for ((i = 1; i < ranges; i++)); do
    printf 'user%010d' $((records * i / ranges)) | od -An -tx1 | tr -d ' \n'
    echo
  done
}

common_props=(-p "recordcount=$records" -threads "$threads" "${zipf_props[@]}")

# Prepares engine $1: starts its cluster (nova, ltc-leveldb) or wipes its directory
# (leveldb, rocksdb); sets db and props (the binding's nova_ycsb arguments).
db="" props=()
open_engine() {
  local engine=$1
  case "$engine" in
    nova|ltc-leveldb)
      cluster_dir=$workdir/cluster-$engine
      mkdir -p "$cluster_dir"
      split_points > "$workdir/split_points.txt"
      local flags=(--ltcs 1 --stocs 3 --ranges "$ranges"
                   "--split_points=$workdir/split_points.txt"
                   "${cluster_flags[@]+"${cluster_flags[@]}"}")
      if ((cache_per_range)); then
        flags+=("--ltc_block_cache_mb=$((cache_mb / ranges))")
      else
        flags+=("--ltc_shared_block_cache_mb=$cache_mb")
      fi
      if [[ $engine == nova ]]; then
        flags+=("--ltc_memtable_size_mb=$tau_mb" "--ltc_memtables_per_range=$delta"
                "--ltc_dranges_per_range=$theta")
        [[ -z "$table_availability" ]] ||
          flags+=("--setting=table_availability=$table_availability")
      else
        flags+=(--engine=leveldb "--ltc_memtable_size_mb=$((memtable_mb / (2 * ranges)))")
      fi
      printf '%q ' "$cluster_sh" start --dir "$cluster_dir" "${flags[@]}" >> "$commands"
      echo >> "$commands"
      echo "[$engine] starting the cluster" >&2
      "$cluster_sh" start --dir "$cluster_dir" "${flags[@]}" > "$cluster_dir/start.out" \
        2> "$cluster_dir/start.err" || { tail -n 20 "$cluster_dir/start.err" >&2; die "cluster start failed"; }
      # shellcheck disable=SC1091
      source "$cluster_dir/cluster.env"
      db=nova
      props=(-p "nova.zk=$NOVA_ZK" -p "nova.cluster=$NOVA_CLUSTER")
      ;;
    leveldb|rocksdb)
      db=$engine
      rm -rf "$workdir/db-$engine"
      props=(-p "$engine.dir=$workdir/db-$engine"
             -p "$engine.write_buffer_size_mb=$((memtable_mb / 2))"
             -p "$engine.cache_size_mb=$cache_mb" -p "$engine.bloom_bits=10"
             -p "$engine.compression=none")
      ;;
  esac
}

# Stops engine $1's cluster, removes its data.
close_engine() {
  local engine=$1
  if [[ -n "$cluster_dir" ]]; then
    echo "[$engine] stopping the cluster" >&2
    "$cluster_sh" stop --dir "$cluster_dir" >/dev/null 2>&1 || true
    rm -rf "$cluster_dir"
    cluster_dir=""
  fi
  rm -rf "$workdir/db-$engine"
}

# Loads engine $1 (its report: $2.load).
load_engine() {
  echo "[$1] loading $records records" >&2
  ycsb "$kLoadTimeoutSeconds" "$2.load" -load -db "$db" \
    -P "$workloads_dir/w100" "${common_props[@]}" "${props[@]}"
}

# Loads and runs every workload against engine $1 in pass $2 (1, or 2 with --abba);
# reports go to $reports/p$2.$1.*.
bench_engine() {
  local engine=$1 prefix=$reports/p$2.$1 wl dist
  open_engine "$engine"
  load_engine "$engine" "$prefix"
  for wl in w100 rw50 sw50; do
    for dist in "${dist_list[@]}"; do
      echo "[$engine] $wl $dist, ${seconds}s" >&2
      ycsb_run $((seconds + kRunSlackSeconds)) "$prefix.$wl.$dist" -run -db "$db" \
        -P "$workloads_dir/$wl" "${common_props[@]}" -p "requestdistribution=$dist" \
        -p "operationcount=$kUnboundedOps" -p "maxexecutiontime=$seconds" "${props[@]}"
    done
  done
  close_engine "$engine"
}

# --latency: loads engine $1 and reads from one thread; report: $reports/$1.latency.
latency_engine() {
  local engine=$1
  open_engine "$engine"
  load_engine "$engine" "$reports/$engine"
  echo "[$engine] 100% reads, 1 thread, ${seconds}s" >&2
  ycsb_run $((seconds + kRunSlackSeconds)) "$reports/$engine.latency" -run -db "$db" \
    -P "$workloads_dir/w100" "${common_props[@]}" -p readproportion=1 \
    -p updateproportion=0 -p requestdistribution=uniform \
    -p "operationcount=$kUnboundedOps" -p "maxexecutiontime=$seconds" "${props[@]}"
  close_engine "$engine"
}

# The table of pass $1 over engines $2...: a row per load and run, a column per engine.
pass_table() {
  local pass=$1 header="| workload | distribution |" rule="|---|---|" row e wl dist
  shift
  for e in "$@"; do header+=" $e |"; rule+="---|"; done
  echo "$header"
  echo "$rule"
  row="| load | (ordered) |"
  for e in "$@"; do row+=" $(cell "$reports/p$pass.$e.load") |"; done
  echo "$row"
  for wl in w100 rw50 sw50; do
    for dist in "${dist_list[@]}"; do
      row="| $wl | $dist |"
      for e in "$@"; do row+=" $(cell "$reports/p$pass.$e.$wl.$dist") |"; done
      echo "$row"
    done
  done
}

# --abba: one row of means_table, labelled $1 ("| w100 | uniform |"), of the reports with
# suffix $2 (w100.uniform, or load).
mean_row() {
  local row=$1 suffix=$2 e a b
  local -a means=()
  for e in "${engine_list[@]}"; do
    a=$(field "$reports/p1.$e.$suffix" OVERALL 'Throughput(ops/sec)')
    b=$(field "$reports/p2.$e.$suffix" OVERALL 'Throughput(ops/sec)')
    means+=("$(awk -v a="${a:-0}" -v b="${b:-0}" 'BEGIN { printf "%.0f", (a + b) / 2 }')")
    row+=" $(ops_fmt "${means[-1]}") ($(ops_fmt "${a:-0}") / $(ops_fmt "${b:-0}")) |"
  done
  if ((${#engine_list[@]} > 1)); then
    row+=" $(awk -v a="${means[0]}" -v b="${means[1]}" \
      'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }') |"
  fi
  echo "$row"
}

# --abba: the mean ops/s of each engine over both passes, and (two engines or more) the
# ratio of the first engine's mean to the second's.
means_table() {
  local header="| workload | distribution |" rule="|---|---|" e wl dist
  for e in "${engine_list[@]}"; do header+=" $e |"; rule+="---|"; done
  if ((${#engine_list[@]} > 1)); then
    header+=" ${engine_list[0]} / ${engine_list[1]} |"
    rule+="---|"
  fi
  echo "$header"
  echo "$rule"
  mean_row "| load | (ordered) |" load
  for wl in w100 rw50 sw50; do
    for dist in "${dist_list[@]}"; do mean_row "| $wl | $dist |" "$wl.$dist"; done
  done
}

# ---- main ---------------------------------------------------------------------------------

started=$(date -u '+%Y-%m-%d %H:%M UTC')
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
echo "ping-pong (start)" >&2
ping_pong start
rtt_start=$rtt_line
# The engines of pass 2 (--abba): the reverse order.
reversed_list=()
for ((i = ${#engine_list[@]} - 1; i >= 0; i--)); do reversed_list+=("${engine_list[i]}"); done
for e in "${engine_list[@]}"; do
  if ((latency)); then latency_engine "$e"; else bench_engine "$e" 1; fi
done
if ((abba)); then
  for e in "${reversed_list[@]}"; do bench_engine "$e" 2; done
fi
echo "ping-pong (end)" >&2
ping_pong end
rtt_end=$rtt_line
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

report=$workdir/table.md
{
  if ((latency)); then
    echo "YCSB single-client latency: $records records of 1 KiB, 100% reads (uniform), 1 thread,"
    echo "${seconds} s per engine; started $started;"
  else
    echo "YCSB, $records records of 1 KiB, $threads threads, ${seconds} s per run${zipfianconstant:+, zipfianconstant $zipfianconstant};"
    echo "started $started;"
  fi
  echo "load average (1/5/15 min) before: $load_before, after: $load_after;"
  echo "1-min load average as each load or run started: $(sort -n "$workdir/load.txt" |
    sed -n '1p;$p' | paste -sd- | sed 's/-/ to /')."
  echo "Memory budget per engine: ${memtable_mb} MiB memtables + ${cache_mb} MiB block cache."
  echo
  echo "ping-pong 64 B loopback TCP: start $(ping_pong_short "$rtt_start"), end $(ping_pong_short "$rtt_end")"
  echo "(deploy/testbed/rtt.py, $kRttRoundTrips round trips; start: $rtt_start; end: $rtt_end)"
  echo
  if ((latency)); then
    echo "| engine | Get p50 us | Get p99 us | ops/s | sys | cs/op |"
    echo "|---|---|---|---|---|---|"
    for e in "${engine_list[@]}"; do
      r=$reports/$e.latency
      read -r sys cs < "$r.cpu"
      fails=$(failures "$r")
      echo "| $e | $(field "$r" READ '50thPercentileLatency(us)') |" \
        "$(field "$r" READ '99thPercentileLatency(us)') |" \
        "$(ops_fmt "$(field "$r" OVERALL 'Throughput(ops/sec)')")$( ((fails == 0)) || echo " **$fails failed**") |" \
        "$sys% | $cs |"
    done
    echo
    echo "Get: the [READ] latency nova_ycsb measures around the binding's Read (client-side, one"
    echo "request at a time). sys: system CPU share of the whole machine during the run (vmstat's"
    echo "sy); cs/op: the machine's context switches per operation."
  else
    if ((abba)); then
      echo "Pass 1 (${engine_list[*]}):"
      echo
      pass_table 1 "${engine_list[@]}"
      echo
      echo "Pass 2 (${reversed_list[*]}):"
      echo
      pass_table 2 "${reversed_list[@]}"
      echo
      echo "Means of both passes, ops/s (pass 1 / pass 2):"
      echo
      means_table
    else
      pass_table 1 "${engine_list[@]}"
    fi
    echo
    echo "Cells: throughput in ops/s, then the p99 latency in us of each operation type"
    echo "(I insert, R read, U update, S scan of 10 records); for the runs, the system CPU share"
    echo "of the whole machine (vmstat's sy: system + irq + softirq) and its context switches"
    echo "per operation, over the run."
  fi
  echo
  cache_text="one $cache_mb MiB block cache shared by the ranges"
  ((cache_per_range)) && cache_text="$((cache_mb / ranges)) MiB block cache per range"
  echo "Per engine: nova: $ranges ranges x delta $delta memtables of tau $tau_mb MiB, theta $theta,"
  echo "table availability ${table_availability:-hybrid (the default)},"
  echo "$cache_text; ltc-leveldb: $ranges ranges x LevelDB write buffer"
  echo "$((memtable_mb / (2 * ranges))) MiB (2 memtables), $cache_text;"
  echo "leveldb, rocksdb: write buffer $((memtable_mb / 2)) MiB (2 memtables), block cache $cache_mb MiB."
  echo
  echo "Commands:"
  echo
  sed 's/^/    /' "$commands"
  echo "    python3 deploy/testbed/rtt.py serve 127.0.0.1 0 &  # then, with the port it prints:"
  echo "    python3 deploy/testbed/rtt.py ping 127.0.0.1 PORT $kRttRoundTrips"
} > "$report"
cat "$report"
if [[ -n "$out" ]]; then cp "$report" "$out"; fi
