#!/usr/bin/env bash
# smoke.sh -- Slurm 22.05 with CgroupPlugin=cgroup/v2, in the guest of
# tests/vm (pure unified hierarchy, no systemd):
#
#   tests/vm/vm.sh run tests/vm/smoke.sh
#
# 1. the guest: /proc/self/cgroup is "0::/", the built programs' libraries
#    resolve;
# 2. tests/slurm/smoke.sh without the plugin (cluster.sh picks cgroup/v2);
# 3. a batch job and an srun step on 2 nodes: their cgroups are Slurm's v2
#    job tree, the devices program lets them open only their GPUs (ENXIO =
#    allowed, EPERM = denied), the job's memory.max is set;
# 4. tests/slurm/smoke.sh with the plugin (SPANK_K8S_SO, default the build's
#    spank/.libs/spank_k8s.so);
# 5. the plugin with the stub agent (tests/integration/stub_agent.py) and the
#    recording shim (tests/integration/shim_recorder.sh): a --k8s-gpus job
#    registers, its extern step starts the shim inside the job's cgroup tree,
#    the job completes and nothing of the shim or the job's cgroups is left;
#    the plugin's device programs: the trainer's steps are denied the lent
#    GPU, the shim gets only that one;
# 6. the unit tests of the v2 pod cgroups and device programs, which need
#    this kernel (tests/unit/test_slurm_cgroup, test_bpf_devices).
# Prints PASS:/FAIL:/SKIP: lines (those of tests/slurm/smoke.sh prefixed with
# its run) and, last, "N passed, N failed".  Exit 0, 1 on a failure, 77 when
# not run as root or not on a pure cgroup v2 hierarchy.
# `ok` evaluates its single-quoted conditions itself:
# shellcheck disable=SC2016,SC2034
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TOP="$(cd "$HERE/../.." && pwd)"
# shellcheck source=../slurm/lib.sh
. "$TOP/tests/slurm/lib.sh"
CLUSTER="$TOP/tests/slurm/cluster.sh"
BUILD="${SK_TOP_BUILDDIR:-$TOP/build}"
SPANK_K8S_SO="${SPANK_K8S_SO:-$BUILD/spank/.libs/spank_k8s.so}"
JOB_TIMEOUT="${JOB_TIMEOUT:-120}"
D="$SK_SLURM_DIR"
CG=/sys/fs/cgroup
t_start=$SECONDS

[ "$(id -u)" = 0 ] || { echo "SKIP: needs root"; exit 77; }
if grep -qv '^0::' /proc/self/cgroup || [ "$(stat -fc %T "$CG")" != cgroup2fs ]; then
  echo "SKIP: not a pure cgroup v2 hierarchy (run it with tests/vm/vm.sh run)"; exit 77
fi
AGENT=""
cleanup() {
  [ -z "$AGENT" ] || { kill "$AGENT" 2>/dev/null; wait "$AGENT" 2>/dev/null; }
  "$CLUSTER" stop >/dev/null 2>&1
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# tests/slurm/smoke.sh, its PASS/FAIL/SKIP lines prefixed and counted here.
inner_smoke() {  # LABEL [VAR=VALUE...]
  local label="$1" line rc out t0=$SECONDS; shift
  out="$(env "$@" "$TOP/tests/slurm/smoke.sh" 2>"$D.smoke.err")"; rc=$?
  while IFS= read -r line; do
    case "$line" in
      PASS:*) SK_PASSED=$((SK_PASSED + 1)); echo "PASS: [$label] ${line#PASS: }" ;;
      FAIL:*) SK_FAILED=$((SK_FAILED + 1)); echo "FAIL: [$label] ${line#FAIL: }" ;;
      SKIP:*) echo "SKIP: [$label] ${line#SKIP: }" ;;
      *\ passed,\ *\ failed) ;;
      *) echo "  $line" ;;
    esac
  done <<<"$out"
  if [ "$rc" != 0 ]; then sed 's/^/  stderr| /' "$D.smoke.err" | tail -n 30; fi
  ok "$rc" "[$label] tests/slurm/smoke.sh exit $rc ($((SECONDS - t0))s)"
}

devices_probe='import errno, os, sys
r = []
for i in range(4):
    try:
        os.close(os.open("%s/nvidia%d" % (sys.argv[1], i), os.O_RDWR)); r.append("ok")
    except OSError as e:
        r.append(errno.errorcode.get(e.errno, str(e.errno)))
print(",".join(r))'

