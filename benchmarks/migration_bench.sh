#!/usr/bin/env bash
# Moving ranges between LTCs (issue 15): a local cluster (deploy/local_cluster.sh: ZooKeeper,
# a coordinator, 3 StoCs, 2 LogCs with --log-mode, 2 LTCs, 4 ranges) with memtables of
# --memtable-mb MiB; YCSB workloada (dataintegrity=true) runs while `nova_admin migrate-range`
# moves range 1 back and forth --moves times.
#
# Live (default): for each move the destination LTC logs "range 1: served here N ms after the
# hand-off began" (from asking the source to stop the range to the range open at the
# destination) and "... committed ...: pre-copy B bytes in T ms, hand-off B bytes in T ms";
# the script prints the blocked times' p50 / p99 / max and the bytes shipped, and
# nova_admin's total time per move. --live 0: moves that reopen the range (the new owner
# replays its logs); blocked is then nova_admin's "served by LTC X after N ms" and the
# script prints the bytes replayed. Then the YCSB summary. Writes everything to --out.
#
#   benchmarks/migration_bench.sh [--memtable-mb N] [--moves N] [--gap-s S] [--live 0|1]
#                                 [--log-mode MODE] [--out DIR]
#
# Defaults: --memtable-mb 4, --moves 6, --gap-s 5 (seconds of writes before each move: with
# big memtables, what moves grows with it), --live 1, --log-mode memory, --out a new
# directory in /tmp.
set -euo pipefail

usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; }
memtable_mb=4
moves=6
gap_s=5
live=1
log_mode=memory
out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --memtable-mb) memtable_mb=$2; shift 2 ;;
    --moves) moves=$2; shift 2 ;;
    --gap-s) gap_s=$2; shift 2 ;;
    --live) live=$2; shift 2 ;;
    --log-mode) log_mode=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --help|-h) usage; exit 0 ;;
    *) echo "migration_bench: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$live" == 0 || "$live" == 1 ]] || { echo "migration_bench: --live takes 0 or 1" >&2; exit 2; }
for v in "$memtable_mb" "$moves" "$gap_s"; do
  [[ "$v" =~ ^[0-9]+$ && "$v" -gt 0 ]] || { echo "migration_bench: '$v' is not a positive number" >&2; exit 2; }
done

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export NOVA_BUILD_DIR=${NOVA_BUILD_DIR:-$root/build}
cmake --build "$NOVA_BUILD_DIR" --target nova_stoc nova_logc nova_ltc nova_coordinator \
  nova_admin nova_ycsb nova_cli >/dev/null
out=${out:-$(mktemp -d /tmp/nova-migration.XXXXXX)}
mkdir -p "$out"
dir=$out/cluster
printf '%s\n' 7573657233 7573657235 7573657237 > "$out/split_points"
stop() { deploy/local_cluster.sh stop --dir "$dir" >/dev/null 2>&1 || true; }
trap stop EXIT

echo "== cluster in $dir ($memtable_mb MiB memtables)"
deploy/local_cluster.sh start --dir "$dir" --ltcs 2 --stocs 3 --logcs 2 --log-mode "$log_mode" \
  --ranges 4 "--split_points=$out/split_points" "--ltc_memtable_size_mb=$memtable_mb" \
  --coordinator_recheck_interval_ms=200 >/dev/null
source "$dir/cluster.env"
ycsb=("$NOVA_BUILD_DIR/bin/nova_ycsb" -db nova -p "nova.zk=$NOVA_ZK"
      -p "nova.cluster=$NOVA_CLUSTER" -P benchmarks/ycsb/workloads/workloada
      -p recordcount=50000 -p operationcount=100000000 -p dataintegrity=true -threads 4)
"${ycsb[@]}" -load >/dev/null
admin=("$NOVA_BUILD_DIR/bin/nova_admin" --zk="$NOVA_ZK" --cluster="$NOVA_CLUSTER")
seconds=$(( 10 + moves * (gap_s + 3) ))
"${ycsb[@]}" -run -p "maxexecutiontime=$seconds" -p "timeseries=$out/timeseries.csv" \
  > "$out/run.txt" 2>"$out/run.err" &
ycsb_pid=$!
started=$(date +%s.%N)
sleep "$gap_s"  # the workload warms up (and fills memtables) before the first move
: > "$out/moves.txt"
: > "$out/events.txt"
for ((i = 0; i < moves; i++)); do
  owner=$("${admin[@]}" show-config | python3 -c 'import json,sys; c=json.load(sys.stdin); print([r["ltc"] for r in c["ranges"] if r["id"]==1][0])')
  to=$(( owner == 0 ? 1 : 0 ))
  # The move's second on the time series' clock (it starts with the run).
  awk -v a="$started" -v b="$(date +%s.%N)" -v to="$to" \
    'BEGIN { printf "%.1f move-to-ltc-%s\n", b - a, to }' >> "$out/events.txt"
  "${admin[@]}" migrate-range --range=1 "--to=$to" "--live=$([[ $live == 1 ]] && echo true || echo false)" |
    tee -a "$out/moves.txt"
  sleep "$gap_s"  # memtables fill again before the next move
done
wait "$ycsb_pid" || { echo "nova_ycsb failed:"; tail -20 "$out/run.err"; exit 1; }
summary() {  # numbers on stdin -> "moves N  p50 A  p99 B  max C"
  sort -n | awk '{ v[NR] = $1 } END { if (NR) { i = int(NR * 0.99 + 0.999); if (i > NR) i = NR;
    printf "moves %d  p50 %d  p99 %d  max %d\n", NR, v[int((NR + 1) / 2)], v[i], v[NR] } }'
}
if [[ $live == 1 ]]; then
  echo "== blocked per move (ms, hand-off asked -> range open at the destination):"
  grep -h "range 1: served here" "$dir"/logs/ltc-*.log |
    sed 's/.*served here \([0-9]*\) ms.*/\1/' | summary
  echo "== shipped per move:"
  grep -h "migration of range 1 from LTC .* committed" "$dir"/logs/ltc-*.log | sed 's/.*committed/committed/' || true
  echo "== total per move (ms, nova_admin: queued -> taken over):"
  sed -n 's/.*took it over at epoch .* (after \([0-9]*\) ms)/\1/p' "$out/moves.txt" | summary
else
  echo "== blocked per move (ms):"
  sed -n 's/.*served by LTC .* after \([0-9]*\) ms/\1/p' "$out/moves.txt" | summary
  echo "== replayed by the new owners:"
  grep -h "range 1: rebuilt" "$dir"/logs/ltc-*.log | sed 's/.*range 1: //' || true
fi
grep -E '^\[(OVERALL|VERIFY|READ|UPDATE)\], (Throughput|Operations|Return=)' "$out/run.txt" || true
if grep -qE '^\[VERIFY\], Return=(UNEXPECTED_STATE|ERROR)' "$out/run.txt"; then
  echo "verification errors: see $out/run.txt" >&2
  exit 1
fi
if [[ -x benchmarks/plot_timeseries ]] && command -v gnuplot >/dev/null 2>&1; then
  benchmarks/plot_timeseries "$out/timeseries.csv" "$out/timeseries.png" \
    "workloada, range 1 moved $moves times ($memtable_mb MiB memtables, live=$live)" \
    "$out/events.txt" >/dev/null && echo "plot: $out/timeseries.png (moves marked)"
fi
echo "moves: $out/moves.txt; time series: $out/timeseries.csv; YCSB: $out/run.txt"
