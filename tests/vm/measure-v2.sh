#!/usr/bin/env bash
# measure-v2.sh -- records how Slurm 22.05's cgroup/v2 lays out a job, in the
# guest of tests/vm (pure unified hierarchy, no systemd):
#
#   tests/vm/vm.sh run tests/vm/measure-v2.sh
#
# Two phases on a NUM_NODES (2) cluster of tests/slurm/cluster.sh with
# PrologFlags=Alloc,Contain, proctrack/cgroup, task/cgroup,task/affinity and
# ConstrainCores/ConstrainRAMSpace/ConstrainDevices=yes:
#   A. no plugin: a batch job (--gres=gpu:2) whose script and an srun step
#      (--gres=gpu:1) probe their cgroups while root records the tree;
#   B. spank_k8s.so with the stub agent (tests/integration/stub_agent.py) and a
#      stand-in shim that probes the same from the extern step.
# The probes: /proc/<pid>/cgroup of every process of the job, every cgroup
# directory under the stepd scope with its controls, mkdir and cgroup.procs
# writes as the job user, open() of the fake GPUs (ENXIO = allowed by the
# device program, EPERM = denied), bpftool's view, and what is left after the
# job and after the cluster stops.  Output: sections on stdout (README.md,
# "Measured cgroup v2 layout", is written from it).  Exit 0 unless a phase
# could not run.
# shellcheck disable=SC2016
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TOP="$(cd "$HERE/../.." && pwd)"
export NUM_NODES="${NUM_NODES:-2}" GPUS_PER_NODE="${GPUS_PER_NODE:-4}" CONSTRAIN_RAM_SPACE=yes
# shellcheck source=../slurm/lib.sh
. "$TOP/tests/slurm/lib.sh"
CLUSTER="$TOP/tests/slurm/cluster.sh"
BUILD="${SK_TOP_BUILDDIR:-$TOP/build}"
D="$SK_SLURM_DIR"
LIB="$D/lib"
OUTD="$D/out"
CG=/sys/fs/cgroup
rc=0

sec() { printf '\n==== %s\n' "$*"; }
sub() { printf -- '--- %s\n' "$*"; }
ind() { sed 's/^/    /'; }

[ "$(id -u)" = 0 ] || { echo "needs root"; exit 77; }
"$CLUSTER" clean >/dev/null 2>&1 || true
mkdir -p "$LIB" "$OUTD" "$SK_JOBS_DIR"; chmod 755 "$D" "$LIB"; chmod 1777 "$OUTD" "$SK_JOBS_DIR"

# ------------------------------------------------------------- probes ------
# The job user's probe: run from the batch script, an srun task and the shim.
cat > "$LIB/cgprobe.py" <<'PY'
import errno, os, sys
def err(e): return errno.errorcode.get(e.errno, str(e.errno))
me = open("/proc/self/cgroup").read().strip()
print("uid=%d pid=%d cgroup %s" % (os.getuid(), os.getpid(), me))
rel = me.split("::", 1)[1]
parts = rel.strip("/").split("/")
job = [i for i, p in enumerate(parts) if p.startswith("job_")]
dev = sys.argv[1]
for i in range(4):
    p = "%s/nvidia%d" % (dev, i)
    try:
        os.close(os.open(p, os.O_RDWR)); r = "opened"
    except OSError as e:
        r = err(e)
    print("open nvidia%d: %s" % (i, r))
if not job:
    print("not in a job cgroup"); sys.exit(0)
root = "/sys/fs/cgroup"
jobdir = root + "/" + "/".join(parts[:job[0] + 1])
dirs = [root + "/" + "/".join(parts[:k]) for k in range(1, job[0] + 1)]
for d, subdirs, files in os.walk(jobdir):
    dirs.append(d)
for d in sorted(set(dirs)):
    t = d + "/probe-%d" % os.getpid()
    try:
        os.mkdir(t); r = "CREATED"; os.rmdir(t)
    except OSError as e:
        r = err(e)
    print("mkdir %s/<child>: %s" % (d[len(root):], r))
