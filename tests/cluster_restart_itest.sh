#!/usr/bin/env bash
# Whole clusters stopped and restarted (issue 17), end to end through deploy/local_cluster.sh
# with real ZooKeeper and daemons (2 LTCs, 3 StoCs, 2 LogCs, 4 ranges, 1 MiB memtables):
#  1. `--help`, `-h` and `help` print the usage (every command and option) and exit 0 with
#     no --dir; an unknown command exits 2. A start whose StoC exits fails at once (not
#     after the start timeout) and leaves no process running.
#  2. For each log mode (none, memory, disk, memory+disk): acked_writer writes 1,200
#     acknowledged puts over 1,000 keys; `stop` exits 0, no LTC logs a failed closing flush
#     and every range logs its clean close; `start --dir` alone resumes the same cluster
#     (the same NOVA_ZK line, every component on the port it had) and every acknowledged
#     write reads back. In mode none, start also refuses an option that contradicts the
#     directory, and a pinned port taken by another process, naming it.
#  3. For disk and memory+disk: acked_writer writes under load; every process of the
#     cluster and the writer are killed -9 at once (a power loss); one `start --dir`
#     resumes the cluster and every acknowledged write reads back, none stale or corrupted.
#     A clean stop follows.
#
#   NOVA_BUILD_DIR=build tests/cluster_restart_itest.sh [MODE ...]   # default: all four
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${NOVA_BUILD_DIR:-$root/build}
bin=$build/bin
export NOVA_BUILD_DIR=$build
if [[ ! -r /usr/share/java/zookeeper.jar ]]; then
  echo "SKIP: ZooKeeper is not installed (deploy/install_deps.sh installs it)"
  exit 0
