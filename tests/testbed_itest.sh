#!/usr/bin/env bash
# Integration test of deploy/testbed/testbed.sh: brings up 3 simulated hosts (0.5 core and
# 256 MiB each, a 5 ms delay when the kernel has sch_netem, else a 100 Mbit/s rate limit) and
# checks
#   1. every host reaches every other over ssh on its 198.18 address, and the control node
#      reaches each through STATE/ssh_config; an ssh session's HOME is the host's own;
#   2. the CPU quota holds: a busy loop of ~2 s in a host gets at most ~0.5 of a core
#      (the host's cpuacct.usage over wall time, with a generous tolerance);
#   3. the netem delay shows in the round trip between two hosts (skipped without
#      sch_netem; the rate limit's qdisc is checked instead);
#   4. the memory limit is set;
#   5. isolation: a host cannot reach a 127.0.0.1 service of the root namespace and has no
#      route out of its /24; the root namespace gains no 198.18 address, route or link;
#   6. `down` leaves no namespace, link, cgroup, process, state directory or registry entry,
#      and a second `down` succeeds; the cgroups it removes are exactly those `up` recorded
#      in STATE/hosts/host-I/cgroups;
#   7. names: `up`/`down --name beds` (the registry's name), a --state-dir in the registry
#      and one containing a space are refused and leave the registry as it was;
#   8. cgroups from a deep caller: a 1-host bed brought up from a cgroup 4 levels below this
#      one's leaves nothing behind after `down`; a stale nova-testbed-NAME-0 cgroup deep in
#      the tree makes `up` of NAME fail with a clear message, and `down` of NAME removes it.
# Needs root and `ip netns`; prints "SKIP: ..." and exits 0 otherwise. Takes ~10 s.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tb=$root/deploy/testbed/testbed.sh
rtt=$root/deploy/testbed/rtt.py

if [[ $(id -u) -ne 0 ]]; then echo "SKIP: testbed_itest needs root"; exit 0; fi
if ! command -v ip >/dev/null || ! ip netns list >/dev/null 2>&1; then
  echo "SKIP: testbed_itest needs 'ip netns'"; exit 0
fi
for tool in sshd ssh nc python3 tc; do
  command -v "$tool" >/dev/null || PATH=$PATH:/usr/sbin
  command -v "$tool" >/dev/null || { echo "SKIP: testbed_itest needs $tool"; exit 0; }
done

name=it$(( $$ % 100000 ))
cores=0.5
mem_mib=256
delay_ms=5
passed=0 failed=0
ok() { echo "ok: $*"; passed=$((passed + 1)); }
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }
check() {  # check DESCRIPTION CMD...: ok when CMD succeeds
  local what=$1; shift
  if "$@"; then ok "$what"; else fail "$what"; fi
}

root_links_before=$(ip -o link | awk -F': ' '{print $2}' | sort)
listener_pid=""
deep_name=${name}d   # the bed of check 8 (8 characters at most)
deep_tops=()         # the top of each cgroup chain check 8 makes
cleanup() {
  [[ -z "$listener_pid" ]] || kill "$listener_pid" 2>/dev/null || true
  "$tb" down --name "$name" >/dev/null 2>&1 || true
  "$tb" down --name "$deep_name" >/dev/null 2>&1 || true
  local top
  for top in "${deep_tops[@]}"; do  # deepest first
    [[ ! -d "$top" ]] || find "$top" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done
}
trap cleanup EXIT

# Does the kernel have sch_netem? Probe in a scratch namespace.
probe=nbprobe$$
has_netem=0
if ip netns add "$probe"; then
  if ip -n "$probe" link add p0 type veth peer name p1 &&
     ip netns exec "$probe" tc qdisc add dev p0 root netem delay 1ms 2>/dev/null; then
    has_netem=1
  fi
  ip netns del "$probe"
fi
if ((has_netem)); then
  shaping=(--delay-ms "$delay_ms")
else
  shaping=(--rate-mbit 100)
  echo "note: this kernel has no sch_netem: the delay check becomes a rate-limit check"
fi

