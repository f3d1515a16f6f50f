#!/usr/bin/env bash
# newer-slurm.sh -- the plugin built against, and loaded in, a Slurm newer
# than Debian 12's 22.05: Debian 13 (trixie)'s Slurm 24.11, in a trixie tree
# (chroot) on this Debian 12 host. As root:
#
#   bash tests/slurm/newer-slurm.sh
#
# 1. installs what it needs on the host (mmdebstrap, the plugin's build
#    dependencies, python3 for the stub agent; apt-get);
# 2. builds a trixie tree (mmdebstrap, variant minbase, amd64) holding
#    slurmctld, slurmd, slurm-client, munge and libslurm-dev, from the Debian
#    archive this host's apt sources name; it is kept in
#    $SK_NEWER_SLURM_DIR/tree and reused by the next run;
# 3. configures (--disable-daemons --with-slurm=<tree>/usr) and builds
#    spank_k8s.so on the host in a temporary build directory, and checks that
#    configure reports the tree's Slurm;
# 4. in the tree (chroot, with /proc, /dev and /sys bind-mounted) starts a
#    private munged, slurmctld and one slurmd (node v24n1, 2 fake GPUs) with
#    a plugstack.conf naming a copy of that plugin, and checks: srun/sbatch
#    --help list the plugin's flags; sbatch refuses bad --k8s-* values with
#    the plugin's messages; a job without --k8s-* flags runs to completion
#    with the plugin's hooks running in slurmstepd; a job with --k8s-gpus=1
#    completes and gets the plugin's own message that no agent registered the
#    node (its job_prolog, user_init and task_init ran in 24.11); with the
#    project's stub agent (tests/integration/stub_agent.py, on the host) and a
#    stand-in shim, a lent node's whole life (register, shim, GPUs denied at
#    the device, deregister naming how the job ended); the logs hold no plugin
#    load or symbol errors;
# 5. stops everything it started and checks that no process of the tree is
#    left and nothing is mounted in it.
#
# Everything runs in a private mount namespace (unshare -m): the bind mounts
# are never visible outside it, and an EXIT trap stops the daemons and
# unmounts them even when a step fails. Nothing of the host's Slurm, munge,
# ports or users is touched.
#
# Settings (environment):
#   SK_NEWER_SLURM_DIR      the cache (default /var/tmp/slurm-k8s-newer-slurm):
#                           tree/ (the trixie tree), logs/ (the last run's logs)
#   SK_NEWER_SLURM_SUITE    the Debian suite (default trixie)
#   SK_NEWER_SLURM_VERSION  the major.minor it must hold (default 24.11)
#   SK_NEWER_SLURM_MIRROR   the Debian archive (default: from the host's apt
#                           sources, the entry serving its own release)
#   SK_NEWER_SLURM_REFRESH  1: build the tree again even if cached
#   SK_NEWER_SLURM_CGROUP   auto (cgroup/v1 where the host has v1 freezer,
#                           cpuset and devices and the tree ships
#                           cgroup_v1.so), 1 (require it) or 0
#                           (proctrack/linuxproc + task/none)
#   SK_NEWER_SLURM_CTLD_PORT, SK_NEWER_SLURM_SLURMD_PORT  (6917, 6918)
#   SK_KEEP=1               keep the temporary build directory
#   JOB_TIMEOUT             seconds per job (default 60)
# Prints PASS:/FAIL: lines, and last "N passed, N failed". Exit: 0 all passed,
# 1 a failure, 77 not root or no mount namespace.

# `ok` evaluates its single-quoted condition itself (variables used only there):
# shellcheck disable=SC2016,SC2034
set -uo pipefail

if [ "$(id -u)" != 0 ]; then
  echo "SKIP: newer-slurm.sh needs root (apt-get, chroot, mounts, Slurm daemons)"
  exit 77
fi

# Everything below runs in a private mount namespace.
if [ "${SK_NEWER_SLURM_IN_NS:-0}" != 1 ]; then
  unshare -m --propagation private true 2>/dev/null \
    || { echo "SKIP: newer-slurm.sh needs a mount namespace (unshare -m)"; exit 77; }
  SK_NEWER_SLURM_IN_NS=1 exec unshare -m --propagation private bash "${BASH_SOURCE[0]}" "$@"
fi

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DIR=$(realpath -m "${SK_NEWER_SLURM_DIR:-/var/tmp/slurm-k8s-newer-slurm}")
SUITE=${SK_NEWER_SLURM_SUITE:-trixie}
WANT=${SK_NEWER_SLURM_VERSION:-24.11}
USE_CGROUP=${SK_NEWER_SLURM_CGROUP:-auto}
CTLD_PORT=${SK_NEWER_SLURM_CTLD_PORT:-6917}
SLURMD_PORT=${SK_NEWER_SLURM_SLURMD_PORT:-6918}
JOB_TIMEOUT=${JOB_TIMEOUT:-60}
T=$DIR/tree             # the trixie tree (host path)
S=/srv/sk-newer-slurm   # this run's files, a path inside the tree ($T$S on the host)
NODE=v24n1              # the slurmd's node name (cgroups: slurm_$NODE; not slurm_n*, which the
                        # other harnesses' leftover checks match)
