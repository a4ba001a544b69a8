#!/usr/bin/env bash
# Table availability modes compared (issue 16; paper Figure 4.13), on a local cluster of one
# LTC, 4 StoCs, no LogCs and 2 ranges, with nova_ycsb (1 KB records, 3 threads). Per mode:
#  - W100 and RW50 throughput (SECS seconds each) and the bytes the StoCs appended per byte
#    the clients wrote (StoC /metrics stoc_append_bytes_total; tables, parity and MANIFESTs);
#  - Gets (reads of the W100 records only, 10 s) healthy and with one StoC killed -9: latency
#    p50/p95/p99;
#  - repair: Gets run while that StoC is removed (--coordinator_stoc_grace_ms=30000) and its
#    copies rebuilt; the rebuild's bytes and duration (LTC status) and Get throughput before
#    and during it (per-second timeseries).
#
#   benchmarks/availability_bench.sh [--records N] [--secs S] [--modes "none replicas2 ..."]
#
# Modes: none, replicas2, replicas3, parity, hybrid (m = 1). Prints one table row per mode.
set -uo pipefail  # no -e: a figure that cannot be measured prints as empty
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
records=100000 secs=20 modes="none replicas2 replicas3 parity hybrid"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --records) records=$2; shift 2 ;;
    --secs) secs=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
bin=${NOVA_BUILD_DIR:-$root/build}/bin
dir=""
cleanup() { [[ -n "$dir" ]] && { deploy/local_cluster.sh stop --dir "$dir" >/dev/null 2>&1 || true; rm -rf "$dir"; }; }
trap cleanup EXIT

# Sum of a counter over the running StoCs' /metrics (their metrics port: the listening socket
# of the StoC's process that is not its transport port).
stoc_counter() {
  local total=0 id pid port listen
  for pidf in "$dir"/pids/stoc-*.pid; do
    pid=$(cat "$pidf"); kill -0 "$pid" 2>/dev/null || continue
    id=$(basename "$pidf" .pid)
    listen=$(grep -m1 '^LISTEN ' "$dir/logs/$id.log" | sed 's/.*://')
    for port in $(ss -ltnpH "( sport > :0 )" 2>/dev/null | grep "pid=$pid," | awk '{print $4}' | sed 's/.*://'); do
      [[ "$port" == "$listen" ]] && continue
      v=$(curl -s "http://127.0.0.1:$port/metrics" | awk -v m="$1" '$1 == m {print $2}')
      [[ -n "$v" ]] && total=$(python3 -c "print(int($total + float('$v')))")
    done
  done
  echo "$total"
}
ycsb_run() {  # workload secs extra...
  local w=$1 s=$2; shift 2
  "$bin/nova_ycsb" -db nova -P "benchmarks/ycsb/workloads/$w" -p "nova.zk=$NOVA_ZK" \
    -p "nova.cluster=$NOVA_CLUSTER" -p "recordcount=$records" -p operationcount=1000000000 \
    -p fieldcount=1 -p fieldlength=1024 -p "maxexecutiontime=$s" -threads 3 "$@" -run 2>/dev/null
}
field() { grep -E "^\[$1\], $2," | head -1 | awk -F', ' '{print $3}'; }

