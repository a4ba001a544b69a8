#!/usr/bin/env bash
# YCSB W100, RW50 and SW50 (the Nova-LSM paper's workloads, benchmarks/ycsb/workloads/),
# each with uniform and zipfian access, against four engines with the same memory budget:
#
#   nova         a local cluster (deploy/local_cluster.sh): 1 LTC, 3 StoCs, the Nova engine
#   ltc-leveldb  the same cluster with the LTC's --engine=leveldb (a LevelDB per range)
#   leveldb      nova_ycsb's embedded LevelDB binding
#   rocksdb      nova_ycsb's embedded RocksDB binding
#
#   benchmarks/ycsb/compare_engines.sh [--records N] [--seconds S] [--threads T]
#       [--engines nova,ltc-leveldb,leveldb,rocksdb] [--memtable_mb M] [--cache_mb C]
#       [--ranges R] [--tau_mb T] [--theta N] [--workdir DIR] [--out FILE] [--keep]
#
# Per engine: one load of N records (1 KiB: one 1024-byte field, ordered zero-padded keys,
# as the workload files define), then the six runs in the order w100, rw50, sw50, each
# uniform then zipfian, on the loaded database, for S seconds each (maxexecutiontime; the
# operation count is left unbounded). Prints one markdown table (rows: load and
# workload x distribution; columns: engines; each cell: ops/s and p99 latencies) and the
# exact commands. Smoke run: --records 20000 --seconds 2.
#
# Memory budget, the same for every engine: M MiB of memtables and C MiB of block cache
# (defaults 64 and 64), at most, summed over the engine's ranges:
#   nova:        R ranges x delta memtables of tau MiB (delta = M / (R x tau)), a block cache
#                of C / R MiB per range (--ltc_block_cache_mb)
#   ltc-leveldb: R ranges x a LevelDB write buffer of M / (2R) MiB (LevelDB keeps at most
#                two memtables: the active one and one being flushed), C / R MiB cache each
#   leveldb, rocksdb: write buffer M / 2 (two memtables, RocksDB's max_write_buffer_number
#                default), block cache C
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
workloads_dir=$root/benchmarks/ycsb/workloads

records=1000000 seconds=20 threads=4 engines=nova,ltc-leveldb,leveldb,rocksdb
memtable_mb=64 cache_mb=64 ranges=4 tau_mb=4 theta=2 workdir="" out="" keep=0
# An operation count no run reaches: maxexecutiontime ends every run.
readonly kUnboundedOps=2000000000
# Bounds on each step, beyond its own duration: a load of N records, a run's start and
# clean-up, a cluster start.
readonly kLoadTimeoutSeconds=3600 kRunSlackSeconds=120

usage() { sed -n '2,40p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 1; }
die() { echo "compare_engines.sh: $*" >&2; exit 1; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --records) records=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --engines) engines=$2; shift 2 ;;
    --memtable_mb) memtable_mb=$2; shift 2 ;;
    --cache_mb) cache_mb=$2; shift 2 ;;
    --ranges) ranges=$2; shift 2 ;;
    --tau_mb) tau_mb=$2; shift 2 ;;
    --theta) theta=$2; shift 2 ;;
    --workdir) workdir=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    -h|--help) usage ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done
for n in "$records" "$seconds" "$threads" "$memtable_mb" "$cache_mb" "$ranges" "$tau_mb" \
    "$theta"; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || die "numeric options want a positive integer, got '$n'"
done
((memtable_mb % (2 * ranges) == 0)) || die "--memtable_mb must be a multiple of 2 x --ranges"
((memtable_mb % (ranges * tau_mb) == 0)) || die "--memtable_mb must be a multiple of ranges x tau"
((cache_mb % ranges == 0)) || die "--cache_mb must be a multiple of --ranges"
delta=$((memtable_mb / (ranges * tau_mb)))
((theta <= delta)) || die "--theta ($theta) must be <= delta ($delta memtables per range)"
IFS=, read -r -a engine_list <<< "$engines"
for e in "${engine_list[@]}"; do
  case "$e" in nova|ltc-leveldb|leveldb|rocksdb) ;; *) die "unknown engine $e" ;; esac
done
[[ -x $bin/nova_ycsb ]] || die "$bin/nova_ycsb not found: build first (or set NOVA_BUILD_DIR)"

if [[ -z "$workdir" ]]; then
  workdir=$(mktemp -d /tmp/compare_engines.XXXXXX)
else
  mkdir -p "$workdir"
  workdir=$(cd "$workdir" && pwd)
fi

# ---- clean-up: the running nova_ycsb, the cluster, the work directory -------------------

child=""        # pid of the nova_ycsb running now
cluster_dir=""  # set while a cluster runs
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [[ -n "$child" ]] && kill -0 "$child" 2>/dev/null; then
    kill -TERM "$child" 2>/dev/null || true
    wait "$child" 2>/dev/null || true
  fi
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

# The value of "[SECTION], NAME, value" in report $1, or "" if absent.
field() { awk -F', ' -v s="[$2]" -v n="$3" '$1 == s && $2 == n { print $3; exit }' "$1"; }

