#!/usr/bin/env bash
# A test bed of simulated hosts on this machine: one network namespace per host, joined by a
# Linux bridge, addressed from the benchmarking range 198.18.0.0/15 (RFC 2544), each host with
# its own sshd, a CPU quota and a memory limit (cgroup v1), and optional tc shaping.
#
#   deploy/testbed/testbed.sh up     --name NAME --hosts N [--cpu CORES] [--mem MIB]
#                                    [--delay-ms D] [--rate-mbit R] [--state-dir DIR]
#   deploy/testbed/testbed.sh down   --name NAME
#   deploy/testbed/testbed.sh status --name NAME
#   deploy/testbed/testbed.sh exec   --name NAME HOST CMD [ARG...]
#   deploy/testbed/testbed.sh shape  --name NAME [--delay-ms D] [--rate-mbit R]
#   deploy/testbed/testbed.sh limit  --name NAME HOST [--cpu CORES] [--mem MIB]
#   deploy/testbed/testbed.sh list
#
# Options:
#   --name NAME      the test bed's name: 1-8 characters [a-z0-9], starting with a letter;
#                    not `beds` (/run/nova-testbed/beds is the registry of beds). Two test
#                    beds with different names coexist (own namespaces, bridge, cgroups, /24
#                    of addresses).
#   --hosts N        number of hosts, 1..200: host-0 .. host-(N-1).
#   --cpu CORES      CPU quota per host in cores, e.g. 0.4 (cpu.cfs_quota_us = CORES * 100000
#                    per cpu.cfs_period_us = 100000); 0 = no quota. Default 1.
#   --mem MIB        memory limit per host in MiB (memory.limit_in_bytes); 0 = no limit.
#                    Default 2048.
#   --delay-ms D     one-way delay added to every packet a host sends (tc netem on its
#                    interface), so a round trip between two hosts gains 2*D ms. Needs the
#                    kernel's sch_netem; refused with an error when the kernel lacks it.
#   --rate-mbit R    bandwidth limit of every packet a host sends (netem rate, or tc tbf when
#                    no delay is asked for).
#   --state-dir DIR  where the bed keeps its files (default /run/nova-testbed/NAME); an empty
#                    or new directory, not /run/nova-testbed itself nor its registry; no
#                    whitespace, quote or backslash in its path (sshd's config names it).
#   HOST             host-I or I (exec, limit: which host's CPU quota or memory limit to
#                    change on a running bed; shape changes every host's shaping).
#
# What `up` makes, for a bed with index B (the lowest free one, 0..255; one /24 per bed):
#   namespaces  nb-NAME-0 .. nb-NAME-(N-1)   the hosts: interface eth0 = 198.18.B.(I+1)/24, lo
#               nb-NAME-br                   the bridge `br0` and the hosts' veth peers
#               nb-NAME-c                    the control port: 198.18.B.254/24, no sshd; ssh
#                                            from the root namespace goes through it
#   cgroups     <cpu|cpuacct|memory>/<the caller's cgroup>/nova-testbed-NAME-I, each path
#               recorded in STATE/hosts/host-I/cgroups before it is made; needs cgroup v1
#               (a cgroup-v2-only machine, e.g. stock Debian 12, is refused: boot it with
#               systemd.unified_cgroup_hierarchy=0 on the kernel command line)
#   STATE/      ssh_config (ssh_config_direct: the same without the proxy, for ssh from one
#               host to another), known_hosts, id_ed25519{,.pub}, inventory.ini (Ansible),
#               hosts.tsv (name address namespace), hosts.json, bed.env, hosts/host-I/ (sshd
#               config, host key, pid file, log; home/: the HOME of its ssh sessions)
# The root namespace gets no address, route or link: nothing is routed to or from the real
# network. `ssh -F STATE/ssh_config host-0` (or the address) logs in as root with the
# bed's key; everything started over ssh or `exec` runs in that host's namespace and cgroups.
# An ssh session's HOME is the host's own STATE/hosts/host-I/home, not /root: bash sources
# ~/.bashrc for each command sshd runs, and the control machine's (a `pyenv init` on the CI
# machines) cost ~0.7 s of CPU per command: one Ansible run took 15 minutes.
# The hosts share this machine's root filesystem: give each host its own directories.
#
# `down` kills every process of the bed, removes its namespaces (and so its links), cgroups
# (exactly those STATE/hosts/host-*/cgroups records; only when no record is left, every
# nova-testbed-NAME-I found at any depth) and state directory; it succeeds on a bed that is
# half made or already gone. A failed `up` cleans up what it made. `up` of a NAME whose
# namespaces, registry entry or cgroups are still there is refused (run `down` first).
# Exit codes: 0 ok, 1 failure, 2 usage error or not root.
set -euo pipefail