# ------------------------------------------------------------ 1. guest -----
ok '[ "$(cat /proc/self/cgroup)" = "0::/" ]' "pure cgroup v2: /proc/self/cgroup is 0::/"
for b in "$BUILD/spank/.libs/spank_k8s.so" "$BUILD/k8s-shim/slurm-k8s-shim" "$BUILD/agent/slurm-k8s-agent"; do
  if [ -e "$b" ]; then
    missing="$(ldd "$b" 2>&1 | grep 'not found' | paste -sd' ')"
    ok '[ -z "$missing" ]' "ldd ${b#"$TOP"/}: every library found${missing:+ (missing: $missing)}"
  else
    sk_skip "ldd ${b#"$TOP"/}: not built"
  fi
done

# ------------------------------------------------ 2. the harness's smoke ---
inner_smoke "slurm smoke, no plugin" SPANK_K8S_SO=
ok 'grep -q "^CgroupPlugin=cgroup/v2" "$D/etc/cgroup.conf"' "cluster.sh wrote CgroupPlugin=cgroup/v2"

# ------------------------------------------- 3. jobs in the v2 job tree ----
export NUM_NODES=2 GPUS_PER_NODE=4 CONSTRAIN_RAM_SPACE=yes PLUGSTACK_LINES=""
"$CLUSTER" start >/dev/null 2>"$D.start.err"
ok $? "cluster.sh start (2 nodes, cgroup/v2, ConstrainRAMSpace=yes)"
cat > "$SK_JOBS_DIR/v2-job.sh" <<EOF
#!/bin/bash
cg="\$(cut -d: -f3 /proc/self/cgroup)"
echo "BATCH \$cg \$(python3 -c '$devices_probe' $D/dev) mem=\$(cat $CG\${cg%%/step_*}/memory.max)"
srun -N2 --ntasks-per-node=1 --gres=gpu:1 bash -c \
  'echo "TASK \$SLURMD_NODENAME \$(cut -d: -f3 /proc/self/cgroup) \$(python3 -c "\$0" $D/dev)"' '$devices_probe'
EOF
chmod 755 "$SK_JOBS_DIR/v2-job.sh"
jid="$(sk_submit_as_user -N2 --gres=gpu:2 -o "$SK_JOBS_DIR/v2-%j.out" "$SK_JOBS_DIR/v2-job.sh")"
ok '[ -n "$jid" ]' "sbatch -N2 --gres=gpu:2 as $TEST_USER (job ${jid:-none})"
if [ -n "$jid" ]; then
  sk_wait_state "$jid" COMPLETED "$JOB_TIMEOUT"
  ok $? "job $jid COMPLETED (state $(sk_job_state "$jid"))"
  out="$SK_JOBS_DIR/v2-$jid.out"
  sed 's/^/  | /' "$out" 2>/dev/null
  ok 'grep -qE "^BATCH /system.slice/${N1}_slurmstepd.scope/job_$jid/step_batch/user/task_0 " "$out"' \
    "the batch script runs in system.slice/${N1}_slurmstepd.scope/job_$jid/step_batch/user/task_0"
  ok 'grep -qE "^BATCH .* ENXIO,ENXIO,EPERM,EPERM " "$out"' \
    "the batch step opens its GPUs 0,1 (ENXIO) and is denied 2,3 (EPERM)"
  ok 'grep -qE "^BATCH .* mem=[0-9]+$" "$out"' "the job's memory.max is a number (ConstrainRAMSpace=yes)"
  for n in $N1 $N2; do
    ok 'grep -qE "^TASK $n /system.slice/${n}_slurmstepd.scope/job_$jid/step_0/user/task_[0-9]+ ENXIO,EPERM,EPERM,EPERM$" "$out"' \
      "srun task on $n: in ${n}_slurmstepd.scope/job_$jid/step_0/user/task_N, only GPU 0 allowed (--gres=gpu:1)"
  done
  sk_wait_gone "$jid" 30
  left="$(find "$CG/system.slice" -type d -name "job_$jid")"
  ok '[ -z "$left" ]' "no job_$jid cgroup directory left after the job${left:+ ($left)}"
fi
"$CLUSTER" stop >/dev/null 2>&1
ok $? "cluster.sh stop"

# ------------------------------------------- 4. the smoke with the plugin --
if [ -f "$SPANK_K8S_SO" ]; then
  inner_smoke "slurm smoke, plugin" SPANK_K8S_SO="$SPANK_K8S_SO" NUM_NODES=3
else
  ok 1 "the plugin $SPANK_K8S_SO exists"
fi

