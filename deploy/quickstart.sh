#!/usr/bin/env bash
# README command one: installs what is missing, builds, and runs the main job.
#
# The cluster daemons (LTC, LogC, StoC, coordinator) and the YCSB driver arrive in later
# milestones. Until then this runs the foundation's exchange-transport benchmark: two
# processes over loopback, one-sided WRITE/READ throughput and 64 B round-trip latency.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

./deploy/install_deps.sh --quiet
build_dir=${NOVA_BUILD_DIR:-build}
echo "== configure and build ($build_dir)"
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build_dir" -j "$(nproc)" --target transport_bench

echo
echo "NOTE: the local cluster and YCSB workload are not built yet; running the exchange"
echo "      transport benchmark (tcp backend, two processes over loopback) instead."
echo
"$build_dir/bin/transport_bench" "$@"