readonly kStateRoot=/run/nova-testbed          # registry of beds and default state dirs
readonly kRegistryName=beds                    # so no bed may be named this
readonly kRegistry=$kStateRoot/$kRegistryName  # one file per bed: its index and state dir
readonly kLock=$kStateRoot/.lock               # serializes index allocation and teardown
readonly kCfsPeriodUs=100000                   # cpu.cfs_period_us: 100 ms, the kernel default
readonly kMaxHosts=200                         # addresses .1 .. .200 of the bed's /24
readonly kControlOctet=254                     # the control port's address in the bed's /24
readonly kSshdStartTimeoutS=15                 # an sshd answers within this after `up` starts it
readonly kKillGraceS=3                         # SIGTERM, then SIGKILL after this

prog=testbed.sh
die() { echo "$prog: $*" >&2; exit 1; }
usage_error() { echo "$prog: $*" >&2; echo "run '$0 --help' for the usage" >&2; exit 2; }
usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0; }

# ---- arguments ----------------------------------------------------------------------

cmd=${1:-}
[[ -n "$cmd" ]] || usage_error "a command is required (up, down, status, exec, shape, limit, list)"
[[ "$cmd" == -h || "$cmd" == --help ]] && usage
shift
name="" hosts="" cpu="" mem="" delay_ms="" rate_mbit="" state_dir="" exec_args=() limit_host=""
readonly kDefaultCpu=1 kDefaultMemMib=2048
while [[ $# -gt 0 ]]; do
  case "$1" in
    --name) name=${2:-}; shift 2 || usage_error "--name wants a value" ;;
    --name=*) name=${1#*=}; shift ;;
    --hosts) hosts=${2:-}; shift 2 || usage_error "--hosts wants a value" ;;
    --hosts=*) hosts=${1#*=}; shift ;;
    --cpu) cpu=${2:-}; shift 2 || usage_error "--cpu wants a value" ;;
    --cpu=*) cpu=${1#*=}; shift ;;
    --mem) mem=${2:-}; shift 2 || usage_error "--mem wants a value" ;;
    --mem=*) mem=${1#*=}; shift ;;
    --delay-ms) delay_ms=${2:-}; shift 2 || usage_error "--delay-ms wants a value" ;;
    --delay-ms=*) delay_ms=${1#*=}; shift ;;
    --rate-mbit) rate_mbit=${2:-}; shift 2 || usage_error "--rate-mbit wants a value" ;;
    --rate-mbit=*) rate_mbit=${1#*=}; shift ;;
    --state-dir) state_dir=${2:-}; shift 2 || usage_error "--state-dir wants a value" ;;
    --state-dir=*) state_dir=${1#*=}; shift ;;
    -h|--help) usage ;;
    *)
      if [[ "$cmd" == exec ]]; then exec_args=("$@"); break; fi
      if [[ "$cmd" == limit && -z "$limit_host" && "$1" != -* ]]; then
        limit_host=$1; shift; continue
      fi
      usage_error "unknown argument '$1'" ;;
  esac
done

case "$cmd" in
  up|down|status|exec|shape|limit|list) ;;
  *) usage_error "unknown command '$cmd' (up, down, status, exec, shape, limit, list)" ;;
esac
if [[ "$cmd" != list ]]; then
  [[ -n "$name" ]] || usage_error "--name NAME is required"
  [[ "$name" =~ ^[a-z][a-z0-9]{0,7}$ ]] ||
    usage_error "--name wants 1-8 characters [a-z0-9] starting with a letter, got '$name'"
  # The default state directory $kStateRoot/NAME of a bed named so would be the registry.
  [[ "$name" != "$kRegistryName" ]] ||
    usage_error "--name $kRegistryName is reserved ($kRegistry is the registry of beds)"
fi
if [[ "$cmd" == up ]]; then
  [[ "$hosts" =~ ^[0-9]+$ ]] && ((hosts >= 1 && hosts <= kMaxHosts)) ||
    usage_error "--hosts wants a number 1..$kMaxHosts, got '$hosts'"
  cpu=${cpu:-$kDefaultCpu}
  mem=${mem:-$kDefaultMemMib}
