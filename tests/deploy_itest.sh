#!/usr/bin/env bash
# The multi-host deployment end to end (issue 17): deploy/ansible's playbooks on a test bed
# of 5 simulated hosts (deploy/testbed/testbed.sh), from the sample inventory
# deploy/ansible/inventories/testbed (a ZooKeeper ensemble of 3 on 3 hosts, 2 coordinators,
# 2 LTCs, 2 LogCs with log_mode=memory and 2 replicas, 3 StoCs, a client host):
#   1. the units site.yml would install pass `systemd-analyze verify`;
#   2. site.yml deploys the cluster with client authentication and ZooKeeper ACLs on; it
#      serves (nova_cli count from the client host), and a client without the secret is refused;
#   3. ycsb.yml: workloada with dataintegrity=true from the client host (20,000 records,
#      15 s): no failed operation, no unexpected read;
#   4. kill -9 of every process of host-2 (ZooKeeper 3, LTC 1, StoC 2; not its sshd): the
#      cluster keeps serving: nova_cli put/get within a deadline, then a 5 s ycsb.yml run
#      with dataintegrity=true on the loaded records, 0 failures;
#   5. site.yml restarts what was killed (changes on host-2 only), then a second site.yml
#      reports changed=0 for every host;
#   6. stop.yml stops every daemon (coordinators first, then the LTCs: they flush); none is
#      left in any host's namespace, and no LTC logged a failed closing flush;
#   7. site.yml starts the same cluster again (log_mode=memory, so only the clean close
#      brings it back): the same number of keys, the write made while host-2 was down, and
#      a 5 s ycsb.yml run with dataintegrity=true on the loaded records; stop.yml again.
# The test bed is torn down on exit. Prints the time of each phase.
#
#   NOVA_BUILD_DIR=build tests/deploy_itest.sh      (as root; SKIP otherwise)
#
# Needs root, ansible-playbook, ZooKeeper (Debian's package) and the test bed; prints
# "SKIP: ..." and exits 0 without them. Keep DEPLOY_ITEST_KEEP=1 to leave the work
# directory (logs, rendered files) behind.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${NOVA_BUILD_DIR:-$root/build}" && pwd)  # absolute: the units and playbooks use it
export NOVA_BUILD_DIR=$build
tb=$root/deploy/testbed/testbed.sh
ans=$root/deploy/ansible
export ANSIBLE_CONFIG=$ans/ansible.cfg
export ANSIBLE_NOCOLOR=1 ANSIBLE_FORCE_COLOR=0

if [[ $(id -u) -ne 0 ]]; then echo "SKIP: deploy_itest needs root (the test bed)"; exit 0; fi
command -v ansible-playbook >/dev/null ||
  { echo "SKIP: ansible-playbook not installed (deploy/install_deps.sh)"; exit 0; }
[[ -x $tb ]] || { echo "SKIP: no test bed ($tb)"; exit 0; }
[[ -r /usr/share/java/zookeeper.jar ]] ||
  { echo "SKIP: ZooKeeper is not installed (deploy/install_deps.sh)"; exit 0; }
ip netns list >/dev/null 2>&1 || { echo "SKIP: deploy_itest needs 'ip netns'"; exit 0; }
binaries=(nova_stoc nova_logc nova_ltc nova_coordinator nova_admin nova_cli nova_ycsb)
for b in "${binaries[@]}"; do
  [[ -x $build/bin/$b ]] || { echo "FAIL: $build/bin/$b not built"; exit 1; }
done

name=dit$(( $$ % 10000 ))
work=$(mktemp -d /var/tmp/nova-deploy-itest.XXXXXX)
# The playbooks deploy copies of the binaries without their debug information (what a package
# ships): RelWithDebInfo's weigh 220 MB for the five hosts; copying them took ~20 s of the
# first site.yml run, checksumming them ~15 s of every later one.
mkdir -p "$work/build/bin"
for b in "${binaries[@]}"; do
  objcopy --strip-debug "$build/bin/$b" "$work/build/bin/$b" ||
    { echo "FAIL: objcopy --strip-debug $build/bin/$b"; rm -rf "$work"; exit 1; }
done
build=$work/build
export NOVA_BUILD_DIR=$build
# The bed's default state directory: sshd's StrictModes refuses keys below a world-writable
# directory such as /var/tmp.
state=/run/nova-testbed/$name
inv=(-i "$state/inventory.ini" -i "$ans/inventories/testbed/hosts.yml"
     -e "nova_testbed_root=$work/hosts")