GPUS=2
TUSER=sknewer TUID=2101 # the submitting user, in the tree's /etc/passwd only
APT=(apt-get -o DPkg::Lock::Timeout=600 -q)

# Each check also a record of the one result protocol (tests/lib/report.sh).
# shellcheck source=../lib/report.sh
source "$top/tests/lib/report.sh"
passed=0 failed=0
pass() { echo "PASS: $*"; passed=$((passed + 1)); report_record pass "newer-slurm: $*"; }
fail() { echo "FAIL: $*"; failed=$((failed + 1)); report_record fail "newer-slurm: $*"; }
ok() {  # ok STATUS|CONDITION NAME: a number is an exit status, else evaluated
  local c=$1; shift
  if { if [[ "$c" =~ ^[0-9]+$ ]]; then [ "$c" = 0 ]; else eval "$c"; fi; }; then pass "$*"; else fail "$*"; fi
}
log() { echo "[newer-slurm] $*" >&2; }
summary() { echo "$passed passed, $failed failed"; [ "$failed" = 0 ]; }
finish() { summary; exit $?; }  # a step the rest depends on failed

t_start=$SECONDS

# ------------------------------------------------------------ packages -----
host_pkgs=(mmdebstrap g++ make autoconf automake libtool pkg-config libjson-c-dev python3)
missing=()
for p in "${host_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]}"
  { [ "${SKIP_APT_UPDATE:-0}" = 1 ] || "${APT[@]}" update; } >&2 \
    && DEBIAN_FRONTEND=noninteractive "${APT[@]}" install -y --no-install-recommends "${missing[@]}" >&2
  ok $? "host packages installed (${missing[*]})"
else
  pass "host packages present (${host_pkgs[*]})"
fi
[ "$failed" = 0 ] || finish

mkdir -p "$DIR"
exec 9>"$DIR/lock"
flock -w 1800 9 || { fail "another newer-slurm.sh holds $DIR/lock"; finish; }

# ----------------------------------------------------------- the tree ------
# The Debian archive of the host's own release, as apt is configured
# (downloaded index targets first, then the sources files themselves).
host_mirror() {
  local codename uri
  # shellcheck disable=SC1091
  codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
  uri=$(apt-get indextargets --format '$(SITE) $(RELEASE) $(COMPONENT)' 'Identifier: Packages' 2>/dev/null \
        | awk -v c="$codename" '$2 == c && $3 == "main" && $1 ~ /^https?:/ { print $1; exit }')
  if [ -z "$uri" ]; then
    uri=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk -v c="$codename" '
      function flush() { if (!done && types ~ /(^| )deb( |$)/ && suites ~ ("(^| )" c "( |$)") && comps ~ /(^| )main( |$)/) { split(uris, u, " "); for (i in u) if (u[i] ~ /^https?:/) { print u[i]; done = 1; break } } types = uris = suites = comps = "" }
      /^[[:space:]]*$/ { flush(); next }
      /^Types:/ { sub(/^Types:[[:space:]]*/, ""); types = $0 }
      /^URIs:/ { sub(/^URIs:[[:space:]]*/, ""); uris = $0 }
      /^Suites:/ { sub(/^Suites:[[:space:]]*/, ""); suites = $0 }
      /^Components:/ { sub(/^Components:[[:space:]]*/, ""); comps = $0 }
      END { flush() }')
  fi
  if [ -z "$uri" ]; then
    uri=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | sed 's/\[[^]]*\]//' \
          | awk -v c="$codename" '$1 == "deb" && $2 ~ /^https?:/ && $3 == c { for (i = 4; i <= NF; i++) if ($i == "main") { print $2; exit } }')
  fi
  echo "${uri%/}"
}

# Fails when something is mounted at or below $1 (never rm -rf through a mount).
nothing_mounted_below() {
  ! awk -v d="$1" '$5 == d || index($5, d "/") == 1 { f = 1 } END { exit !f }' /proc/self/mountinfo
}

tree_slurm_version() {  # "24.11.5" from the tree's slurmd
  chroot "$T" /usr/sbin/slurmd -V 2>/dev/null | awk '{ print $2 }'
}

t0=$SECONDS
if [ "${SK_NEWER_SLURM_REFRESH:-0}" != 1 ] && [ -f "$DIR/tree.done" ] && [ -x "$T/usr/sbin/slurmd" ]; then
  tree_how="cached"
