#!/usr/bin/env bash
# YCSB on the test bed of simulated hosts (deploy/testbed) as the number of LTC hosts and
# StoC hosts grows, each host with its own CPU quota: the shape of the paper's scaling
# figures (4.10-4.12) on one machine. Needs root (the test bed does).
#
#   benchmarks/testbed_scaling.sh [--configs L:S,...] [--cpu CORES] [--client-cpu CORES]
#                                 [--records N] [--seconds S] [--threads T]
#                                 [--workloads W,...] [--ranges R] [--block-cache-mb MB]
#                                 [--out DIR] [--name BED]
#
#   --configs      LTC hosts:StoC hosts per cluster, default 1:4,2:4,4:4,2:1,2:2: the LTC
#                  hosts grow 1, 2, 4 with 4 StoC hosts (enough that StoCs do not limit),
#                  then the StoC hosts grow 1, 2, 4 with 2 LTC hosts (2:4 is measured once)
#   --cpu          CPU quota of every LTC, StoC and ZooKeeper/coordinator host (default 0.4)
#   --client-cpu   CPU quota of the client host that runs nova_ycsb (default 1.0), so the
#                  client is not what limits the cluster
#   --records      records loaded, 1 KiB each (default 100000)
#   --seconds      length of each run (default 20)
#   --threads      nova_ycsb client threads (default 8)
#   --workloads    run after the load, each for --seconds (default
#                  workloada,w100,workloadc@uniform); W@D runs workload W with
#                  requestdistribution=D. Keys are "user" + 10 digits (insertorder=ordered),
#                  split evenly into --ranges
#   --ranges       ranges of the key space (default 4: 1, 2 or 4 per LTC host)
#   --block-cache-mb  each range's block cache on its LTC (default 4: with 100,000 records
#                  most uniform reads miss it and go to a StoC, so StoC hosts matter)
#   --out DIR      where scaling.csv, table.md, commands.txt and the logs go (default a new
#                  directory under /tmp, kept)
#   --name BED     the test bed's name (default scale)
#
# For each configuration: a fresh test bed (host-0: ZooKeeper and the coordinator, host-1:
# the client, then one host per LTC and one per StoC), a fresh cluster (nova_admin
# create-cluster, table_availability none so one StoC is enough, log_mode none), a 64 B TCP
# round trip between two hosts and over loopback (deploy/testbed/rtt.py), the load, each
# workload, then the bed goes down. Per run it records ops/s, read/update p50/p99 and the
# CPU each group of hosts used (cpuacct), since the quotas of all hosts add up to more than
# the machine's cores. Prints a table; writes DIR/scaling.csv.
#
# Binaries: $NOVA_BIN if set, else $NOVA_BUILD_DIR/bin (default build/bin). Run it under
# the shared lock: flock /tmp/nova_build.lock benchmarks/testbed_scaling.sh
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bin=${NOVA_BIN:-${NOVA_BUILD_DIR:-$root/build}/bin}
tb=$root/deploy/testbed/testbed.sh
rtt=$root/deploy/testbed/rtt.py
workloads_dir=$root/benchmarks/ycsb/workloads

configs=1:4,2:4,4:4,2:1,2:2 cpu=0.4 client_cpu=1.0 records=100000 seconds=20 threads=8
workloads=workloada,w100,workloadc@uniform ranges=4 block_cache_mb=4 out="" bed=scale
readonly kPort=7000              # every component's transport port (each host has its own address)
readonly kZkPort=2181
readonly kStartTimeoutS=60       # ZooKeeper (a JVM on 0.4 core) and each component
readonly kLoadTimeoutS=600
readonly kRunSlackS=60           # a run's start and clean-up beyond --seconds
readonly kUnboundedOps=2000000000  # an operation count no run reaches: maxexecutiontime ends it
readonly kRttRoundTrips=2000
readonly kRttPort=7100

