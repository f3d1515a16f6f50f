#!/usr/bin/env bash
# cluster.sh -- a real multi-node Slurm cluster on this one host, for testing
# slurm-k8s (SPANK plugin + agent) with real sbatch/srun jobs.  See README.md.
#
#   cluster.sh install             packages (scripts/install-deps.sh) + test user
#   cluster.sh start               write configs, start munged, slurmctld and
#                                  NUM_NODES slurmd; wait until all nodes idle
#   cluster.sh stop                cancel jobs, stop everything this cluster
#                                  started, verify nothing is left
#   cluster.sh restart             stop + start
#   cluster.sh status              daemons, log paths, sinfo, squeue
#   cluster.sh env                 prints: export SLURM_CONF=...
#   cluster.sh resume              resume drained/down nodes
#   cluster.sh restart-slurmd NODE restart one slurmd (running steps survive)
#   cluster.sh procs               list live processes of this cluster
#   cluster.sh clean               stop, remove SK_SLURM_DIR and our empty
#                                  job cgroup directories
#
# SK_NETNS=1: each node a host of its own, in a network namespace with an
# address that is not loopback, slurmctld and the commands above in the
# site's (hosts.sh); the namespaces go with `stop` (a node's that still holds
# a process the caller started there, an agent, is the caller's to remove).
#   cluster.sh hosts               makes the namespaces alone (before a start:
#                                  for a control plane to run in the site)
#                                  and prints their names and addresses
#
# Everything lives under SK_SLURM_DIR.  Processes are identified by the pid
# files there and by the marker variable SK_SLURM_CLUSTER=$SK_SLURM_DIR that
# every daemon gets in its environment; nothing else is ever signalled.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
. "$HERE/lib.sh"          # SK_SLURM_DIR, TEST_USER, SK_CONF, sk_cluster_procs

NUM_NODES="${NUM_NODES:-3}"
GPUS_PER_NODE="${GPUS_PER_NODE:-4}"
GPU_TYPE="${GPU_TYPE:-}"                     # gres.conf Type= of every GPU ("" = untyped)
CPUS_PER_NODE="${CPUS_PER_NODE:-4}"          # may exceed the real cores
MEM_PER_NODE="${MEM_PER_NODE:-4000}"         # MB
CTLD_PORT="${CTLD_PORT:-16817}"
SLURMD_BASE_PORT="${SLURMD_BASE_PORT:-17001}" # node 1 = base, node 2 = base+1, ...
USE_CGROUP="${USE_CGROUP:-auto}"             # auto | 1 | 0
CONSTRAIN_RAM_SPACE="${CONSTRAIN_RAM_SPACE:-no}" # cgroup.conf ConstrainRAMSpace
PLUGSTACK_LINES="${PLUGSTACK_LINES:-}"       # plugstack.conf content
PROLOG_FLAGS="${PROLOG_FLAGS:-Alloc,Contain}" # empty: no PrologFlags line
PROLOG_SCRIPT="${PROLOG_SCRIPT:-}"           # absolute path -> Prolog=
EPILOG_SCRIPT="${EPILOG_SCRIPT:-}"           # absolute path -> Epilog=
KILL_WAIT="${KILL_WAIT:-2}"                  # s between SIGTERM and SIGKILL of steps
MIN_JOB_AGE="${MIN_JOB_AGE:-300}"            # s a finished job stays visible
SLURM_DEBUG="${SLURM_DEBUG:-debug}"          # SlurmctldDebug and SlurmdDebug
SLURM_CONF_EXTRA="${SLURM_CONF_EXTRA:-}"     # lines appended to slurm.conf
GPU_PARTITION_OPTS="${GPU_PARTITION_OPTS:-}" # more options of the default partition "gpu"
START_TIMEOUT="${START_TIMEOUT:-60}"         # s for all nodes to become idle
STOP_JOB_TIMEOUT="${STOP_JOB_TIMEOUT:-30}"   # s for cancelled jobs to leave
DAEMON_STOP_TIMEOUT="${DAEMON_STOP_TIMEOUT:-15}" # s per daemon after SIGTERM

D="$SK_SLURM_DIR"
CONF="$SK_CONF"
ETC="$D/etc"
RUN="$D/run"
LOGD="$D/log"
MUNGE_SOCK="$D/munge-run/munge.sock"
MUNGE_PID="$D/munge/munged.pid"
CTLD_PID="$RUN/slurmctld.pid"
NODES="${SK_NODE_PREFIX}[1-$NUM_NODES]"   # lib.sh: per cluster directory
# Slurm daemon binaries (the Debian names; /usr/sbin/slurmd -> slurmd-wlm).
SLURMCTLD=/usr/sbin/slurmctld
SLURMD=/usr/sbin/slurmd
MUNGED=/usr/sbin/munged