else
  mirror=${SK_NEWER_SLURM_MIRROR:-$(host_mirror)}
  if [ -z "$mirror" ]; then
    fail "a Debian archive in the host's apt sources (set SK_NEWER_SLURM_MIRROR)"; finish
  fi
  if ! nothing_mounted_below "$DIR"; then
    fail "nothing mounted below $DIR before it is rebuilt"; finish
  fi
  rm -f "$DIR/tree.done"
  rm -rf "$T" "$DIR/tree.new"
  log "building the $SUITE tree from $mirror (mmdebstrap, log: $DIR/mmdebstrap.log)"
  mmdebstrap --mode=root --variant=minbase --architectures=amd64 \
    --include=slurmctld,slurmd,slurm-client,munge,libslurm-dev,libjson-c5 \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    "$SUITE" "$DIR/tree.new" "deb $mirror $SUITE main" >"$DIR/mmdebstrap.log" 2>&1
  rc=$?
  if [ "$rc" = 0 ] && mv "$DIR/tree.new" "$T"; then
    date -u +%FT%TZ >"$DIR/tree.done"
    tree_how="built in $((SECONDS - t0)) s"
  else
    tail -20 "$DIR/mmdebstrap.log"
    fail "mmdebstrap $SUITE (rc $rc, $DIR/mmdebstrap.log)"
    rm -rf "$DIR/tree.new"
    finish
  fi
fi
tree_version=$(tree_slurm_version)
ok '[[ "$tree_version" == "$WANT".* ]]' "$SUITE tree with Slurm $WANT (slurmd -V: ${tree_version:-none}; tree $tree_how)"
[ "$failed" = 0 ] || finish

# ---------------------------------------------------------- the plugin -----
B=$(mktemp -d "${TMPDIR:-/tmp}/sk-newer-slurm.XXXXXX")
t0=$SECONDS
if [ ! -x "$top/configure" ]; then
  log "no configure in $top: autoreconf -fi"
  (cd "$top" && autoreconf -fi) >"$B/autoreconf.out" 2>&1 || { tail -20 "$B/autoreconf.out"; fail "autoreconf -fi"; }
fi
(cd "$B" && "$top/configure" --disable-daemons --enable-werror --with-slurm="$T/usr" \
   CXXFLAGS="${SK_CXXFLAGS:--O2 -g1}") >"$B/configure.out" 2>&1
rc=$?
[ "$rc" = 0 ] || tail -30 "$B/configure.out"
ok "$rc" "configure --disable-daemons --with-slurm=$T/usr"
reported=$(sed -n 's/^checking the Slurm version the plugin is built against\.\.\. //p' "$B/configure.out")
ok '[[ "$reported" == "$tree_version" ]] && grep -q "Slurm headers: .*-I$T/usr/include (Slurm $WANT\." "$B/configure.out"' \
  "configure reports Slurm ${reported:-none} from the tree's headers"
make -C "$B" -j"${SK_JOBS:-$(nproc)}" spank/spank_k8s.la >"$B/make.out" 2>&1
rc=$?
[ "$rc" = 0 ] || grep -E "error|Error" "$B/make.out" | head -30
so=$B/spank/.libs/spank_k8s.so
ok '[ "$rc" = 0 ] && [ -f "$so" ]' "spank_k8s.so builds against Slurm $tree_version's headers with -Werror ($((SECONDS - t0)) s)"
[ "$failed" = 0 ] || { [ "${SK_KEEP:-0}" = 1 ] || rm -rf "$B"; finish; }

# ------------------------------------------------------ start in the tree --
mounted=()
cleanup_done=0
tree_env=(env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 SLURM_CONF="$S/etc/slurm.conf")
in_tree() { chroot "$T" "${tree_env[@]}" "$@"; }
# As the submitting user, in its job directory, with a clean environment
# (sbatch exports the submitter's environment into the job).
as_user() {
  chroot --userspec="$TUID:$TUID" "$T" env -i -C "$S/jobs" PATH=/usr/bin:/bin HOME="$S/jobs" \
    USER="$TUSER" LOGNAME="$TUSER" SHELL=/bin/bash LANG=C.UTF-8 SLURM_CONF="$S/etc/slurm.conf" "$@"
}

