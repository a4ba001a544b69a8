#!/usr/bin/env bash
# A Nova-LSM cluster on this machine, on loopback: a ZooKeeper server (Debian's package), a
# coordinator, StoCs, LogCs and LTCs, with their data, logs and pid files under one
# directory. `deploy/local_cluster.sh --help` prints the commands and options (usage() below);
# docs/operations.md describes them, and "Stopping and restarting a whole cluster" there the
# order of a stop and how `start` resumes an existing directory.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bin=${NOVA_BUILD_DIR:-$root/build}/bin
start_timeout=${NOVA_START_TIMEOUT:-90}  # seconds, for ZooKeeper (a JVM) and the cluster
# Seconds the LTCs get to close their ranges (flushing their memtables to the StoCs) and
# exit on `stop`, before they are killed -9; a big memtable budget takes a while to flush.
ltc_stop_timeout=${NOVA_LTC_STOP_TIMEOUT:-120}
# Seconds any other component gets to exit after SIGTERM before it is killed -9.
stop_timeout=${NOVA_STOP_TIMEOUT:-30}

usage() {
  cat <<'EOF'
Usage: deploy/local_cluster.sh COMMAND --dir DIR [options]

A Nova-LSM cluster on this machine, on loopback: a ZooKeeper server, a coordinator, StoCs,
LogCs and LTCs, with their data, logs, pid files and command lines under DIR.

Commands:
  start   --dir DIR [--ltcs N] [--stocs N] [--logcs N] [--ranges N] [--log-mode MODE]
          [--log-replicas N] [--cluster NAME] [--flag=value ...]
          On a new (or empty) DIR: creates and starts a cluster. On a DIR holding a
          cluster that was started before (stopped, or every process killed at once):
          resumes that same cluster (its ZooKeeper data and port, ids, ports, secret and
          data) with every component DIR/cmd lists, those added later included. The
          options, if given on a resume, must be those the cluster was created with
          (else start refuses and says which differs). Waits until every range is
          served, then prints `NOVA_ZK=host:port NOVA_CLUSTER=name` (also written to
          DIR/cluster.env).
  stop    --dir DIR
          Stops the cluster without losing anything: the coordinator first (so that it
          moves no range while the others stop), then the LTCs, which close their ranges
          (flushing their memtables to the StoCs), waited for up to
          $NOVA_LTC_STOP_TIMEOUT s (120); then the LogCs, the StoCs and ZooKeeper. Exits
          1 if a component had to be killed -9 or an LTC could not flush.
  status  --dir DIR            the processes, and the cluster's view (nova_admin status)
  kill    --dir DIR ID         kill -9 one component: ltc-0, logc-1, stoc-2, coordinator,
                               zookeeper
  restart --dir DIR ID         start a stopped or killed component again: same id, data and
                               port
  add     --dir DIR ltc        start one more LTC, then rebalance ranges onto it
  add     --dir DIR stoc       start one more StoC (the next id never used in DIR)
  remove  --dir DIR ltc-N      move its ranges to the other LTCs, drop it, stop it
  remove  --dir DIR stoc [--id N] [--timeout_s=S]
                               drain a StoC (nova_admin remove-stoc: every LTC moves its
                               table copies off it), drop it, stop it; default: the newest
  help, -h, --help             this text

Options of start (they shape a new cluster; a resume only checks them):
  --dir DIR          the cluster's directory (every command needs it)
  --ltcs N           LTCs (default 1)
  --stocs N          StoCs (default 3)
  --logcs N          LogCs (default 0)
  --ranges N         ranges, split evenly by first byte (default 4)
  --log-mode MODE    none, memory, disk or memory+disk (default: memory with LogCs, none
                     without): the cluster's log_mode setting (docs/durability.md); the
                     LogCs persist their logs to DIR/data/logc-N in the disk modes
  --log-replicas N   the log_replicas setting: LogCs per log (default min(2, LogCs))
  --cluster NAME     the cluster's name in ZooKeeper (default local)
  --flag=value       any other flag goes to every component and to nova_admin
                     create-cluster, each ignoring those it does not define (--undefok),
                     e.g. --ltc_memtable_size_mb=8 or --split_points=FILE; with `remove
                     stoc` they go to nova_admin (e.g. --timeout_s=600)
  --id N             remove stoc: which StoC

Files under DIR: logs/<id>.log (each component's output; the runs before are kept as
<id>.log.1 up to .3), pids/<id>.pid, cmd/<id> (the command line, one argument a line, with
the port it got pinned), data/<id>/, zk/ (zoo.cfg and ZooKeeper's data), secret (the
cluster secret), cluster.conf (the options it was created with), cluster.env.

Environment: NOVA_BUILD_DIR (binaries in $NOVA_BUILD_DIR/bin, default build/),
NOVA_START_TIMEOUT (seconds each wait of start may take, default 90), NOVA_LTC_STOP_TIMEOUT
(120) and NOVA_STOP_TIMEOUT (30, the other components): how long stop waits after SIGTERM
before kill -9.
EOF
}
# A usage error: the reason and the usage on stderr, exit status 2.
usage_error() {
  [[ -z "${1:-}" ]] || echo "local_cluster.sh: $1" >&2
  usage >&2
  exit 2
}

