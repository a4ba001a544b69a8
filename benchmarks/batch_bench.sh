#!/usr/bin/env bash
# Multi-range vs single-range batch latency and throughput (build/bin/batch_bench) against
# a local cluster started with deploy/local_cluster.sh: 2 LTCs, 8 ranges (4 per LTC),
# 3 StoCs, no LogCs. Stops the cluster and removes its directory at the end. Extra
# arguments go to batch_bench (e.g. --json, --seconds=5, --batch_ops=256).
#
#   benchmarks/batch_bench.sh [batch_bench flags]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
if [[ "${1:-}" == "--help" || "${1:-}" == "-h" ]]; then
  sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'
  exit 0
fi
bench=${NOVA_BUILD_DIR:-$root/build}/bin/batch_bench
[[ -x "$bench" ]] || { echo "$bench not found: build the batch_bench target first" >&2; exit 2; }
dir=$(mktemp -d /tmp/nova-batch-bench.XXXXXX)
cleanup() {
  deploy/local_cluster.sh stop --dir "$dir" >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT
deploy/local_cluster.sh start --dir "$dir" --ltcs 2 --stocs 3 --ranges 8 >/dev/null
# shellcheck disable=SC1091
source "$dir/cluster.env"
"$bench" --uri "nova://$NOVA_ZK/$NOVA_CLUSTER" "$@"