# Every live process whose root is the tree: all of it was started here
# (munged, slurmctld, slurmd, slurmstepd, job tasks), nothing else is.
tree_procs() {
  local p root st
  for p in /proc/[0-9]*; do
    root=$(readlink "$p/root" 2>/dev/null) || continue
    [ "$root" = "$T" ] || continue
    st=$(awk '{ print $3 }' "$p/stat" 2>/dev/null) || continue
    [ "$st" = Z ] && continue
    echo "${p#/proc/}"
  done
}
proc_name() { tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | cut -c1-100; }
# stop_procs TIMEOUT PID...: SIGTERM, wait, SIGKILL the rest.
stop_procs() {
  local t=$1 p i live; shift
  [ $# -gt 0 ] || return 0
  kill -TERM "$@" 2>/dev/null
  for ((i = 0; i < t * 10; i++)); do
    live=0
    for p in "$@"; do [ -d "/proc/$p" ] && [ "$(awk '{ print $3 }' "/proc/$p/stat" 2>/dev/null)" != Z ] && live=1; done
    [ "$live" = 0 ] && return 0
    sleep 0.1
  done
  kill -KILL "$@" 2>/dev/null
  sleep 0.3
}
procs_named() {  # the tree's processes whose executable is one of $@
  local p exe n
  for p in $(tree_procs); do
    exe=$(readlink "/proc/$p/exe" 2>/dev/null); exe=${exe##*/}
    for n in "$@"; do [ "$exe" = "$n" ] && echo "$p"; done
  done
}

stop_all() {
  [ "$cleanup_done" = 1 ] && return 0
  cleanup_done=1
  local i p
  if [ -n "$(procs_named slurmctld slurmctld-wlm)" ]; then
    for p in $(in_tree squeue -h -o %i 2>/dev/null); do in_tree scancel "$p" 2>/dev/null; done
    for ((i = 0; i < 100; i++)); do
      [ -z "$(in_tree squeue -h -o %i 2>/dev/null)" ] && break
      sleep 0.2
    done
  fi
  # shellcheck disable=SC2046  # pid lists
  {
    stop_procs 10 $(procs_named slurmd slurmd-wlm)
    stop_procs 10 $(procs_named slurmctld slurmctld-wlm)
    stop_procs 5 $(tree_procs | while read -r p; do [ "$(readlink "/proc/$p/exe" 2>/dev/null)" = "$T/usr/sbin/munged" ] || echo "$p"; done)
    stop_procs 5 $(tree_procs)
  }
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
    umount -R "${mounted[$i]}" 2>/dev/null || umount -R -l "${mounted[$i]}" 2>/dev/null \
      || log "cannot unmount ${mounted[$i]}"
  done
  mounted=()
  # Slurm leaves its (empty) cgroup directories of this node behind.
  local d
  for d in /sys/fs/cgroup/*/slurm_"$NODE"; do
    [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null
  done
  # This run's logs, for a look afterwards.
  if [ -d "$T$S/log" ]; then
    rm -rf "$DIR/logs"; cp -a "$T$S/log" "$DIR/logs" 2>/dev/null
  fi
}
agent_pid=""
on_exit() {
  [ -z "$agent_pid" ] || { kill "$agent_pid" 2>/dev/null; wait "$agent_pid" 2>/dev/null; }
  stop_all
  [ "${SK_KEEP:-0}" = 1 ] || rm -rf "$B"
}
trap on_exit EXIT
trap 'exit 130' INT TERM HUP

port_free() {
  local hex; hex=$(printf '%04X' "$1")
  ! awk -v p=":$hex" 'NR > 1 && $4 == "0A" && substr($2, length($2) - 4) == p { f = 1 } END { exit !f }' \
    /proc/net/tcp /proc/net/tcp6 2>/dev/null
}
ok 'port_free "$CTLD_PORT" && port_free "$SLURMD_PORT"' "ports $CTLD_PORT and $SLURMD_PORT are free"
ok '[ -z "$(tree_procs)" ]' "no process runs in the tree before the start"
[ "$failed" = 0 ] || finish

cgroup=none
v1_host=1
for c in freezer cpuset devices; do
  [ "$(stat -fc %T "/sys/fs/cgroup/$c" 2>/dev/null)" = cgroupfs ] || v1_host=0
done
if [ "$USE_CGROUP" != 0 ] && [ "$v1_host" = 1 ] && [ -f "$T/usr/lib/x86_64-linux-gnu/slurm-wlm/cgroup_v1.so" ]; then
  cgroup=v1
elif [ "$USE_CGROUP" = 1 ]; then
  fail "SK_NEWER_SLURM_CGROUP=1, but the host has no v1 freezer/cpuset/devices or the tree no cgroup_v1.so"; finish
fi

# The run's directory in the tree, fresh each time.
R=$T$S
rm -rf "$R"
mkdir -p "$R"/{etc,lib,log,state,spool/"$NODE",run,munge,munge-run,dev,jobs}
chmod 755 "$R" "$R"/{etc,lib,log,state,spool,run,munge-run,dev}
chmod 1777 "$R/jobs"
for ((i = 0; i < GPUS; i++)); do mknod -m 666 "$R/dev/nvidia$i" c 195 "$i"; done
install -m 0644 "$so" "$R/lib/spank_k8s.so"
cp /etc/hosts "$T/etc/hosts"
grep -q "^$TUSER:" "$T/etc/passwd" || echo "$TUSER:x:$TUID:$TUID::$S/jobs:/bin/bash" >>"$T/etc/passwd"
grep -q "^$TUSER:" "$T/etc/group" || echo "$TUSER:x:$TUID:" >>"$T/etc/group"

host=$(hostname -s)
if [ "$cgroup" = v1 ]; then proctrack=proctrack/cgroup task=task/cgroup,task/affinity
else proctrack=proctrack/linuxproc task=task/none; fi
cat >"$R/etc/slurm.conf" <<EOF
# Written by tests/slurm/newer-slurm.sh: one node on 127.0.0.1 in the $SUITE tree.
ClusterName=sknewer
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$S/munge-run/munge.sock
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool/%n
SlurmctldPidFile=$S/run/slurmctld.pid
SlurmdPidFile=$S/run/slurmd-%n.pid
SlurmctldLogFile=$S/log/slurmctld.log
SlurmdLogFile=$S/log/slurmd-%n.log
SlurmctldDebug=debug
SlurmdDebug=debug
PlugStackConfig=$S/etc/plugstack.conf
ProctrackType=$proctrack
TaskPlugin=$task
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
MailProg=/bin/true
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
MinJobAge=300
KillWait=2
Waittime=0
PrologFlags=Alloc,Contain
NodeName=$NODE NodeHostname=$host NodeAddr=127.0.0.1 Port=$SLURMD_PORT CPUs=2 RealMemory=1000 Gres=gpu:$GPUS State=UNKNOWN
PartitionName=gpu Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
cat >"$R/etc/gres.conf" <<EOF
AutoDetect=off
NodeName=$NODE Name=gpu File=$S/dev/nvidia[0-$((GPUS - 1))]
EOF
if [ "$cgroup" = v1 ]; then
  printf '%s\n' CgroupPlugin=cgroup/v1 ConstrainCores=yes ConstrainDevices=yes ConstrainRAMSpace=no >"$R/etc/cgroup.conf"
fi
# No agent listens on socket=: the plugin's own "agent unreachable" path.
echo "required $S/lib/spank_k8s.so socket=$S/run/agent.sock rundir=$S/run/k8s-jobs shim=$S/lib/shim.sh timeout=2 grace=2 gpu_device=$S/dev/nvidia{index}" \
  >"$R/etc/plugstack.conf"
chmod 644 "$R"/etc/*

for m in proc dev sys; do
  if mount --rbind "/$m" "$T/$m"; then mounted+=("$T/$m"); else fail "bind-mount /$m into the tree"; fi
done
[ "$failed" = 0 ] || finish

# A daemon from the tree: clean environment, stdin /dev/null, stdout and
# stderr into its log, no other inherited descriptor (the lock on fd 9).
launch() {
  local out=$1; shift
  (
    for fd in /proc/"$BASHPID"/fd/*; do
      fd=${fd##*/}
      [ "$fd" -gt 2 ] && eval "exec $fd>&-" 2>/dev/null
    done
    exec chroot "$T" "${tree_env[@]}" "$@" </dev/null >>"$R/log/$out" 2>&1
  )
}

