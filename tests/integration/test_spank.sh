#!/usr/bin/env bash
# Integration test of spank_k8s.so on the real Slurm cluster of tests/slurm
# (3 nodes x 4 fake GPUs, PrologFlags=Alloc,Contain, cgroup v1), with a
# recording stub agent (stub_agent.py) and a recording stand-in shim
# (shim_recorder.sh). Needs root. Usage:
#   tests/integration/test_spank.sh [BUILD_DIR]  (default $SK_TOP_BUILDDIR, else ./build)
# Uses its own cluster dir and ports so it can run next to other harness users.
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
BUILD="${1:-${SK_TOP_BUILDDIR:-$HERE/../../build}}"
export SK_SLURM_DIR="${SK_SLURM_DIR:-/tmp/sk-spank}"
export CTLD_PORT="${CTLD_PORT:-26817}" SLURMD_BASE_PORT="${SLURMD_BASE_PORT:-27001}"
# shellcheck source=../slurm/lib.sh
. "$HERE/../slurm/lib.sh"
CLUSTER="$HERE/../slurm/cluster.sh"
D="$SK_SLURM_DIR"
[ "$(id -u)" = 0 ] || { echo "needs root"; exit 77; }
[ -f "$BUILD/spank/.libs/spank_k8s.so" ] || { echo "no plugin in $BUILD"; exit 77; }

"$CLUSTER" clean >/dev/null 2>&1 || true
mkdir -p "$D/lib" "$D/out"
chmod 755 "$D" "$D/lib"; chmod 1777 "$D/out"
install -m 755 "$BUILD/spank/.libs/spank_k8s.so" "$D/lib/spank_k8s.so"
install -m 755 "$HERE/shim_recorder.sh" "$D/lib/shim_recorder.sh"
SOCK="$D/agent.sock"; REC="$D/agent.jsonl"; : > "$REC"
ARGS="socket=$SOCK rundir=$D/rundir shim=$D/lib/shim_recorder.sh timeout=3 grace=5 allowed_namespaces=rl,default gpu_device=$D/dev/nvidia{index}"
export PLUGSTACK_LINES="required $D/lib/spank_k8s.so $ARGS"

AGENT_PID=""
start_agent() {  # returns once both of its sockets are there
  python3 "$HERE/stub_agent.py" "$SOCK" "$REC" & AGENT_PID=$!
  local end=$((SECONDS + 20))
  until [ -S "$SOCK" ] && [ -S "$D/admin/agent.sock" ]; do [ $SECONDS -ge $end ] && return 1; sleep 0.1; done
}
stop_agent() { [ -z "$AGENT_PID" ] || kill "$AGENT_PID" 2>/dev/null; wait "$AGENT_PID" 2>/dev/null; AGENT_PID=""; rm -f "$SOCK" "$D/admin/agent.sock"; }
cleanup() { stop_agent; "$CLUSTER" stop >/dev/null 2>&1; }
trap cleanup EXIT

start_agent
"$CLUSTER" start >/dev/null 2>"$D/start.err" || { cat "$D/start.err"; exit 1; }

script() {  # script NAME BODY -> path of a batch script readable by the user
  local p="$SK_JOBS_DIR/$1.sh"
  printf '#!/bin/bash\n%s\n' "$2" > "$p"; chmod 644 "$p"; echo "$p"
}
rec_count() { python3 - "$REC" "$@" <<'PY'
import json, sys
rec, op, job = sys.argv[1], sys.argv[2], sys.argv[3]
n = 0
for l in open(rec):
    e = json.loads(l)
    if e["op"] == op and str(e["body"].get("job_id")) == job: n += 1
print(n)
PY
}
no_leftovers() {  # no process of the shim, no cgroup dir of the job
  local job="$1"
  ! pgrep -u "$TEST_USER" -f shim_recorder >/dev/null &&
  ! pgrep -u "$TEST_USER" -f "python3 - $D/out/shim-$job" >/dev/null &&
  [ -z "$(ls -d /sys/fs/cgroup/*/slurm_"$SK_NODE_PREFIX"*/uid_*/job_"$job" 2>/dev/null)" ]
}
wait_until() { local t="$1"; shift; local end=$((SECONDS + t)); until eval "$*"; do [ $SECONDS -ge $end ] && return 1; sleep 0.2; done; }