# ---- up -----------------------------------------------------------------------------
timeout 60 "$tb" up --name "$name" --hosts 3 --cpu "$cores" --mem "$mem_mib" "${shaping[@]}"
state=/run/nova-testbed/$name
# shellcheck source=/dev/null
source "$state/bed.env"
mapfile -t addrs < <(cut -f2 "$state/hosts.tsv")
check "hosts.tsv lists 3 hosts in 198.18.0.0/15" \
  test "${#addrs[@]}" -eq 3 -a -z "$(printf '%s\n' "${addrs[@]}" | grep -v '^198\.1[89]\.')"
check "the inventory fragment names every host" \
  test "$(grep -c 'ansible_host=198\.1[89]\.' "$state/inventory.ini")" -eq 3
sshd_pids=$(cat "$state"/hosts/host-*/sshd.pid)
recorded=$(cat "$state"/hosts/host-*/cgroups)
record_ok=1
for i in 0 1 2; do
  [[ -s "$state/hosts/host-$i/cgroups" ]] || { record_ok=0; echo "host-$i has no cgroup record"; }
done
for cg in $recorded; do
  [[ -d "$cg" && "$cg" =~ ^/sys/fs/cgroup/.*/nova-testbed-$name-[0-2]$ ]] ||
    { record_ok=0; echo "recorded cgroup $cg is not a bed cgroup that exists"; }
done
check "every host's cgroups are recorded in STATE/hosts/host-I/cgroups and exist" \
  test "$record_ok" -eq 1

# 1. ssh from the control node, and from every host to every other.
mesh_ok=1
for i in 0 1 2; do
  got=$(timeout 20 ssh -F "$state/ssh_config" "host-$i" 'hostname -I' | xargs) || got=""
  [[ "$got" == "${addrs[$i]}" ]] || { mesh_ok=0; echo "control -> host-$i saw '$got'"; }
  for j in 0 1 2; do
    ((i != j)) || continue
    got=$(timeout 20 ssh -F "$state/ssh_config" "host-$i" \
      "ssh -F $state/ssh_config_direct ${addrs[$j]} 'hostname -I'" | xargs) || got=""
    [[ "$got" == "${addrs[$j]}" ]] || { mesh_ok=0; echo "host-$i -> host-$j saw '$got'"; }
  done
done
check "ssh: control -> every host and every host -> every other host" test "$mesh_ok" -eq 1
# An ssh session's HOME is its host's own (no dotfile of the control machine's root runs).
home_ok=1
for i in 0 1 2; do
  got=$(timeout 20 ssh -F "$state/ssh_config" "host-$i" 'echo "$HOME"') || got=""
  [[ "$got" == "$state/hosts/host-$i/home" && -d "$got" ]] ||
    { home_ok=0; echo "host-$i: ssh sessions' HOME is '$got'"; }
done
check "ssh: each host's sessions have its own HOME" test "$home_ok" -eq 1

# 2. The CPU quota. cpuacct.usage counts the nanoseconds of CPU the host's processes used.
acct=$(grep cpuacct "$state/hosts/host-0/cgroups" | head -1)/cpuacct.usage
before_ns=$(cat "$acct") t0=$(date +%s%N)
"$tb" exec --name "$name" host-0 timeout 2 sh -c 'while :; do :; done' || true
after_ns=$(cat "$acct") t1=$(date +%s%N)
share=$(awk -v u=$((after_ns - before_ns)) -v w=$((t1 - t0)) 'BEGIN { printf "%.2f", u / w }')
# Upper bound: the quota plus 30% (scheduling granularity, the exec's own start-up); lower
# bound: the loop ran at all (this machine's cores are shared with other work).
check "CPU quota: a busy loop got $share of a core (quota $cores)" \
  awk -v s="$share" -v c="$cores" 'BEGIN { exit !(s <= c * 1.3 && s >= 0.05) }'
quota=$(cat "$(grep '/cpu/' "$state/hosts/host-0/cgroups" | head -1)/cpu.cfs_quota_us")
check "cpu.cfs_quota_us is 50000 (period 100000)" test "$quota" -eq 50000