t0=$SECONDS
dd if=/dev/urandom of="$R/munge/munge.key" bs=1024 count=1 status=none
chroot "$T" chown -R munge:munge "$S/munge" "$S/munge-run"
chmod 700 "$R/munge"; chmod 400 "$R/munge/munge.key"; chmod 755 "$R/munge-run"
launch munged.stdout runuser -u munge -- /usr/sbin/munged --socket="$S/munge-run/munge.sock" \
  --key-file="$S/munge/munge.key" --log-file="$S/munge/munged.log" \
  --pid-file="$S/munge/munged.pid" --seed-file="$S/munge/munged.seed"
munge_ok=1
for ((i = 0; i < 50; i++)); do
  in_tree sh -c "munge -S $S/munge-run/munge.sock -n | unmunge -S $S/munge-run/munge.sock" >/dev/null 2>&1 && break
  sleep 0.1
done
[ "$i" -lt 50 ] || munge_ok=0
ok "$((1 - munge_ok))" "munged (its own key and socket in the tree) answers"

launch slurmctld.stdout /usr/sbin/slurmctld -f "$S/etc/slurm.conf"
for ((i = 0; i < 150; i++)); do
  in_tree scontrol ping >/dev/null 2>&1 && break
  sleep 0.1
done
ok '[ "$i" -lt 150 ]' "slurmctld $tree_version answers scontrol ping (port $CTLD_PORT)"
launch "slurmd-$NODE.stdout" /usr/sbin/slurmd -f "$S/etc/slurm.conf" -N "$NODE"
state=""
for ((i = 0; i < 300; i++)); do
  state=$(in_tree sinfo -h -N -n "$NODE" -o '%T %G' 2>/dev/null | head -1)
  [ "${state%% *}" = idle ] && break
  sleep 0.2
done
ok '[ "$state" = "idle gpu:$GPUS" ]' "slurmd $NODE idle with gpu:$GPUS ($proctrack, $task; ${state:-no state}; start $((SECONDS - t0)) s)"
if [ "${state%% *}" != idle ]; then
  tail -20 "$R/log/slurmd-$NODE.log" "$R/log/slurmd-$NODE.stdout" "$R/log/slurmctld.log" 2>/dev/null
  finish