own = root + rel
# A child of one's own cgroup: who owns it, can a process move into it, can
# controllers be enabled for it?
t = own + "/probe-child-%d" % os.getpid()
try:
    os.mkdir(t)
    st = os.stat(t + "/cgroup.procs")
    print("own child %s: created, its cgroup.procs uid %d mode %o" % (t[len(root):], st.st_uid, st.st_mode & 0o777))
    pid = os.fork()
    if pid == 0:
        try:
            with open(t + "/cgroup.procs", "w") as f: f.write("0")
            r = "MOVED (now %s)" % open("/proc/self/cgroup").read().strip()
        except OSError as e:
            r = err(e)
        os.write(1, ("move a forked process into the own child: %s\n" % r).encode())
        os._exit(0)
    os.waitpid(pid, 0)
    os.rmdir(t)
except OSError as e:
    print("own child %s: %s" % (t[len(root):], err(e)))
for f in ("cgroup.subtree_control", "cgroup.procs", "memory.max", "cgroup.kill", "cgroup.freeze"):
    st = os.stat(own + "/" + f)
    print("own cgroup's %s: uid %d mode %o" % (f, st.st_uid, st.st_mode & 0o777))
try:
    with open(own + "/cgroup.subtree_control", "w") as f: f.write("+memory")
    print("write +memory to own cgroup.subtree_control: WRITTEN")
except OSError as e:
    print("write +memory to own cgroup.subtree_control: %s" % err(e))
sys.stdout.flush()
for d in sorted(set(dirs)):
    if d == own or not os.path.exists(d + "/cgroup.procs"): continue
    pid = os.fork()
    if pid == 0:
        try:
            with open(d + "/cgroup.procs", "w") as f: f.write("0")
            os.write(1, ("write own pid to %s/cgroup.procs: MOVED\n" % d[len(root):]).encode())
        except OSError as e:
            os.write(1, ("write own pid to %s/cgroup.procs: %s\n" % (d[len(root):], err(e))).encode())
        os._exit(0)
    os.waitpid(pid, 0)
PY

# Records the signals it gets, with the time, until SIGKILL.
cat > "$LIB/sigrec.py" <<'PY'
import os, signal, sys, time
out = sys.argv[1]
def w(s):
    with open(out, "a") as f: f.write("%.3f %s\n" % (time.time(), s))
w("sigrec pid %d uid %d cgroup %s" % (os.getpid(), os.getuid(), open("/proc/self/cgroup").read().strip()))
for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCONT, signal.SIGUSR1, signal.SIGUSR2):
    signal.signal(s, lambda n, f: w("got %s" % signal.Signals(n).name))
while True:
    signal.pause()
PY

# The stand-in shim (plugstack shim=): records, probes, then waits to be
# stopped (the plugin SIGTERMs its process group at the job's end).
cat > "$LIB/vm-shim.sh" <<'EOF'
#!/bin/bash
LIB="$(dirname "$0")"
while [ $# -gt 0 ]; do
  case "$1" in --job-id) JOB="$2"; shift 2 ;; --slurm-node) NODE="$2"; shift 2 ;; *) shift ;; esac
done
{
  echo "shim pid $$ ppid $PPID $(id)"
  echo "shim /proc/self/cgroup: $(cat /proc/self/cgroup)"
  env | grep '^SLURM_K8S' | sort
  python3 -u "$LIB/cgprobe.py" "$LIB/../dev"
} > "$LIB/../out/shim-$JOB-$NODE.txt" 2>&1
# Until SIGKILL: record every signal and when it came.
exec python3 -u "$LIB/sigrec.py" "$LIB/../out/shim-$JOB-$NODE.txt"
EOF
chmod 755 "$LIB/vm-shim.sh"; chmod 644 "$LIB/cgprobe.py" "$LIB/sigrec.py"