starting=0  # set while `start` runs: a failure then stops what it started
die() {
  echo "local_cluster.sh: $*" >&2
  # Only the script itself stops the cluster: a die inside $(...) ends that subshell, and the
  # caller's `|| die` then stops what was started (once).
  if ((starting)) && [[ "$BASHPID" == "$$" ]]; then
    starting=0
    echo "local_cluster.sh: start failed; stopping what was started" >&2
    stop_all || true
  fi
  exit 1
}

cmd=${1:-}
case "$cmd" in
  help|-h|--help) usage; exit 0 ;;
  start|stop|status|kill|restart|add|remove) shift ;;
  "") usage_error "which command?" ;;
  *) usage_error "unknown command '$cmd'" ;;
esac
dir="" ltcs=1 stocs=3 logcs=0 ranges=4 cluster=local id="" log_mode="" log_replicas="" member_id=""
extra=()
given=()  # the shaping options given on the command line (a resume checks them)
while [[ $# -gt 0 ]]; do
  case "$1" in
    -h|--help|help) usage; exit 0 ;;
  esac
  # --name value and --name=value alike.
  opt="" val=""
  case "$1" in
    --dir|--ltcs|--stocs|--logcs|--log-mode|--log-replicas|--ranges|--id|--cluster)
      [[ $# -ge 2 ]] || usage_error "$1 needs a value"
      opt=${1#--} val=$2; shift 2 ;;
    --dir=*|--ltcs=*|--stocs=*|--logcs=*|--log-mode=*|--log-replicas=*|--ranges=*|--id=*|--cluster=*)
      opt=${1%%=*} opt=${opt#--} val=${1#*=}; shift ;;
    --*=*) extra+=("$1"); shift; continue ;;
    -*) usage_error "unknown option $1 (component flags must be given as --flag=value)" ;;
    *) [[ -z "$id" ]] || usage_error "unexpected argument $1"; id=$1; shift; continue ;;
  esac
  case "$opt" in
    dir) dir=$val ;;
    ltcs) ltcs=$val ;;
    stocs) stocs=$val ;;
    logcs) logcs=$val ;;
    log-mode) log_mode=$val ;;
    log-replicas) log_replicas=$val ;;
    ranges) ranges=$val ;;
    id) member_id=$val ;;
    cluster) cluster=$val ;;
  esac
  [[ "$opt" == dir || "$opt" == id ]] || given+=("$opt")
done
[[ -n "$dir" ]] || usage_error "--dir DIR is required"
for n in "$ltcs" "$stocs" "$logcs" "$ranges"; do
  [[ "$n" =~ ^[0-9]+$ ]] || die "--ltcs/--stocs/--logcs/--ranges want a number, got '$n'"
done
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

# ---- helpers ------------------------------------------------------------------------