fi

# ------------------------------------------------------------- checks -----
help_s=$(as_user srun --help 2>&1)
help_b=$(as_user sbatch --help 2>&1)
ok 'grep -q -- "--k8s-gpus=N|all" <<<"$help_s" && grep -q -- "--k8s-wait" <<<"$help_s"' "srun --help lists the plugin's --k8s-* flags"
ok 'grep -q -- "--k8s-gpus=N|all" <<<"$help_b" && grep -q -- "--k8s-drain-before" <<<"$help_b"' "sbatch --help lists the plugin's --k8s-* flags"

cat >"$R/jobs/job.sh" <<'EOF'
#!/bin/bash
echo "batch user=$(id -un) node=$SLURMD_NODENAME k8s_error=${SLURM_K8S_ERROR:-none}"
srun -N1 -n1 bash -c 'echo "TASK node=$SLURMD_NODENAME gpus=${CUDA_VISIBLE_DEVICES:-none} user=$(id -un)"'
EOF
chmod 755 "$R/jobs/job.sh"

# The allocator (sbatch, as the user) refuses bad flags before submission.
out=$(as_user sbatch --k8s-gpus=1 "$S/jobs/job.sh" 2>&1); rc=$?
ok '[ "$rc" != 0 ] && grep -q "k8s-gpus lends GPUs, but the job requests none" <<<"$out"' \
  "sbatch --k8s-gpus=1 without GPUs is refused by the plugin (${out//$'\n'/ })"
out=$(as_user sbatch --gres=gpu:1 --k8s-gpus=0 "$S/jobs/job.sh" 2>&1); rc=$?
ok '[ "$rc" != 0 ] && grep -q -- "--k8s-gpus=0: expected a number of GPUs per node" <<<"$out"' \
  "sbatch --k8s-gpus=0 is refused by the plugin (${out//$'\n'/ })"

job_state() {
  in_tree scontrol show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' | head -1
}
wait_job_end() {  # prints the final state
  local jid=$1 end=$((SECONDS + JOB_TIMEOUT)) st=""
  while [ "$SECONDS" -lt "$end" ]; do
    st=$(job_state "$jid")
    case $st in
      COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE|PREEMPTED) break ;;
    esac
    sleep 0.2
  done
  echo "${st:-unknown}"
}
slurmd_log=$R/log/slurmd-$NODE.log
# The lines slurmd's log gained since mark_log.
mark_log() { log_mark=$(wc -l <"$slurmd_log" 2>/dev/null || echo 0); }
new_log() { tail -n +"$((log_mark + 1))" "$slurmd_log" 2>/dev/null; }

# (b) a job without --k8s-* flags, with the plugin loaded everywhere.
mark_log
t0=$SECONDS
jid=$(as_user sbatch --parsable -N1 --gres=gpu:$GPUS -o "$S/jobs/plain-%j.out" -e "$S/jobs/plain-%j.err" "$S/jobs/job.sh" 2>&1)
ok '[[ "$jid" =~ ^[0-9]+$ ]]' "sbatch of a job without --k8s-* flags (job $jid)"
if [[ "$jid" =~ ^[0-9]+$ ]]; then
  st=$(wait_job_end "$jid")
  ok '[ "$st" = COMPLETED ]' "the plain job ran to completion ($st, $((SECONDS - t0)) s)"
  o=$R/jobs/plain-$jid.out
  sed 's/^/  | /' "$o" "$R/jobs/plain-$jid.err" 2>/dev/null
  ok 'grep -q "^batch user=$TUSER node=$NODE k8s_error=none$" "$o" && grep -q "^TASK node=$NODE gpus=0,1 user=$TUSER$" "$o"' \
    "its batch script and srun step ran as $TUSER and saw both GPUs"
  sleep 0.5  # the epilog's lines
  hooks=$(new_log | grep -o "spank_k8s: hook [a-z_]* ([a-z_]*" | sort -u | sed 's/spank_k8s: hook //; s/ (/@/' | paste -sd' ')
  ok '[[ " $hooks " == *" init@remote "* && " $hooks " == *" task_init@remote "* && " $hooks " == *" exit@remote "* ]]' \
    "the plugin's hooks ran in 24.11's slurmstepd for it (${hooks:-none})"
fi