# ---- 1. bad flags: sbatch exits non-zero before submission, names the flag
S="$(script ok 'true')"
bad() {  # bad EXPECTED_TEXT SBATCH_ARGS...
  local want="$1"; shift
  local out; out="$(sk_as_user sbatch "$@" "$S" 2>&1)"; local rc=$?
  ok "[ $rc -ne 0 ] && grep -qF -- '$want' <<<\"\$out\"" "sbatch $* rejected with '$want' (got: $out)"
}
bad "--k8s-gpus=abc" --k8s-gpus=abc --gres=gpu:4
bad "requests only 4 GPUs" --k8s-gpus=6 --gres=gpu:4
bad "requests none" --k8s-gpus=1
bad "reserved prefix" --k8s-gpus=1 --gres=gpu:1 --k8s-labels=slurm-k8s/x=1
bad "not allowed by this site" --k8s-gpus=1 --gres=gpu:1 --k8s-namespace=prod
bad "--k8s-taints=x" --k8s-gpus=1 --gres=gpu:1 --k8s-taints=x
ok "[ \$(squeue -h | wc -l) -eq 0 ]" "no job was submitted by the rejected sbatch calls"

# ---- 2. a 3-node job lends the last 2 of 4 GPUs on every node
S="$(script three 'echo "CVD=$CUDA_VISIBLE_DEVICES JOBGPUS=$SLURM_JOB_GPUS NODE=$SLURM_K8S_NODE K8SGPUS=$SLURM_K8S_GPUS NS=$SLURM_K8S_NAMESPACES"
srun -N3 --ntasks-per-node=1 bash -c "echo TASK \$SLURMD_NODENAME CVD=\$CUDA_VISIBLE_DEVICES"
sleep 2')"
J="$(sk_submit_as_user -N3 --gres=gpu:4 --k8s-gpus=2 --k8s-namespace=rl -o "$SK_JOBS_DIR/three-%j.out" "$S")"
sk_wait_state "$J" COMPLETED 60; ok $? "3-node job $J completed"
sk_wait_gone "$J" 30
ok "[ \$(rec_count register $J) -eq 3 ]" "3 (job,node) pairs registered"
ok "python3 -c 'import json,sys; r=[json.loads(l) for l in open(\"$REC\")]; g=[e[\"body\"][\"gpus\"] for e in r if e[\"op\"]==\"register\" and e[\"body\"][\"job_id\"]==$J]; sys.exit(0 if g==[[2,3]]*3 else 1)'" "each registration lends GPUs 2,3"
ok "python3 -c 'import json,sys; r=[json.loads(l) for l in open(\"$REC\")]; n=sorted(e[\"body\"][\"slurm_node\"] for e in r if e[\"op\"]==\"register\" and e[\"body\"][\"job_id\"]==$J); sys.exit(0 if n==[\"$N1\",\"$N2\",\"$N3\"] else 1)'" "registrations name $N1, $N2, $N3"
OUTF="$SK_JOBS_DIR/three-$J.out"
ok "grep -q 'CVD=0,1 JOBGPUS=0,1 NODE=slurm-$N1-$J K8SGPUS=2,3 NS=rl' '$OUTF'" "batch script sees CUDA_VISIBLE_DEVICES=0,1 and SLURM_K8S_* ($(head -1 "$OUTF"))"
ok "[ \$(grep -c 'TASK $SK_NODE_PREFIX[123] CVD=0,1\$' '$OUTF') -eq 3 ]" "srun tasks on all 3 nodes see only GPUs 0,1"
ok "[ \$(rec_count attach $J) -eq 3 ]" "a shim attached on every node"
ok "[ \$(rec_count deregister $J) -ge 3 ]" "job end deregistered on every node"
ok "grep -q 'shutdown grace_s=5' '$D/out/shim-$J-$N1.txt'" "the shim got shutdown with the grace budget"
on_socket() {  # on_socket JOB -> "op:socket" pairs of the job's requests, sorted, unique
  python3 - "$REC" "$1" <<'PY'
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])]
print(" ".join(sorted({"%s:%s" % (e["op"], e.get("socket")) for e in r
                       if "socket" in e and str(e["body"].get("job_id")) == sys.argv[2]})))