fi
[[ -z "$mem" || "$mem" =~ ^[0-9]+$ ]] || usage_error "--mem wants MiB as a whole number, got '$mem'"
[[ -z "$cpu" || "$cpu" =~ ^[0-9]+(\.[0-9]+)?$ ]] ||
  usage_error "--cpu wants cores, e.g. 0.4, got '$cpu'"
if [[ "$cmd" == limit ]]; then
  [[ -n "$limit_host" ]] || usage_error "limit wants HOST (host-I or I)"
  [[ -n "$cpu$mem" ]] || usage_error "limit wants --cpu and/or --mem"
fi
[[ -z "$delay_ms" || "$delay_ms" =~ ^[0-9]+(\.[0-9]+)?$ ]] ||
  usage_error "--delay-ms wants milliseconds, got '$delay_ms'"
[[ -z "$rate_mbit" || "$rate_mbit" =~ ^[0-9]+(\.[0-9]+)?$ ]] ||
  usage_error "--rate-mbit wants Mbit/s, got '$rate_mbit'"
if [[ "$cmd" == shape && -z "$delay_ms" && -z "$rate_mbit" ]]; then
  usage_error "shape wants --delay-ms and/or --rate-mbit (0 removes the shaping)"
fi
if [[ "$cmd" == exec && ${#exec_args[@]} -lt 2 ]]; then
  usage_error "exec wants HOST CMD [ARG...]"
fi

if [[ $(id -u) -ne 0 ]]; then
  echo "$prog: must run as root (it creates network namespaces, cgroups and sshds)" >&2
  exit 2
fi
for tool in ip tc nc ssh ssh-keygen /usr/sbin/sshd flock awk; do
  command -v "$tool" >/dev/null ||
    die "'$tool' is missing: run deploy/install_deps.sh (iproute2, openssh, netcat-openbsd)"
done
ip netns list >/dev/null 2>&1 || die "'ip netns' does not work here (no network namespaces?)"

mkdir -p "$kRegistry"
chmod 0755 "$kStateRoot"
exec 9>"$kLock"

# ---- names --------------------------------------------------------------------------

ns_host() { echo "nb-$name-$1"; }
ns_bridge() { echo "nb-$name-br"; }
ns_control() { echo "nb-$name-c"; }
cgroup_leaf() { echo "nova-testbed-$name-$1"; }

# Every namespace of the bed that exists now (also those of a half-made bed).
bed_namespaces() {
  ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^nb-$name-([0-9]+|br|c)\$" || true
}

# The v1 hierarchy roots we use, one per line: cpu, cpuacct, memory (deduplicated when
# co-mounted, e.g. cpu,cpuacct).
cgroup_roots() {
  local c r seen=""
  for c in cpu cpuacct memory; do
    r=$(readlink -f "/sys/fs/cgroup/$c" 2>/dev/null) || continue
    [[ -d "$r" ]] || continue
    [[ " $seen " == *" $r "* ]] && continue
    seen+=" $r"
    echo "$r"
  done
}

# The cgroup of this process in hierarchy root $1 (the bed's cgroups nest under it, so a
# supervisor that accounts or kills by cgroup still sees them).
caller_cgroup() {
  local root=$1 line ctrls path c
  c=$(basename "$root")
  while IFS= read -r line; do
    ctrls=${line#*:}; path=${ctrls#*:}; ctrls=${ctrls%%:*}
    if [[ ",$ctrls," == *",${c%%,*},"* ]]; then echo "$path"; return; fi
  done < /proc/self/cgroup
  echo /
}

# Every cgroup directory of the bed found in the hierarchies we use, at any depth (the bed's
# cgroups sit under its caller's cgroup, which may be deep, e.g. in a desktop session's
# .../user@1000.service/app.slice/X.scope). One per line.
search_cgroups() {
  local r
  for r in $(cgroup_roots); do
    find "$r" -type d -name "nova-testbed-$name-*" 2>/dev/null |
      grep -E "/nova-testbed-$name-[0-9]+\$" || true
  done
}

# The bed's cgroup directories, one per line: those recorded in state directory $1's
# hosts/host-*/cgroups (exact paths, made or about to be made by `up`), or, when $1 holds no
# record, search_cgroups. A record line that is not a nova-testbed-NAME-I under
# /sys/fs/cgroup is ignored (down kills the processes of every cgroup listed).
bed_cgroups() {
  local dir=$1
  if [[ -n "$dir" && -f "$dir/bed.env" ]] && compgen -G "$dir/hosts/host-*/cgroups" >/dev/null
  then
    cat "$dir"/hosts/host-*/cgroups |
      grep -E "^/sys/fs/cgroup/.*/nova-testbed-$name-[0-9]+\$" | sort -u || true
  else
    search_cgroups | sort -u
  fi
}

registry_file() { echo "$kRegistry/$name"; }

# Loads the bed's registry entry (index, state dir, host count); fails if the bed is not up.
load_bed() {
  local f; f=$(registry_file)
  [[ -r "$f" ]] || die "no test bed named '$name' (see '$0 list')"
  # shellcheck disable=SC1090
  source "$f"
  state_dir=$bed_state_dir
}

subnet_of() { echo "198.18.$1"; }
host_addr() { echo "$(subnet_of "$bed_index").$(($1 + 1))"; }

# Host argument (host-I or I) -> I.
host_index() {
  local h=${1#host-}
  [[ "$h" =~ ^[0-9]+$ ]] && ((h < bed_hosts)) ||
    die "no host '$1' in test bed '$name' (host-0 .. host-$((bed_hosts - 1)))"
  echo "$h"
}

# ---- teardown -----------------------------------------------------------------------

# Pids of every process of the bed: in its namespaces or in the cgroups listed in $1 (one per
# line).
bed_pids() {
  local cgroups=$1 ns cg
  for ns in $(bed_namespaces); do ip netns pids "$ns" 2>/dev/null || true; done
  for cg in $cgroups; do cat "$cg/cgroup.procs" 2>/dev/null || true; done
}

teardown() {
  local pids deadline ns cg f dir cgroups
  # The state directory: the registry's, else --state-dir, else the default.
  dir=$state_dir
  f=$(registry_file)
  if [[ -r "$f" ]]; then
    dir=$(sed -n 's/^bed_state_dir=//p' "$f")
  fi
  [[ -n "$dir" ]] || dir=$kStateRoot/$name
  cgroups=$(bed_cgroups "$dir")
  pids=$(bed_pids "$cgroups" | sort -un)
  if [[ -n "$pids" ]]; then
    # shellcheck disable=SC2086
    kill -TERM $pids 2>/dev/null || true
    deadline=$((SECONDS + kKillGraceS))
    while [[ -n "$(bed_pids "$cgroups")" ]] && ((SECONDS < deadline)); do sleep 0.1; done
    deadline=$((SECONDS + kKillGraceS))
    while pids=$(bed_pids "$cgroups" | sort -un) && [[ -n "$pids" ]]; do
      # shellcheck disable=SC2086
      kill -KILL $pids 2>/dev/null || true
      ((SECONDS < deadline)) || die "processes $pids of test bed '$name' do not die"
      sleep 0.1
    done
  fi
  # Deleting a namespace deletes its links, and so both ends of every veth pair.
  for ns in $(bed_namespaces); do
    ip netns del "$ns" 2>/dev/null || ip netns del "$ns" || die "cannot delete namespace $ns"
  done
  # A recorded cgroup that is missing was never made (up failed before) or is gone already.
  for cg in $cgroups; do
    [[ -d "$cg" ]] || continue
    rmdir "$cg" 2>/dev/null || { sleep 0.2; rmdir "$cg"; } ||
      die "cannot remove cgroup $cg"
  done
  f=$(registry_file)
  if [[ -r "$f" ]]; then
    # shellcheck disable=SC1090
    source "$f"
    if [[ -n "${bed_state_dir:-}" && -f "$bed_state_dir/bed.env" ]]; then
      rm -rf "$bed_state_dir"
    fi
    rm -f "$f"
  fi
  [[ -z "$state_dir" || ! -f "$state_dir/bed.env" ]] || rm -rf "$state_dir"
  [[ ! -d "$kStateRoot/$name" ]] || rm -rf "${kStateRoot:?}/$name"
  # /run/sshd (sshd's privilege separation directory) goes when `up` made it and no bed is
  # left to use it.
  if [[ -f "$kStateRoot/made_run_sshd" && -z "$(ls -A "$kRegistry")" ]]; then
    rmdir /run/sshd 2>/dev/null || true
    rm -f "$kStateRoot/made_run_sshd"
  fi
  # The registry goes with the last bed (a concurrent `up` recreates it).
  if [[ -z "$(ls -A "$kRegistry" 2>/dev/null)" ]]; then
    rmdir "$kRegistry" 2>/dev/null || true
    rm -f "$kLock"
    rmdir "$kStateRoot" 2>/dev/null || true
  fi
}

# ---- up -----------------------------------------------------------------------------

# The lowest bed index no registered bed uses.
free_index() {
  local used=" " f i
  for f in "$kRegistry"/*; do
    [[ -r "$f" ]] || continue
    used+="$(sed -n 's/^bed_index=//p' "$f") "
  done
  for ((i = 0; i < 256; i++)); do
    [[ "$used" == *" $i "* ]] || { echo "$i"; return; }
  done
  die "all 256 bed indexes of 198.18.0.0/16 are in use"
}

# Applies --delay-ms / --rate-mbit to interface eth0 of namespace $1 (replacing any shaping).
shape_ns() {
  local ns=$1 d=${delay_ms:-0} r=${rate_mbit:-0}
  ip netns exec "$ns" tc qdisc del dev eth0 root 2>/dev/null || true
  if awk -v d="$d" 'BEGIN { exit !(d > 0) }'; then
    local args=(delay "${d}ms" limit 100000)
    awk -v r="$r" 'BEGIN { exit !(r > 0) }' && args+=(rate "${r}mbit")
    ip netns exec "$ns" tc qdisc add dev eth0 root netem "${args[@]}" 2>/dev/null ||
      die "tc netem failed in $ns: this kernel has no sch_netem (CONFIG_NET_SCH_NETEM)," \
          "so --delay-ms cannot be applied; --rate-mbit alone uses tbf"
  elif awk -v r="$r" 'BEGIN { exit !(r > 0) }'; then
    ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate "${r}mbit" burst 64kb latency 100ms ||
      die "tc tbf failed in $ns"
  fi
}

# cpu.cfs_quota_us for $1 cores (-1: no quota for 0).
quota_us() {
  local q=-1
  if awk -v c="$1" 'BEGIN { exit !(c > 0) }'; then
    q=$(awk -v c="$1" -v p="$kCfsPeriodUs" 'BEGIN { printf "%d", c * p }')
    ((q >= 1000)) || usage_error "--cpu $1 is below the kernel's 1 ms minimum quota"
  fi
  echo "$q"
}

# memory.limit_in_bytes for $1 MiB (-1: no limit for 0).
limit_bytes() { if (($1 == 0)); then echo -1; else echo $(($1 * 1024 * 1024)); fi; }

# Joins the current shell process to host $1's cgroups.
join_cgroups() {
  local i=$1 cg
  for cg in $(cat "$state_dir/hosts/host-$i/cgroups"); do
    echo "$BASHPID" > "$cg/cgroup.procs"
  done
}

write_sshd_config() {
  local i=$1 addr=$2 dir=$3
  cat > "$dir/sshd_config" <<EOF
# sshd of test bed '$name' host-$i: listens on its own address only (deploy/testbed).
ListenAddress $addr:22
HostKey $dir/ssh_host_ed25519_key
PidFile $dir/sshd.pid
AuthorizedKeysFile $state_dir/authorized_keys
UsePAM no
# The key file is the bed's own (root, 0600); its directory may sit under a world-writable
# one such as /tmp (--state-dir), which StrictModes would refuse.
StrictModes no
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
AllowUsers root
UseDNS no
PrintMotd no
PrintLastLog no
MaxStartups 100:30:200
MaxSessions 100
Subsystem sftp internal-sftp
# Each host its own HOME (see the header): no dotfile of the control machine's root runs.
SetEnv HOME=$dir/home
EOF
}

start_sshd() {
  local i=$1 ns dir
  ns=$(ns_host "$i"); dir=$state_dir/hosts/host-$i
  (
    join_cgroups "$i"
    exec ip netns exec "$ns" /usr/sbin/sshd -f "$dir/sshd_config" -E "$dir/sshd.log"
  ) || die "sshd of host-$i did not start (see $dir/sshd.log)"
}

wait_sshd() {
  local i=$1 addr ns deadline
  addr=$(host_addr "$i"); ns=$(ns_host "$i")
  deadline=$((SECONDS + kSshdStartTimeoutS))
  until ip netns exec "$ns" nc -z -w 1 "$addr" 22 2>/dev/null; do
    ((SECONDS < deadline)) ||
      die "sshd of host-$i did not answer on $addr:22 in ${kSshdStartTimeoutS}s" \
          "(see $state_dir/hosts/host-$i/sshd.log)"
    sleep 0.1
  done
}

write_client_files() {
  local i addr subnet
  subnet=$(subnet_of "$bed_index")
  {
    echo "# ssh_config of test bed '$name' (deploy/testbed): ssh -F $state_dir/ssh_config host-0"
    for ((i = 0; i < hosts; i++)); do
      printf 'Host host-%d\n  HostName %s\n' "$i" "$(host_addr "$i")"
    done
    cat <<EOF
Host host-* $subnet.*
  User root
  IdentityFile $state_dir/id_ed25519
  IdentitiesOnly yes
  UserKnownHostsFile $state_dir/known_hosts
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking yes
  BatchMode yes
  ConnectTimeout 10
  LogLevel ERROR
  # The root namespace has no route to the bed: enter its control port to connect.
  ProxyCommand ip netns exec $(ns_control) nc %h %p
EOF
  } > "$state_dir/ssh_config"
  # The same without the proxy, for ssh from one host to another (inside the bed).
  sed -e '/ProxyCommand/d' -e '/root namespace has no route/d' "$state_dir/ssh_config" \
    > "$state_dir/ssh_config_direct"
  : > "$state_dir/known_hosts"
  : > "$state_dir/hosts.tsv"
  for ((i = 0; i < hosts; i++)); do
    addr=$(host_addr "$i")
    echo "$addr $(cut -d' ' -f1,2 "$state_dir/hosts/host-$i/ssh_host_ed25519_key.pub")" \
      >> "$state_dir/known_hosts"
    printf 'host-%d\t%s\t%s\n' "$i" "$addr" "$(ns_host "$i")" >> "$state_dir/hosts.tsv"
  done
  {
    echo "{\"name\": \"$name\", \"subnet\": \"$subnet.0/24\", \"hosts\": ["
    for ((i = 0; i < hosts; i++)); do
      printf '  {"name": "host-%d", "address": "%s", "namespace": "%s"}%s\n' \
        "$i" "$(host_addr "$i")" "$(ns_host "$i")" "$([[ $i -lt $((hosts - 1)) ]] && echo ,)"
    done
    echo "]}"
  } > "$state_dir/hosts.json"
  {
    echo "# Test bed '$name' (deploy/testbed): $hosts hosts on $subnet.0/24, ${cpu} core(s)"
    echo "# and ${mem} MiB each. The hosts share one root filesystem: give each its own dirs."
    echo "[testbed_$name]"
    for ((i = 0; i < hosts; i++)); do
      echo "host-$i ansible_host=$(host_addr "$i") testbed_host_index=$i"
    done
    echo
    echo "[testbed_$name:vars]"
    echo "ansible_user=root"
    echo "ansible_ssh_private_key_file=$state_dir/id_ed25519"
    echo "ansible_ssh_common_args='-F $state_dir/ssh_config'"
  } > "$state_dir/inventory.ini"
}

cmd_up() {
  flock 9
  [[ ! -e "$(registry_file)" && -z "$(bed_namespaces)" ]] ||
    die "test bed '$name' exists already (run '$0 down --name $name' first)"
  local quota limit leftovers
  quota=$(quota_us "$cpu"); limit=$(limit_bytes "$mem")
  [[ -f /sys/fs/cgroup/cpu/cpu.cfs_quota_us && -f /sys/fs/cgroup/memory/memory.limit_in_bytes ]] ||
    die "no cgroup v1 cpu and memory hierarchies at /sys/fs/cgroup/{cpu,memory}:" \
        "this machine mounts cgroup v2 only (e.g. stock Debian 12), which the test bed does" \
        "not support. Boot with systemd.unified_cgroup_hierarchy=0 on the kernel command" \
        "line (Debian: add it to GRUB_CMDLINE_LINUX in /etc/default/grub, run update-grub," \
        "reboot) to get cgroup v1; systemd 256 and later no longer boot with cgroup v1"
  leftovers=$(search_cgroups)
  [[ -z "$leftovers" ]] ||
    die "cgroups of an earlier test bed '$name' are left over: ${leftovers//$'\n'/ };" \
        "run '$0 down --name $name' first (it removes them)"

  bed_index=$(free_index)
  bed_hosts=$hosts
  [[ -n "$state_dir" ]] || state_dir=$kStateRoot/$name
  # sshd_config and ssh_config name files below it unquoted.
  [[ "$state_dir" != *[[:space:]\"\'\\]* ]] ||
    die "--state-dir '$state_dir' contains whitespace, a quote or a backslash; choose another"
  [[ ! -e "$state_dir" || -z "$(ls -A "$state_dir" 2>/dev/null)" ]] ||
    die "state directory $state_dir exists and is not empty"
  mkdir -p "$state_dir"
  state_dir=$(cd "$state_dir" && pwd)
  local real_dir real_root
  real_dir=$(cd "$state_dir" && pwd -P); real_root=$(cd "$kStateRoot" && pwd -P)
  [[ "$real_dir" != "$real_root" && "$real_dir/" != "$real_root/$kRegistryName/"* ]] ||
    die "--state-dir $state_dir is $kStateRoot or its registry of beds; choose another"
  chmod 0755 "$state_dir"

  # From here a failure tears down what was made.
  trap 'rc=$?; if ((rc != 0)); then echo "$prog: up failed; removing what it made" >&2;
        teardown || true; fi' EXIT
  {
    echo "bed_index=$bed_index"
    echo "bed_hosts=$hosts"
    echo "bed_state_dir=$state_dir"
  } > "$(registry_file)"
  {
    echo "TESTBED_NAME=$name"
    echo "TESTBED_HOSTS=$hosts"
    echo "TESTBED_SUBNET=$(subnet_of "$bed_index").0/24"
    echo "TESTBED_CPU=$cpu"
    echo "TESTBED_MEM_MIB=$mem"
    echo "TESTBED_DELAY_MS=${delay_ms:-0}"
    echo "TESTBED_RATE_MBIT=${rate_mbit:-0}"
    echo "TESTBED_STATE_DIR=$state_dir"
  } > "$state_dir/bed.env"
  if [[ ! -d /run/sshd ]]; then
    mkdir -m 0755 /run/sshd
    touch "$kStateRoot/made_run_sshd"
  fi

  local subnet br i ns addr r cg
  subnet=$(subnet_of "$bed_index")
  br=$(ns_bridge)
  ip netns add "$br"
  ip -n "$br" link add br0 type bridge
  ip -n "$br" link set br0 up
  ip netns add "$(ns_control)"
  ip link add c netns "$br" type veth peer name eth0 netns "$(ns_control)"
  ip -n "$br" link set c master br0 up
  ip -n "$(ns_control)" addr add "$subnet.$kControlOctet/24" dev eth0
  ip -n "$(ns_control)" link set eth0 up
  ip -n "$(ns_control)" link set lo up

  ssh-keygen -q -t ed25519 -N '' -C "nova-testbed-$name-control" -f "$state_dir/id_ed25519"
  cp "$state_dir/id_ed25519.pub" "$state_dir/authorized_keys"
  chmod 0600 "$state_dir/authorized_keys"

  for ((i = 0; i < hosts; i++)); do
    ns=$(ns_host "$i"); addr=$(host_addr "$i")
    ip netns add "$ns"
    ip link add "h$i" netns "$br" type veth peer name eth0 netns "$ns"
    ip -n "$br" link set "h$i" master br0 up
    ip -n "$ns" addr add "$addr/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    if [[ -n "$delay_ms$rate_mbit" ]]; then shape_ns "$ns"; fi

    mkdir -p "$state_dir/hosts/host-$i"
    mkdir -m 0700 "$state_dir/hosts/host-$i/home"
    : > "$state_dir/hosts/host-$i/cgroups"
    for r in $(cgroup_roots); do
      cg=$r$(caller_cgroup "$r")
      cg=${cg%/}/$(cgroup_leaf "$i")
      # Recorded first: down removes what the record lists, so nothing made goes unlisted.
      echo "$cg" >> "$state_dir/hosts/host-$i/cgroups"
      mkdir "$cg" || die "cannot make cgroup $cg"
      [[ ! -f "$cg/cpu.cfs_quota_us" ]] || {
        echo "$kCfsPeriodUs" > "$cg/cpu.cfs_period_us"
        echo "$quota" > "$cg/cpu.cfs_quota_us"
      }
      [[ ! -f "$cg/memory.limit_in_bytes" ]] || echo "$limit" > "$cg/memory.limit_in_bytes"
    done
    ssh-keygen -q -t ed25519 -N '' -C "nova-testbed-$name-host-$i" \
      -f "$state_dir/hosts/host-$i/ssh_host_ed25519_key"
    write_sshd_config "$i" "$addr" "$state_dir/hosts/host-$i"
    start_sshd "$i"
  done
  for ((i = 0; i < hosts; i++)); do wait_sshd "$i"; done
  write_client_files
  trap - EXIT
  echo "test bed '$name' is up: $hosts host(s) on $subnet.0/24, state in $state_dir"
  echo "  ssh -F $state_dir/ssh_config host-0"
  echo "  inventory: $state_dir/inventory.ini   hosts: $state_dir/hosts.tsv"
}

# ---- the other commands -------------------------------------------------------------

cmd_down() {
  flock 9
  teardown
  echo "test bed '$name' is down"
}

cmd_status() {
  load_bed
  local i ns addr pid ok=1 cg quota limit qdisc
  echo "test bed '$name': $bed_hosts host(s) on $(subnet_of "$bed_index").0/24, state $state_dir"
  printf '%-8s %-16s %-14s %-6s %-8s %-9s %s\n' host address namespace sshd cpu mem_mib shaping
  for ((i = 0; i < bed_hosts; i++)); do
    ns=$(ns_host "$i"); addr=$(host_addr "$i")
    pid=$(cat "$state_dir/hosts/host-$i/sshd.pid" 2>/dev/null || true)
    local sshd=down
    if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then sshd=up; else ok=0; fi
    ip netns list | grep -q "^$ns\b" || { ns="$ns(gone)"; ok=0; }
    quota=-; limit=-
    for cg in $(cat "$state_dir/hosts/host-$i/cgroups" 2>/dev/null); do
      [[ -d "$cg" ]] || ok=0
      [[ ! -f "$cg/cpu.cfs_quota_us" ]] ||
        quota=$(awk -v q="$(cat "$cg/cpu.cfs_quota_us")" -v p="$(cat "$cg/cpu.cfs_period_us")" \
          'BEGIN { if (q < 0) print "none"; else printf "%.2f", q / p }')
      [[ ! -f "$cg/memory.limit_in_bytes" ]] ||
        limit=$(( $(cat "$cg/memory.limit_in_bytes") / 1048576 ))
    done
    ((limit < 1 << 40)) 2>/dev/null || limit=none
    qdisc=$(ip netns exec "${ns%(gone)}" tc qdisc show dev eth0 2>/dev/null |
      awk '$2 == "netem" || $2 == "tbf" { $1 = $3 = $4 = $5 = $6 = ""; print }' | xargs || true)
    printf '%-8s %-16s %-14s %-6s %-8s %-9s %s\n' "host-$i" "$addr" "$ns" "$sshd" "$quota" \
      "$limit" "${qdisc:-none}"
  done
  ((ok)) || { echo "$prog: test bed '$name' is not whole" >&2; exit 1; }
}

cmd_exec() {
  load_bed
  local i; i=$(host_index "${exec_args[0]}")
  (
    join_cgroups "$i"
    exec ip netns exec "$(ns_host "$i")" "${exec_args[@]:1}"
  )
}

cmd_shape() {
  load_bed
  local i
  for ((i = 0; i < bed_hosts; i++)); do shape_ns "$(ns_host "$i")"; done
  sed -i -e "s/^TESTBED_DELAY_MS=.*/TESTBED_DELAY_MS=${delay_ms:-0}/" \
    -e "s/^TESTBED_RATE_MBIT=.*/TESTBED_RATE_MBIT=${rate_mbit:-0}/" "$state_dir/bed.env"
  echo "test bed '$name': delay ${delay_ms:-0} ms, rate ${rate_mbit:-0} Mbit/s (0 = none)"
}

cmd_limit() {
  load_bed
  local i cg
  i=$(host_index "$limit_host")
  for cg in $(cat "$state_dir/hosts/host-$i/cgroups"); do
    if [[ -n "$cpu" && -f "$cg/cpu.cfs_quota_us" ]]; then
      quota_us "$cpu" > "$cg/cpu.cfs_quota_us"
    fi
    if [[ -n "$mem" && -f "$cg/memory.limit_in_bytes" ]]; then
      limit_bytes "$mem" > "$cg/memory.limit_in_bytes" ||
        die "cannot set host-$i's memory limit to $mem MiB (it uses more already?)"
    fi
  done
  echo "test bed '$name' host-$i:${cpu:+ cpu $cpu core(s)}${mem:+ mem $mem MiB} (0 = none)"
}

cmd_list() {
  local f n
  for f in "$kRegistry"/*; do
    [[ -r "$f" ]] || continue
    n=$(basename "$f")
    (
      # shellcheck disable=SC1090
      source "$f"
      printf '%-10s %3d host(s)  198.18.%d.0/24  %s\n' "$n" "$bed_hosts" "$bed_index" \
        "$bed_state_dir"
    )
  done
}

"cmd_$cmd"