pid_of() { cat "$dir/pids/$1.pid" 2>/dev/null || true; }
# True if component $1 runs: its pid file names a live process running exactly its command
# line (or setsid with it, an instant before it execs it). A pid reused by another process,
# e.g. after a reboot, does not count, so it is never signalled.
alive() {
  local p running want
  p=$(pid_of "$1")
  [[ -n "$p" ]] && kill -0 "$p" 2>/dev/null || return 1
  # The whole command line, not only the program: another cluster's component from the same
  # build, or any JVM, must not count. --listen_port is left out (pinned after the start).
  running=$({ tr '\0' '\n' < "/proc/$p/cmdline"; } 2>/dev/null | grep -v '^--listen_port=' || true)
  want=$(grep -v '^--listen_port=' "$dir/cmd/$1" 2>/dev/null || true)
  [[ -n "$want" && ( "$running" == "$want" || "$running" == "setsid"$'\n'"$want" ) ]]
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Dies, naming the process if it can, when port $2 that component $1 must listen on is
# taken: a resumed cluster keeps its ports, since they are in the configuration and in
# every client's NOVA_ZK.
check_port_free() {
  local id=$1 port=$2 who
  python3 - "$port" <<'EOF' && return 0
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the daemons: TIME_WAIT is fine
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(1)
EOF
  who=$(ss -Hltnp "sport = :$port" 2>/dev/null | grep -o 'users:(.*)' | head -n1 || true)
  die "port $port of $id (pinned in $dir/cmd/$id) is taken by another process${who:+: $who}; stop that process and start again (the cluster's members and clients know this port)"
}

# The port component $1 listens on as pinned in its command line (empty: none pinned).
pinned_port() {
  if [[ "$1" == zookeeper ]]; then
    sed -n 's/^clientPort=\([0-9][0-9]*\)$/\1/p' "$dir/zk/zoo.cfg" 2>/dev/null
  else
    sed -n 's/^--listen_port=\([1-9][0-9]*\)$/\1/p' "$dir/cmd/$1" 2>/dev/null
  fi
}

# Names of the extra flags, for --undefok: a component ignores the ones it does not define.
undefok() {
  local names=() f
  for f in "${extra[@]+"${extra[@]}"}"; do f=${f#--}; names+=("${f%%=*}"); done
  local IFS=,
  echo "${names[*]-}"
}

# Keeps the logs of the runs before (DIR/logs/<id>.log.1 the last one, up to .3).
rotate_log() {
  local f=$dir/logs/$1.log i
  [[ -s "$f" ]] || return 0
  for i in 2 1; do [[ ! -f "$f.$i" ]] || mv -f "$f.$i" "$f.$((i + 1))"; done
  mv -f "$f" "$f.1"
}

# Starts component $1 from the command in DIR/cmd/$1 (one argument per line), in the
# background, logging to DIR/logs/$1.log.
launch() {
  local id=$1 args=()
  mapfile -t args < "$dir/cmd/$id"
  rotate_log "$id"
  setsid "${args[@]}" > "$dir/logs/$id.log" 2>&1 < /dev/null &
  echo $! > "$dir/pids/$id.pid"
}

# Whether the process `launch` just started for component $1 still runs: its pid exists
# and is no zombie. Not `alive`: until the forked shell has exec'd setsid and the program,
# its command line is still this script's, which `alive` takes for another process.
launched_running() {
  local p
  p=$(pid_of "$1")
  [[ -n "$p" ]] && kill -0 "$p" 2>/dev/null &&
    [[ -n "$({ tr -d '\0' < "/proc/$p/cmdline"; } 2>/dev/null)" ]]
}

# Waits until component $1, just launched, printed its LISTEN line; prints host:port.
wait_listen() {
  local id=$1 deadline=$((SECONDS + start_timeout)) line
  while ((SECONDS < deadline)); do
    line=$(grep -m1 '^LISTEN ' "$dir/logs/$id.log" 2>/dev/null || true)
    if [[ -n "$line" ]]; then echo "${line#LISTEN }"; return 0; fi
    launched_running "$id" || { tail -n 20 "$dir/logs/$id.log" >&2; die "$id exited during start"; }
    sleep 0.2
  done
  die "$id did not start within ${start_timeout}s (see $dir/logs/$id.log)"
}

# Writes the command line of component $1 (remaining arguments) to DIR/cmd/$1.
save_cmd() { local id=$1; shift; printf '%s\n' "$@" > "$dir/cmd/$id"; }

# Waits until component $1 listens, then pins it to the port it got, so a restart keeps its
# address. Dies (in this shell: stopping what `start` started) if it does not come up.
listen_and_pin() {
  local id=$1 address
  address=$(wait_listen "$id") || die "$id did not come up (see $dir/logs/$id.log)"
  [[ "$address" =~ :[0-9]+$ ]] || die "$id printed no address ('$address')"
  sed -i "s/^--listen_port=0\$/--listen_port=${address##*:}/" "$dir/cmd/$id"
}

zk_address() { cat "$dir/zk/address" 2>/dev/null || true; }

# A new ZooKeeper: its configuration (a free port, data in DIR/zk/data) and command line.
create_zookeeper() {
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
}

# Starts ZooKeeper from DIR/cmd/zookeeper and waits until it answers `srvr`.
start_zookeeper() {
  local port
  port=$(pinned_port zookeeper)
  [[ -n "$port" ]] || die "no clientPort in $dir/zk/zoo.cfg"
  launch zookeeper
  local deadline=$((SECONDS + start_timeout))
  until [[ "$(echo srvr | nc -w 2 127.0.0.1 "$port" 2>/dev/null | grep -c '^Mode')" -gt 0 ]]; do
    if ! launched_running zookeeper; then
      tail -n 20 "$dir/logs/zookeeper.log" >&2
      die "ZooKeeper exited"
    fi
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

# The ids of every component started in DIR, in start order.
components() { ls -tr "$dir/cmd" 2>/dev/null || true; }
# The components of one kind (a regular expression on the id), in id order.
components_of() { components | grep -E "$1" | sort -V || true; }

# True once process $1 has exited: gone, or a zombie its parent has not reaped yet (its
# sockets and files are closed; this container's init may take seconds to reap it).
exited() {
  kill -0 "$1" 2>/dev/null || return 0
  [[ "$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)" == Z ]]
}
signalled=()  # every pid stop_group signalled: stop_all waits until they are reaped

# Sends SIGTERM to the running components among $3..., waits up to $1 seconds for them to
# exit (saying every 5 s which are left), then kill -9s the rest with a warning that says
# what it may cost ($2). Forgets their pids. Returns 1 if one had to be killed.
stop_group() {
  local timeout=$1 cost=$2 id p rc=0 started=$SECONDS next=$((SECONDS + 5))
  shift 2
  local ids=() left=()
  for id in "$@"; do
    if alive "$id"; then
      p=$(pid_of "$id")
      kill -TERM "$p" 2>/dev/null || true
      ids+=("$id")
      signalled+=("$p")
    fi
  done
  while ((${#ids[@]})); do
    left=()
    for id in "${ids[@]}"; do exited "$(pid_of "$id")" || left+=("$id"); done
    ((${#left[@]})) || break
    if ((SECONDS - started >= timeout)); then
      for id in "${left[@]}"; do
        echo "local_cluster.sh: WARNING: $id did not exit within ${timeout}s of SIGTERM;" \
          "killing it with SIGKILL: $cost (see $dir/logs/$id.log)" >&2
        kill -KILL "$(pid_of "$id")" 2>/dev/null || true
      done
      for id in "${left[@]}"; do until exited "$(pid_of "$id")"; do sleep 0.05; done; done
      rc=1
      break
    fi
    if ((SECONDS >= next)); then
      echo "  waiting for ${left[*]} to exit ($((SECONDS - started)) s of ${timeout} s)" >&2
      next=$((SECONDS + 5))
    fi
    sleep 0.1
  done
  for id in "$@"; do rm -f "$dir/pids/$id.pid"; done
  return $rc
}

# Waits (up to NOVA_STOP_TIMEOUT s) until every process stop_group signalled is reaped, so
# that none is left in the process table when stop returns.
wait_reaped() {
  local p deadline=$((SECONDS + stop_timeout))
  for p in "${signalled[@]+"${signalled[@]}"}"; do
    while kill -0 "$p" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
  done
}

# Stops every component in the order that loses nothing (docs/operations.md, "Stopping
# and restarting a whole cluster"):
#  1. the coordinator: it only reacts to members leaving, and every departure now is
#     intended; left running it would fail a stopping LTC's ranges over to an LTC that is
#     stopping too, so the cluster would come back with its ranges moved;
#  2. the LTCs, all at once: each closes its ranges, flushing their memtables to the StoCs
#     and deleting their logs, which needs the StoCs and LogCs up; waited for;
#  3. the LogCs, then the StoCs, which nothing writes to any more;
#  4. ZooKeeper last, so that the others deregister.
# Returns 1 (after stopping everything) if a component had to be killed -9 or an LTC
# logged that a closing flush failed.
stop_all() {
  local rc=0 id ltcs=() sizes=() others=()
  mapfile -t ltcs < <(components_of '^ltc-')
  # Where each LTC's log ends now: what it logs from here on is its shutdown.
  for id in "${ltcs[@]+"${ltcs[@]}"}"; do
    sizes+=("$(stat -c %s "$dir/logs/$id.log" 2>/dev/null || echo 0)")
  done
  mapfile -t others < <(components | grep -Ev '^(ltc-|logc-|stoc-|coordinator|zookeeper$)' || true)
  # shellcheck disable=SC2046
  stop_group "$stop_timeout" "no harm (it holds no data)" $(components_of '^coordinator') || rc=1
  if ((${#ltcs[@]})); then
    local running=()
    for id in "${ltcs[@]}"; do alive "$id" && running+=("$id"); done
    ((${#running[@]} == 0)) ||
      echo "stopping ${running[*]}: closing their ranges (flushing memtables to the StoCs)" >&2
    stop_group "$ltc_stop_timeout" "its memtables are not flushed; only the logs of log_mode memory or disk still hold them" \
      "${ltcs[@]}" || rc=1
    local i=0 failed
    for id in "${ltcs[@]}"; do
      failed=$(tail -c +"$((sizes[i] + 1))" "$dir/logs/$id.log" 2>/dev/null |
        grep -c 'closing a range: flush failed' || true)
      if ((failed > 0)); then
        echo "local_cluster.sh: WARNING: $id could not flush $failed range(s) while stopping" \
          "(see 'closing a range: flush failed' in $dir/logs/$id.log): their unflushed writes" \
          "are only in the logs (lost with log_mode none)" >&2
        rc=1
      fi
      i=$((i + 1))
    done
  fi
  stop_group "$stop_timeout" "whatever it held in memory" "${others[@]+"${others[@]}"}" || rc=1
  # shellcheck disable=SC2046
  stop_group "$stop_timeout" "its memory logs are lost" $(components_of '^logc-') || rc=1
  # shellcheck disable=SC2046
  stop_group "$stop_timeout" "writes it had not synced may be lost" $(components_of '^stoc-') || rc=1
  stop_group "$stop_timeout" "ZooKeeper may replay its log at start" \
    $(components_of '^zookeeper$') || rc=1
  wait_reaped
  return $rc
}

# Stops component $1 (SIGTERM, then SIGKILL after NOVA_STOP_TIMEOUT s) and forgets its pid
# and command; its data directory stays.
stop_one() {
  stop_group "$stop_timeout" "it was being removed" "$1" || true
  wait_reaped
  rm -f "$dir/cmd/$1"
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
  listen_and_pin "$new"
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

# Waits until the cluster serves: every range is assigned and answers (count reads all of
# them). On a timeout, says what the LTCs report about ranges they cannot open yet.
wait_serving() {
  local zk=$1 deadline=$((SECONDS + start_timeout))
  until "$bin/nova_cli" "--zk=$zk" "--cluster=$cluster" --timeout_ms=3000 count \
      >/dev/null 2>"$dir/logs/probe.log"; do
    if ((SECONDS >= deadline)); then
      cat "$dir/logs/probe.log" >&2
      grep -h -m3 -E 'recovery (waits|is blocked)|cannot (open|recover)|opening range .* failed' \
        "$dir"/logs/ltc-*.log >&2 2>/dev/null || true
      die "cluster not serving after ${start_timeout}s (NOVA_START_TIMEOUT; see $dir/logs/ltc-*.log)"
    fi
    sleep 0.5
  done
}

# Records the options a new cluster was created with (DIR/cluster.conf), which a resume
# compares with those it is given.
record_options() {
  {
    printf 'created_ltcs=%q\ncreated_stocs=%q\ncreated_logcs=%q\ncreated_ranges=%q\n' \
      "$ltcs" "$stocs" "$logcs" "$ranges"
    printf 'created_log_mode=%q\ncreated_log_replicas=%q\ncreated_cluster=%q\n' \
      "$log_mode" "$log_replicas" "$cluster"
    printf 'created_extra=('
    printf '%q ' "${extra[@]+"${extra[@]}"}"
    printf ')\n'
  } > "$dir/cluster.conf"
}

# A resume takes the cluster as DIR holds it. Options given anyway must be those it was
# created with (so re-running the command that created it resumes it); any other value
# would silently not apply, so start refuses it, naming each.
check_resume_options() {
  local o bad=() want got
  ((${#given[@]} + ${#extra[@]})) || return 0
  [[ -f "$dir/cluster.conf" ]] ||
    die "$dir holds a cluster started before, with no record of the options it was created with ($dir/cluster.conf): run start --dir $dir without options to resume it as it is"
  local created_ltcs created_stocs created_logcs created_ranges created_log_mode
  local created_log_replicas created_cluster created_extra=()
  source "$dir/cluster.conf"
  for o in "${given[@]+"${given[@]}"}"; do
    case "$o" in
      ltcs) want=$created_ltcs got=$ltcs ;;
      stocs) want=$created_stocs got=$stocs ;;
      logcs) want=$created_logcs got=$logcs ;;
      ranges) want=$created_ranges got=$ranges ;;
      log-mode) want=$created_log_mode got=$log_mode ;;
      log-replicas) want=$created_log_replicas got=$log_replicas ;;
      cluster) want=$created_cluster got=$cluster ;;
      *) continue ;;
    esac
    [[ "$got" == "$want" ]] || bad+=("--$o $got (it was created with $want)")
  done
  if ((${#extra[@]})) && [[ "${extra[*]}" != "${created_extra[*]-}" ]]; then
    bad+=("the flags '${extra[*]}' (it was created with '${created_extra[*]-}')")
  fi
  ((${#bad[@]} == 0)) ||
    die "$dir holds a cluster that start resumes as it is, and these options differ from those it was created with: ${bad[*]}. Drop them (add and remove change its members; flags of one component: edit $dir/cmd/<id>), or give a new directory for a new cluster"
}

# start on a new directory: a new cluster with the options given.
create_cluster() {
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
  # What an earlier, failed start left (it never served): started afresh.
  rm -rf "$dir/pids" "$dir/cmd"
  mkdir -p "$dir/pids" "$dir/logs" "$dir/cmd"
  [[ -s "$dir/secret" ]] || head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$dir/secret"
  starting=1
  trap 'die "a command failed (line $LINENO)"' ERR
  echo "starting ZooKeeper" >&2
  create_zookeeper
  start_zookeeper
  zk=$(zk_address)
  # The cluster document (one left by an earlier, failed start in DIR is kept).
  u=$(undefok)
  if ! "$bin/nova_admin" show-config "--zk=$zk" "--cluster=$cluster" >/dev/null 2>&1; then
    "$bin/nova_admin" create-cluster "--zk=$zk" "--cluster=$cluster" "--ranges=$ranges" \
      "--setting=log_mode=$log_mode" "--setting=log_replicas=$log_replicas" \
      ${u:+"--undefok=$u"} "${extra[@]+"${extra[@]}"}" >&2
  fi
  echo "starting $stocs StoCs, $logcs LogCs (log_mode=$log_mode), $ltcs LTCs and a coordinator" >&2
  for ((i = 0; i < stocs; i++)); do start_stoc "$i"; done
  for ((i = 0; i < logcs; i++)); do start_logc "$i"; done
  for ((i = 0; i < stocs; i++)); do listen_and_pin "stoc-$i"; done
  for ((i = 0; i < logcs; i++)); do listen_and_pin "logc-$i"; done
  start_coordinator
  for ((i = 0; i < ltcs; i++)); do start_ltc "$i"; done
  for ((i = 0; i < ltcs; i++)); do listen_and_pin "ltc-$i"; done
  wait_serving "$zk"
  trap - ERR
  starting=0
  record_options
  echo "NOVA_ZK=$zk NOVA_CLUSTER=$cluster" | tee "$dir/cluster.env"
}

# start on a directory whose cluster served before (stopped, or killed at once): the same
# cluster from DIR/cmd, in the order the components need each other: ZooKeeper (its
# zoo.cfg, port and data), the StoCs and LogCs (serving before anything writes to them),
# the coordinator, the LTCs (their ranges reopen from the MANIFESTs on the StoCs, their
# memtables from the logs on the LogCs).
resume_cluster() {
  local id port groups stocs_logcs=() coordinators=() ltc_ids=() others=()
  check_resume_options
  cluster=$(sed -n 's/^NOVA_ZK=[^ ]* NOVA_CLUSTER=//p' "$dir/cluster.env")
  [[ -n "$cluster" ]] || die "$dir/cluster.env names no cluster"
  zk=$(zk_address)
  for id in $(components); do
    [[ "$(head -n1 "$dir/cmd/$id")" == java || -x "$(head -n1 "$dir/cmd/$id")" ]] ||
      die "$id: $(head -n1 "$dir/cmd/$id") is not an executable (build first)"
    port=$(pinned_port "$id")
    [[ -z "$port" ]] || check_port_free "$id" "$port"
  done
  mapfile -t stocs_logcs < <(components_of '^stoc-'; components_of '^logc-')
  mapfile -t coordinators < <(components_of '^coordinator')
  mapfile -t ltc_ids < <(components_of '^ltc-')
  mapfile -t others < <(components | grep -Ev '^(ltc-|logc-|stoc-|coordinator|zookeeper$)' || true)
  rm -rf "$dir/pids"
  mkdir -p "$dir/pids" "$dir/logs"
  starting=1
  trap 'die "a command failed (line $LINENO)"' ERR
  echo "resuming the cluster in $dir: ZooKeeper at $zk, ${#stocs_logcs[@]} StoCs and LogCs," \
    "${#coordinators[@]} coordinator(s), ${#ltc_ids[@]} LTCs" >&2
  start_zookeeper
  for id in "${stocs_logcs[@]}" "${others[@]+"${others[@]}"}"; do launch "$id"; done
  for id in "${stocs_logcs[@]}" "${others[@]+"${others[@]}"}"; do
    listen_and_pin "$id"
  done
  for id in "${coordinators[@]+"${coordinators[@]}"}"; do launch "$id"; done
  for id in "${ltc_ids[@]}"; do launch "$id"; done
  for id in "${ltc_ids[@]}"; do listen_and_pin "$id"; done
  wait_serving "$zk"
  trap - ERR
  starting=0
  echo "NOVA_ZK=$zk NOVA_CLUSTER=$cluster" | tee "$dir/cluster.env"
}

# ---- commands -----------------------------------------------------------------------

case "$cmd" in
  start)
    for b in nova_stoc nova_logc nova_ltc nova_coordinator nova_admin nova_cli; do
      [[ -x "$bin/$b" ]] || die "$bin/$b not found: build first (or set NOVA_BUILD_DIR)"
    done
    for id in $(components); do
      alive "$id" && die "a cluster already runs in $dir ($id); stop it first"
    done
    if [[ -f "$dir/cluster.env" && -f "$dir/cmd/zookeeper" && -f "$dir/zk/zoo.cfg" ]]; then
      resume_cluster
    else
      create_cluster
    fi
    ;;
  stop)
    if stop_all; then
      echo "stopped the cluster in $dir" >&2
    else
      echo "local_cluster.sh: stopped the cluster in $dir, but not cleanly (warnings above)" >&2
      exit 1
    fi
    ;;
  status)
    zk=$(zk_address)
    [[ -n "$zk" ]] || die "no cluster in $dir"
    [[ ! -f "$dir/cluster.env" ]] ||
      cluster=$(sed -n 's/^NOVA_ZK=[^ ]* NOVA_CLUSTER=//p' "$dir/cluster.env")
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
    port=$(pinned_port "$id")
    [[ -z "$port" ]] || check_port_free "$id" "$port"
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
    listen_and_pin "$new"
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
esac