fi
[[ -x "$bin/acked_writer" ]] || { echo "FAIL: $bin/acked_writer not built" >&2; exit 1; }
modes=("$@")
((${#modes[@]})) || modes=(none memory disk memory+disk)
cluster_sh=$root/deploy/local_cluster.sh
# Acknowledged writes before the power loss: enough that flushes and the logs of several
# memtables are involved (1 MiB memtables, values of 100 to 1,099 bytes).
load_writes=${NOVA_RESTART_LOAD_WRITES:-3000}

dir="" writer_pid="" failed=0
cleanup() {
  [[ -z "$writer_pid" ]] || kill -9 "$writer_pid" 2>/dev/null || true
  [[ -z "${squatter_pid:-}" ]] || kill "$squatter_pid" 2>/dev/null || true
  if [[ -n "$dir" ]]; then
    "$cluster_sh" stop --dir "$dir" >/dev/null 2>&1 || true
    if ((failed)) && [[ -n "${NOVA_KEEP_FAILED:-}" ]]; then echo "kept $dir" >&2; else rm -rf "$dir"; fi
  fi
}
trap cleanup EXIT
fail() {
  failed=1
  echo "FAIL: $*" >&2
  if [[ -n "$dir" ]]; then
    for f in "$dir"/logs/*.log "$dir"/*.out; do
      [[ -f "$f" ]] || continue
      echo "--- $f" >&2; tail -n 15 "$f" >&2
    done
  fi
  exit 1
}
phase_start=$SECONDS
phase() {
  echo "   ($((SECONDS - phase_start)) s)"
  phase_start=$SECONDS
  echo "== $*"
}
# Polls a command every 0.2 s until it succeeds or `secs` pass.
wait_for() {
  local secs=$1 what=$2 deadline
  shift 2
  deadline=$((SECONDS + secs))
  until "$@"; do
    ((SECONDS < deadline)) || fail "timed out after ${secs}s waiting for $what"
    sleep 0.2
  done
}
# Every component's LISTEN address, one "id address" a line.
listen_addresses() {
  local f id
  for f in "$dir"/logs/*.log; do
    id=$(basename "$f" .log)
    [[ -f "$dir/cmd/$id" ]] || continue
    echo "$id $(grep -m1 '^LISTEN ' "$f" | sed 's/^LISTEN //')"
  done
}
writer() { "$bin/acked_writer" "--zk=$NOVA_ZK" "--cluster=$NOVA_CLUSTER" "$@"; }
verify() {  # FILE WHEN
  local out
  out=$(writer verify "--in=$1" 2>&1) || fail "$2: $out"
  echo "   $2: $out"
}
# A clean stop: exit 0, no failed closing flush, every range's clean close in the LTC logs.
clean_stop() {
  "$cluster_sh" stop --dir "$dir" > "$dir/stop.out" 2>&1 || fail "stop was not clean: $(cat "$dir/stop.out")"
  ! grep -h 'flush failed' "$dir"/logs/ltc-*.log || fail "an LTC logged a failed flush"
  local closed
  closed=$(grep -h 'closed cleanly: every memtable flushed' "$dir"/logs/ltc-*.log | wc -l)
  [[ "$closed" -ge 4 ]] || fail "$closed of 4 ranges logged their clean close"
  [[ -z "$(ls "$dir/pids" 2>/dev/null)" ]] || fail "pid files left after stop: $(ls "$dir/pids")"
}
resume() {  # WHEN: start --dir alone; the same NOVA_ZK line and addresses as before
  local before after
  before=$(listen_addresses)
  "$cluster_sh" start --dir "$dir" > "$dir/resume.out" 2> "$dir/resume.err" ||
    fail "$1: start --dir did not resume the cluster: $(tail -5 "$dir/resume.err")"
  [[ "$(tail -n1 "$dir/resume.out")" == "NOVA_ZK=$NOVA_ZK NOVA_CLUSTER=$NOVA_CLUSTER" ]] ||
    fail "$1: resumed with '$(tail -n1 "$dir/resume.out")', not NOVA_ZK=$NOVA_ZK"
  after=$(listen_addresses)
  [[ "$before" == "$after" ]] || fail "$1: addresses changed: before [$before] after [$after]"
}

echo "== local_cluster.sh --help"
for h in --help -h help; do
  out=$("$cluster_sh" "$h") || fail "local_cluster.sh $h exited $?"
  for word in start stop status kill restart add remove --dir --ltcs --stocs --logcs --ranges \
      --log-mode --log-replicas --cluster --flag=value NOVA_BUILD_DIR NOVA_LTC_STOP_TIMEOUT; do
    grep -q -- "$word" <<< "$out" || fail "local_cluster.sh $h does not explain $word"
  done
done
"$cluster_sh" stop --help | grep -q '^Usage: ' || fail "stop --help prints no usage"
set +e
"$cluster_sh" frobnicate --dir /nonexistent > /dev/null 2>&1; rc=$?
set -e
[[ $rc == 2 ]] || fail "an unknown command exited $rc, not 2"

echo "== a component that fails during start: start fails at once and leaves nothing running"
dir=$(mktemp -d /tmp/nova-cluster-restart-itest.XXXXXX)
t0=$SECONDS
set +e
# --xchg_threads=0 is refused by the StoCs and LogCs: they exit during start.
"$cluster_sh" start --dir "$dir" --ltcs 1 --stocs 1 --xchg_threads=0 > "$dir/bad.out" 2>&1; rc=$?
set -e
[[ $rc != 0 ]] || fail "start with a StoC that cannot start succeeded"
grep -q "stoc-0" "$dir/bad.out" || fail "the failed start does not name stoc-0: $(tail -3 "$dir/bad.out")"
((SECONDS - t0 < 60)) || fail "the failed start took $((SECONDS - t0)) s: it went on after the StoC died"
for f in "$dir"/pids/*.pid; do
  [[ -f "$f" ]] || continue
  p=$(cat "$f")
  ! kill -0 "$p" 2>/dev/null || fail "$(basename "$f" .pid) (pid $p) still runs after the failed start"
done
! grep -q "^--listen_port=\$" "$dir"/cmd/* 2>/dev/null || fail "a command line was pinned to an empty port"
echo "   failed in $((SECONDS - t0)) s, nothing left running"
rm -rf "$dir"
dir=""

for mode in "${modes[@]}"; do
  phase "$mode: acknowledged writes, a clean stop, start --dir resumes, every write reads back"
  dir=$(mktemp -d /tmp/nova-cluster-restart-itest.XXXXXX)
  logc_flags=()
  [[ "$mode" == none ]] || logc_flags=(--logcs 2 --log-mode "$mode")
  "$cluster_sh" start --dir "$dir" --ltcs 2 --stocs 3 --ranges 4 "${logc_flags[@]+"${logc_flags[@]}"}" \
    --ltc_memtable_size_mb=1 > "$dir/start.out" 2> "$dir/start.err" ||
    fail "start ($mode): $(tail -5 "$dir/start.err")"
  source "$dir/cluster.env"
  writer write "--out=$dir/clean.acked" --writes_per_thread=300 > "$dir/write.out" 2>&1 ||
    fail "writer: $(cat "$dir/write.out")"
  grep -q '^acknowledged 1200 writes' "$dir/write.out" || fail "writer: $(cat "$dir/write.out")"
  clean_stop
  if [[ "$mode" == none ]]; then
    set +e
    out=$("$cluster_sh" start --dir "$dir" --ltcs 3 2>&1); rc=$?
    set -e
    [[ $rc == 1 && "$out" == *"--ltcs 3 (it was created with 2)"* ]] ||
      fail "start --ltcs 3 on a directory of 2 LTCs: exit $rc: $out"
    port=$(sed -n 's/^--listen_port=//p' "$dir/cmd/stoc-0")
    # (SO_REUSEADDR: the StoC's connections may linger in TIME_WAIT on that port.)
    python3 -c 'import socket,sys,time; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1",int(sys.argv[1]))); s.listen(); time.sleep(120)' \
      "$port" & squatter_pid=$!
    wait_for 10 "a process listening on port $port" bash -c "ss -Hltn 'sport = :$port' | grep -q ."
    set +e
    out=$("$cluster_sh" start --dir "$dir" 2>&1); rc=$?
    set -e
    kill "$squatter_pid"; wait "$squatter_pid" 2>/dev/null || true; squatter_pid=""
    [[ $rc == 1 && "$out" == *"port $port of stoc-0"*"taken"* ]] ||
      fail "start with stoc-0's port taken: exit $rc: $out"
    # Nothing started: the refused starts left no process behind.
    [[ -z "$(ls "$dir/pids" 2>/dev/null)" ]] || fail "a refused start left pid files"
  fi
  resume "after a clean stop ($mode)"
  verify "$dir/clean.acked" "after a clean stop and start ($mode)"

  if [[ "$mode" == disk || "$mode" == memory+disk ]]; then
    phase "$mode: every process killed -9 at once under load, one start --dir, every acknowledged write back"
    writer write "--out=$dir/load.acked" --seconds=120 > "$dir/load.out" 2>&1 &
    writer_pid=$!
    acked_lines() { [[ -f "$dir/load.acked" ]] && (($(wc -l < "$dir/load.acked") >= load_writes)); }
    wait_for 90 "$load_writes acknowledged writes under load" acked_lines
    # A power loss: the cluster and its client at once.
    pids=$(cat "$dir"/pids/*.pid)
    # shellcheck disable=SC2086
    kill -9 $pids "$writer_pid"
    wait "$writer_pid" 2>/dev/null || true
    writer_pid=""
    gone() { local p; for p in $pids; do ! kill -0 "$p" 2>/dev/null || return 1; done; }
    wait_for 10 "every process to die" gone
    echo "   killed with $(wc -l < "$dir/load.acked") writes acknowledged"
    resume "after a power loss ($mode)"
    verify "$dir/load.acked" "after a power loss ($mode)"
    phase "$mode: a clean stop after the power loss"
    clean_stop
  else
    "$cluster_sh" stop --dir "$dir" > /dev/null 2>&1 || fail "second stop ($mode)"
  fi
  rm -rf "$dir"
  dir=""
done
phase "done"
echo "PASS"
