#!/usr/bin/env bash
# A/B of the quickstart's cluster and YCSB run for daemons from several build directories:
# for each DIR in turn, starts the quickstart's local cluster (1 LTC, 4 ranges, 3 StoCs,
# 2 LogCs in memory mode) with DIR/bin's daemons, loads 100,000 records and runs workloada
# with 4 threads for 30 s using this checkout's build/bin/nova_ycsb, prints the throughput
# and latency lines, and stops the cluster.
#
#   benchmarks/quickstart_ab.sh /tmp/before-build build /tmp/before-build build
#
# Give each directory more than once, alternating, to see the run-to-run spread.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
if [[ $# -eq 0 || "$1" == "--help" || "$1" == "-h" ]]; then
  sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi
ycsb_bin=$root/build/bin/nova_ycsb
[[ -x "$ycsb_bin" ]] || { echo "$ycsb_bin not found: build first" >&2; exit 2; }
for build in "$@"; do
  [[ -x "$build/bin/nova_ltc" ]] || { echo "$build/bin/nova_ltc not found" >&2; exit 2; }
  dir=$(mktemp -d /tmp/nova-ab.XXXXXX)
  printf '%s\n' "# user3, user5, user7" 7573657233 7573657235 7573657237 > "$dir/split_points"
  NOVA_BUILD_DIR=$build deploy/local_cluster.sh start --dir "$dir" --ltcs 1 --stocs 3 --logcs 2 \
    --log-mode memory --ranges 4 "--split_points=$dir/split_points" >/dev/null
  # shellcheck disable=SC1091
  source "$dir/cluster.env"
  ycsb=("$ycsb_bin" -db nova -p "nova.zk=$NOVA_ZK" -p "nova.cluster=$NOVA_CLUSTER"
        -P benchmarks/ycsb/workloads/workloada -p recordcount=100000 -p operationcount=100000000
        -p maxexecutiontime=30 -threads 4 -s)
  echo "== $build"
  "${ycsb[@]}" -load 2>/dev/null | grep -E '^\[OVERALL\], Throughput' | sed 's/^/load /'
  "${ycsb[@]}" -run 2>/dev/null | grep -E '^\[(OVERALL|READ|UPDATE)\], (Throughput|AverageLatency)' \
    | sed 's/^/run  /'
  deploy/local_cluster.sh stop --dir "$dir" >/dev/null 2>&1 || true
  rm -rf "$dir"
done
