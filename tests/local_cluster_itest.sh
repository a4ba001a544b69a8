#!/usr/bin/env bash
# End to end through ZooKeeper: deploy/local_cluster.sh starts a real cluster (ZooKeeper, a
# coordinator, 3 StoCs, 2 LogCs with log_mode=memory, 2 LTCs); nova_cli and nova_ycsb -db nova find it through ZooKeeper;
# a StoC, a LogC and an LTC are killed -9 (the LTC's acknowledged writes come back from the
# LogCs) and restarted; stop leaves no process behind.
#
#   NOVA_BUILD_DIR=build tests/local_cluster_itest.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${NOVA_BUILD_DIR:-$root/build}
bin=$build/bin
export NOVA_BUILD_DIR=$build
if [[ ! -r /usr/share/java/zookeeper.jar ]]; then
  echo "SKIP: ZooKeeper is not installed (deploy/install_deps.sh installs it)"
  exit 0
fi

dir=$(mktemp -d /tmp/nova-local-cluster-itest.XXXXXX)
cleanup() {
  "$root/deploy/local_cluster.sh" stop --dir "$dir" >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  for f in "$dir"/logs/*.log; do echo "--- $f" >&2; tail -n 15 "$f" >&2; done
  exit 1
}
expect_eq() { [[ "$1" == "$2" ]] || fail "$3: expected '$2', got '$1'"; }

"$root/deploy/local_cluster.sh" start --dir "$dir" --ltcs 2 --stocs 3 --logcs 3 --ranges 4 \
  --log-mode memory --ltc_memtable_size_mb=1 > "$dir/start.out" || fail "start"
line=$(tail -n 1 "$dir/start.out")
[[ "$line" =~ ^NOVA_ZK=127\.0\.0\.1:[0-9]+\ NOVA_CLUSTER=local$ ]] || fail "start printed '$line'"
expect_eq "$(cat "$dir/cluster.env")" "$line" "cluster.env"
source "$dir/cluster.env"
cli=("$bin/nova_cli" "--zk=$NOVA_ZK" "--cluster=$NOVA_CLUSTER" --timeout_ms=10000)

echo "== nova_cli through ZooKeeper"
for k in a m z 0 ~; do "${cli[@]}" put "key-$k" "value-$k" || fail "put key-$k"; done
expect_eq "$("${cli[@]}" get key-m)" "value-m" "get"
expect_eq "$("${cli[@]}" count)" "5" "count"
expect_eq "$("${cli[@]}" scan key-m --limit=2 | tr '\t\n' '=;')" "key-m=value-m;key-z=value-z;" "scan"
"${cli[@]}" --hex --hex_values put 00ff 6869 || fail "hex put"
expect_eq "$("${cli[@]}" --hex get 00ff)" "hi" "hex get"
echo "== binary keys in every range; a scan across range and LTC boundaries"
# 4 ranges split by first byte: 00-3f, 40-7f (ltc-0), 80-bf, c0-ff (ltc-1).
for k in 10 7f00 80 c1ff00; do
  "${cli[@]}" --hex --hex_values put "$k" "$k$k" || fail "put hex key $k"
done
expect_eq "$("${cli[@]}" --hex --hex_values scan 7f --limit=3 | tr '\t\n' '=;')" \
  "7f00=7f007f00;80=8080;c1ff00=c1ff00c1ff00;" "scan across LTCs"
expect_eq "$("${cli[@]}" --hex count 80)" "2" "count in ltc-1's ranges"
set +e
err=$("${cli[@]}" get missing-key 2>&1 >/dev/null); rc=$?
set -e
expect_eq "$rc" "1" "missing key exit code"
expect_eq "$err" "not found" "missing key message"

echo "== status"
status=$("$root/deploy/local_cluster.sh" status --dir "$dir")
echo "$status"
for id in zookeeper coordinator stoc-0 stoc-1 stoc-2 ltc-0 ltc-1; do
  grep -Eq "^$id +[0-9]+ +running" <<< "$status" || fail "status: $id not running"
done
[[ $(grep -Ec '^ltc +[01] .*alive' <<< "$status") -eq 2 ]] || fail "status: LTCs not alive"

echo "== nova_ycsb -db nova (workloada, dataintegrity)"
ycsb=("$bin/nova_ycsb" -db nova -P "$root/benchmarks/ycsb/workloads/workloada"
      -p "nova.zk=$NOVA_ZK" -p "nova.cluster=$NOVA_CLUSTER" -p recordcount=2000
      -p operationcount=4000 -p dataintegrity=true -threads 2)
"${ycsb[@]}" -load > "$dir/load.out" 2>"$dir/load.err" || fail "ycsb load: $(tail -3 "$dir/load.err")"
"${ycsb[@]}" -run > "$dir/run.out" 2>"$dir/run.err" || fail "ycsb run: $(tail -3 "$dir/run.err")"
grep -q '^\[OVERALL\], Throughput(ops/sec), ' "$dir/run.out" || fail "ycsb: no throughput line"
grep -Eq '^\[VERIFY\], Return=OK, [1-9]' "$dir/run.out" || fail "ycsb: no verified reads"
! grep -Eq 'UNEXPECTED_STATE|Return=ERROR|-FAILED\]' "$dir/run.out" "$dir/load.out" ||
  fail "ycsb: failed operations or unexpected values: $(grep -E 'UNEXPECTED|ERROR|FAILED' "$dir/run.out")"
grep -E '^\[(OVERALL|VERIFY)\]' "$dir/run.out"

echo "== nova_ycsb -db nova (sw50: scans across ranges, dataintegrity)"
sw=("$bin/nova_ycsb" -db nova -P "$root/benchmarks/ycsb/workloads/sw50"
    -p "nova.zk=$NOVA_ZK" -p "nova.cluster=$NOVA_CLUSTER" -p recordcount=2000
    -p operationcount=1000 -p dataintegrity=true -p fieldlength=100 -threads 2)
"${sw[@]}" -load > "$dir/swload.out" 2>"$dir/swload.err" || fail "sw50 load: $(tail -3 "$dir/swload.err")"
"${sw[@]}" -run > "$dir/swrun.out" 2>"$dir/swrun.err" || fail "sw50 run: $(tail -3 "$dir/swrun.err")"
grep -Eq '^\[SCAN\], Return=OK, [1-9]' "$dir/swrun.out" || fail "sw50: no scans"
# (YCSB verifies reads only, and sw50 has none: the check is that nothing failed.)
! grep -Eq 'UNEXPECTED_STATE|Return=ERROR|-FAILED\]' "$dir/swrun.out" "$dir/swload.out" ||
  fail "sw50: failed operations or unexpected values"

echo "== a StoC killed -9 and restarted"
"$root/deploy/local_cluster.sh" kill --dir "$dir" stoc-1
"$root/deploy/local_cluster.sh" restart --dir "$dir" stoc-1
"${cli[@]}" put after-stoc-restart yes || fail "put after StoC restart"
expect_eq "$("${cli[@]}" get after-stoc-restart)" "yes" "get after StoC restart"

echo "== an LTC killed -9 and restarted (same id, data and port)"
for k in 90 a0 c0 f0; do
  "${cli[@]}" --hex --hex_values put "${k}aa" "$k" || fail "put hex key ${k}aa into ltc-1"
done
"$root/deploy/local_cluster.sh" kill --dir "$dir" ltc-1
"$root/deploy/local_cluster.sh" restart --dir "$dir" ltc-1
# Its memtables come back from the LogCs (log_mode=memory): nothing acknowledged is lost.
for k in 90 a0 c0 f0; do
  expect_eq "$("${cli[@]}" --hex --hex_values get "${k}aa")" "$k" "hex key ${k}aa after the LTC's crash"
done
expect_eq "$("${cli[@]}" --hex --hex_values get 80)" "8080" "hex key 80 after the LTC's crash"
for k in a m z 0 ~; do "${cli[@]}" put "again-$k" "v2-$k" || fail "put again-$k after LTC restart"; done
expect_eq "$("${cli[@]}" get again-z)" "v2-z" "get after LTC restart"

echo "== a LogC killed -9: its logs are copied to the spare LogC and writes go on"
# Three LogCs, two replicas per log: a write is acknowledged on two of them (docs/durability.md).
"$root/deploy/local_cluster.sh" kill --dir "$dir" logc-0
for k in a m z 0 ~; do "${cli[@]}" put "logc-down-$k" "v-$k" || fail "put logc-down-$k with a LogC down"; done
echo "== a second LogC killed: too few replicas, a write fails with Unavailable"
"$root/deploy/local_cluster.sh" kill --dir "$dir" logc-1
if out=$("$bin/nova_cli" "--zk=$NOVA_ZK" "--cluster=$NOVA_CLUSTER" --timeout_ms=3000 put two-logcs-down x 2>&1); then
  fail "a put was acknowledged with one LogC of three up (log_replicas=2)"
fi
grep -q "min_insync_replicas\|Unavailable\|TimedOut" <<<"$out" || fail "unexpected error: $out"
"$root/deploy/local_cluster.sh" restart --dir "$dir" logc-1
"$root/deploy/local_cluster.sh" restart --dir "$dir" logc-0
"${cli[@]}" put logcs-back yes || fail "put once the LogCs are back"

echo "== ZooKeeper killed: the LTCs keep serving from the last configuration"
"$root/deploy/local_cluster.sh" kill --dir "$dir" zookeeper
ltc_list=$(grep -h '^LISTEN ' "$dir"/logs/ltc-*.log | sed 's/^LISTEN //' | paste -sd, -)
"$bin/nova_cli" "--ltc=$ltc_list" put during-zk-outage yes || fail "put while ZooKeeper is down"
expect_eq "$("$bin/nova_cli" "--ltc=$ltc_list" get key-m)" "value-m" "get while ZooKeeper is down"
"$root/deploy/local_cluster.sh" restart --dir "$dir" zookeeper
expect_eq "$("${cli[@]}" get during-zk-outage)" "yes" "get through ZooKeeper after its restart"

echo "== an LTC started while ZooKeeper is down serves once it is back"
"$root/deploy/local_cluster.sh" kill --dir "$dir" zookeeper
"$root/deploy/local_cluster.sh" kill --dir "$dir" ltc-0
"$root/deploy/local_cluster.sh" restart --dir "$dir" ltc-0
"$root/deploy/local_cluster.sh" restart --dir "$dir" zookeeper
# Printable keys lie in ltc-0's ranges (0 and 1 of 4, split by first byte): served again
# once ltc-0 got the configuration.
"${cli[@]}" put key-late late || fail "put into ltc-0's range after the outage"
expect_eq "$("${cli[@]}" get key-late)" "late" "get from ltc-0's range after the outage"
# What ltc-0 held in memtables when it was killed came back from the logs.
expect_eq "$("${cli[@]}" get logc-down-m)" "v-m" "a write logged while a LogC was down, after ltc-0's crash"
expect_eq "$("${cli[@]}" get again-m)" "v2-m" "a write from before ltc-0's crash"

echo "== an LTC added (rebalance gives it a range), then removed (its range moves back)"
"$root/deploy/local_cluster.sh" add --dir "$dir" ltc > "$dir/add.out" 2>&1 || { cat "$dir/add.out"; fail "add ltc"; }
grep -q "served by LTC 2" "$dir/add.out" || { cat "$dir/add.out"; fail "rebalance gave the new LTC no range"; }
"${cli[@]}" put after-add yes || fail "put after adding an LTC"
"$root/deploy/local_cluster.sh" remove --dir "$dir" ltc-2 > "$dir/remove.out" 2>&1 || { cat "$dir/remove.out"; fail "remove ltc-2"; }
[[ ! -f "$dir/pids/ltc-2.pid" ]] || fail "ltc-2 still has a pid file after remove"
expect_eq "$("${cli[@]}" get after-add)" "yes" "a write made with 3 LTCs, after removing one"
expect_eq "$("${cli[@]}" get key-late)" "late" "an older write, after the moves"

echo "== stop"
pids=$(cat "$dir"/pids/*.pid)
"$root/deploy/local_cluster.sh" stop --dir "$dir"
for p in $pids; do
  if kill -0 "$p" 2>/dev/null; then fail "process $p still runs after stop"; fi
done
echo "PASS"