log() { echo "[cluster.sh] $*" >&2; }
die() { log "ERROR: $*"; exit 1; }
indent() { sed 's/^/  /'; }
need_root() { [ "$(id -u)" = 0 ] || die "'$1' needs root"; }

# ------------------------------------------------------------- helpers -----
pid_alive() { sk_pid_alive "$@"; }
pidfile_pid() { if [ -s "$1" ]; then tr -dc '0-9' < "$1"; fi; }
slurmd_pidfile() { echo "$RUN/slurmd-$1.pid"; }
node_names() { local i; for i in $(seq 1 "$NUM_NODES"); do sk_node "$i"; done; }

# Run a daemon with a clean, fixed environment (what systemd would give it,
# plus SLURM_CONF and the marker), stdin from /dev/null, stdout/stderr into
# LOGFILE and every other inherited fd closed -- so a daemon never holds the
# caller's pipes open (`$(cluster.sh start)` or `| tee` would hang otherwise).
launch() {
  local logfile="$1"; shift
  (
    local fd
    for fd in /proc/"$BASHPID"/fd/*; do
      fd="${fd##*/}"
      if [ "$fd" -gt 2 ]; then eval "exec $fd>&-" 2>/dev/null || true; fi
    done
    # A clean environment, but for sanitizer options (a sanitizer build of
    # the shim, started by the plugin in slurmstepd, reads them).
    local san=() v
    for v in ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS; do
      [ -n "${!v:-}" ] && san+=("$v=${!v}")
    done
    exec env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
      SLURM_CONF="$CONF" "$SK_MARKER_VAR=$D" "${san[@]}" "$@" </dev/null >>"$logfile" 2>&1
  )
}

# stop_pids TIMEOUT NAME PID...: SIGTERM all, wait up to TIMEOUT s for all,
# then SIGKILL the rest.  Returns 1 if one survives SIGKILL.
stop_pids() {
  local t="$1" name="$2" pid i live=(); shift 2
  for pid in "$@"; do
    if pid_alive "$pid"; then live+=("$pid"); kill -TERM "$pid" 2>/dev/null || true; fi
  done
  [ "${#live[@]}" -eq 0 ] && return 0
  for ((i = 0; i <= t * 10 + 50; i++)); do
    local still=()
    for pid in "${live[@]}"; do
      if pid_alive "$pid"; then still+=("$pid"); else log "stopped $name (pid $pid)"; fi
    done
    live=("${still[@]}")
    [ "${#live[@]}" -eq 0 ] && return 0
    if [ "$i" = $((t * 10)) ]; then
      log "$name (pid ${live[*]}) still alive after ${t}s: SIGKILL"
      kill -KILL "${live[@]}" 2>/dev/null || true
    fi
    sleep 0.1
  done
  log "$name (pid ${live[*]}) survived SIGKILL"
  return 1
}

