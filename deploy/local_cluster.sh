#!/usr/bin/env bash
# A Nova-LSM cluster on this machine, on loopback: a ZooKeeper server (Debian's package), a
# coordinator, StoCs and LTCs, with their data, logs and pid files under one directory.
#
#   deploy/local_cluster.sh start   --dir DIR [--ltcs N] [--stocs N] [--logcs N] [--ranges N]
#                                   [--log-mode MODE] [--log-replicas N]
#                                   [--cluster NAME] [--flag=value ...]
#   deploy/local_cluster.sh stop    --dir DIR
#   deploy/local_cluster.sh status  --dir DIR
#   deploy/local_cluster.sh kill    --dir DIR ID      # kill -9 one component: ltc-0, logc-1, ...
#   deploy/local_cluster.sh restart --dir DIR ID      # start it again: same id, data and port
#   deploy/local_cluster.sh add     --dir DIR ltc     # start one more LTC, then rebalance
#   deploy/local_cluster.sh remove  --dir DIR ltc-N   # move its ranges away, drop it, stop it
#   deploy/local_cluster.sh add     --dir DIR stoc    # start one more StoC (next unused id)
#   deploy/local_cluster.sh remove  --dir DIR stoc [--id N] [--timeout_s=S]  # drain it
#                                   # (nova_admin remove-stoc), stop it; default: newest
#
# start prints one line `NOVA_ZK=host:port NOVA_CLUSTER=name` once every range is served,
# and writes it to DIR/cluster.env. Any other --flag=value is passed to every component and
# to cluster creation (each ignores flags it does not know), e.g. --ltc_memtable_size_mb=8.
# Binaries come from $NOVA_BUILD_DIR if set, else build/. Logs: DIR/logs/<id>.log; pids:
# DIR/pids/<id>.pid; how each component was started: DIR/cmd/<id>.
#
# --log-mode (none, memory, disk, memory+disk; default none, or memory when --logcs > 0)
# becomes the cluster's log_mode setting, and --log-replicas (default: min(2, LogCs)) its
# log_replicas (docs/durability.md). LogCs persist to DIR/data/logc-N in the disk modes.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bin=${NOVA_BUILD_DIR:-$root/build}/bin
start_timeout=${NOVA_START_TIMEOUT:-90}  # seconds, for ZooKeeper (a JVM) and the cluster

starting=0  # set while `start` runs: a failure then stops what it started
die() {
  echo "local_cluster.sh: $*" >&2
  if ((starting)); then
    starting=0
    echo "local_cluster.sh: start failed; stopping what was started" >&2
    stop_all
  fi
  exit 1
}
usage() { sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

cmd=${1:-}
[[ -n "$cmd" ]] || usage
shift
dir="" ltcs=1 stocs=3 logcs=0 ranges=4 cluster=local id="" log_mode="" log_replicas="" member_id=""
extra=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dir) dir=$2; shift 2 ;;
    --dir=*) dir=${1#--dir=}; shift ;;
    --ltcs) ltcs=$2; shift 2 ;;
    --ltcs=*) ltcs=${1#--ltcs=}; shift ;;
    --stocs) stocs=$2; shift 2 ;;
    --stocs=*) stocs=${1#--stocs=}; shift ;;
    --logcs) logcs=$2; shift 2 ;;
    --logcs=*) logcs=${1#--logcs=}; shift ;;
    --log-mode) log_mode=$2; shift 2 ;;
    --log-mode=*) log_mode=${1#--log-mode=}; shift ;;
    --log-replicas) log_replicas=$2; shift 2 ;;
    --log-replicas=*) log_replicas=${1#--log-replicas=}; shift ;;
    --ranges) ranges=$2; shift 2 ;;
    --ranges=*) ranges=${1#--ranges=}; shift ;;
    --id) member_id=$2; shift 2 ;;
    --id=*) member_id=${1#--id=}; shift ;;
    --cluster) cluster=$2; shift 2 ;;
    --cluster=*) cluster=${1#--cluster=}; shift ;;
    -h|--help) usage ;;
    --*=*) extra+=("$1"); shift ;;
    -*) die "unknown option $1 (component flags must be given as --flag=value)" ;;
    *) [[ -z "$id" ]] || die "unexpected argument $1"; id=$1; shift ;;
  esac
done
[[ -n "$dir" ]] || die "--dir DIR is required"
for n in "$ltcs" "$stocs" "$logcs" "$ranges"; do
  [[ "$n" =~ ^[0-9]+$ ]] || die "--ltcs/--stocs/--logcs/--ranges want a number, got '$n'"