PY
}
ok "[ \"\$(on_socket $J)\" = 'attach:agent deregister:admin register:admin' ]" "the plugin's register and deregister go to the admin socket, the shim's attach to the agent socket ($(on_socket $J))"
ok "no_leftovers $J" "after normal end: no shim process, no cgroup dir of job $J"

# ---- 3. the shim: job user, job cgroups, only the lent GPU; the trainer: only its own
# A fake GPU's open fails with ENXIO where the devices cgroup allows it and
# with EPERM where it denies it (no driver behind the node).
OPENER="import errno, os, sys
for i in range(4):
    try: os.close(os.open('$D/dev/nvidia%d' % i, os.O_RDWR)); r = 'OK'
    except OSError as e: r = errno.errorcode.get(e.errno, str(e.errno))
    print('trainer open nvidia%d %s' % (i, r))"
S="$(script one "echo \"CVD=\$CUDA_VISIBLE_DEVICES GPUS_ON_NODE=\$SLURM_GPUS_ON_NODE NS=[\$SLURM_K8S_NAMESPACES]\"; python3 -c \"$OPENER\"; srun python3 -c \"$OPENER\" | sed 's/^trainer/step/'; sleep 1")"
J="$(sk_submit_as_user -N1 -w $N2 --gres=gpu:2 --k8s-gpus=1 -o "$SK_JOBS_DIR/one-%j.out" "$S")"
sk_wait_state "$J" COMPLETED 60; ok $? "1-node job $J completed"
SH="$D/out/shim-$J-$N2.txt"
ok "grep -q 'id uid=$TEST_UID' '$SH'" "shim runs as the job user"
ok "grep -q 'cgroup .*devices:/slurm_$N2/uid_$TEST_UID/job_$J/step_extern' '$SH'" "shim is in the job's step_extern devices cgroup"
ok "grep -q 'status SigBlk:.*0000000000000000' '$SH'" "shim starts with no blocked signals"
ok "grep -q '^open nvidia0 EPERM' '$SH' && grep -q '^open nvidia1 ENXIO' '$SH' && grep -q '^open nvidia2 EPERM' '$SH' && grep -q '^open nvidia3 EPERM' '$SH'" "shim may open only the lent GPU 1, not the trainer's GPU 0 ($(grep open "$SH" | tr '\n' ' '))"
ok "grep -q '^env SLURM_K8S_GPUS_CONFINED=1' '$SH'" "the shim is told its step opens the lent GPUs only (pods' CUDA numbering)"
O="$SK_JOBS_DIR/one-$J.out"
ok "grep -q '^trainer open nvidia0 ENXIO' '$O' && grep -q '^trainer open nvidia1 EPERM' '$O' && grep -q '^trainer open nvidia2 EPERM' '$O'" "the batch script may open its GPU 0, not the lent GPU 1 ($(grep '^trainer' "$O" | tr '\n' ' '))"
ok "grep -q '^step open nvidia0 ENXIO' '$O' && grep -q '^step open nvidia1 EPERM' '$O'" "an srun step may open GPU 0, not the lent GPU 1 ($(grep '^step' "$O" | tr '\n' ' '))"
ok "grep -q 'CVD=0 GPUS_ON_NODE=1' '$SK_JOBS_DIR/one-$J.out'" "trainer sees only GPU 0 ($(cat "$SK_JOBS_DIR/one-$J.out"))"
ok "grep -q 'NS=\[\]' '$SK_JOBS_DIR/one-$J.out' && grep -q '^spank_k8s: note: no Kubernetes namespace may run pods on this job.s nodes: the job named none (--k8s-namespace=NS)' '$SK_JOBS_DIR/one-$J.out'" "a job that names no namespace where the site allows none: SLURM_K8S_NAMESPACES empty and a note on its stderr"
sk_wait_gone "$J" 30
ok "no_leftovers $J" "after normal end: nothing of job $J left"