printf '| mode | W100 ops/s | RW50 ops/s | StoC bytes per user byte | Get p50 / p95 / p99 (us): healthy -> one StoC down | Gets/s before / during repair | rebuilt MB in s (MB/s) |\n|---|---|---|---|---|---|---|\n'
for mode in $modes; do
  flags=()
  case "$mode" in
    none) flags=(--ltc_table_availability=none) ;;
    replicas2) flags=(--ltc_table_availability=replicas --ltc_fragment_replicas=2) ;;
    replicas3) flags=(--ltc_table_availability=replicas --ltc_fragment_replicas=3) ;;
    parity) flags=(--ltc_table_availability=parity --ltc_parity_fragments=1) ;;
    hybrid) flags=(--ltc_table_availability=hybrid --ltc_parity_fragments=1) ;;
    *) echo "unknown mode $mode" >&2; exit 2 ;;
  esac
  dir=$(mktemp -d /tmp/nova-availability-bench.XXXXXX)
  deploy/local_cluster.sh start --dir "$dir" --ltcs 1 --stocs 4 --logcs 0 --ranges 2 \
    --coordinator_stoc_grace_ms=30000 "${flags[@]}" > "$dir/start.out" 2>&1
  source "$dir/cluster.env"
  "$bin/nova_ycsb" -db nova -P benchmarks/ycsb/workloads/w100 -p "nova.zk=$NOVA_ZK" \
    -p "nova.cluster=$NOVA_CLUSTER" -p "recordcount=$records" -threads 3 -load > "$dir/load.out" 2>/dev/null
  w100=$(ycsb_run w100 "$secs" | field OVERALL 'Throughput\(ops/sec\)')
  rw50=$(ycsb_run rw50 "$secs" -p fieldcount=1 > "$dir/rw50.out"; field OVERALL 'Throughput\(ops/sec\)' < "$dir/rw50.out")
  appended=$(stoc_counter stoc_append_bytes_total)
  updates=$(field UPDATE Operations < "$dir/rw50.out")
  # User bytes: the load, the W100 run and RW50's updates, 1 KB values each.
  w100_ops=$(python3 -c "print(int(float('$w100') * $secs))")
  user=$(( (records + w100_ops + ${updates:-0}) * 1024 ))
  amp=$(python3 -c "print(f'{$appended / $user:.2f}')")
  # Gets (the W100 records, reads only): healthy, then with StoC 1 killed -9.
  pct() { echo "$(field READ '50thPercentileLatency\(us\)' < "$1") / $(field READ '95thPercentileLatency\(us\)' < "$1") / $(field READ '99thPercentileLatency\(us\)' < "$1")"; }
  ycsb_run w100 10 -p readproportion=1 -p updateproportion=0 > "$dir/healthy.out"
  deploy/local_cluster.sh kill --dir "$dir" stoc-1 >/dev/null
  ycsb_run w100 10 -p readproportion=1 -p updateproportion=0 > "$dir/degraded.out"
  if [[ "$mode" == none ]]; then
    lat="$(pct "$dir/healthy.out") -> $(field READ-FAILED Operations < "$dir/degraded.out") of $(( $(field READ Operations < "$dir/degraded.out") + $(field READ-FAILED Operations < "$dir/degraded.out") )) Gets fail"
  else
    lat="$(pct "$dir/healthy.out") -> $(pct "$dir/degraded.out")"
  fi
  # Repair under Gets (reads only: writes would make compactions rewrite the StoC's tables
  # before it is removed, leaving nothing to repair): the StoC is removed
  # --coordinator_stoc_grace_ms (30 s) after its ZooKeeper session expired, about 20 s into
  # this run.
  repair="-" before="-"
  if [[ "$mode" != none ]]; then
    ycsb_run w100 60 -p readproportion=1 -p updateproportion=0 -p "timeseries=$dir/ts.csv" \
      > "$dir/repair.out" &
    yp=$!
    t0=$(date +%s.%N); start_rel=""; end_rel=""
    b0=$("$bin/nova_admin" "--zk=$NOVA_ZK" "--cluster=$NOVA_CLUSTER" status | grep -Eo '[0-9]+ bytes' | head -1 | grep -Eo '[0-9]+')
    deadline=$((SECONDS + 58))
    while ((SECONDS < deadline)); do
      st=$("$bin/nova_admin" "--zk=$NOVA_ZK" "--cluster=$NOVA_CLUSTER" status 2>/dev/null || true)
      now=$(date +%s.%N)
      if [[ -z "$start_rel" ]] && ! grep -Eq '^stoc +1 ' <<<"$st"; then start_rel=$now; fi
      # (a status of an older epoch says "(behind)" and does not count)
      if [[ -n "$start_rel" ]] && grep -Eq 'at epoch [0-9]+: 0 copies at risk; to move: none' <<<"$st"; then
        end_rel=$now; bytes=$(grep -Eo '[0-9]+ bytes' <<<"$st" | head -1 | grep -Eo '[0-9]+'); break
      fi
      sleep 0.2
    done
    wait "$yp" || true
    if [[ -n "$end_rel" ]]; then
      repair=$(python3 -c "b=($bytes-${b0:-0})/1e6; t=$end_rel-$start_rel; print(f'{b:.0f} in {t:.1f} ({b/max(t,0.1):.0f})')")
      # W100 per second before the removal, and from the removal to the end of the rebuild.
      before=$(python3 - "$dir/ts.csv" "$t0" "$start_rel" "$end_rel" <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if r and r[0][0].isdigit()]
t0, s, e = map(float, sys.argv[2:5])
pre = [float(r[1]) for r in rows if float(r[0]) < s - t0 - 1]
dur = [float(r[1]) for r in rows if s - t0 - 1 <= float(r[0]) <= e - t0 + 1]
avg = lambda v: sum(v) / len(v) if v else float('nan')
print(f"{avg(pre):.0f} / {avg(dur):.0f}")
PY
)
    fi
  fi
  printf '| %s | %.0f | %.0f | %s | %s | %s | %s |\n' "$mode" "$w100" "$rw50" "$amp" "$lat" "$before" "$repair"
  deploy/local_cluster.sh stop --dir "$dir" >/dev/null 2>&1 || true
  rm -rf "$dir"; dir=""
done