die() { echo "testbed_scaling.sh: $*" >&2; exit 1; }
usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --configs) configs=$2; shift 2 ;;
    --cpu) cpu=$2; shift 2 ;;
    --client-cpu) client_cpu=$2; shift 2 ;;
    --records) records=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --workloads) workloads=$2; shift 2 ;;
    --ranges) ranges=$2; shift 2 ;;
    --block-cache-mb) block_cache_mb=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --name) bed=$2; shift 2 ;;
    -h|--help) usage ;;
    *) echo "testbed_scaling.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ $(id -u) -eq 0 ]] || { echo "testbed_scaling.sh: must run as root (the test bed does)" >&2; exit 2; }
for n in "$records" "$seconds" "$threads" "$ranges" "$block_cache_mb"; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || die "numeric options want a positive integer, got '$n'"
done
IFS=, read -r -a config_list <<< "$configs"
IFS=, read -r -a workload_list <<< "$workloads"
for c in "${config_list[@]}"; do
  [[ "$c" =~ ^[1-9][0-9]*:[1-9][0-9]*$ ]] || die "--configs wants L:S pairs, got '$c'"
done
for w in "${workload_list[@]}"; do
  [[ -f "$workloads_dir/${w%@*}" ]] || die "no workload $workloads_dir/${w%@*}"
done
for b in nova_stoc nova_ltc nova_coordinator nova_admin nova_cli nova_ycsb; do
  [[ -x "$bin/$b" ]] || die "$bin/$b not found: build first, or set NOVA_BIN / NOVA_BUILD_DIR"
done
[[ -r /usr/share/java/zookeeper.jar ]] || die "ZooKeeper is missing: run deploy/install_deps.sh"

out=${out:-$(mktemp -d /tmp/testbed_scaling.XXXXXX)}
mkdir -p "$out"
out=$(cd "$out" && pwd)
commands=$out/commands.txt csv=$out/scaling.csv
: > "$commands"
echo "workload,ltc_hosts,stoc_hosts,cpu_per_host,ops_per_s,read_p50_us,read_p99_us,update_p50_us,update_p99_us,failed_ops,ltc_cpu_cores,stoc_cpu_cores,client_cpu_cores,all_hosts_cpu_cores,rtt_hosts_p50_us,rtt_loopback_p50_us" > "$csv"

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  "$tb" down --name "$bed" >/dev/null 2>&1 || true
  echo "testbed_scaling.sh: results and logs in $out" >&2
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---- helpers ------------------------------------------------------------------------

ex() { "$tb" exec --name "$bed" "$@"; }           # ex HOST CMD...: run on a host
log_cmd() { printf '%q ' "$@" >> "$commands"; echo >> "$commands"; }