cleanup() {
  local rc=$?
  "$tb" down --name "$name" >/dev/null 2>&1 || echo "deploy_itest: test bed $name: down failed" >&2
  if ((rc != 0)) || [[ -n "${DEPLOY_ITEST_KEEP:-}" ]]; then
    echo "deploy_itest: work directory kept: $work" >&2
  else
    rm -rf "$work"
  fi
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  local f
  for f in "$work"/hosts/host-*/var/log/nova/*.log; do
    [[ -f $f ]] || continue
    echo "--- ${f#$work/hosts/}" >&2
    tail -n 8 "$f" >&2
  done
  exit 1
}

t_start=$SECONDS t_phase=$SECONDS
phase() {
  local now=$SECONDS
  if [[ -n "${phase_name:-}" ]]; then
    printf 'TIME %-34s %4d s\n' "$phase_name" $((now - t_phase))
  fi
  phase_name=$1 t_phase=$now
  [[ -z "$1" ]] || echo "== $1"
}

# play NAME PLAYBOOK [ARGS...]: runs a playbook, its output in $work/NAME.log.
play() {
  local log=$work/$1.log; shift
  ansible-playbook "${inv[@]}" "$@" > "$log" 2>&1 ||
    { tail -n 40 "$log" >&2; fail "ansible-playbook $* (log: $log)"; }
}

# The PLAY RECAP's changed= count of every host of log $1, one "host N" a line.
changed_per_host() {
  sed -n '/^PLAY RECAP/,$p' "$1" | sed -n 's/^\([a-z0-9-]*\) *:.* changed=\([0-9]*\) .*/\1 \2/p'
}

host_dir() { echo "$work/hosts/$1"; }
zk() {
  local h out=""
  for h in host-0 host-1 host-2; do out+="${out:+,}$(addr "$h"):2181"; done
  echo "$out"
}
addr() { awk -v h="$1" '$1 == h { print $2 }' "$state/hosts.tsv"; }
cli() {  # nova_cli on the client host, with the client secret site.yml installed there
  anonymous_cli "--client_secret_file=$(host_dir host-4)/etc/nova/client_secret" "$@"
}
anonymous_cli() {  # the same without the client secret
  "$tb" exec --name "$name" host-4 "$(host_dir host-4)/opt/nova/bin/nova_cli" \
    "--zk=$(zk)" --cluster=testbed --timeout_ms=5000 "$@"
}

# ---- 1. the systemd units ------------------------------------------------------------