# Is a TCP port listening?  (from /proc/net/tcp*, no tools needed)
port_listening() {
  local hex; hex="$(printf '%04X' "$1")"
  awk -v p=":$hex" 'NR > 1 && $4 == "0A" && substr($2, length($2) - 4) == p { f = 1 } END { exit !f }' \
    /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

cgroup_mode() {
  if [ "$USE_CGROUP" = 0 ]; then echo none; return; fi
  local c ok=1
  for c in freezer cpuset devices; do
    [ "$(stat -fc %T "/sys/fs/cgroup/$c" 2>/dev/null)" = cgroupfs ] || ok=0
  done
  if [ "$ok" = 1 ]; then echo v1; return; fi
  # A pure unified hierarchy (/proc/self/cgroup has only "0::" lines): Slurm's
  # cgroup/v2, which refuses a hybrid layout (tests/vm runs this in a guest).
  if [ "$(stat -fc %T /sys/fs/cgroup 2>/dev/null)" = cgroup2fs ] && ! grep -qv '^0::' /proc/self/cgroup; then
    echo v2; return
  fi
  [ "$USE_CGROUP" = 1 ] && die "USE_CGROUP=1 but neither cgroup v1 freezer/cpuset/devices nor a pure cgroup v2 hierarchy under /sys/fs/cgroup"
  echo none
}

# ---------------------------------------------------------------- install --
cmd_install() {
  need_root install
  "$HERE/../../scripts/install-deps.sh"
  local cur
  if cur="$(id -u "$TEST_USER" 2>/dev/null)"; then
    [ "$cur" = "$TEST_UID" ] || log "WARNING: user $TEST_USER exists with uid $cur (wanted $TEST_UID)"
  else
    if getent passwd "$TEST_UID" >/dev/null; then
      die "uid $TEST_UID is taken by $(getent passwd "$TEST_UID" | cut -d: -f1)"
    fi
    useradd -m -u "$TEST_UID" -s /bin/bash "$TEST_USER"
    log "created user $TEST_USER (uid $TEST_UID)"
  fi
  local home; home="$(getent passwd "$TEST_USER" | cut -d: -f6)"
  [ -d "$home" ] || { mkdir -p "$home"; chown "$TEST_USER:" "$home"; chmod 755 "$home"; }
  # Rootless podman (the e2e image pods) maps the image's other uids to a
  # subordinate range of the job's user; useradd gives one, an older user
  # may lack it.
  grep -q "^$TEST_USER:" /etc/subuid 2>/dev/null || usermod --add-subuids 300000-365535 "$TEST_USER"
  grep -q "^$TEST_USER:" /etc/subgid 2>/dev/null || usermod --add-subgids 300000-365535 "$TEST_USER"
  # The second job user (e2e: another user's pods beside the first's).
  if ! id -u "$TEST_USER2" >/dev/null 2>&1; then
    getent passwd "$TEST_UID2" >/dev/null && die "uid $TEST_UID2 is taken by $(getent passwd "$TEST_UID2" | cut -d: -f1)"
    useradd -m -u "$TEST_UID2" -s /bin/bash "$TEST_USER2"
    log "created user $TEST_USER2 (uid $TEST_UID2)"
  fi
  # The owner of the agents' image stores (agent.conf image_store_user).
  id slurm-k8s-images >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin slurm-k8s-images
  "$SLURMD" -V
}

# ---------------------------------------------------------------- configs --
# Writes every config file into directory $1.
write_configs() {
  local out="$1" host cg proctrack task i last_port last_gpu ctld_addr=127.0.0.1
  host="$(hostname -s)"
  [ "$SK_NETNS" = 1 ] && ctld_addr="$(sk_site_addr)"
  cg="$(cgroup_mode)"
  last_port=$((SLURMD_BASE_PORT + NUM_NODES - 1))
  last_gpu=$((GPUS_PER_NODE - 1))
  if [ "$cg" = v1 ] || [ "$cg" = v2 ]; then
    proctrack=proctrack/cgroup; task=task/cgroup,task/affinity
  else
    proctrack=proctrack/linuxproc; task=task/none
  fi
  mkdir -p "$out"

  {
    cat <<EOF
# Generated by tests/slurm/cluster.sh -- local test cluster on $ctld_addr.
ClusterName=sktest
# The controller name must equal \`hostname -s\` or slurmctld exits with
# "This host not a valid controller".
SlurmctldHost=$host($ctld_addr)
SlurmctldPort=$CTLD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# Our private munged; used by auth/munge and cred/munge in daemons and clients.
# cred_expire (default 120 s) is also how long a requeued job waits before it
# may start again (its begin time): 30 s keeps e2e requeue short.
AuthInfo=socket=$MUNGE_SOCK,cred_expire=30
StateSaveLocation=$D/state
# Per cluster directory (lib.sh), as the node names are.
FirstJobId=$SK_FIRST_JOB_ID
# %n = node name: several slurmd on one host need their own spool/pid/log.
SlurmdSpoolDir=$D/spool/%n
SlurmctldPidFile=$CTLD_PID
SlurmdPidFile=$RUN/slurmd-%n.pid
SlurmctldLogFile=$LOGD/slurmctld.log
SlurmdLogFile=$LOGD/slurmd-%n.log
SlurmctldDebug=$SLURM_DEBUG
SlurmdDebug=$SLURM_DEBUG
# Clients (sbatch/srun/salloc, run by the test user) read this too.
PlugStackConfig=$ETC/plugstack.conf
ProctrackType=$proctrack
TaskPlugin=$task
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
# Trust CPUs/RealMemory below although they exceed the real hardware.
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
# Otherwise: "error: Configured MailProg is invalid".
MailProg=/bin/true
SchedulerType=sched/backfill
# Schedule batch jobs at once instead of on the 1 s background tick.
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
MinJobAge=$MIN_JOB_AGE
KillWait=$KILL_WAIT
Waittime=0
EOF
    if [ -n "$PROLOG_FLAGS" ]; then
      echo "# Alloc: SPANK job_prolog runs on all nodes at allocation time."
      echo "# Contain: extern step (slurmstepd per node for the whole job)."
      echo "PrologFlags=$PROLOG_FLAGS"
    fi
    [ -z "$PROLOG_SCRIPT" ] || echo "Prolog=$PROLOG_SCRIPT"
    [ -z "$EPILOG_SCRIPT" ] || echo "Epilog=$EPILOG_SCRIPT"
    local node_hw="CPUs=$CPUS_PER_NODE RealMemory=$MEM_PER_NODE Gres=gpu:${GPU_TYPE:+$GPU_TYPE:}$GPUS_PER_NODE State=UNKNOWN"
    if [ "$SK_NETNS" = 1 ]; then
      # Each node a host of its own (hosts.sh): its own address.
      for ((i = 1; i <= NUM_NODES; i++)); do
        echo "NodeName=$(sk_node "$i") NodeHostname=$host NodeAddr=$(sk_node_addr "$i") Port=$((SLURMD_BASE_PORT + i - 1)) $node_hw"
      done
    else
      echo "NodeName=$NODES NodeHostname=$host NodeAddr=127.0.0.1 Port=[$SLURMD_BASE_PORT-$last_port] $node_hw"
    fi
    cat <<EOF
PartitionName=gpu Nodes=$NODES Default=YES MaxTime=INFINITE State=UP${GPU_PARTITION_OPTS:+ $GPU_PARTITION_OPTS}
EOF
    [ -z "$SLURM_CONF_EXTRA" ] || printf '%s\n' "$SLURM_CONF_EXTRA"
  } > "$out/slurm.conf"

  # gres/gpu drops GPUs without File= ("Removing file-less GPU") and the node
  # then goes INVALID_REG; the files must be char devices (see start).
  cat > "$out/gres.conf" <<EOF
AutoDetect=off
NodeName=$NODES Name=gpu${GPU_TYPE:+ Type=$GPU_TYPE} File=$D/dev/nvidia[0-$last_gpu]
EOF

  if [ "$cg" = v1 ]; then
    cat > "$out/cgroup.conf" <<EOF
CgroupPlugin=cgroup/v1
ConstrainCores=yes
ConstrainDevices=yes
ConstrainRAMSpace=$CONSTRAIN_RAM_SPACE
EOF
  elif [ "$cg" = v2 ]; then
    # No systemd: IgnoreSystemd makes the cgroups by mkdir (no dbus), and
    # CgroupAutomount enables the controllers from the root down to slurmd.
    cat > "$out/cgroup.conf" <<EOF
CgroupPlugin=cgroup/v2
IgnoreSystemd=yes
CgroupAutomount=yes
ConstrainCores=yes
ConstrainDevices=yes
ConstrainRAMSpace=$CONSTRAIN_RAM_SPACE
EOF
  fi

  if [ -n "$PLUGSTACK_LINES" ]; then
    printf '%s\n' "$PLUGSTACK_LINES" > "$out/plugstack.conf"
  else
    : > "$out/plugstack.conf"
  fi
  # Checksums of the plugins: part of the "same configuration?" test in start,
  # so that a rebuilt plugin restarts daemons that have the old one loaded.
  local so
  while read -r so; do
    sha256sum "$so" 2>/dev/null || echo "missing $so"
  done < <(plugstack_sos "$out/plugstack.conf") > "$out/plugins.sha256"
  # Clients run as the test user and read all of these.
  chmod 755 "$out"; chmod 644 "$out"/*
}

# The .so paths named in a plugstack.conf.
plugstack_sos() {
  awk '!/^[[:space:]]*#/ && NF >= 2 && $2 ~ /\.so$/ { print $2 }' "$1"
}

# Every .so named in plugstack.conf must be readable by the test user (sbatch
# loads it as that user); catch this now rather than as a cryptic job error.
check_plugins_readable() {
  local so
  while read -r so; do
    [ -f "$so" ] || die "plugstack.conf: $so does not exist"
    if id "$TEST_USER" >/dev/null 2>&1 && ! runuser -u "$TEST_USER" -- test -r "$so"; then
      die "plugstack.conf: $so is not readable by $TEST_USER (copy it somewhere world-readable, e.g. $D/lib)"
    fi
  done < <(plugstack_sos "$ETC/plugstack.conf")
}

# --------------------------------------------------------------- state -----
# Prints: "running" (all daemons alive), "stopped" (none) or "partial".
cluster_state() {
  local n=0 up=0 f
  for f in "$MUNGE_PID" "$CTLD_PID" $(for x in $(node_names); do slurmd_pidfile "$x"; done); do
    n=$((n + 1))
    if pid_alive "$(pidfile_pid "$f")"; then up=$((up + 1)); fi
  done
  if [ "$up" = "$n" ]; then echo running
  elif [ "$up" = 0 ] && [ -z "$(sk_cluster_procs)" ]; then echo stopped
  else echo partial; fi
}

# ---------------------------------------------------------------- start ----
prepare_dirs() {
  mkdir -p "$D"/{etc,state,spool,log,run,lib,dev,jobs,munge,munge-run}
  # Clients (the test user) must reach etc/, lib/ and the munge socket.
  chmod 755 "$D" "$D"/{etc,state,spool,log,run,lib,dev,munge-run}
  chmod 1777 "$D/jobs"                 # job output, written by the user
  local n i
  # Fresh controller state (no jobs or node states from an earlier run) and
  # fresh logs, so that log excerpts show this run only.
  rm -rf "${D:?}/state" "${D:?}/spool"; mkdir -p "$D/state" "$D/spool"
  rm -f "$LOGD"/*.log "$LOGD"/*.stdout "$D/munge/munged.log"
  chmod 755 "$D/state" "$D/spool"
  # slurmd does not create its spool dir: "Domain socket directory ... No
  # such file or directory".
  for n in $(node_names); do mkdir -p "$D/spool/$n"; done
  # Fake GPUs: character devices with the NVIDIA major number.  Never opened
  # by Slurm; regular files are accepted but log "not a valid character or
  # block device".
  for ((i = 0; i < GPUS_PER_NODE; i++)); do
    if [ ! -c "$D/dev/nvidia$i" ]; then
      rm -f "$D/dev/nvidia$i"
      mknod -m 666 "$D/dev/nvidia$i" c 195 "$i" 2>/dev/null || {
        log "WARNING: mknod failed; using a regular file for nvidia$i"
        touch "$D/dev/nvidia$i"; chmod 666 "$D/dev/nvidia$i"; }
    fi
  done
}

start_munged() {
  id munge >/dev/null 2>&1 || die "user munge missing (run: $0 install)"
  # munged checks permissions: key dir 0700 + key 0400 owned by munge; the
  # socket dir must be executable for all ("Socket is inaccessible").
  [ -s "$D/munge/munge.key" ] || dd if=/dev/urandom of="$D/munge/munge.key" bs=1024 count=1 status=none
  rm -f "$MUNGE_SOCK" "$MUNGE_SOCK.lock" "$MUNGE_PID"   # stale (nothing runs)
  chown -R munge:munge "$D/munge" "$D/munge-run"
  chmod 700 "$D/munge"; chmod 400 "$D/munge/munge.key"; chmod 755 "$D/munge-run"
  launch "$LOGD/munged.stdout" runuser -u munge -- "$MUNGED" \
    --socket="$MUNGE_SOCK" --key-file="$D/munge/munge.key" \
    --log-file="$D/munge/munged.log" --pid-file="$MUNGE_PID" \
    --seed-file="$D/munge/munged.seed" \
    || { tail -n 20 "$D/munge/munged.log" "$LOGD/munged.stdout" >&2 2>/dev/null; die "munged failed to start"; }
  local i
  for ((i = 0; i < 50; i++)); do
    if munge -S "$MUNGE_SOCK" -n 2>/dev/null | unmunge -S "$MUNGE_SOCK" >/dev/null 2>&1; then
      log "munged up (pid $(pidfile_pid "$MUNGE_PID"))"; return 0
    fi
    sleep 0.1
  done
  tail -n 20 "$D/munge/munged.log" >&2 2>/dev/null || true
  die "munge self-test failed (log: $D/munge/munged.log)"
}

start_slurmctld() {
  launch "$LOGD/slurmctld.stdout" "$SLURMCTLD" -f "$CONF" \
    || { tail -n 30 "$LOGD/slurmctld.stdout" "$LOGD/slurmctld.log" >&2 2>/dev/null; die "slurmctld failed to start"; }
  local i
  for ((i = 0; i < 150; i++)); do
    if pid_alive "$(pidfile_pid "$CTLD_PID")" && scontrol ping >/dev/null 2>&1; then
      log "slurmctld up (pid $(pidfile_pid "$CTLD_PID"), port $CTLD_PORT)"; return 0
    fi
    sleep 0.1
  done
  tail -n 30 "$LOGD/slurmctld.stdout" "$LOGD/slurmctld.log" >&2 2>/dev/null || true
  die "slurmctld did not answer 'scontrol ping' within 15s"
}

# Note: a SPANK plugin's slurm_spank_init runs in slurmd BEFORE it daemonizes.
start_slurmd() {
  local n="$1" netns=()
  # SK_NETNS=1: in the node's own network namespace (hosts.sh).
  [ "$SK_NETNS" = 1 ] && netns=(nsenter --net="$SK_NETNS_RUN/sk-$n" --)
  launch "$LOGD/slurmd-$n.stdout" "${netns[@]}" "$SLURMD" -f "$CONF" -N "$n" \
    || { tail -n 30 "$LOGD/slurmd-$n.stdout" "$LOGD/slurmd-$n.log" >&2 2>/dev/null; die "slurmd $n failed to start"; }
}

# Wait until every node in $@ is in state idle (or $WANT_RE); on timeout show
# sinfo and the log tails.
wait_nodes() {
  local t="$1"; shift
  local want_re="${WANT_RE:-^idle$}" end=$((SECONDS + t)) n bad
  while :; do
    bad=""
    for n in "$@"; do
      [[ "$(sinfo -h -n "$n" -N -o %T 2>/dev/null | head -n1)" =~ $want_re ]] || bad="$bad $n"
    done
    [ -z "$bad" ] && return 0
    [ "$SECONDS" -ge "$end" ] && break
    sleep 0.2
  done
  log "nodes not ready after ${t}s:$bad"
  sinfo -N -o '%N %T %E' >&2 2>/dev/null || true
  for n in $bad; do
    log "--- $LOGD/slurmd-$n.log (errors, last lines)"
    grep -i error "$LOGD/slurmd-$n.log" 2>/dev/null | tail -n 10 >&2 || true
    tail -n 5 "$LOGD/slurmd-$n.stdout" >&2 2>/dev/null || true
  done
  log "--- $LOGD/slurmctld.log (errors, last lines)"
  grep -i error "$LOGD/slurmctld.log" 2>/dev/null | tail -n 10 >&2 || true
  return 1
}

# cgroup v2 without systemd: do what systemd does before slurmd starts.
# - system.slice: cgroup/v2 makes its scope there but not the slice ("Could
#   not create scope directory ... No such file or directory").
# - pids enabled from the root down to each node's stepd scope (systemd
#   enables it too): Slurm 22.05.8 does not see a controller that is the last
#   word of a cgroup.controllers file, and with only cpuset, cpu and memory
#   enabled, memory is last: "Controller memory is not enabled!", and every
#   step fails in task/cgroup ("memory cgroup controller is not available").
v2_prepare() {
  local cg=/sys/fs/cgroup d n
  for d in "$cg" "$cg/system.slice" $(for n in $(node_names); do echo "$cg/system.slice/${n}_slurmstepd.scope"; done); do
    mkdir -p "$d"
    echo "+cpuset +cpu +memory +pids" > "$d/cgroup.subtree_control" \
      || die "cannot enable cpuset, cpu, memory and pids in $d/cgroup.subtree_control"
  done
}

cmd_start() {
  need_root start
  if ! [ -x "$SLURMCTLD" ] || ! [ -x "$SLURMD" ] || ! [ -x "$MUNGED" ]; then
    die "Slurm/munge not installed (run: $0 install)"
  fi
  if ! [ "$NUM_NODES" -ge 1 ] || ! [ "$GPUS_PER_NODE" -ge 1 ]; then
    die "NUM_NODES and GPUS_PER_NODE must be >= 1"
  fi
  mkdir -p "$D"; chmod 755 "$D"

  # Idempotence: same config and everything running -> nothing to do;
  # otherwise stop what runs and start afresh.
  local staged="$D/etc.new" st
  rm -rf "$staged"; write_configs "$staged"
  st="$(cluster_state)"
  if [ "$st" = running ] && diff -r "$staged" "$ETC" >/dev/null 2>&1; then
    rm -rf "$staged"
    log "already running with the same configuration"
    return 0
  fi
  if [ "$st" != stopped ]; then
    if [ "$st" = running ]; then log "configuration or plugin changed: restarting"
    else log "cluster is partly running: restarting"; fi
    cmd_stop || die "could not stop the old cluster"
  fi

  local p
  for p in "$CTLD_PORT" $(seq "$SLURMD_BASE_PORT" $((SLURMD_BASE_PORT + NUM_NODES - 1))); do
    port_listening "$p" && die "TCP port $p is already in use by another program (set CTLD_PORT / SLURMD_BASE_PORT)"
  done

  prepare_dirs
  if [ "$(cgroup_mode)" = v2 ]; then v2_prepare; fi
  if [ "$SK_NETNS" = 1 ]; then
    sk_netns_up "$NUM_NODES" || die "could not make the hosts' network namespaces (hosts.sh)"
  fi
  rm -rf "$ETC"; mv "$staged" "$ETC"
  # From here on a failure stops whatever did start (logs are kept).
  trap 'start_failed' EXIT
  check_plugins_readable
  log "configs in $ETC (cgroup: $(cgroup_mode), $NUM_NODES nodes x gpu:$GPUS_PER_NODE)"

  start_munged
  start_slurmctld
  local n
  for n in $(node_names); do start_slurmd "$n"; done
  # Every slurmd must have written its pid file and still be alive.
  local i bad
  for ((i = 0; i < 100; i++)); do
    bad=""
    for n in $(node_names); do pid_alive "$(pidfile_pid "$(slurmd_pidfile "$n")")" || bad="$bad $n"; done
    [ -z "$bad" ] && break
    sleep 0.1
  done
  if [ -n "$bad" ]; then
    for n in $bad; do tail -n 20 "$LOGD/slurmd-$n.stdout" "$LOGD/slurmd-$n.log" >&2 2>/dev/null || true; done
    die "slurmd not running:$bad"
  fi
  # shellcheck disable=SC2046
  wait_nodes "$START_TIMEOUT" $(node_names) || die "nodes did not become idle (logs: $LOGD)"
  trap - EXIT
  sinfo -N -o '%N %T %G %c %m' >&2
  log "ready. Clients: export SLURM_CONF=$CONF"
}

start_failed() {
  local rc=$?
  [ "$rc" = 0 ] && return 0
  if [ "${KEEP_ON_FAILURE:-0}" = 1 ]; then
    log "start failed; KEEP_ON_FAILURE=1: leaving the daemons running"
  else
    log "start failed; stopping what was started (KEEP_ON_FAILURE=1 keeps it; logs: $LOGD)"
    cmd_stop || true
  fi
  exit "$rc"
}

# ----------------------------------------------------------------- stop ----
cmd_stop() {
  need_root stop
  local i n rc=0 jobs
  # 1. Cancel all jobs so that epilogs run and slurmstepd exit cleanly.
  if pid_alive "$(pidfile_pid "$CTLD_PID")"; then
    jobs="$(squeue -h -o %A 2>/dev/null | paste -sd' ' || true)"
    if [ -n "$jobs" ]; then
      log "cancelling jobs: $jobs"
      # shellcheck disable=SC2086
      scancel $jobs 2>/dev/null || true
      for ((i = 0; i < STOP_JOB_TIMEOUT * 10; i++)); do
        [ -z "$(squeue -h -o %A 2>/dev/null)" ] && break
        sleep 0.1
      done
      [ -z "$(squeue -h -o %A 2>/dev/null)" ] || log "WARNING: jobs still listed after ${STOP_JOB_TIMEOUT}s"
    fi
  fi
  # 2. All slurmd (pid files) at once.
  # (every pid file, not just n1..nNUM_NODES: NUM_NODES may have changed)
  local pids=() f
  for f in "$RUN"/slurmd-*.pid; do [ -e "$f" ] && pids+=("$(pidfile_pid "$f")"); done
  stop_pids "$DAEMON_STOP_TIMEOUT" slurmd "${pids[@]}" || rc=1
  # 3. Steps that outlived their job/slurmd (e.g. after slurmd was killed)
  #    and their tasks.  slurmstepd blocks SIGTERM: short grace, then KILL.
  mapfile -t pids < <(sk_cluster_procs | awk '$2 !~ /^(munged|slurmctld|slurmscriptd)$/ { print $1 }')
  if [ "${#pids[@]}" -gt 0 ]; then
    log "left-over steps/tasks: ${pids[*]}"
    stop_pids 2 "step process" "${pids[@]}" || rc=1
  fi
  # 4. slurmctld (its slurmscriptd child exits with it), 5. munged.
  stop_pids "$DAEMON_STOP_TIMEOUT" slurmctld "$(pidfile_pid "$CTLD_PID")" || rc=1
  stop_pids "$DAEMON_STOP_TIMEOUT" munged "$(pidfile_pid "$MUNGE_PID")" || rc=1
  # 6. Verify: anything of ours still alive is printed and stopped.
  local left
  for i in 1 2 3; do
    left="$(sk_cluster_procs)"
    [ -z "$left" ] && break
    log "still running (round $i):"; printf '%s\n' "$left" | indent >&2
    mapfile -t pids < <(awk '{ print $1 }' <<<"$left")
    stop_pids 2 "straggler" "${pids[@]}" || true
  done
  left="$(sk_cluster_procs)"
  if [ -n "$left" ]; then
    log "ERROR: could not stop:"; printf '%s\n' "$left" | indent >&2; rc=1
  fi
  # The hosts' network namespaces go with the daemons (the site's name
  # only, while the scripts that called this still run in it). A node's
  # that still holds what the caller started there (the e2e's agents) is
  # the caller's to remove, after those (sk_netns_down).
  if [ "$rc" = 0 ] && [ "$SK_NETNS" = 1 ]; then
    sk_netns_down || log "kept the network namespaces that still hold processes"
  fi
  if [ "$rc" = 0 ]; then log "stopped; nothing of $D is running"; fi
  return "$rc"
}

# Remove our (empty) job cgroup directories: /sys/fs/cgroup/<ctrl>/slurm_NODE
# (v1), /sys/fs/cgroup/system.slice/NODE_slurmstepd.scope (v2), for this
# cluster's node names only (another cluster on the host has its own names).
# rmdir only -- a cgroup that still holds processes cannot be removed.
clean_cgroups() {
  local n dir left=""
  for n in $(node_names); do
    # v1: /sys/fs/cgroup/<ctrl>/slurm_NODE and the slurm-k8s agent's tree
    # beside it, slurm_k8s_NODE; v2: system.slice/NODE_slurmstepd.scope
    for dir in /sys/fs/cgroup/*/slurm_"$n" /sys/fs/cgroup/*/slurm_k8s_"$n" \
        /sys/fs/cgroup/system.slice/"$n"_slurmstepd.scope; do
      [ -d "$dir" ] || continue
      find "$dir" -depth -type d -exec rmdir {} + 2>/dev/null || true
      [ -d "$dir" ] && left="$left $dir"
    done
  done
  [ -z "$left" ] || log "WARNING: cgroup dirs not removable (still in use?):$left"
}

cmd_clean() {
  need_root clean
  local rc=0
  cmd_stop || rc=1
  clean_cgroups
  if [ "$rc" = 0 ]; then
    rm -rf "${D:?}"; log "removed $D"
  else
    log "not removing $D: something is still running"
  fi
  return "$rc"
}

# -------------------------------------------------------------- others -----
cmd_status() {
  local st n; st="$(cluster_state)"
  echo "cluster:    $st ($D)"
  echo "SLURM_CONF: $CONF"
  show() { local pid; pid="$(pidfile_pid "$2")"
    printf '%-16s pid %-8s %-6s log %s\n' "$1" "${pid:--}" "$(pid_alive "$pid" && echo alive || echo dead)" "$3"; }
  show munged "$MUNGE_PID" "$D/munge/munged.log"
  show slurmctld "$CTLD_PID" "$LOGD/slurmctld.log"
  for n in $(node_names); do show "slurmd $n" "$(slurmd_pidfile "$n")" "$LOGD/slurmd-$n.log"; done
  echo "daemon stdout/stderr: $LOGD/*.stdout"
  if [ "$st" != stopped ]; then
    sinfo -N -o '%N %T %G %E' 2>/dev/null || true
    squeue 2>/dev/null || true
  fi
  if [ -s "$ETC/plugstack.conf" ]; then echo "plugstack.conf:"; sed 's/^/  /' "$ETC/plugstack.conf"; fi
  case "$st" in running) return 0 ;; partial) return 1 ;; *) return 3 ;; esac
}

# A failing SPANK prolog/epilog, or a required plugin that does not load,
# drains the node.  Resume only the nodes that need it (scontrol rejects the
# whole update if one listed node is not drained/down).
cmd_resume() {
  local d
  d="$(sinfo -h -N -t drain,drained,draining,down,fail -o %N 2>/dev/null | sort -u | paste -sd, || true)"
  if [ -z "$d" ]; then log "nothing to resume"; return 0; fi
  scontrol update nodename="$d" state=resume && log "resumed $d"
}

cmd_hosts() {
  need_root hosts
  sk_netns_up "$NUM_NODES" || die "could not make the hosts' network namespaces"
  local i
  echo "site: $(sk_netns_site) $(sk_site_addr) (nsenter --net=$SK_NETNS_RUN/$(sk_netns_site) CMD)"
  for ((i = 1; i <= NUM_NODES; i++)); do
    echo "node $(sk_node "$i"): $(sk_netns_node "$i") $(sk_node_addr "$i")"
  done
}

cmd_restart_slurmd() {
  need_root restart-slurmd
  local n="${1:-}"
  if ! [[ $n =~ ^${SK_NODE_PREFIX}[0-9]+$ ]] || [ "${n#"$SK_NODE_PREFIX"}" -lt 1 ] \
     || [ "${n#"$SK_NODE_PREFIX"}" -gt "$NUM_NODES" ]; then
    die "usage: $0 restart-slurmd ${SK_NODE_PREFIX}X (1 <= X <= $NUM_NODES)"
  fi
  stop_pids "$DAEMON_STOP_TIMEOUT" "slurmd $n" "$(pidfile_pid "$(slurmd_pidfile "$n")")" \
    || die "could not stop slurmd $n"
  start_slurmd "$n"
  WANT_RE='^(idle|allocated|mixed|completing)' wait_nodes "$START_TIMEOUT" "$n" \
    || die "slurmd $n did not come back"
  log "slurmd $n restarted (pid $(pidfile_pid "$(slurmd_pidfile "$n")"))"
}

usage() {
  sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0" >&2
  exit 2
}

# SK_NETNS=1: the commands that talk to the daemons run in the site's
# network namespace (hosts.sh), made by a start; a stop or clean with no
# site left has nothing there to reach.
if [ "$SK_NETNS" = 1 ]; then
  case "${1:-}" in
    start|restart|status|resume|restart-slurmd) sk_enter_site "$0" "$@" ;;
    stop|clean) [ ! -e "$SK_NETNS_RUN/$(sk_netns_site)" ] || sk_enter_site "$0" "$@" ;;
  esac
fi

case "${1:-}" in
  install)        cmd_install ;;
  start)          cmd_start ;;
  stop)           cmd_stop ;;
  restart)        cmd_stop && cmd_start ;;
  status)         cmd_status ;;
  env)            echo "export SLURM_CONF=$CONF" ;;
  resume)         cmd_resume ;;
  restart-slurmd) shift; cmd_restart_slurmd "$@" ;;
  procs)          sk_cluster_procs ;;
  hosts)          cmd_hosts ;;
  clean)          cmd_clean ;;
  *)              usage ;;
esac