done
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

# ---- helpers ------------------------------------------------------------------------

pid_of() { cat "$dir/pids/$1.pid" 2>/dev/null || true; }
alive() { local p; p=$(pid_of "$1"); [[ -n "$p" ]] && kill -0 "$p" 2>/dev/null; }

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Names of the extra flags, for --undefok: a component ignores the ones it does not define.
undefok() {
  local names=() f
  for f in "${extra[@]+"${extra[@]}"}"; do f=${f#--}; names+=("${f%%=*}"); done
  local IFS=,
  echo "${names[*]-}"
}

# Starts component $1 from the command in DIR/cmd/$1 (one argument per line), in the
# background, logging to DIR/logs/$1.log.
launch() {
  local id=$1 args=()
  mapfile -t args < "$dir/cmd/$id"
  setsid "${args[@]}" > "$dir/logs/$id.log" 2>&1 < /dev/null &
  echo $! > "$dir/pids/$id.pid"
}

# Waits until component $1 printed its LISTEN line; prints host:port.
wait_listen() {
  local id=$1 deadline=$((SECONDS + start_timeout)) line
  while ((SECONDS < deadline)); do
    line=$(grep -m1 '^LISTEN ' "$dir/logs/$id.log" 2>/dev/null || true)
    if [[ -n "$line" ]]; then echo "${line#LISTEN }"; return 0; fi
    alive "$id" || { tail -n 20 "$dir/logs/$id.log" >&2; die "$id exited during start"; }
    sleep 0.2
  done
  die "$id did not start within ${start_timeout}s (see $dir/logs/$id.log)"
}

# Writes the command line of component $1 (remaining arguments) to DIR/cmd/$1.
save_cmd() { local id=$1; shift; printf '%s\n' "$@" > "$dir/cmd/$id"; }

# Pins a started component to the port it got, so a restart keeps its address.
pin_port() {
  local id=$1 address=$2
  sed -i "s/^--listen_port=0\$/--listen_port=${address##*:}/" "$dir/cmd/$id"
}

zk_address() { cat "$dir/zk/address" 2>/dev/null || true; }

start_zookeeper() {
  local jar=/usr/share/java/zookeeper.jar port
  [[ -r $jar ]] || die "ZooKeeper is not installed ($jar missing): run deploy/install_deps.sh"
  port=$(free_port)
  mkdir -p "$dir/zk/data"
  cat > "$dir/zk/zoo.cfg" <<EOF
tickTime=500
initLimit=10
syncLimit=5
dataDir=$dir/zk/data
clientPort=$port
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=srvr,ruok
maxSessionTimeout=60000
EOF
  echo "127.0.0.1:$port" > "$dir/zk/address"
  save_cmd zookeeper java -cp "/etc/zookeeper/conf:$jar" \
    -Dzookeeper.log.dir="$dir/logs" -Dzookeeper.root.logger=INFO,CONSOLE \
    org.apache.zookeeper.server.quorum.QuorumPeerMain "$dir/zk/zoo.cfg"
  launch zookeeper
  local deadline=$((SECONDS + start_timeout))
  until [[ "$(echo srvr | nc -w 2 127.0.0.1 "$port" 2>/dev/null | grep -c '^Mode')" -gt 0 ]]; do
    alive zookeeper || { tail -n 20 "$dir/logs/zookeeper.log" >&2; die "ZooKeeper exited"; }
    ((SECONDS < deadline)) || die "ZooKeeper did not answer within ${start_timeout}s"
    sleep 0.5
  done
}

# The flags every component gets; $1 = "transport" for those that talk to peers over the
# exchange transport (and need the cluster secret).
common_flags() {
  echo "--zk=$(zk_address)"
  echo "--cluster=$cluster"
  [[ "${1:-}" != transport ]] || echo "--cluster_secret_file=$dir/secret"
  echo "--metrics_port=0"
  local u; u=$(undefok)
  [[ -z "$u" ]] || echo "--undefok=$u"
  local f
  for f in "${extra[@]+"${extra[@]}"}"; do echo "$f"; done
}

start_stoc() {
  local i=$1 id="stoc-$1" args
  mkdir -p "$dir/data/$id"
  mapfile -t args < <(common_flags transport)
  save_cmd "$id" "$bin/nova_stoc" "--stoc_id=$i" "--stoc_dir=$dir/data/$id" --listen_port=0 \
    "${args[@]}"
  launch "$id"
}

start_logc() {
  local i=$1 id="logc-$1" args persist=()
  mkdir -p "$dir/data/$id"
  [[ "$log_mode" != disk && "$log_mode" != memory+disk ]] || persist=(--logc_persist)
  mapfile -t args < <(common_flags transport)
  save_cmd "$id" "$bin/nova_logc" "--logc_id=$i" "--logc_dir=$dir/data/$id" \
    "${persist[@]+"${persist[@]}"}" --listen_port=0 "${args[@]}"
  launch "$id"
}

start_ltc() {
  local i=$1 id="ltc-$1" args
  mkdir -p "$dir/data/$id"
  mapfile -t args < <(common_flags transport)
  save_cmd "$id" "$bin/nova_ltc" "--ltc_id=$i" "--ltc_dir=$dir/data/$id" --listen_port=0 \
    "${args[@]}"
  launch "$id"
}

start_coordinator() {
  local args
  mapfile -t args < <(common_flags)
  save_cmd coordinator "$bin/nova_coordinator" --coordinator_id=0 \
    "--coordinator_min_ltcs=$ltcs" "${args[@]}"
  launch coordinator
}

# The ids of every component started, in start order.
components() { ls -tr "$dir/cmd" 2>/dev/null || true; }

stop_all() {
  local id p
  # Clients' servers first, ZooKeeper last (so the others can deregister).
  for id in $(components | grep -v '^zookeeper$') zookeeper; do
    p=$(pid_of "$id")
    [[ -n "$p" ]] || continue
    if kill -0 "$p" 2>/dev/null; then kill -TERM "$p" 2>/dev/null || true; fi
  done
  local deadline=$((SECONDS + 20))
  for id in $(components); do
    p=$(pid_of "$id")
    [[ -n "$p" ]] || continue
    while kill -0 "$p" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
    kill -0 "$p" 2>/dev/null && kill -KILL "$p" 2>/dev/null || true
    rm -f "$dir/pids/$id.pid"
  done
}

# Stops component $1 (SIGTERM, then SIGKILL after 30 s) and forgets its pid and command;
# its data directory stays.
stop_one() {
  local id=$1 p deadline
  p=$(pid_of "$id")
  if [[ -n "$p" ]] && kill -0 "$p" 2>/dev/null; then
    kill -TERM "$p"
    deadline=$((SECONDS + 30))
    while kill -0 "$p" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
    kill -0 "$p" 2>/dev/null && kill -KILL "$p" 2>/dev/null || true
  fi
  rm -f "$dir/pids/$id.pid" "$dir/cmd/$id"
}

# add stoc: one more StoC with the next id never used in DIR (a removed StoC's id stays
# draining in the configuration, so it is not reused: its data directory stays as a marker),
# started like the others (the command of an existing StoC with the new id, directory and a
# free port). The coordinator adds it to the configuration and the LTCs use it at once.
# Waits until member KIND N is alive in the configuration (nova_admin status), or dies.
wait_in_config() {
  local kind=$1 n=$2 deadline=$((SECONDS + start_timeout))
  until "$bin/nova_admin" status "--zk=$NOVA_ZK" "--cluster=$NOVA_CLUSTER" 2>/dev/null |
      grep -qE "^$kind +$n +[^ ]+ +alive"; do
    ((SECONDS < deadline)) || die "$kind-$n is not in the configuration after ${start_timeout}s"
    sleep 0.2
  done
}

add_stoc() {
  local n=0 template new
  [[ -f "$dir/cluster.env" ]] || die "no cluster in $dir"
  source "$dir/cluster.env"
  template=$(ls "$dir/cmd" 2>/dev/null | grep -E '^stoc-[0-9]+$' | head -n1 || true)
  [[ -n "$template" ]] || die "no StoC in $dir to copy the command line of"
  while [[ -e "$dir/data/stoc-$n" || -f "$dir/cmd/stoc-$n" ]]; do n=$((n + 1)); done
  new="stoc-$n"
  mkdir -p "$dir/data/$new"
  sed -e "s|^--stoc_id=.*|--stoc_id=$n|" -e "s|^--stoc_dir=.*|--stoc_dir=$dir/data/$new|" \
    -e "s|^--listen_port=.*|--listen_port=0|" "$dir/cmd/$template" > "$dir/cmd/$new"
  launch "$new"
  pin_port "$new" "$(wait_listen "$new")"
  wait_in_config stoc "$n"
  echo "started $new: in the configuration, the LTCs place new table copies on it" >&2
}

# remove stoc [--id N] (or remove stoc-N): nova_admin remove-stoc (drains it: every LTC moves
# its table copies off it; then drops it from the configuration), then stops the process.
# Default: the StoC with the highest id still started here.
remove_stoc() {
  local n=$member_id
  [[ -f "$dir/cluster.env" ]] || die "no cluster in $dir"
  source "$dir/cluster.env"
  [[ "$id" == stoc ]] || n=${id#stoc-}
  if [[ -z "$n" ]]; then
    n=$(ls "$dir/cmd" 2>/dev/null | sed -n 's/^stoc-\([0-9][0-9]*\)$/\1/p' | sort -n | tail -n1)
    [[ -n "$n" ]] || die "no StoC started in $dir"
  fi
  [[ "$n" =~ ^[0-9]+$ ]] || die "remove stoc: --id wants a StoC number, got '$n'"
  [[ -f "$dir/cmd/stoc-$n" ]] || die "no component stoc-$n in $dir"
  local u; u=$(undefok)
  # Extra --flag=value arguments go to nova_admin (e.g. --timeout_s=600 for a big StoC).
  "$bin/nova_admin" remove-stoc "--stoc=$n" "--zk=$NOVA_ZK" "--cluster=$NOVA_CLUSTER" \
    ${u:+"--undefok=$u"} "${extra[@]+"${extra[@]}"}" >&2 ||
    die "stoc-$n is not drained (nova_admin remove-stoc failed); it keeps running (re-run to wait again)"
  stop_one "stoc-$n"
  echo "removed stoc-$n (its data directory stays: $dir/data/stoc-$n)" >&2
}

# ---- commands -----------------------------------------------------------------------

case "$cmd" in
  start)
    ((ltcs >= 1 && stocs >= 1 && ranges >= 1)) || die "need at least 1 LTC, 1 StoC and 1 range"
    [[ -n "$log_mode" ]] || { if ((logcs > 0)); then log_mode=memory; else log_mode=none; fi; }
    case "$log_mode" in
      none) ;;
      memory|disk|memory+disk) ((logcs > 0)) || die "--log-mode=$log_mode needs --logcs >= 1" ;;
      *) die "--log-mode must be none, memory, disk or memory+disk, got '$log_mode'" ;;
    esac
    [[ -n "$log_replicas" ]] || log_replicas=$((logcs < 2 ? (logcs < 1 ? 1 : logcs) : 2))
    [[ "$log_replicas" =~ ^[0-9]+$ ]] && ((log_replicas >= 1)) ||
      die "--log-replicas wants a positive number, got '$log_replicas'"
    for b in nova_stoc nova_logc nova_ltc nova_coordinator nova_admin nova_cli; do
      [[ -x "$bin/$b" ]] || die "$bin/$b not found: build first (or set NOVA_BUILD_DIR)"
    done
    if [[ -n "$(ls "$dir/pids" 2>/dev/null)" ]]; then
      for id in $(components); do
        alive "$id" && die "a cluster already runs in $dir ($id); stop it first"
      done
    fi
    rm -rf "$dir/pids" "$dir/cmd"
    mkdir -p "$dir/pids" "$dir/logs" "$dir/cmd"
    [[ -s "$dir/secret" ]] || head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$dir/secret"
    starting=1
    trap 'die "a command failed (line $LINENO)"' ERR
    echo "starting ZooKeeper" >&2
    start_zookeeper
    zk=$(zk_address)
    # The cluster document (an existing one, from an earlier start in DIR, is kept).
    u=$(undefok)
    if ! "$bin/nova_admin" show-config "--zk=$zk" "--cluster=$cluster" >/dev/null 2>&1; then
      "$bin/nova_admin" create-cluster "--zk=$zk" "--cluster=$cluster" "--ranges=$ranges" \
        "--setting=log_mode=$log_mode" "--setting=log_replicas=$log_replicas" \
        ${u:+"--undefok=$u"} "${extra[@]+"${extra[@]}"}" >&2
    fi
    echo "starting $stocs StoCs, $logcs LogCs (log_mode=$log_mode), $ltcs LTCs and a coordinator" >&2
    for ((i = 0; i < stocs; i++)); do start_stoc "$i"; done
    for ((i = 0; i < logcs; i++)); do start_logc "$i"; done
    for ((i = 0; i < stocs; i++)); do pin_port "stoc-$i" "$(wait_listen "stoc-$i")"; done
    for ((i = 0; i < logcs; i++)); do pin_port "logc-$i" "$(wait_listen "logc-$i")"; done
    start_coordinator
    for ((i = 0; i < ltcs; i++)); do start_ltc "$i"; done
    for ((i = 0; i < ltcs; i++)); do pin_port "ltc-$i" "$(wait_listen "ltc-$i")"; done
    # Serving: every range is assigned and answers (count reads all of them).
    deadline=$((SECONDS + start_timeout))
    until "$bin/nova_cli" "--zk=$zk" "--cluster=$cluster" --timeout_ms=3000 count \
        >/dev/null 2>"$dir/logs/probe.log"; do
      ((SECONDS < deadline)) || { cat "$dir/logs/probe.log" >&2; die "cluster not serving after ${start_timeout}s"; }
      sleep 0.5
    done
    trap - ERR
    starting=0
    echo "NOVA_ZK=$zk NOVA_CLUSTER=$cluster" | tee "$dir/cluster.env"
    ;;
  stop)
    stop_all
    echo "stopped the cluster in $dir" >&2
    ;;
  status)
    zk=$(zk_address)
    [[ -n "$zk" ]] || die "no cluster in $dir"
    printf '%-12s %-8s %s\n' PROCESS PID STATE
    for id in $(components); do
      p=$(pid_of "$id")
      if alive "$id"; then st=running; else st=stopped; fi
      printf '%-12s %-8s %s\n' "$id" "${p:--}" "$st"
    done
    echo
    if alive zookeeper; then
      "$bin/nova_admin" status "--zk=$zk" "--cluster=$cluster"
    else
      echo "ZooKeeper is not running: no cluster view" >&2
    fi
    ;;
  kill)
    [[ -n "$id" ]] || die "kill: which component? (e.g. ltc-0, stoc-1)"
    [[ -f "$dir/cmd/$id" ]] || die "no component $id in $dir"
    p=$(pid_of "$id")
    alive "$id" || die "$id is not running"
    kill -KILL "$p"
    while kill -0 "$p" 2>/dev/null; do sleep 0.05; done
    echo "killed $id (pid $p)" >&2
    ;;
  restart)
    [[ -n "$id" ]] || die "restart: which component? (e.g. ltc-0, stoc-1)"
    [[ -f "$dir/cmd/$id" ]] || die "no component $id in $dir"
    alive "$id" && die "$id is running; kill or stop it first"
    launch "$id"
    if [[ "$id" != zookeeper && "$id" != coordinator ]]; then wait_listen "$id" >/dev/null; fi
    echo "restarted $id (pid $(pid_of "$id"))" >&2
    ;;
  add)
    if [[ "$id" == stoc ]]; then add_stoc; exit 0; fi
    [[ "$id" == ltc ]] || die "add: 'ltc' or 'stoc' (e.g. local_cluster.sh add --dir D ltc)"
    [[ -f "$dir/cluster.env" && -f "$dir/cmd/ltc-0" ]] || die "no cluster with an LTC in $dir"
    source "$dir/cluster.env"
    n=0
    while [[ -f "$dir/cmd/ltc-$n" ]]; do n=$((n + 1)); done
    new="ltc-$n"
    mkdir -p "$dir/data/$new"
    # ltc-0's command line with the new id, data directory and any free port.
    sed -e "s|^--ltc_id=0\$|--ltc_id=$n|" -e "s|^--ltc_dir=.*/ltc-0\$|--ltc_dir=$dir/data/$new|" \
      -e "s|^--listen_port=.*|--listen_port=0|" "$dir/cmd/ltc-0" > "$dir/cmd/$new"
    launch "$new"
    pin_port "$new" "$(wait_listen "$new")"
    # The coordinator lists it in the configuration first (rebalance moves ranges only to
    # LTCs in it).
    wait_in_config ltc "$n"
    echo "started $new; rebalancing" >&2
    "$bin/nova_admin" rebalance "--zk=$NOVA_ZK" "--cluster=$NOVA_CLUSTER" >&2
    ;;
  remove)
    if [[ "$id" == stoc || "$id" =~ ^stoc-[0-9]+$ ]]; then remove_stoc; exit 0; fi
    [[ "$id" =~ ^ltc-[0-9]+$ ]] || die "remove: which LTC or StoC? (e.g. local_cluster.sh remove --dir D ltc-1, or remove --dir D stoc --id 2)"
    [[ -f "$dir/cmd/$id" ]] || die "no component $id in $dir"
    source "$dir/cluster.env"
    "$bin/nova_admin" remove-ltc "--ltc=${id#ltc-}" "--zk=$NOVA_ZK" "--cluster=$NOVA_CLUSTER" >&2 ||
      die "$id still owns ranges (nova_admin remove-ltc failed); it keeps running"
    stop_one "$id"
    echo "removed $id" >&2
    ;;
  *) usage ;;
esac