phase "systemd units (systemd-analyze verify)"
if command -v systemd-analyze >/dev/null; then
  units=$work/units
  ansible-playbook -i "$ans/inventories/testbed/hosts.yml" "$ans/render_units.yml" \
    -e "nova_units_dir=$units" -e "nova_testbed_root=$work/hosts" > "$work/units.log" 2>&1 ||
    { cat "$work/units.log" >&2; fail "render_units.yml"; }
  n=$(ls "$units"/*.service 2>/dev/null | wc -l)
  ((n == 5)) || fail "render_units.yml rendered $n units, expected 5"
  # verify checks each unit's syntax and that ExecStart's program exists; the rendered
  # units point into $units/root.
  SYSTEMD_LOG_LEVEL=warning systemd-analyze verify "$units"/*.service > "$work/verify.log" 2>&1 ||
    { cat "$work/verify.log" >&2; fail "systemd-analyze verify"; }
  if grep -v -e 'Failed to connect to bus' -e '^$' "$work/verify.log" | grep -q .; then
    cat "$work/verify.log" >&2
    fail "systemd-analyze verify printed warnings"
  fi
else
  echo "(systemd-analyze not installed: skipped)"
fi

# ---- 2. deploy -------------------------------------------------------------------------

phase "test bed up (5 hosts)"
"$tb" up --name "$name" --hosts 5 --cpu 1 --mem 1536 > "$work/bed.log" 2>&1 ||
  { cat "$work/bed.log" >&2; fail "testbed.sh up"; }

phase "site.yml (deploy)"
play site1 "$ans/site.yml"
count=$(cli count) || fail "nova_cli count after site.yml"
[[ "$count" == 0 ]] || fail "a new cluster counts $count keys"
# Client authentication is on: a client without the secret is refused, and told why.
if anonymous_cli count > "$work/anonymous.out" 2>&1; then
  fail "nova_cli without the client secret was served"
fi
grep -q -- "client_secret_file" "$work/anonymous.out" ||
  { cat "$work/anonymous.out" >&2; fail "the refusal does not name --client_secret_file"; }

# ---- 3. YCSB ---------------------------------------------------------------------------

ycsb_props='{"nova_ycsb_properties": {"dataintegrity": "true"}}'
phase "ycsb.yml (workloada, dataintegrity)"
play ycsb1 "$ans/ycsb.yml" -e "$ycsb_props" -e nova_ycsb_results_dir="$work/ycsb1"
grep -q 'VERIFY OK' "$work/ycsb1/summary.txt" || fail "no verified reads in $work/ycsb1/summary.txt"
cat "$work/ycsb1/summary.txt"
[[ -s "$work/ycsb1/timeseries.csv" ]] || fail "no merged time series"

# ---- 4. a host dies --------------------------------------------------------------------

phase "kill -9 every process of host-2"
ns=$(awk '$1 == "host-2" { print $3 }' "$state/hosts.tsv")
victims=()
for p in $(ip netns pids "$ns"); do
  [[ "$(cat "/proc/$p/comm" 2>/dev/null)" == sshd ]] || victims+=("$p")
done
((${#victims[@]} >= 6)) || fail "host-2 runs ${#victims[@]} processes, expected >= 6 (3 daemons, 3 supervisors)"
kill -KILL "${victims[@]}"
for p in "${victims[@]}"; do
  while kill -0 "$p" 2>/dev/null; do sleep 0.05; done
done
echo "killed ${#victims[@]} processes"

phase "serving without host-2"
deadline=$((SECONDS + 60))
until cli put after-kill yes >/dev/null 2>&1 && [[ "$(cli get after-kill 2>/dev/null)" == yes ]]; do
  ((SECONDS < deadline)) || fail "no put/get within 60 s of host-2's death"
  sleep 0.5
done
echo "put/get served $((SECONDS - t_phase)) s after the kill"
until cli count >/dev/null 2>&1; do
  ((SECONDS < deadline)) || fail "not every range served within 60 s of host-2's death"
  sleep 0.5
done
echo "every range served $((SECONDS - t_phase)) s after the kill"
play ycsb2 "$ans/ycsb.yml" -e "$ycsb_props" -e nova_ycsb_load=false -e nova_ycsb_seconds=5 \
  -e nova_ycsb_results_dir="$work/ycsb2"
cat "$work/ycsb2/summary.txt"

# ---- 5. idempotence --------------------------------------------------------------------

phase "site.yml (restarts host-2)"
play site2 "$ans/site.yml"
changed_per_host "$work/site2.log"
while read -r h n; do
  if [[ $h == host-2 ]]; then ((n > 0)) || fail "site.yml changed nothing on host-2"
  else ((n == 0)) || fail "site.yml changed $n things on $h (only host-2 was down)"; fi
done < <(changed_per_host "$work/site2.log")

phase "site.yml again (changed=0)"
play site3 "$ans/site.yml"
hosts_seen=0
while read -r h n; do
  hosts_seen=$((hosts_seen + 1))
  ((n == 0)) || { grep -B3 '^changed:' "$work/site3.log" >&2; fail "re-run of site.yml: changed=$n on $h"; }
done < <(changed_per_host "$work/site3.log")
((hosts_seen == 5)) || fail "the recap lists $hosts_seen hosts, expected 5"
[[ "$(cli get after-kill)" == yes ]] || fail "the write made while host-2 was down is gone"

# ---- 6. stop ---------------------------------------------------------------------------

phase "stop.yml"
keys_before=$(cli count) || fail "nova_cli count before stop.yml"
play stop "$ans/stop.yml"
for i in 0 1 2 3 4; do
  ns=$(awk -v h="host-$i" '$1 == h { print $3 }' "$state/hosts.tsv")
  for p in $(ip netns pids "$ns"); do
    c=$(cat "/proc/$p/comm" 2>/dev/null || true)
    [[ -z "$c" || "$c" == sshd ]] || fail "host-$i still runs $c (pid $p) after stop.yml"
  done
done

if grep -rs --include='*.log' -l 'closing a range: flush failed' "$work/hosts" >&2; then
  fail "an LTC's closing flush failed during stop.yml (log_mode=memory: those writes would be lost)"
fi

# ---- 7. a clean stop loses nothing -------------------------------------------------------

phase "site.yml after stop.yml (the same cluster, every key back)"
play site4 "$ans/site.yml"
keys_after=$(cli count) || fail "nova_cli count after the restart"
[[ "$keys_after" == "$keys_before" ]] || fail "$keys_before keys before stop.yml, $keys_after after site.yml"
[[ "$(cli get after-kill)" == yes ]] || fail "the write made while host-2 was down is gone after the restart"
play ycsb3 "$ans/ycsb.yml" -e "$ycsb_props" -e nova_ycsb_load=false -e nova_ycsb_seconds=5 \
  -e nova_ycsb_results_dir="$work/ycsb3"
cat "$work/ycsb3/summary.txt"
echo "$keys_after keys, the same as before stop.yml"
play stop2 "$ans/stop.yml"

phase "test bed down"
"$tb" down --name "$name" > /dev/null 2>&1 || fail "testbed.sh down"
phase ""
echo "TIME total $((SECONDS - t_start)) s"
echo "PASS: deploy_itest"
