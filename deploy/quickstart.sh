#!/usr/bin/env bash
# README command one: installs what is missing, builds, starts a local Nova-LSM cluster
# (ZooKeeper, a coordinator, 3 StoCs with the default table availability, hybrid: parity over
# each table's data and its index twice, so any one StoC may die; 2 LogCs with
# log_mode=memory, 1 LTC, 4 ranges, all on loopback), loads 100,000
# records and runs YCSB workloada against it for about 30 s with nova_ycsb (a progress line
# every 10 s, every read verified), prints YCSB's summary, then stops the cluster.
#
#   ./deploy/quickstart.sh                       # as above
#   ./deploy/quickstart.sh -P benchmarks/ycsb/workloads/w100 -p operationcount=500000
#                                                # any further nova_ycsb arguments
#
# Environment: NOVA_BUILD_DIR (default build/), NOVA_CLUSTER_DIR (default a new directory
# under /tmp, kept afterwards with the logs), NOVA_KEEP_CLUSTER=1 leaves the cluster running
# (stop it with deploy/local_cluster.sh stop --dir DIR).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

./deploy/install_deps.sh --quiet
build_dir=${NOVA_BUILD_DIR:-build}
export NOVA_BUILD_DIR=$(cd "$root" && mkdir -p "$build_dir" && cd "$build_dir" && pwd)
echo "== configure and build ($NOVA_BUILD_DIR)"
cmake -S . -B "$NOVA_BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$NOVA_BUILD_DIR" -j "$(nproc)" \
  --target nova_stoc nova_logc nova_ltc nova_coordinator nova_admin nova_cli nova_ycsb

dir=${NOVA_CLUSTER_DIR:-$(mktemp -d /tmp/nova-quickstart.XXXXXX)}
mkdir -p "$dir"
# YCSB's hashed keys are "user" + a decimal hash: split the ranges on its first digit.
printf '%s\n' "# user3, user5, user7" 7573657233 7573657235 7573657237 > "$dir/split_points"

stop() {
  if [[ "${NOVA_KEEP_CLUSTER:-0}" == 1 ]]; then
    echo "the cluster keeps running: deploy/local_cluster.sh stop --dir $dir"
  else
    deploy/local_cluster.sh stop --dir "$dir" >/dev/null 2>&1 || true
    echo "cluster stopped; its logs are in $dir/logs"
  fi
}
trap stop EXIT

echo "== start a local cluster in $dir"
deploy/local_cluster.sh start --dir "$dir" --ltcs 1 --stocs 3 --logcs 2 --log-mode memory --ranges 4 \
  --ltc_table_availability=hybrid \
  "--split_points=$dir/split_points"
source "$dir/cluster.env"
deploy/local_cluster.sh status --dir "$dir" 2>/dev/null | sed -n '/^cluster/,$p'

ycsb=("$NOVA_BUILD_DIR/bin/nova_ycsb" -db nova -p "nova.zk=$NOVA_ZK" -p "nova.cluster=$NOVA_CLUSTER"
      -P benchmarks/ycsb/workloads/workloada -p recordcount=100000 -p operationcount=100000000
      -p maxexecutiontime=30 -p dataintegrity=true -threads 4 -s)
echo
echo "== YCSB load: ${ycsb[*]} -load $*"
"${ycsb[@]}" -load "$@" | grep -E '^\[(OVERALL|INSERT)\]'
echo
echo "== YCSB run"
"${ycsb[@]}" -run -p "timeseries=$dir/timeseries.csv" "$@" | tee "$dir/run.txt"
echo
echo "per-second figures: $dir/timeseries.csv (benchmarks/plot_timeseries turns them into a PNG)"