# 3. The delay (or the rate limit).
if ((has_netem)); then
  serve_log=$(mktemp)
  "$tb" exec --name "$name" host-1 timeout 20 python3 "$rtt" serve "${addrs[1]}" 7000 \
    > "$serve_log" &
  line=$("$tb" exec --name "$name" host-0 timeout 20 python3 "$rtt" ping "${addrs[1]}" 7000 50)
  wait || true
  rm -f "$serve_log"
  p50=$(sed -n 's/.* p50=\([0-9]*\).*/\1/p' <<< "$line")
  # Both hosts delay what they send: a round trip gains 2 * delay.
  check "netem: round trip host-0 <-> host-1 p50 ${p50} us >= 2 x ${delay_ms} ms" \
    test "${p50:-0}" -ge $((2 * delay_ms * 1000 * 9 / 10))
else
  check "rate limit: host-0's eth0 has a tbf qdisc at 100Mbit" \
    bash -c "ip netns exec nb-$name-0 tc qdisc show dev eth0 | grep -q 'tbf.*rate 100Mbit'"
fi

# 4. The memory limit.
mlimit=$(cat "$(grep '/memory/' "$state/hosts/host-0/cgroups" | head -1)/memory.limit_in_bytes")
check "memory.limit_in_bytes is $mem_mib MiB" test "$mlimit" -eq $((mem_mib * 1048576))

# 5. Isolation.
python3 -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
print(s.getsockname()[1], flush=True); time.sleep(30)' > /tmp/testbed_itest.$$ &
listener_pid=$!
deadline=$((SECONDS + 10))
until [[ -s /tmp/testbed_itest.$$ ]] || ((SECONDS > deadline)); do sleep 0.05; done
lport=$(cat /tmp/testbed_itest.$$); rm -f /tmp/testbed_itest.$$
check "the root namespace's listener on 127.0.0.1:$lport answers there" nc -z -w 2 127.0.0.1 "$lport"
check "a host cannot reach 127.0.0.1:$lport of the root namespace" \
  bash -c "! '$tb' exec --name '$name' host-0 nc -z -w 2 127.0.0.1 $lport"
kill "$listener_pid" 2>/dev/null || true; listener_pid=""
# `ip route get` asks the routing table only: no packet is sent.
check "a host has no route out of its /24" \
  bash -c "! ip -n nb-$name-0 route get 192.0.2.1 >/dev/null 2>&1 && [[ -z \$(ip -n nb-$name-0 route show default) ]]"
check "the root namespace has no 198.18.0.0/15 address or route" \
  bash -c "[[ -z \$(ip -4 -o addr | grep ' 198\.1[89]\.') && -z \$(ip route | grep '^198\.1[89]\.') ]]"
check "the root namespace has no new link" \
  test "$(ip -o link | awk -F': ' '{print $2}' | sort)" == "$root_links_before"

# 7. Names (while the bed is up, so the registry holds its entry).
registry_before=$(ls /run/nova-testbed/beds)
rc=0; "$tb" up --name beds --hosts 1 >/dev/null 2>&1 || rc=$?
check "up --name beds (the registry's name) is refused as a usage error" test "$rc" -eq 2
rc=0; "$tb" down --name beds >/dev/null 2>&1 || rc=$?
check "down --name beds is refused as a usage error" test "$rc" -eq 2
rc=0; "$tb" up --name "${name}s" --hosts 1 --state-dir /run/nova-testbed/beds/x \
  >/dev/null 2>&1 || rc=$?
rmdir /run/nova-testbed/beds/x 2>/dev/null || true
check "up with a --state-dir inside the registry is refused" test "$rc" -ne 0
ws_dir=$(mktemp -u "/tmp/nova testbed.XXXXXX")  # sshd_config could not name files there
rc=0; out=$("$tb" up --name "${name}s" --hosts 1 --state-dir "$ws_dir" 2>&1) || rc=$?
check "up with a --state-dir containing a space is refused, and says why, making nothing" \
  test "$rc" -ne 0 -a ! -e "$ws_dir" -a "${out#*contains whitespace}" != "$out"
