#!/usr/bin/env bash
# Iterator latency of the leveldb::DB adapter (issue 19): for each range count (default 4
# and 64) starts a local cluster of 2 LTCs, 3 StoCs and no LogCs with that many equal
# ranges, runs build/bin/iterator_bench on it (it loads KEYS random keys, then times
# NewIterator + 100 Next, SeekToLast + 100 Prev, Seek + 100 Prev and whole walks both ways),
# and stops the cluster. Extra arguments go to iterator_bench (e.g. --json, --reps=500).
#
#   benchmarks/iterator_bench.sh [--ranges "4 64"] [--keys N] [iterator_bench flags...]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bin=${NOVA_BUILD_DIR:-$root/build}/bin
range_counts="4 64" keys=100000
args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --ranges) range_counts=$2; shift 2 ;;
    --keys) keys=$2; shift 2 ;;
    -h|--help) sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) args+=("$1"); shift ;;
  esac
done
[[ -x "$bin/iterator_bench" ]] || { echo "$bin/iterator_bench not found: build first" >&2; exit 2; }
dir=""
cleanup() {
  [[ -n "$dir" ]] || return 0
  deploy/local_cluster.sh stop --dir "$dir" >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT
for ranges in $range_counts; do
  dir=$(mktemp -d /tmp/nova-iterator-bench.XXXXXX)
  deploy/local_cluster.sh start --dir "$dir" --ltcs 2 --stocs 3 --logcs 0 --ranges "$ranges" \
    > "$dir/start.out" 2>&1 || { cat "$dir/start.out" >&2; exit 1; }
  # shellcheck disable=SC1091
  source "$dir/cluster.env"
  echo "== $ranges ranges"
  "$bin/iterator_bench" "--uri=nova://$NOVA_ZK/$NOVA_CLUSTER" "--keys=$keys" \
    ${args[@]+"${args[@]}"}
  cleanup
  dir=""
done