# (c) --k8s-gpus=1 with no agent: the plugin's own message reaches the job.
mark_log
t0=$SECONDS
jid=$(as_user sbatch --parsable -N1 --gres=gpu:$GPUS --k8s-gpus=1 -o "$S/jobs/k8s-%j.out" -e "$S/jobs/k8s-%j.err" "$S/jobs/job.sh" 2>&1)
ok '[[ "$jid" =~ ^[0-9]+$ ]]' "sbatch --gres=gpu:$GPUS --k8s-gpus=1 (job $jid)"
if [[ "$jid" =~ ^[0-9]+$ ]]; then
  st=$(wait_job_end "$jid")
  ok '[ "$st" = COMPLETED ]' "the --k8s-gpus=1 job still runs to completion without an agent ($st, $((SECONDS - t0)) s)"
  o=$R/jobs/k8s-$jid.out e=$R/jobs/k8s-$jid.err
  sed 's/^/  | /' "$o" "$e" 2>/dev/null
  msg="the slurm-k8s agent on $NODE did not register the node"
  ok 'grep -q "^batch user=$TUSER node=$NODE k8s_error=$msg (" "$o"' \
    "the job's SLURM_K8S_ERROR names the unregistered node (user_init ran)"
  ok 'grep -q "^spank_k8s: $msg (.*); this job runs without its Kubernetes part$" "$e"' \
    "the job's stderr has the plugin's message (task_init ran)"
  sleep 0.5
  # (not `new_log | grep -q`: with pipefail, grep's early exit fails tail)
  prolog_err=$(new_log | grep "spank_k8s: prolog: job $jid: node $NODE: register failed: ")
  ok '[ -n "$prolog_err" ]' "slurmd's log has the plugin's job_prolog error (it ran in 24.11's prolog)"
  [ -z "$prolog_err" ] || echo "  | $prolog_err"
fi

# (e) the same with the project's stub agent (tests/integration/stub_agent.py,
# on the host, its sockets in the tree) and a stand-in shim: the whole life
# of a lent node in 24.11 -- register from the prolog (with the CPUs the
# job holds there: SLURM_JOB_CPUS_PER_NODE, 24.11 has no
# slurm_job_cpus_allocated_on_node), the shim started in the extern step,
# the lent GPU denied to the batch step and the kept one to the shim (cgroup
# v1), and at the end deregister from the extern step's exit and from the
# epilog, each naming how the job ended (slurm_load_job again), the shim
# stopped.
try_open_fn='try_open() { local e; e=$( ( : 3<>"$1" ) 2>&1 ) && { echo OK; return; }
  case $e in *"No such device or address"*) echo ENXIO ;; *"not permitted"*) echo EPERM ;; *) echo "$e" ;; esac; }'
{
  echo '#!/bin/bash'
  echo '# Stands in for slurm-k8s-shim (tests/slurm/newer-slurm.sh): records who it'
  echo '# runs as and which fake GPU it may open, then waits for SIGTERM.'
  echo "$try_open_fn"
  echo 'while [ $# -gt 0 ]; do case $1 in --job-id) job=$2; shift 2 ;; *) shift ;; esac; done'
  echo "out=$S/jobs/shim-\$job.txt"
  echo '{ echo "shim user=$(id -un) gpus=$SLURM_K8S_GPUS"'
  echo "  for i in \$(seq 0 $((GPUS - 1))); do echo \"open nvidia\$i \$(try_open $S/dev/nvidia\$i)\"; done; } >\"\$out\""
  echo "trap 'echo sigterm >>\"\$out\"; exit 0' TERM"
  echo 'while :; do sleep 1 & wait $!; done'
} >"$R/lib/shim.sh"
chmod 755 "$R/lib/shim.sh"
{
  echo '#!/bin/bash'
  echo "$try_open_fn"
  echo 'echo "env node=${SLURM_K8S_NODE:-none} gpus=${SLURM_K8S_GPUS:-none} cvd=${CUDA_VISIBLE_DEVICES:-none} error=${SLURM_K8S_ERROR:-none}"'
  echo "for i in \$(seq 0 $((GPUS - 1))); do echo \"open nvidia\$i \$(try_open $S/dev/nvidia\$i)\"; done"
} >"$R/jobs/lend.sh"
chmod 755 "$R/jobs/lend.sh"
agent_rec=$R/run/agent.jsonl
: >"$agent_rec"
python3 "$top/tests/integration/stub_agent.py" "$R/run/agent.sock" "$agent_rec" \
  </dev/null >"$R/log/stub-agent.stdout" 2>&1 &
agent_pid=$!
for ((i = 0; i < 100; i++)); do
  [ -S "$R/run/agent.sock" ] && [ -S "$R/run/admin/agent.sock" ] && break
  sleep 0.1