# ---- 4. scancel: deregistered everywhere, nothing left
S="$(script long 'sleep 300')"
J="$(sk_submit_as_user -N3 --gres=gpu:2 --k8s-gpus=1 -o /dev/null "$S")"
sk_wait_state "$J" RUNNING 60
wait_until 20 "[ \$(rec_count attach $J) -eq 3 ]"; ok $? "3 shims attached for job $J"
scancel "$J"
sk_wait_gone "$J" 60; ok $? "cancelled job $J left the queue"
ok "[ \$(rec_count deregister $J) -ge 3 ]" "scancel deregistered on all 3 nodes"
ok "wait_until 5 no_leftovers $J" "after scancel: no shim process, no cgroup dir of job $J"

ok "python3 -c 'import json,sys; r=[json.loads(l) for l in open(\"$REC\")]; bad=[e for e in r if e[\"op\"] in (\"register\",\"deregister\",\"status\") and e[\"socket\"]!=\"admin\"]; sys.exit(1 if bad or not r else 0)'" "every register/deregister/status of the plugin came on the admin socket"

# ---- 5. agent absent, default policy (warn): job runs, nothing drained
stop_agent
S="$(script noagent 'echo "ERR=$SLURM_K8S_ERROR CVD=$CUDA_VISIBLE_DEVICES"')"
J="$(sk_submit_as_user -N1 --gres=gpu:2 --k8s-gpus=1 -o "$SK_JOBS_DIR/noagent-%j.out" -e "$SK_JOBS_DIR/noagent-%j.err" "$S")"
sk_wait_state "$J" COMPLETED 60; ok $? "job $J completes without an agent"
ok "grep -q 'ERR=the slurm-k8s agent' '$SK_JOBS_DIR/noagent-$J.out'" "the job is told why ($(cat "$SK_JOBS_DIR/noagent-$J.out"))"
ok "[ -z \"\$(sinfo -h -o '%t' | grep -E 'drain|drng|down')\" ]" "no node drained"

# ---- 6. agent absent, on_agent_error=fail: prolog fails, node drained, job held
sed -i 's/$/ on_agent_error=fail/' "$D/etc/plugstack.conf"
J="$(sk_submit_as_user -N1 -w $N3 --gres=gpu:1 --k8s-gpus=1 -o /dev/null "$S")"
wait_until 30 "sinfo -h -n $N3 -o '%t' | grep -qE 'drain|drng'"; ok $? "on_agent_error=fail: node $N3 drained"
wait_until 30 "scontrol show job $J | grep -qE 'JobState=PENDING.*|Reason=.*held'"; ok $? "job $J requeued/held ($(scontrol show job -o "$J" | grep -o 'JobState=[A-Z]* Reason=[^ ]*'))"
scancel "$J"; sed -i 's/ on_agent_error=fail$//' "$D/etc/plugstack.conf"
"$CLUSTER" resume >/dev/null 2>&1
wait_until 20 "[ -z \"\$(sinfo -h -o '%t' | grep -E 'drain|drng|down')\" ]"; ok $? "nodes resumed"

sk_summary
