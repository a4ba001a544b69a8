#!/usr/bin/env bash
# Moving ranges between LTCs (issue 15): a local cluster (deploy/local_cluster.sh: ZooKeeper,
# a coordinator, 3 StoCs, 2 LogCs with log_mode=memory, 2 LTCs, 4 ranges) with memtables of
# --memtable-mb MiB; YCSB workloada (dataintegrity=true) runs while `nova_admin migrate-range`
# moves range 1 back and forth --moves times. For each move the script prints how long the
# range was not served (nova_admin's "served by LTC X after N ms": from the published owner
# change to the first read the new owner answers, i.e. the old owner letting go plus the
# new owner fencing and replaying the range's logs), then p50 / max over the moves, the
# bytes the new owner replayed (its log line "rebuilt N memtables (E entries, B log bytes)")
# and the YCSB summary. Writes everything to --out.
#
#   benchmarks/migration_bench.sh [--memtable-mb N] [--moves N] [--gap-s S] [--out DIR]
#
# Defaults: --memtable-mb 4, --moves 6, --gap-s 5 (seconds of writes before each move: with
# big memtables, what the new owner replays grows with it), --out a new directory in /tmp.
set -euo pipefail

usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; }
memtable_mb=4
moves=6
gap_s=5
out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --memtable-mb) memtable_mb=$2; shift 2 ;;
    --moves) moves=$2; shift 2 ;;
    --gap-s) gap_s=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --help|-h) usage; exit 0 ;;
    *) echo "migration_bench: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
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
deploy/local_cluster.sh start --dir "$dir" --ltcs 2 --stocs 3 --logcs 2 --log-mode memory \
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
sleep "$gap_s"  # the workload warms up (and fills memtables) before the first move
: > "$out/moves.txt"
for ((i = 0; i < moves; i++)); do
  owner=$("${admin[@]}" show-config | python3 -c 'import json,sys; c=json.load(sys.stdin); print([r["ltc"] for r in c["ranges"] if r["id"]==1][0])')
  to=$(( owner == 0 ? 1 : 0 ))
  "${admin[@]}" migrate-range --range=1 "--to=$to" | tee -a "$out/moves.txt"
  sleep "$gap_s"  # memtables fill again before the next move
done
wait "$ycsb_pid" || { echo "nova_ycsb failed:"; tail -20 "$out/run.err"; exit 1; }
echo "== blocked per move (ms):"
sed -n 's/.*served by LTC .* after \([0-9]*\) ms/\1/p' "$out/moves.txt" | sort -n |
  awk '{ v[NR] = $1 } END { if (NR) printf "moves %d  p50 %d  max %d\n", NR, v[int((NR + 1) / 2)], v[NR] }'
echo "== replayed by the new owners:"
grep -h "range 1: rebuilt" "$dir"/logs/ltc-*.log | sed 's/.*range 1: //' || true
grep -E '^\[(OVERALL|VERIFY|READ|UPDATE)\], (Throughput|Operations|Return=)' "$out/run.txt" || true
if grep -qE '^\[VERIFY\], Return=(UNEXPECTED_STATE|ERROR)' "$out/run.txt"; then
  echo "verification errors: see $out/run.txt" >&2
  exit 1
fi
echo "moves: $out/moves.txt; time series: $out/timeseries.csv; YCSB: $out/run.txt"
