#!/usr/bin/env bash
# Failover under load (issue 15): a local cluster (deploy/local_cluster.sh: ZooKeeper, a
# coordinator, 3 StoCs, 2 LogCs with log_mode=memory, 2 LTCs, 4 ranges) runs YCSB workloada
# with dataintegrity=true; KILL_AT seconds into the run one LTC is killed with SIGKILL. The
# coordinator gives its ranges to the other LTC once its ZooKeeper session expires; the
# script prints the time from the kill to the configuration change and to the first second
# in which the workload completes operations again, the YCSB summary (verification errors
# must be 0) and writes the per-second time series (and a PNG with the kill marked, if
# gnuplot is installed).
#
#   benchmarks/failover_timeseries.sh [--session-ms MS] [--seconds S] [--kill-at S]
#                                     [--out DIR] [--help]
#
# Defaults: --session-ms 2000 (the LTCs' --zk_session_timeout_ms), --seconds 40,
# --kill-at 15, --out a new directory under /tmp. Binaries come from $NOVA_BUILD_DIR or
# build/ (built first). Exits non-zero if the run fails or reports verification errors.
set -euo pipefail

usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; }
session_ms=2000
seconds=40
kill_at=15
out=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --session-ms) session_ms=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --kill-at) kill_at=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --help|-h) usage; exit 0 ;;
    *) echo "failover_timeseries: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
for v in "$session_ms" "$seconds" "$kill_at"; do
  [[ "$v" =~ ^[0-9]+$ ]] || { echo "failover_timeseries: '$v' is not a number" >&2; exit 2; }
done
if (( kill_at >= seconds )); then
  echo "failover_timeseries: --kill-at must be below --seconds" >&2
  exit 2
fi

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export NOVA_BUILD_DIR=${NOVA_BUILD_DIR:-$root/build}
cmake --build "$NOVA_BUILD_DIR" --target nova_stoc nova_logc nova_ltc nova_coordinator \
  nova_admin nova_ycsb >/dev/null
out=${out:-$(mktemp -d /tmp/nova-failover.XXXXXX)}
mkdir -p "$out"
dir=$out/cluster
printf '%s\n' 7573657233 7573657235 7573657237 > "$out/split_points"

stop() { deploy/local_cluster.sh stop --dir "$dir" >/dev/null 2>&1 || true; }
trap stop EXIT

echo "== cluster in $dir (LTC session timeout $session_ms ms)"
deploy/local_cluster.sh start --dir "$dir" --ltcs 2 --stocs 3 --logcs 2 --log-mode memory \
  --ranges 4 "--split_points=$out/split_points" "--zk_session_timeout_ms=$session_ms" \
  --coordinator_recheck_interval_ms=200 >/dev/null
source "$dir/cluster.env"
ycsb=("$NOVA_BUILD_DIR/bin/nova_ycsb" -db nova -p "nova.zk=$NOVA_ZK"
      -p "nova.cluster=$NOVA_CLUSTER" -P benchmarks/ycsb/workloads/workloada
      -p recordcount=50000 -p operationcount=100000000 -p dataintegrity=true -threads 4)
"${ycsb[@]}" -load >/dev/null
admin=("$NOVA_BUILD_DIR/bin/nova_admin" --zk="$NOVA_ZK" --cluster="$NOVA_CLUSTER")
epoch_of() { "${admin[@]}" show-config 2>/dev/null | sed -n 's/^ *"epoch": \([0-9]*\).*/\1/p'; }

"${ycsb[@]}" -run -p "maxexecutiontime=$seconds" -p "timeseries=$out/timeseries.csv" \
  > "$out/run.txt" 2>"$out/run.err" &
ycsb_pid=$!
start_ns=$(date +%s%N)
while (( ($(date +%s%N) - start_ns) / 1000000 < kill_at * 1000 )); do sleep 0.1; done
epoch_before=$(epoch_of)
kill_ns=$(date +%s%N)
deploy/local_cluster.sh kill --dir "$dir" ltc-1 >/dev/null
echo "killed ltc-1 at $(( (kill_ns - start_ns) / 1000000 )) ms into the run"
config_ms=""
deadline=$(( $(date +%s) + 60 ))
while [[ -z "$config_ms" && $(date +%s) -lt $deadline ]]; do
  if "${admin[@]}" show-config 2>/dev/null | grep -q '"ltc": "1"'; then
    sleep 0.05
  else
    config_ms=$(( ($(date +%s%N) - kill_ns) / 1000000 ))
  fi
done
wait "$ycsb_pid" || { echo "nova_ycsb failed:"; tail -20 "$out/run.err"; exit 1; }
echo "configuration without ltc-1's ranges after: ${config_ms:-never} ms (epoch $epoch_before -> $(epoch_of))"
# Seconds after the kill below half the mean rate of the seconds before it, and the first
# one back above half.
kill_s=$(( (kill_ns - start_ns) / 1000000000 ))
awk -F, -v k="$kill_s" '
  NR > 1 && $1 + 0 <= k && $1 + 0 > 2 { sum += $2; n++ }
  NR > 1 && $1 + 0 > k + 1 {
    half = n > 0 ? sum / n / 2 : 0
    if ($2 < half) low++
    else if (low > 0 && !back) { back = $1 + 0 }
  }
  END {
    mean = 0; if (n > 0) mean = sum / n
    when = "never"; if (back) when = back
    printf "mean before the kill: %.0f ops/s; seconds below half of it after the kill: %d; back above half in second %s\n", mean, low, when
  }' "$out/timeseries.csv"
grep -E '^\[(OVERALL|VERIFY|READ|UPDATE)\]' "$out/run.txt" | grep -E 'Throughput|Operations|Return=' || true
if grep -qE '^\[VERIFY\], Return=(UNEXPECTED_STATE|ERROR)' "$out/run.txt"; then
  echo "verification errors: see $out/run.txt" >&2
  exit 1
fi
if [[ -x benchmarks/plot_timeseries ]] && command -v gnuplot >/dev/null 2>&1; then
  echo "$kill_s kill-9-ltc-1" > "$out/events.txt"
  benchmarks/plot_timeseries "$out/timeseries.csv" "$out/timeseries.png" \
    "workloada, ltc-1 killed at second $kill_s (session $session_ms ms)" "$out/events.txt" >/dev/null &&
    echo "plot: $out/timeseries.png"
fi
echo "time series: $out/timeseries.csv; YCSB output: $out/run.txt"
