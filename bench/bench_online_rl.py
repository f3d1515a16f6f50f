#!/usr/bin/python3
"""What slurm-k8s costs the online-RL loop (examples/online-rl).

The same loop (3 trainer ranks, 3 rollout services, 1 reward service, the
same programs and settings) run two ways on this machine, alternating:
  processes   every part a plain process (examples/online-rl/run-local.sh):
              no Slurm, no Kubernetes
  allocation  the trainer ranks a real `sbatch -N3 --gres=gpu:4
              --k8s-gpus=2` job (srun) on the local Slurm cluster, the
              services pods on its virtual nodes (the test API server, one
              agent per node, the shim), as scripts/run-scenario.sh runs it:
              each Slurm node a host of its own (a network namespace and an
              address on a bridge, tests/slurm/hosts.sh), so the weights
              and samples cross veths where the processes use loopback
Measured from the trainer's own summary (rank 0): steps/s over the run and
the weight-sync latency per step (rank 0's push of the new weights to every
rollout, median and p99 over the steps). The allocation's stack is started
once (tests/e2e/lib.sh) and each of its runs is a new job; its start-up is not
in the figures (bench_slurm_start measures that).

Needs root and tests/slurm/cluster.sh install; exits 77 otherwise.

usage: bench_online_rl.py [RESULTS.json]
env:   BENCH_RL_STEPS (200) steps per run, BENCH_RL_ROUNDS (3) runs per variant
       BENCH_RL_DIR (/tmp/sk-bench-rl), BENCH_RL_CTLD_PORT (36817),
       BENCH_RL_SLURMD_PORT (37001), BENCH_RL_KUBELET_PORT (37250)
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sklib as B  # noqa: E402

STEPS = B.env_int("BENCH_RL_STEPS", 200)
ROUNDS = B.env_int("BENCH_RL_ROUNDS", 3)
DIR = os.environ.get("BENCH_RL_DIR", "/tmp/sk-bench-rl")
EXAMPLES = os.path.join(B.SRCDIR, "examples", "online-rl")

# The allocation variant: bash, with the e2e library's functions. Reads the
# round count on stdin's first line; prints "SUMMARY <path>" per run.
ALLOCATION = r'''
set -uo pipefail
. "$SK_TOP_SRCDIR/tests/e2e/lib.sh"
. "$SK_TOP_SRCDIR/tests/e2e/online_rl.sh"
# Each node a host of its own (tests/slurm/hosts.sh): this script re-runs in
# the site's network namespace, its stdin kept.
sk_enter_site "$0"
trap 'rl_stop_log_followers; e2e_stop >/dev/null 2>&1' EXIT
e2e_start >&2 || { echo "bench_online_rl: the stack did not start" >&2; exit 1; }
while read -r cmd; do
  [ "$cmd" = run ] || break
  RL_EXPORT="STEPS=$STEPS" rl_submit -N3 --gres=gpu:4 --k8s-gpus=2 --k8s-labels=team=rl >&2 || exit 1
  rl_apply_and_wait "$RL_JOB" >&2 || exit 1
  rl_publish_services >&2
  sk_wait_state "$RL_JOB" COMPLETED 600 || { echo "job $RL_JOB: $(sk_job_state "$RL_JOB")" >&2; exit 1; }
  rl_stop_log_followers
  e2e_wait 60 "[ -z \"\$(e2e_node_names $RL_JOB)\" ]"
  rl_delete_workloads >&2
  echo "SUMMARY $SK_JOBS_DIR/online-rl-$RL_JOB.json"
done
'''


def figures(summary):
    with open(summary) as f:
        d = json.load(f)
    push = d["weight_sync_ms"]
    return {"steps_per_s": d["steps_per_s"], "samples_per_s": d["samples_per_s"],
            "weight_sync_ms_p50": B.pct(push, 50), "weight_sync_ms_p99": B.pct(push, 99),
            "gain": d["gain"], "lost": d["samples"]["lost"], "late": d["samples"]["late"]}


def run_processes(out):
    env = dict(os.environ, STEPS=str(STEPS), PYTHON3="/usr/bin/python3")
    r = subprocess.run(["bash", os.path.join(EXAMPLES, "run-local.sh"), out], env=env,
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"run-local.sh exit {r.returncode}: {r.stdout[-800:]}{r.stderr[-800:]}")
    return figures(os.path.join(out, "online-rl-local.json"))


def main():
    if os.geteuid() != 0 or not shutil.which("slurmctld") or not shutil.which("munged"):
        B.log("bench_online_rl: needs root, Slurm and munge (tests/slurm/cluster.sh install)")
        return 77
    env = dict(os.environ, STEPS=str(STEPS), SK_BUILD_DIR=B.BUILDDIR, SK_TOP_SRCDIR=B.SRCDIR,
               SK_SLURM_DIR=DIR, CTLD_PORT=os.environ.get("BENCH_RL_CTLD_PORT", "36817"),
               SLURMD_BASE_PORT=os.environ.get("BENCH_RL_SLURMD_PORT", "37001"),
               E2E_KUBELET_BASE_PORT=os.environ.get("BENCH_RL_KUBELET_PORT", "37250"))
    tmp = tempfile.mkdtemp(prefix="sk-bench-rl-")
    script = os.path.join(tmp, "allocation.sh")   # a file: it re-runs itself in the site
    with open(script, "w") as f:
        f.write(ALLOCATION)
    alloc = subprocess.Popen(["bash", script], env=env, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    res = {"processes": [], "allocation": []}
    try:
        for r in range(ROUNDS):
            res["processes"].append(run_processes(os.path.join(tmp, f"local-{r}")))
            alloc.stdin.write("run\n")
            alloc.stdin.flush()
            line = alloc.stdout.readline().split()
            if len(line) != 2 or line[0] != "SUMMARY":
                raise RuntimeError("the allocation run failed (run tests/e2e/run-all.sh "
                                   "online_rl to see why)")
            res["allocation"].append(figures(line[1]))
            B.log(f"round {r + 1}: processes {res['processes'][-1]}, "
                  f"allocation {res['allocation'][-1]}")
    finally:
        try:
            alloc.stdin.write("stop\n")
            alloc.stdin.close()
        except OSError:
            pass
        alloc.wait(timeout=120)
        shutil.rmtree(tmp, ignore_errors=True)
    out = {"steps": STEPS, "rounds": ROUNDS, "ranks": 3, "rollouts": 3}
    for k, runs in res.items():
        out[k] = {f: B.pct([x[f] for x in runs], 50) for f in runs[0]}
        out[k]["runs"] = runs
    out["steps_per_s_ratio"] = round(out["allocation"]["steps_per_s"]
                                     / out["processes"]["steps_per_s"], 3)
    B.write_result("online_rl", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