# The batch script: probes itself, a forked child and an srun step, then
# waits for root (file "done") while root records the tree.
cat > "$SK_JOBS_DIR/measure.sh" <<EOF
#!/bin/bash
O=$OUTD/job-\$SLURM_JOB_ID
{
  echo "batch shell pid \$\$: \$(cat /proc/\$\$/cgroup)"
  sleep 1000 & c=\$!
  echo "forked sleep pid \$c: \$(cat /proc/\$c/cgroup)"
  kill \$c
  python3 -u $LIB/cgprobe.py $D/dev
  echo "SLURM_JOB_GPUS=\$SLURM_JOB_GPUS CUDA_VISIBLE_DEVICES=\$CUDA_VISIBLE_DEVICES"
} > \$O.batch 2>&1
srun -n1 --gres=gpu:1 bash -c 'python3 -u $LIB/cgprobe.py $D/dev > \$0.step0 2>&1;
  echo "SLURM_STEP_GPUS=\$SLURM_STEP_GPUS CUDA_VISIBLE_DEVICES=\$CUDA_VISIBLE_DEVICES" >> \$0.step0;
  touch \$0.step0.ready; for i in \$(seq 600); do [ -e \$0.done ] && break; sleep 0.5; done' \$O &
for i in \$(seq 600); do [ -e \$O.step0.ready ] && break; sleep 0.5; done
touch \$O.ready
for i in \$(seq 600); do [ -e \$O.done ] && break; sleep 0.5; done
wait
EOF
chmod 755 "$SK_JOBS_DIR/measure.sh"

# ------------------------------------------------------- root's view -------
cg_of() { tr '\n' ' ' < "/proc/$1/cgroup" 2>/dev/null; }
procs_of() {  # pid(comm) list of a cgroup.procs file
  local p out=""
  while read -r p; do out="$out $p($(cat "/proc/$p/comm" 2>/dev/null))"; done < "$1"
  echo "${out# }"
}
show_dir() {
  local d="$1" f v
  echo "${d#"$CG"}/"
  for f in cgroup.controllers cgroup.subtree_control cgroup.type memory.max cpuset.cpus \
           cpuset.cpus.effective cpuset.mems pids.max; do
    if [ -e "$d/$f" ]; then v="$(tr '\n' ' ' < "$d/$f")"; echo "    $f: ${v:-<empty>}"; fi
  done
  echo "    cgroup.procs ($(stat -c '%U:%G %a' "$d/cgroup.procs")): $(procs_of "$d/cgroup.procs")"
  local o; o="$(find "$d" -maxdepth 1 -type f ! -user root -printf '%f(%u) ' 2>/dev/null)"
  [ -z "$o" ] || echo "    files not owned by root: $o"
  echo "    dir: $(stat -c '%U:%G %a' "$d")"
}
show_tree() { local d; while read -r d; do show_dir "$d"; done < <(find "$1" -type d | sort); }
pids_named() { pgrep -x "$1" | sort -n; }