# ------------------------- 5. plugin, stub agent and the recording shim ----
if [ -f "$SPANK_K8S_SO" ]; then
  "$CLUSTER" stop >/dev/null 2>&1
  mkdir -p "$D/lib" "$D/out"; chmod 755 "$D" "$D/lib"; chmod 1777 "$D/out"; rm -f "$D/out"/*
  install -m 755 "$SPANK_K8S_SO" "$D/lib/spank_k8s.so"
  install -m 755 "$TOP/tests/integration/shim_recorder.sh" "$D/lib/shim_recorder.sh"
  SOCK="$D/agent.sock"; REC="$D/agent.jsonl"; : > "$REC"
  python3 "$TOP/tests/integration/stub_agent.py" "$SOCK" "$REC" & AGENT=$!
  for _ in $(seq 100); do [ -S "$SOCK" ] && [ -S "$D/admin/agent.sock" ] && break; sleep 0.2; done
  ok '[ -S "$SOCK" ]' "stub agent listening on $SOCK"
  export PLUGSTACK_LINES="required $D/lib/spank_k8s.so socket=$SOCK rundir=$D/rundir shim=$D/lib/shim_recorder.sh timeout=3 grace=5 allowed_namespaces=rl,default gpu_device=$D/dev/nvidia{index}"
  "$CLUSTER" start >/dev/null 2>"$D.start.err"
  ok $? "cluster.sh start with the plugin and the stub agent"
  cat > "$SK_JOBS_DIR/v2-plugin.sh" <<EOF
#!/bin/bash
echo "BATCH CVD=\$CUDA_VISIBLE_DEVICES K8SGPUS=\$SLURM_K8S_GPUS NODE=\$SLURM_K8S_NODE"
echo "TRAINER \$(python3 -c '$devices_probe' $D/dev)"
srun -n1 --gres=gpu:1 bash -c 'echo "STEP \$(python3 -c "\$0" $D/dev)"' '$devices_probe'
# until the shim has written its record (and root has looked at it)
for i in \$(seq 300); do [ -s "$D/out/shim-\$SLURM_JOB_ID-\$SLURMD_NODENAME.txt" ] && break; sleep 0.2; done
# the shim's record as it is now (at the job's end a restarted shim rewrites it)
sleep 1; sed 's/^/SHIM /' "$D/out/shim-\$SLURM_JOB_ID-\$SLURMD_NODENAME.txt"
sleep 3
EOF
  chmod 755 "$SK_JOBS_DIR/v2-plugin.sh"
  jid="$(sk_submit_as_user -N1 --gres=gpu:2 --k8s-gpus=1 -o "$SK_JOBS_DIR/v2p-%j.out" "$SK_JOBS_DIR/v2-plugin.sh")"
  ok '[ -n "$jid" ]' "sbatch --gres=gpu:2 --k8s-gpus=1 (job ${jid:-none})"
  if [ -n "$jid" ]; then
    sk_wait_state "$jid" RUNNING "$JOB_TIMEOUT"
    shim=""
    for _ in $(seq 300); do
      shim="$(sed -n "s/.*\[$jid\.extern\].*spank_k8s: extern: .* shim started, pid \([0-9]*\).*/\1/p" "$D/log/slurmd-$N1.log" | head -n1)"
      [ -n "$shim" ] && break; sleep 0.2
    done
    shim_cg="$(cut -d: -f3 "/proc/$shim/cgroup" 2>/dev/null)"
    shim_uid="$(stat -c %u "/proc/$shim" 2>/dev/null)"
    echo "  shim pid ${shim:-none}: uid ${shim_uid:-?}, cgroup ${shim_cg:-?}"
    ok '[ "$shim_uid" = "$TEST_UID" ]' "the shim runs as $TEST_USER (uid $TEST_UID)"
    ok '[[ $shim_cg == /system.slice/${N1}_slurmstepd.scope/job_$jid/step_extern/* ]]' \
      "the extern step's shim runs inside job_$jid/step_extern ($shim_cg)"
    sk_wait_state "$jid" COMPLETED "$JOB_TIMEOUT"
    ok $? "job $jid COMPLETED (state $(sk_job_state "$jid"))"
    sed 's/^/  | /' "$SK_JOBS_DIR/v2p-$jid.out" 2>/dev/null
    ok 'grep -q "^BATCH CVD=0 K8SGPUS=1 NODE=slurm-$N1-$jid$" "$SK_JOBS_DIR/v2p-$jid.out"' \
      "the batch script sees CUDA_VISIBLE_DEVICES=0 and SLURM_K8S_GPUS=1"
    # The plugin's device programs in place of Slurm's (GPU 1 lent): the
    # trainer's steps are denied it, the shim gets it alone.
    ok 'grep -q "^TRAINER ENXIO,EPERM,EPERM,EPERM$" "$SK_JOBS_DIR/v2p-$jid.out"' \
      "the batch step opens its GPU 0, is denied the lent GPU 1 and 2,3 ($(grep ^TRAINER "$SK_JOBS_DIR/v2p-$jid.out"))"
    ok 'grep -q "^STEP ENXIO,EPERM,EPERM,EPERM$" "$SK_JOBS_DIR/v2p-$jid.out"' \
      "an srun --gres=gpu:1 step opens GPU 0, is denied the lent GPU 1 ($(grep ^STEP "$SK_JOBS_DIR/v2p-$jid.out"))"
    rec="$SK_JOBS_DIR/v2p-$jid.out"
    ok 'grep -q "^SHIM open nvidia0 EPERM" "$rec" && grep -q "^SHIM open nvidia1 ENXIO" "$rec" && grep -q "^SHIM open nvidia2 EPERM" "$rec" && grep -q "^SHIM open nvidia3 EPERM" "$rec"' \
      "the shim opens only the lent GPU 1 ($(grep '^SHIM open' "$rec" 2>/dev/null | paste -sd' '))"
    ok 'grep -q "^SHIM env SLURM_K8S_GPUS_CONFINED=1" "$rec"' "the shim is told its GPUs are confined (SLURM_K8S_GPUS_CONFINED=1)"
    sk_wait_gone "$jid" 60
    # (not from the shim's record: at the job's end Slurm kills the shim,
    # which is in step_extern/slurm, and the plugin starts a new one that
    # rewrites the record before it is stopped)
    n_op() { grep -c "\"op\": \"$1\".*\"job_id\": ${jid}[,}]" "$REC"; }
    reg="$(n_op register)"; att="$(n_op attach)"; dereg="$(n_op deregister)"
    ok '[ "$reg" -ge 1 ] && [ "$att" -ge 1 ] && [ "$dereg" -ge 1 ]' \
      "the agent got register ($reg), the shim's attach ($att) and deregister ($dereg) for job $jid"
    for _ in $(seq 50); do pgrep -u "$TEST_USER" >/dev/null || break; sleep 0.2; done
    left="$(pgrep -a -u "$TEST_USER" | paste -sd';')"
    ok '[ -z "$left" ] && ! sk_pid_alive "$shim"' "no shim and no process of $TEST_USER left after the job${left:+ ($left)}"
    left="$(find "$CG/system.slice" -type d -name "job_$jid")"
    ok '[ -z "$left" ]' "no job_$jid cgroup directory left${left:+ ($left)}"
    echo "  plugin log (slurmd-$N1.log):"
    grep -E 'spank_k8s: (extern|step|prolog)' "$D/log/slurmd-$N1.log" | cut -c1-250 | sed 's/^/  | /'
  fi
  "$CLUSTER" stop >/dev/null 2>&1
  ok $? "cluster.sh stop"
  kill "$AGENT" 2>/dev/null; wait "$AGENT" 2>/dev/null; AGENT=""
fi

# ------------------------------- 6. pods' cgroups on the real v2 kernel ----
# common/cgroup/pod_cgroup.h's v2 path and common/cgroup/bpf_devices.h on this kernel: the
# unit tests that skip on a host without a pure unified hierarchy.
for t in test_slurm_cgroup test_bpf_devices; do
  out="$("$BUILD/tests/unit/$t" 2>&1)"; unit_rc=$?
  sed 's/^/  | /' <<<"$out" | grep -v '^  | slurm-k8s' | tail -n 20
  ok '[ "$unit_rc" = 0 ] && ! grep -q "^SKIP" <<<"$out"' "tests/unit/$t on the guest's kernel (none skipped)"
done

# -------------------------------------------------------------- leftovers --
# (NUM_NODES=3: the cgroup scopes of every node any run above had)
NUM_NODES=3 "$CLUSTER" clean >/dev/null 2>&1
ok $? "cluster.sh clean"
left="$(find "$CG/system.slice" -mindepth 1 -type d 2>/dev/null)"
ok '[ -z "$left" ]' "no cgroup directory left under system.slice after clean${left:+ ($(paste -sd' ' <<<"$left"))}"
sk_log "total $((SECONDS - t_start))s"
sk_summary