# launch HOST ID CMD...: starts a component on HOST in the background, output to its log.
launch() {
  local host=host-${1#host-} id=$2; shift 2
  log_cmd "$tb" exec --name "$bed" "$host" "$@"
  ex "$host" setsid "$@" > "$run_dir/logs/$id.log" 2>&1 < /dev/null &
}

# wait_listen ID: until the component printed its LISTEN line.
wait_listen() {
  local id=$1 deadline=$((SECONDS + kStartTimeoutS))
  until grep -q '^LISTEN ' "$run_dir/logs/$id.log" 2>/dev/null; do
    ((SECONDS < deadline)) || { tail -n 20 "$run_dir/logs/$id.log" >&2; die "$id did not start"; }
    sleep 0.2
  done
}

addr_of() { awk -v h="host-$1" '$1 == h { print $2 }' "$state/hosts.tsv"; }

# CPU time (ns) used so far by the hosts given, from their cpuacct cgroups.
cpu_ns() {
  local h cg total=0
  for h in "$@"; do
    cg=$(grep cpuacct "$state/hosts/host-$h/cgroups" | head -1)
    total=$((total + $(cat "$cg/cpuacct.usage")))
  done
  echo "$total"
}

field() { awk -F', ' -v s="[$2]" -v n="$3" '$1 == s && $2 == n { print $3; exit }' "$1"; }
failures() {
  awk -F', ' '$2 ~ /^Return=/ && $2 != "Return=OK" { n += $3 } END { print n + 0 }' "$1"
}

split_points() {
  local i
  for ((i = 1; i < ranges; i++)); do
    printf 'user%010d' $((records * i / ranges)) | od -An -tx1 | tr -d ' \n'
    echo
  done
}

# rtt_p50 SERVER_HOST CLIENT_HOST ADDRESS: p50 of a 64 B TCP ping-pong, in us.
rtt_p50() {
  local server=$1 client=$2 addr=$3 line
  ex "$server" timeout 30 python3 "$rtt" serve "$addr" "$kRttPort" > /dev/null &
  local spid=$!
  line=$(ex "$client" timeout 30 python3 "$rtt" ping "$addr" "$kRttPort" "$kRttRoundTrips")
  wait "$spid" || true
  sed -n 's/.* p50=\([0-9]*\).*/\1/p' <<< "$line"
}

loopback_rtt_p50() {
  local log port line
  log=$(mktemp)
  timeout 30 python3 "$rtt" serve 127.0.0.1 0 > "$log" &
  local spid=$! deadline=$((SECONDS + 10))
  until grep -q LISTEN "$log" || ((SECONDS > deadline)); do sleep 0.05; done
  port=$(sed -n 's/^LISTEN .*://p' "$log")
  line=$(python3 "$rtt" ping 127.0.0.1 "$port" "$kRttRoundTrips")
  wait "$spid" || true
  rm -f "$log"
  sed -n 's/.* p50=\([0-9]*\).*/\1/p' <<< "$line"
}

# cores U: CPU nanoseconds U over the run's wall time (t0..t1 of run_config).
cores() { awk -v u="$1" -v w=$((t1 - t0)) 'BEGIN { printf "%.2f", u / w }'; }

# ---- one configuration ---------------------------------------------------------------

run_config() {
  local L=$1 S=$2 i
  local hosts=$((2 + L + S)) zk_host=0 client=1
  local ltc_hosts=() stoc_hosts=()
  for ((i = 0; i < L; i++)); do ltc_hosts+=($((2 + i))); done
  for ((i = 0; i < S; i++)); do stoc_hosts+=($((2 + L + i))); done
  run_dir=$out/L${L}_S${S}
  rm -rf "$run_dir"
  mkdir -p "$run_dir/logs" "$run_dir/data"
  echo "== $L LTC host(s), $S StoC host(s): a test bed of $hosts hosts at $cpu core(s) each" >&2

  log_cmd "$tb" up --name "$bed" --hosts "$hosts" --cpu "$cpu"
  "$tb" up --name "$bed" --hosts "$hosts" --cpu "$cpu" > "$run_dir/logs/testbed.log"
  log_cmd "$tb" limit --name "$bed" "host-$client" --cpu "$client_cpu"
  "$tb" limit --name "$bed" "host-$client" --cpu "$client_cpu" >> "$run_dir/logs/testbed.log"
  state=/run/nova-testbed/$bed
  local zk_addr cluster=scale secret=$run_dir/secret
  zk_addr=$(addr_of "$zk_host")
  local zk=$zk_addr:$kZkPort
  head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$secret"
  chmod 0600 "$secret"

  local rtt_hosts rtt_lo
  rtt_hosts=$(rtt_p50 "${ltc_hosts[0]}" "$client" "$(addr_of "${ltc_hosts[0]}")")
  rtt_lo=$(loopback_rtt_p50)
  echo "   64 B TCP round trip p50: client -> LTC host ${rtt_hosts} us, loopback ${rtt_lo} us" >&2

  # ZooKeeper, bound to host-0's address only.
  mkdir -p "$run_dir/zk/data"
  cat > "$run_dir/zk/zoo.cfg" <<EOF
tickTime=500
initLimit=10
syncLimit=5
dataDir=$run_dir/zk/data
clientPort=$kZkPort
clientPortAddress=$zk_addr
admin.enableServer=false
4lw.commands.whitelist=srvr,ruok
maxSessionTimeout=60000
EOF
  launch "$zk_host" zookeeper java -Xmx256m -cp "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar" \
    -Dzookeeper.log.dir="$run_dir/logs" -Dzookeeper.root.logger=INFO,CONSOLE \
    org.apache.zookeeper.server.quorum.QuorumPeerMain "$run_dir/zk/zoo.cfg"
  local deadline=$((SECONDS + kStartTimeoutS))
  until ex "$client" sh -c "echo srvr | nc -w 2 $zk_addr $kZkPort" 2>/dev/null | grep -q '^Mode'; do
    ((SECONDS < deadline)) || { tail -n 20 "$run_dir/logs/zookeeper.log" >&2; die "ZooKeeper did not start"; }
    sleep 0.5
  done

  split_points > "$run_dir/split_points.txt"
  log_cmd "$tb" exec --name "$bed" "host-$zk_host" "$bin/nova_admin" create-cluster "--zk=$zk" \
    "--cluster=$cluster" "--split_points=$run_dir/split_points.txt" \
    --setting=table_availability=none --setting=log_mode=none
  ex "$zk_host" "$bin/nova_admin" create-cluster "--zk=$zk" "--cluster=$cluster" \
    "--split_points=$run_dir/split_points.txt" --setting=table_availability=none \
    --setting=log_mode=none > "$run_dir/logs/create-cluster.log" 2>&1 ||
    { cat "$run_dir/logs/create-cluster.log" >&2; die "create-cluster failed"; }

  local h a
  for ((i = 0; i < S; i++)); do
    h=${stoc_hosts[$i]}; a=$(addr_of "$h")
    launch "$h" "stoc-$i" "$bin/nova_stoc" "--stoc_id=$i" "--stoc_dir=$run_dir/data/stoc-$i" \
      "--listen_host=$a" "--listen_port=$kPort" "--metrics_host=$a" --metrics_port=0 \
      "--zk=$zk" "--cluster=$cluster" "--cluster_secret_file=$secret"
  done
  for ((i = 0; i < S; i++)); do wait_listen "stoc-$i"; done
  launch "$zk_host" coordinator "$bin/nova_coordinator" --coordinator_id=0 \
    "--coordinator_min_ltcs=$L" "--metrics_host=$zk_addr" --metrics_port=0 \
    "--zk=$zk" "--cluster=$cluster"
  for ((i = 0; i < L; i++)); do
    h=${ltc_hosts[$i]}; a=$(addr_of "$h")
    launch "$h" "ltc-$i" "$bin/nova_ltc" "--ltc_id=$i" "--ltc_dir=$run_dir/data/ltc-$i" \
      "--listen_host=$a" "--listen_port=$kPort" "--metrics_host=$a" --metrics_port=0 \
      "--zk=$zk" "--cluster=$cluster" "--cluster_secret_file=$secret" \
      --ltc_memtable_size_mb=4 --ltc_memtables_per_range=4 --ltc_dranges_per_range=2 \
      "--ltc_block_cache_mb=$block_cache_mb"
  done
  for ((i = 0; i < L; i++)); do wait_listen "ltc-$i"; done
  deadline=$((SECONDS + kStartTimeoutS))
  until ex "$client" "$bin/nova_cli" "--zk=$zk" "--cluster=$cluster" --timeout_ms=3000 count \
      > /dev/null 2> "$run_dir/logs/probe.log"; do
    ((SECONDS < deadline)) || { cat "$run_dir/logs/probe.log" >&2; die "cluster not serving"; }
    sleep 0.5
  done

  # Keys "user" + 10 digits in order (the split points' format) and 1 KiB records, for
  # every workload.
  local props=(-db nova -p "nova.zk=$zk" -p "nova.cluster=$cluster" -threads "$threads"
               -p "recordcount=$records" -p insertorder=ordered -p zeropadding=10
               -p fieldcount=1 -p fieldlength=1024)
  echo "   loading $records records" >&2
  log_cmd "$tb" exec --name "$bed" "host-$client" "$bin/nova_ycsb" -load -P "$workloads_dir/w100" \
    "${props[@]}"
  ex "$client" timeout -k 10 "$kLoadTimeoutS" "$bin/nova_ycsb" -load -P "$workloads_dir/w100" \
    "${props[@]}" > "$run_dir/load.txt" 2> "$run_dir/logs/load.err" ||
    { tail -n 20 "$run_dir/logs/load.err" >&2; die "the load failed"; }

  local w report dist c0 l0 s0 a0 c1 l1 s1 a1 t0 t1 all_hosts=()
  for ((i = 0; i < hosts; i++)); do all_hosts+=("$i"); done
  for w in "${workload_list[@]}"; do
    echo "   $w, ${seconds}s" >&2
    report=$run_dir/$w.txt
    dist=()
    [[ "$w" != *@* ]] || dist=(-p "requestdistribution=${w#*@}")
    log_cmd "$tb" exec --name "$bed" "host-$client" "$bin/nova_ycsb" -run \
      -P "$workloads_dir/${w%@*}" "${props[@]}" "${dist[@]+"${dist[@]}"}" \
      -p "operationcount=$kUnboundedOps" -p "maxexecutiontime=$seconds"
    l0=$(cpu_ns "${ltc_hosts[@]}"); s0=$(cpu_ns "${stoc_hosts[@]}"); c0=$(cpu_ns "$client")
    a0=$(cpu_ns "${all_hosts[@]}"); t0=$(date +%s%N)
    ex "$client" timeout -k 10 $((seconds + kRunSlackS)) "$bin/nova_ycsb" -run \
      -P "$workloads_dir/${w%@*}" "${props[@]}" "${dist[@]+"${dist[@]}"}" \
      -p "operationcount=$kUnboundedOps" -p "maxexecutiontime=$seconds" > "$report" 2> "$run_dir/logs/$w.err" ||
      { tail -n 20 "$run_dir/logs/$w.err" >&2; die "$w failed"; }
    t1=$(date +%s%N)
    l1=$(cpu_ns "${ltc_hosts[@]}"); s1=$(cpu_ns "${stoc_hosts[@]}"); c1=$(cpu_ns "$client")
    a1=$(cpu_ns "${all_hosts[@]}")
    printf '%s,%d,%d,%s,%.0f,%s,%s,%s,%s,%d,%s,%s,%s,%s,%s,%s\n' "$w" "$L" "$S" "$cpu" \
      "$(field "$report" OVERALL 'Throughput(ops/sec)')" \
      "$(field "$report" READ '50thPercentileLatency(us)')" \
      "$(field "$report" READ '99thPercentileLatency(us)')" \
      "$(field "$report" UPDATE '50thPercentileLatency(us)')" \
      "$(field "$report" UPDATE '99thPercentileLatency(us)')" \
      "$(failures "$report")" "$(cores $((l1 - l0)))" "$(cores $((s1 - s0)))" \
      "$(cores $((c1 - c0)))" "$(cores $((a1 - a0)))" "$rtt_hosts" "$rtt_lo" >> "$csv"
  done

  "$tb" down --name "$bed" >> "$run_dir/logs/testbed.log"
  rm -rf "$run_dir/data" "$run_dir/zk/data"
}

# ---- main ---------------------------------------------------------------------------

started=$(date -u '+%Y-%m-%d %H:%M UTC')
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for c in "${config_list[@]}"; do run_config "${c%%:*}" "${c##*:}"; done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

{
  echo "YCSB on the test bed: $records records of 1 KiB, $threads client threads, ${seconds} s per"
  echo "run, $cpu core(s) per LTC/StoC/ZooKeeper host, $client_cpu for the client host, $ranges"
  echo "ranges, ${block_cache_mb} MiB block cache per range; started $started; load average"
  echo "before: $load_before, after: $load_after."
  echo
  echo "| workload | LTC hosts | StoC hosts | ops/s | read p50 / p99 us | update p50 / p99 us | CPU used (cores): LTCs / StoCs / client / all | failed | RTT p50 us: hosts / loopback |"
  echo "|---|---|---|---|---|---|---|---|---|"
  tail -n +2 "$csv" | sort -t, -k1,1 -s | awk -F, '{
    printf "| %s | %d | %d | %d | %s / %s | %s / %s | %s / %s / %s / %s | %d | %s / %s |\n",
      $1, $2, $3, $5, ($6 == "" ? "-" : $6), ($7 == "" ? "-" : $7), ($8 == "" ? "-" : $8),
      ($9 == "" ? "-" : $9), $11, $12, $13, $14, $10, $15, $16 }'
} > "$out/table.md"
cat "$out/table.md"
echo
echo "CSV: $csv; commands: $commands"