done
ok '[ "$i" -lt 100 ]' "the stub agent listens in the tree ($S/run/agent.sock and admin/)"
mark_log
t0=$SECONDS
jid=$(as_user sbatch --parsable -N1 -n1 -c2 --gres=gpu:$GPUS --k8s-gpus=1 -o "$S/jobs/lend-%j.out" -e "$S/jobs/lend-%j.err" "$S/jobs/lend.sh" 2>&1)
ok '[[ "$jid" =~ ^[0-9]+$ ]]' "sbatch -c2 --gres=gpu:$GPUS --k8s-gpus=1 with the stub agent (job $jid)"
if [[ "$jid" =~ ^[0-9]+$ ]]; then
  st=$(wait_job_end "$jid")
  ok '[ "$st" = COMPLETED ]' "the job lending 1 GPU ran to completion ($st, $((SECONDS - t0)) s)"
  o=$R/jobs/lend-$jid.out sh=$R/jobs/shim-$jid.txt
  sed 's/^/  | /' "$o" "$R/jobs/lend-$jid.err" "$sh" 2>/dev/null
  ok 'grep -q "^env node=slurm-$NODE-$jid gpus=1 cvd=0 error=none$" "$o"' \
    "the batch step got SLURM_K8S_NODE, SLURM_K8S_GPUS=1 and CUDA_VISIBLE_DEVICES=0 (lent GPU 1 hidden)"
  # What the agent was told: register (from the prolog), deregister (from
  # the extern step's exit, then from the epilog).
  rec=$(python3 -c '
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
ev = [e for e in ev if str(e["body"].get("job_id")) == sys.argv[2]]
reg = [e["body"] for e in ev if e["op"] == "register"]
out = ["register=%d" % len(reg)]
if reg:
    out.append("gpus=%s cpus=%s" % (",".join(map(str, reg[0].get("gpus", []))), reg[0].get("cpus", 0)))
out.append("deregister=" + ",".join(e["body"].get("reason", "?") + "@" + e["socket"] for e in ev if e["op"] == "deregister"))
print(" ".join(out))' "$agent_rec" "$jid" 2>&1)
  ok '[[ "$rec" =~ ^register=1\ gpus=1\ cpus=2\  ]]' \
    "the prolog registered GPU 1 and the job's 2 CPUs on the node ($rec)"
  ok '[[ "$rec" == *" deregister=JobCompleted@admin,JobCompleted@admin" ]]' \
    "the extern step's exit and the epilog deregistered, each naming JobCompleted from slurm_load_job"
  ok 'grep -q "^shim user=$TUSER gpus=1$" "$sh" && grep -q "^sigterm$" "$sh"' \
    "the shim ran as $TUSER from the extern step and was stopped with SIGTERM at the end"
  if [ "$cgroup" = v1 ]; then
    ok 'grep -q "^open nvidia0 ENXIO$" "$o" && grep -q "^open nvidia1 EPERM$" "$o"' \
      "the batch step may open the kept GPU 0 only (lent GPU 1 denied in its devices cgroup)"
    ok 'grep -q "^open nvidia0 EPERM$" "$sh" && grep -q "^open nvidia1 ENXIO$" "$sh"' \
      "the shim may open the lent GPU 1 only (kept GPU 0 denied in step_extern's devices cgroup)"
  fi
  errs=$(new_log | grep -E "error: .*spank|spank_k8s: .*(error|fail)")
  if [ "$cgroup" != v1 ]; then  # no job cgroups: said, as the plugin must
    errs=$(grep -vE "is in no job cgroup|not denied( .*)? at the device: slurmstepd is in no devices cgroup" <<<"$errs")
  fi
  ok '[ -z "$errs" ]' "slurmd's log has no error of the plugin for it${errs:+ ($(head -3 <<<"$errs"))}"
fi
kill "$agent_pid" 2>/dev/null; wait "$agent_pid" 2>/dev/null; agent_pid=""

drained=$(in_tree sinfo -h -N -t drain,drained,draining,down,fail -o '%N %E' 2>/dev/null)
ok '[ -z "$drained" ]' "no node drained or down${drained:+ ($drained)}"

# (d) no load, version or symbol error anywhere.
bad=$(grep -ihE "incompatible|undefined symbol|cannot open shared object|plugin_load|spank_stack|spank: .*(fail|error)|version mismatch|symbol lookup" \
        "$R"/log/*.log "$R"/log/*.stdout 2>/dev/null | grep -v "spank_k8s: prolog: job [0-9]*: node $NODE: register failed" | head -5)
ok '[ -z "$bad" ]' "no plugin load, version or symbol error in the daemons' logs${bad:+ ($bad)}"
ok 'grep -q "spank_k8s" "$slurmd_log"' "slurmd's log names spank_k8s (the plugin was loaded)"

# ---------------------------------------------------------------- stop -----
t0=$SECONDS
stop_all
left=$(for p in $(tree_procs); do echo "$p $(proc_name "$p")"; done)
ok '[ -z "$left" ]' "no process of the tree left after the stop ($((SECONDS - t0)) s)${left:+: $left}"
ok 'nothing_mounted_below "$T"' "nothing mounted in the tree"
cg_left=$(ls -d /sys/fs/cgroup/*/slurm_"$NODE" 2>/dev/null)
ok '[ -z "$cg_left" ]' "no cgroup directory of $NODE left${cg_left:+ ($cg_left)}"

log "took $((SECONDS - t_start)) s (tree $tree_how; logs in $DIR/logs)"
summary
