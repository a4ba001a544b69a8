#!/usr/bin/env bash
# Profiles a local Nova-LSM cluster under a YCSB workload: where the machine's CPU goes.
#
#   benchmarks/profile_cluster.sh [--records N] [--workload w100|rw50|sw50]
#       [--distribution D] [--seconds S] [--perf_seconds P] [--perf_start T]
#       [--engine nova|leveldb|embedded] [--out DIR]
#
# Starts a cluster as benchmarks/ycsb/compare_engines.sh does (1 LTC, 3 StoCs, 4 ranges split
# at key numbers N*i/4; nova: tau 4 MiB, delta 4, theta 2; leveldb: --engine=leveldb with an
# 8 MiB write buffer; one 64 MiB block cache), or with `embedded` no cluster but nova_ycsb's
# embedded LevelDB (32 MiB write buffer, 64 MiB cache, as compare_engines.sh's `leveldb`).
# Loads N records (default 200,000), runs the workload for S seconds (default 14) with 4
# client threads, and records `perf record -F 499 -a -g` over P seconds of it (default 6),
# starting T s in (default 4; later to see the steady state after the load's compactions).
# Writes to DIR (default a new temporary directory, printed): perf.data, report-comm.txt
# (CPU share per process), report-dso.txt (kernel vs libraries vs binaries),
# report-sym.txt (top symbols), the run's nova_ycsb report and, for a cluster,
# the LTC's and a StoC's /metrics and `nova_cli stats` (stats.txt) after the run. Needs
# `perf` (Debian: linux-perf) and the binaries in $NOVA_BUILD_DIR/bin (default build/bin).
# Every process it starts is stopped (and embedded LevelDB's data removed) on exit. Exit
# status: 0, or 1 with the reason on stderr.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bin=${NOVA_BUILD_DIR:-$root/build}/bin
records=200000 workload=rw50 distribution=uniform seconds=14 perf_seconds=6 perf_start=4
engine=nova out=""

usage() { sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 1; }
die() { echo "profile_cluster.sh: $*" >&2; exit 1; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --records) records=$2; shift 2 ;;
    --workload) workload=$2; shift 2 ;;
    --distribution) distribution=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --perf_seconds) perf_seconds=$2; shift 2 ;;
    --perf_start) perf_start=$2; shift 2 ;;
    --engine) engine=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) usage ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done
for n in "$records" "$seconds" "$perf_seconds" "$perf_start"; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || die "numeric options want a positive integer, got '$n'"
done
((perf_seconds + perf_start <= seconds)) || die "--perf_seconds + --perf_start must not exceed --seconds"
[[ -f "$root/benchmarks/ycsb/workloads/$workload" ]] || die "no workload '$workload'"
[[ "$engine" =~ ^(nova|leveldb|embedded)$ ]] || die "--engine is nova, leveldb or embedded"
command -v perf > /dev/null || die "perf is not installed (apt-get install linux-perf)"
[[ -x "$bin/nova_ycsb" ]] || die "no $bin/nova_ycsb (build first, or set NOVA_BUILD_DIR)"

[[ -n "$out" ]] || out=$(mktemp -d /tmp/profile_cluster.XXXXXX)
mkdir -p "$out"
cluster=$out/cluster
cleanup() {
  "$root/deploy/local_cluster.sh" stop --dir "$cluster" > /dev/null 2>&1 || true
  rm -rf "$out/db"  # embedded LevelDB's data
}
trap cleanup EXIT

if [[ $engine == embedded ]]; then
  db=leveldb
  props=(-p "leveldb.dir=$out/db" -p leveldb.write_buffer_size_mb=32 -p leveldb.cache_size_mb=64
         -p leveldb.bloom_bits=10 -p leveldb.compression=none)
  rm -rf "$out/db"
else
  for ((i = 1; i < 4; i++)); do
    printf 'user%010d' $((records * i / 4)) | od -An -tx1 | tr -d ' \n'
    echo
  done > "$out/split_points.txt"
  flags=(--ltcs 1 --stocs 3 --ranges 4 "--split_points=$out/split_points.txt"
         --ltc_shared_block_cache_mb=64)
  if [[ $engine == nova ]]; then
    flags+=(--ltc_memtable_size_mb=4 --ltc_memtables_per_range=4 --ltc_dranges_per_range=2)
  else
    flags+=(--engine=leveldb --ltc_memtable_size_mb=8)
  fi
  echo "starting the cluster in $cluster" >&2
  "$root/deploy/local_cluster.sh" start --dir "$cluster" "${flags[@]}" > "$out/start.out" 2>&1 ||
    { tail -n 20 "$out/start.out" >&2; die "cluster start failed"; }
  # shellcheck disable=SC1091
  source "$cluster/cluster.env"
  db=nova
  props=(-p "nova.zk=$NOVA_ZK" -p "nova.cluster=$NOVA_CLUSTER")
fi
props+=(-p "recordcount=$records" -threads 4)
echo "loading $records records" >&2
timeout 3600 "$bin/nova_ycsb" -load -db "$db" -P "$root/benchmarks/ycsb/workloads/w100" \
  "${props[@]}" > "$out/load.out" 2>&1 || die "load failed (see $out/load.out)"
echo "running $workload $distribution for ${seconds}s, perf for ${perf_seconds}s" >&2
timeout $((seconds + 120)) "$bin/nova_ycsb" -run -db "$db" \
  -P "$root/benchmarks/ycsb/workloads/$workload" "${props[@]}" \
  -p "requestdistribution=$distribution" -p operationcount=2000000000 \
  -p "maxexecutiontime=$seconds" > "$out/run.out" 2>&1 &
run_pid=$!
sleep "$perf_start"  # into the run's steady part
perf record -F 499 -a -g -o "$out/perf.data" -- sleep "$perf_seconds" > "$out/perf.out" 2>&1 ||
  echo "perf record failed (see $out/perf.out)" >&2
wait "$run_pid" || die "the run failed (see $out/run.out)"
if [[ "$engine" != embedded ]]; then
  # Per range and level: tables, bytes, and what flushes and compactions read and wrote.
  "$bin/nova_cli" --zk="$NOVA_ZK" --cluster="$NOVA_CLUSTER" stats > "$out/stats.txt" 2>&1 || true
fi
for log in ltc-0 stoc-0; do
  addr=$(grep -o "serving /metrics on http://[0-9.:]*" "$cluster/logs/$log.log" | head -n 1 |
         grep -o "[0-9.]*:[0-9]*$" || true)
  [[ -n "$addr" ]] && curl -s "http://$addr/metrics" > "$out/metrics-$log.txt" || true
done
cleanup
perf report -i "$out/perf.data" --no-children --sort comm --stdio -g none 2> /dev/null |
  grep "%" > "$out/report-comm.txt" || true
perf report -i "$out/perf.data" --no-children --sort dso --stdio -g none 2> /dev/null |
  grep "%" > "$out/report-dso.txt" || true
perf report -i "$out/perf.data" --no-children --sort sym --stdio -g none 2> /dev/null |
  grep "%" | head -n 60 > "$out/report-sym.txt" || true
grep "Throughput" "$out/run.out" || true
echo "== CPU by process"; head -n 10 "$out/report-comm.txt"
echo "== CPU by binary"; head -n 8 "$out/report-dso.txt"
echo "== top symbols"; head -n 15 "$out/report-sym.txt"
echo "(all in $out)"