check "the registry is as before (entry of '$name' still there)" \
  test "$(ls /run/nova-testbed/beds)" == "$registry_before" -a -e "/run/nova-testbed/beds/$name"

# 6. down.
"$tb" down --name "$name" >/dev/null
check "down: no namespace left" bash -c "[[ -z \$(ip netns list | grep 'nb-$name-') ]]"
check "down: no cgroup left" \
  bash -c "[[ -z \$(find /sys/fs/cgroup -type d -name 'nova-testbed-$name-*') ]]"
left=""
for cg in $recorded; do [[ ! -e "$cg" ]] || left+=" $cg"; done
check "down: every recorded cgroup is gone (left:${left:- none})" test -z "$left"
alive=""
for p in $sshd_pids; do  # a zombie (state Z) waiting for its reaper counts as gone
  state_of=$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null || true)
  [[ -z "$state_of" || "$state_of" == Z ]] || alive+=" $p"
done
check "down: no sshd left (was: ${sshd_pids//$'\n'/ })" test -z "$alive"
check "down: no state directory or registry entry left" \
  test ! -e "$state" -a ! -e "/run/nova-testbed/beds/$name"
check "down: the root namespace's links are as before" \
  test "$(ip -o link | awk -F': ' '{print $2}' | sort)" == "$root_links_before"
check "a second down succeeds" bash -c "'$tb' down --name '$name' >/dev/null"

# 8. Cgroups from a deep caller. In the cpu, cpuacct and memory hierarchies, a chain
# <this process's cgroup>/tbit$$/a/b/c puts the bed's cgroups at depth >= 5.
deep_dirs=()
for c in cpu cpuacct memory; do
  r=$(readlink -f "/sys/fs/cgroup/$c")
  own=$(awk -F: -v c="$c" '{ n = split($2, a, ","); for (k = 1; k <= n; k++)
    if (a[k] == c) { print $3; exit } }' /proc/self/cgroup)
  top=${r}${own%/}/tbit$$
  [[ " ${deep_tops[*]} " == *" $top "* ]] && continue  # co-mounted with the previous one
  deep_tops+=("$top")
  mkdir -p "$top/a/b/c"
  deep_dirs+=("$top/a/b/c")
done
(
  for d in "${deep_dirs[@]}"; do echo "$BASHPID" > "$d/cgroup.procs"; done
  exec timeout 60 "$tb" up --name "$deep_name" --hosts 1 --cpu 0 --mem 0 >/dev/null
)
deep_recorded=$(cat "/run/nova-testbed/$deep_name/hosts/host-0/cgroups")
under=1
for cg in $deep_recorded; do
  [[ "$cg" == */tbit$$/a/b/c/nova-testbed-$deep_name-0 && -d "$cg" ]] || under=0
done
check "a bed brought up from a deep cgroup nests its cgroups there and records them" \
  test "$under" -eq 1 -a -n "$deep_recorded"
"$tb" down --name "$deep_name" >/dev/null
check "down of the deep bed leaves no cgroup" \
  bash -c "[[ -z \$(find /sys/fs/cgroup -type d -name 'nova-testbed-$deep_name-*') ]]"
# A stale leftover (as an older testbed.sh left behind): up refuses, down removes it.
mkdir -p "${deep_dirs[0]}/nova-testbed-$deep_name-0"
out=$("$tb" up --name "$deep_name" --hosts 1 2>&1) && rc=0 || rc=$?
refused_clearly() { [[ $rc -eq 1 && "$out" == *"left over"*"down --name $deep_name"* ]]; }
check "up of a name with a stale cgroup is refused with a clear message" refused_clearly
"$tb" down --name "$deep_name" >/dev/null
check "down removes the stale cgroup (found at depth >= 5 without a record)" \
  test ! -e "${deep_dirs[0]}/nova-testbed-$deep_name-0"
for top in "${deep_tops[@]}"; do find "$top" -depth -type d -exec rmdir {} +; done
check "the cgroup chains of check 8 are removed" \
  bash -c "[[ -z \$(find /sys/fs/cgroup -type d -name 'tbit$$') ]]"

echo "testbed_itest: $passed passed, $failed failed"
((failed == 0))