record_running() {  # JOBID: everything while the job waits in its script
  local jid="$1" p t pid
  sec "(a) /proc/<pid>/cgroup while job $jid runs"
  echo "measure script (root, outside Slurm): $(cg_of $$)"
  for p in "$D"/run/slurmd-*.pid "$D/run/slurmctld.pid" "$D/munge/munged.pid"; do
    pid="$(tr -dc 0-9 < "$p")"; echo "$(basename "$p" .pid) pid $pid: $(cg_of "$pid")"
  done
  for pid in $(pids_named slurmstepd); do
    t="$(tr '\0' ' ' < "/proc/$pid/cmdline")"
    echo "slurmstepd pid $pid '${t% }' ppid $(awk '/^PPid/{print $2}' "/proc/$pid/status"): $(cg_of "$pid")"
    for p in $(pgrep -P "$pid"); do
      echo "    child pid $p uid $(stat -c %u "/proc/$p") '$(tr '\0' ' ' < "/proc/$p/cmdline" | cut -c1-60)': $(cg_of "$p")"
    done
  done
  sub "scontrol listpids $jid"
  scontrol listpids "$jid" 2>&1 | ind
  sub "the batch script's report ($OUTD/job-$jid.batch)"; ind < "$OUTD/job-$jid.batch"
  sub "the srun step task's report ($OUTD/job-$jid.step0)"; ind < "$OUTD/job-$jid.step0"
  sec "(b) the cgroup tree while job $jid runs"
  sub "/ and system.slice"
  show_dir "$CG"; show_dir "$CG/system.slice"
  for t in "$CG"/system.slice/*_slurmstepd.scope "$CG"/system.slice/slurmstepd.scope; do
    [ -d "$t" ] || continue
    sub "$t"; show_tree "$t"
  done
  sub "other directories (outside system.slice)"
  find "$CG" -mindepth 1 -maxdepth 2 -type d ! -path "$CG/system.slice*" | sort | ind
  sub "files of a step directory (step_batch)"
  find "$(find "$CG" -type d -name step_batch | head -n1)" -maxdepth 1 -type f -printf '%f\n' | sort | paste -sd' ' | fold -w 100 | ind
  sec "(d) device programs while job $jid runs"
  sub "bpftool cgroup tree $CG"; bpftool cgroup tree "$CG" 2>&1 | ind
  sub "bpftool cgroup show DIR effective, for every directory of job $jid"
  local d
  while read -r d; do
    echo "${d#"$CG"}: $(bpftool cgroup show "$d" effective 2>&1 | awk 'NR > 1 { printf "%s(%s) ", $1, $3 }')"
  done < <(find "$CG" -type d -name "job_$jid" -exec find {} -type d \; | sort) | ind
  sub "bpftool prog show (cgroup_device)"; bpftool prog show 2>&1 | grep -A3 cgroup_device | ind
  local id
  for id in $(bpftool prog show 2>/dev/null | awk -F: '/cgroup_device/ { print $1 }'); do
    sub "bpftool prog dump xlated id $id"; bpftool prog dump xlated id "$id" 2>&1 | ind
  done
}

record_after() {  # LABEL
  sec "(e) $1"
  local t
  for t in "$CG"/system.slice/*_slurmstepd.scope "$CG"/system.slice/slurmstepd.scope; do
    [ -d "$t" ] || continue
    sub "find $t -type d"; find "$t" -type d | sort | ind
    sub "processes in it"; find "$t" -name cgroup.procs -exec sh -c 'for f; do p=$(cat "$f"); [ -z "$p" ] || echo "$f: $p"; done' _ {} + | ind
  done
  sub "directories directly under $CG"; find "$CG" -mindepth 1 -maxdepth 2 -type d | sort | ind
  sub "bpftool cgroup tree $CG"; bpftool cgroup tree "$CG" 2>&1 | ind
}

run_job() {  # LABEL EXTRA_SBATCH_ARGS...
  local label="$1"; shift
  local jid t0=$SECONDS
  rm -f "$OUTD"/*            # job ids start at 1 again after each start
  jid="$(sk_submit_as_user -N1 -w $N1 --gres=gpu:2 -o "$OUTD/slurm-%j.out" "$@" "$SK_JOBS_DIR/measure.sh")" \
    || { echo "FAILED: sbatch ($label)"; rc=1; return 1; }
  local end=$((SECONDS + 240))
  until [ -e "$OUTD/job-$jid.ready" ]; do
    if [ $SECONDS -ge $end ] || ! squeue -h -j "$jid" | grep -q . ||
       scontrol show job "$jid" | grep -q 'Reason=launch_failed'; then
      echo "FAILED: job $jid ($label) did not reach its wait (state $(sk_job_state "$jid"))"
      scontrol show job "$jid" | grep -E 'JobState|Reason' | ind
      cat "$OUTD/slurm-$jid.out" "$OUTD/job-$jid".* 2>/dev/null | ind
      grep -iE 'error|fatal' "$D"/log/slurmd-$N1.log | tail -n 40 | cut -c1-250 | ind
      sub "the tree"; show_tree "$CG/system.slice"
      rc=1; scancel "$jid" 2>/dev/null; return 1
    fi
    sleep 0.5
  done
  echo "job $jid ($label) in its wait after $((SECONDS - t0))s"
  record_running "$jid"
  JID="$jid"
}

# Root puts a process of the job's user into a cgroup directory it makes in
# the job's tree (where a per-pod cgroup could go), to see what the job's end
# does to it.
PROBES=()
start_probe() {  # NAME DIR
  local name="$1" dir="$2" pid
  mkdir -p "$dir" || { echo "probe $name: mkdir $dir failed"; return; }
  setpriv --reuid="$TEST_UID" --regid="$TEST_UID" --clear-groups \
    python3 -u "$LIB/sigrec.py" "$OUTD/probe-$name.txt" </dev/null >/dev/null 2>&1 &
  pid=$!
  if echo "$pid" > "$dir/cgroup.procs"; then
    echo "probe $name: pid $pid (uid $TEST_UID) moved by root into ${dir#"$CG"}: $(cg_of "$pid")"
  else
    echo "probe $name: root could not move pid $pid into ${dir#"$CG"}"
  fi
  echo "    ${dir#"$CG"}: controllers '$(cat "$dir/cgroup.controllers")' memory.max=$(cat "$dir/memory.max" 2>/dev/null) cpuset.cpus.effective=$(cat "$dir/cpuset.cpus.effective" 2>/dev/null) device programs: $(bpftool cgroup show "$dir" effective 2>&1 | awk 'NR > 1 { printf "%s ", $1 }')"
  echo 100000000 > "$dir/memory.max" && echo "    root set memory.max=100000000 there: $(cat "$dir/memory.max")"
  PROBES+=("$name:$pid:$dir")
}
report_probes() {
  local p name pid dir
  for p in "${PROBES[@]}"; do
    IFS=: read -r name pid dir <<<"$p"
    if sk_pid_alive "$pid"; then
      echo "probe $name (pid $pid): ALIVE after the job, in $(cg_of "$pid")"
    else
      echo "probe $name (pid $pid): dead after the job"
    fi
    ind < "$OUTD/probe-$name.txt"
    [ -d "$dir" ] && echo "    ${dir#"$CG"} still exists" || echo "    ${dir#"$CG"} is gone"
  done
}
stop_probes() {
  local p name pid dir
  for p in "${PROBES[@]}"; do
    IFS=: read -r name pid dir <<<"$p"
    kill -KILL "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
  done
  sleep 0.5
  for p in "${PROBES[@]}"; do
    IFS=: read -r name pid dir <<<"$p"
    [ -d "$dir" ] && rmdir "$dir"
  done
  PROBES=()
}

finish_job() {
  local jid="$1"
  touch "$OUTD/job-$jid.done"
  sk_wait_gone "$jid" 120 || echo "WARNING: job $jid still listed"
  echo "job $jid: $(sk_job_state "$jid"); output:"; ind < "$OUTD/slurm-$jid.out"
  sleep 2
}

# ------------------------------------------------------------ phase A ------
sec "phase A: Slurm alone (no plugin)"
export SLURM_CONF_EXTRA="DebugFlags=CGROUP"
export PLUGSTACK_LINES=""
"$CLUSTER" start 2>&1 | tail -n 8 | ind
sub "cgroup.conf"; ind < "$D/etc/cgroup.conf"
sub "slurm.conf (cgroup lines)"; grep -E 'Proctrack|TaskPlugin|PrologFlags' "$D/etc/slurm.conf" | ind
sub "cgroup.controllers / cgroup.subtree_control after start"
for d in "$CG" "$CG/system.slice" "$CG"/system.slice/${N1}_slurmstepd.scope "$CG"/system.slice/${N1}_slurmstepd.scope/*/; do
  echo "${d#"$CG"}: controllers '$(cat "$d/cgroup.controllers")' subtree_control '$(cat "$d/cgroup.subtree_control")'"
done | ind
sub "slurmd $N1 log: cgroup lines at start"
grep -iE 'cgroup' "$D/log/slurmd-$N1.log" | grep -viE 'debug2|debug3' | head -n 30 | cut -c1-220 | ind
JID=""
if run_job "no plugin"; then
  sec "root-made cgroups in the job's tree, each holding a process of the job's user"
  J="$(find "$CG/system.slice" -maxdepth 2 -type d -name "job_$JID" | head -n1)"
  start_probe job-level "$J/sk_probe"
  start_probe extern-user "$J/step_extern/user/sk_probe"
  start_probe extern-slurm-sibling "$J/step_extern/sk_probe"
  finish_job "$JID"
  sec "the probes after job $JID ended"
  report_probes
  sub "slurmd-$N1.log: the job's end"
  grep -E "\[$JID\.(extern|batch)\]" "$D/log/slurmd-$N1.log" | grep -iE 'signal|kill|busy|rmdir|destroy|remov|cgroup.procs|done with' | cut -c1-240 | ind
  record_after "after job $JID ended (no plugin; the probes still there)"
  stop_probes
  record_after "after job $JID ended (no plugin; probes killed and their directories removed)"
  sub "slurmd $N1 log: cgroup errors during the job"
  grep -iE 'error' "$D/log/slurmd-$N1.log" | grep -v pmix | tail -n 20 | cut -c1-220 | ind
fi

# ------------------------------------------------------------ phase B ------
sec "phase B: with spank_k8s.so, the stub agent and a stand-in shim"
SO="$BUILD/spank/.libs/spank_k8s.so"
if [ ! -f "$SO" ]; then
  echo "no plugin at $SO: phase B skipped"
else
  "$CLUSTER" stop >/dev/null 2>&1
  record_after "after cluster.sh stop (phase A)"
  install -m 755 "$SO" "$LIB/spank_k8s.so"
  SOCK="$D/agent.sock"
  python3 "$TOP/tests/integration/stub_agent.py" "$SOCK" "$D/agent.jsonl" &
  AGENT=$!
  trap 'kill $AGENT 2>/dev/null' EXIT
  for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.2; done
  export PLUGSTACK_LINES="required $LIB/spank_k8s.so socket=$SOCK rundir=$D/rundir shim=$LIB/vm-shim.sh timeout=3 grace=5 allowed_namespaces=rl,default gpu_device=$D/dev/nvidia{index}"
  "$CLUSTER" start 2>&1 | tail -n 3 | ind
  JID=""
  if run_job "plugin" --k8s-gpus=1; then
    sec "the extern step's shim (started by the plugin's task_post_fork)"
    for _ in $(seq 40); do [ -s "$OUTD/shim-$JID-$N1.txt" ] && break; sleep 0.5; done
    ind < "$OUTD/shim-$JID-$N1.txt"
    sub "shim process seen by root"
    for p in $(pgrep -u "$TEST_USER" -f sigrec.py); do
      echo "pid $p '$(tr '\0' ' ' < "/proc/$p/cmdline" | cut -c1-60)': $(cg_of "$p")"
    done | ind
    finish_job "$JID"
    sub "the shim's record after the job"
    ind < "$OUTD/shim-$JID-$N1.txt"
    sub "plugin log lines (slurmd-$N1.log; spank_k8s lines but option registration and hook timings)"
    grep -E 'spank_k8s|not confined' "$D/log/slurmd-$N1.log" | grep -vE 'appending plugin option|: hook ' | ind
    sub "slurmd-$N1.log around the job's end (the extern step)"
    grep -F "[$JID.extern]" "$D/log/slurmd-$N1.log" | grep -iE 'signal|kill|spank_k8s|cgroup|rmdir|done|terminat' | grep -v 'appending' | tail -n 40 | cut -c1-240 | ind
    record_after "after job $JID ended (with the plugin)"
  fi
  kill "$AGENT" 2>/dev/null; wait "$AGENT" 2>/dev/null; trap - EXIT
fi
"$CLUSTER" stop >/dev/null 2>&1 || { echo "cluster.sh stop failed"; rc=1; }
record_after "after cluster.sh stop"
if [ -n "${SK_VM_OUT:-}" ]; then
  mkdir -p "$SK_VM_OUT/logs"; cp -r "$D/log/." "$D/etc" "$SK_VM_OUT/logs/" 2>/dev/null
fi
"$CLUSTER" clean >/dev/null 2>&1
record_after "after cluster.sh clean"
exit "$rc"
