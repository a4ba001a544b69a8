#!/usr/bin/env bash
# Drain time of a StoC (issue 16): a local cluster of 1 LTC, 4 StoCs (hybrid availability),
# no LogCs, 2 ranges; loads RECORDS records of 1 KB (W100's format) with nova_ycsb, then
# times `deploy/local_cluster.sh remove stoc --id 1` (nova_admin remove-stoc: every copy and
# MANIFEST replica moved off, then the StoC stopped) with no other load, and prints the
# bytes the StoC held before (its data directory) and the time.
#
#   benchmarks/drain_bench.sh [RECORDS]      # default 3,000,000 (StoC 1 then holds about 1 GiB)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
records=${1:-3000000}
bin=${NOVA_BUILD_DIR:-$root/build}/bin
dir=$(mktemp -d /tmp/nova-drain-bench.XXXXXX)
trap 'deploy/local_cluster.sh stop --dir "$dir" >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
deploy/local_cluster.sh start --dir "$dir" --ltcs 1 --stocs 4 --logcs 0 --ranges 2 \
  --ltc_table_availability=hybrid > "$dir/start.out" 2>&1
source "$dir/cluster.env"
start=$(date +%s.%N)
"$bin/nova_ycsb" -db nova -P benchmarks/ycsb/workloads/w100 -p "nova.zk=$NOVA_ZK" \
  -p "nova.cluster=$NOVA_CLUSTER" -p "recordcount=$records" -threads 3 -load 2>/dev/null |
  grep -E '^\[OVERALL\], Throughput'
echo "loaded $records records in $(python3 -c "print(f'{$(date +%s.%N) - $start:.0f}')") s"
# Let flushes and compactions settle: until StoC 1's bytes stop changing for 10 s.
last=-1 same=0
while ((same < 10)); do
  now=$(du -sb "$dir/data/stoc-1" 2>/dev/null | cut -f1 || true)  # files come and go
  if [[ "$now" == "$last" ]]; then same=$((same + 1)); else same=0; last=$now; fi
  sleep 1
done
echo "StoC 1 holds $(python3 -c "print(f'{$last / 2**20:.0f}')") MiB"
start=$(date +%s.%N)
deploy/local_cluster.sh remove --dir "$dir" stoc --id 1 --timeout_s=1800 | tail -2
secs=$(python3 -c "print(f'{$(date +%s.%N) - $start:.1f}')")
echo "drained and removed in $secs s ($(python3 -c "print(f'{$last / 2**20 / $secs:.0f}')") MiB/s); left in its directory: $(find "$dir/data/stoc-1/data" -name '*.dat' | wc -l) files"
"$bin/nova_admin" "--zk=$NOVA_ZK" "--cluster=$NOVA_CLUSTER" status | sed -n '/^LTC status/,$p'