# Operations that did not return OK in report $1 (summed over sections).
failures() {
  awk -F', ' '$2 ~ /^Return=/ && $2 != "Return=OK" { n += $3 } END { print n + 0 }' "$1"
}

# "12,345" from a floating-point ops/s figure.
ops_fmt() { printf '%.0f' "$1" | sed ':a;s/\B[0-9]\{3\}\>/,&/;ta'; }

# One table cell from report $1: ops/s, then the p99 of each operation type that ran.
cell() {
  local r=$1 s p sec lat="" fails
  s=$(ops_fmt "$(field "$r" OVERALL 'Throughput(ops/sec)')")
  for sec in INSERT READ UPDATE SCAN; do
    p=$(field "$r" "$sec" '99thPercentileLatency(us)')
    [[ -z "$p" ]] || lat+="${lat:+ / }${sec:0:1} $p"
  done
  [[ -z "$lat" ]] || s+=" (p99 us: $lat)"
  fails=$(failures "$r")
  ((fails == 0)) || s+=" **$fails failed**"
  echo "$s"
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

common_props=(-p "recordcount=$records" -threads "$threads")

# Loads and runs every workload against engine $1; reports go to $workdir/reports/$1.*.
bench_engine() {
  local engine=$1 db props=()
  local reports=$workdir/reports
  mkdir -p "$reports"
  case "$engine" in
    nova|ltc-leveldb)
      cluster_dir=$workdir/cluster-$engine
      mkdir -p "$cluster_dir"
      split_points > "$workdir/split_points.txt"
      local flags=(--ltcs 1 --stocs 3 --ranges "$ranges"
                   "--split_points=$workdir/split_points.txt"
                   "--ltc_block_cache_mb=$((cache_mb / ranges))")
      if [[ $engine == nova ]]; then
        flags+=("--ltc_memtable_size_mb=$tau_mb" "--ltc_memtables_per_range=$delta"
                "--ltc_dranges_per_range=$theta")
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

  echo "[$engine] loading $records records" >&2
  ycsb "$kLoadTimeoutSeconds" "$reports/$engine.load" -load -db "$db" \
    -P "$workloads_dir/w100" "${common_props[@]}" "${props[@]}"

  local wl dist
  for wl in w100 rw50 sw50; do
    for dist in uniform zipfian; do
      echo "[$engine] $wl $dist, ${seconds}s" >&2
      ycsb $((seconds + kRunSlackSeconds)) "$reports/$engine.$wl.$dist" -run -db "$db" \
        -P "$workloads_dir/$wl" "${common_props[@]}" -p "requestdistribution=$dist" \
        -p "operationcount=$kUnboundedOps" -p "maxexecutiontime=$seconds" "${props[@]}"
    done
  done

  if [[ -n "$cluster_dir" ]]; then
    echo "[$engine] stopping the cluster" >&2
    "$cluster_sh" stop --dir "$cluster_dir" >/dev/null 2>&1 || true
    rm -rf "$cluster_dir"
    cluster_dir=""
  fi
  rm -rf "$workdir/db-$engine"
}

# ---- main ---------------------------------------------------------------------------------

started=$(date -u '+%Y-%m-%d %H:%M UTC')
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for e in "${engine_list[@]}"; do bench_engine "$e"; done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

report=$workdir/table.md
{
  echo "YCSB, $records records of 1 KiB, $threads threads, ${seconds} s per run; started $started;"
  echo "load average (1/5/15 min) before: $load_before, after: $load_after;"
  echo "1-min load average as each load or run started: $(sort -n "$workdir/load.txt" |
    sed -n '1p;$p' | paste -sd- | sed 's/-/ to /')."
  echo "Memory budget per engine: ${memtable_mb} MiB memtables + ${cache_mb} MiB block cache."
  echo
  header="| workload | distribution |"
  rule="|---|---|"
  for e in "${engine_list[@]}"; do header+=" $e |"; rule+="---|"; done
  echo "$header"
  echo "$rule"
  row="| load | (ordered) |"
  for e in "${engine_list[@]}"; do row+=" $(cell "$workdir/reports/$e.load") |"; done
  echo "$row"
  for wl in w100 rw50 sw50; do
    for dist in uniform zipfian; do
      row="| $wl | $dist |"
      for e in "${engine_list[@]}"; do row+=" $(cell "$workdir/reports/$e.$wl.$dist") |"; done
      echo "$row"
    done
  done
  echo
  echo "Cells: throughput in ops/s, then the p99 latency in us of each operation type"
  echo "(I insert, R read, U update, S scan of 10 records)."
  echo
  echo "Per engine: nova: $ranges ranges x delta $delta memtables of tau $tau_mb MiB, theta $theta,"
  echo "$((cache_mb / ranges)) MiB block cache per range; ltc-leveldb: $ranges ranges x LevelDB write buffer"
  echo "$((memtable_mb / (2 * ranges))) MiB (2 memtables), $((cache_mb / ranges)) MiB block cache per range;"
  echo "leveldb, rocksdb: write buffer $((memtable_mb / 2)) MiB (2 memtables), block cache $cache_mb MiB."
  echo
  echo "Commands:"
  echo
  sed 's/^/    /' "$commands"
} > "$report"
cat "$report"
if [[ -n "$out" ]]; then cp "$report" "$out"; fi
