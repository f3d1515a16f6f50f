#!/usr/bin/python3
"""The cgroup costs on cgroup v2 next to v1, in one run: this host (v1) and the
QEMU guest of tests/vm (a pure unified hierarchy, Slurm's cgroup/v2).

Both sides run the same two benchmarks with the same sizes:
  bench_cgroups.py      bench/pod_cgroup_cost: a pod's own cgroup at its start
                        (v1: 5 directories, deny rules, limits, the move; v2: one
                        directory, its limits, its device program, the move) and end
  bench_slurm_start.py  sbatch -> the script runs: without the plugin, with it, and a
                        --k8s-gpus job (prolog registers with a real agent, the extern
                        step starts the shim; on v2 also the device programs)
The guest runs under TCG (no KVM), so its absolute times are slower; what compares is
each side's overhead over its own baseline (the fork without cgroups; the job
without the plugin).

usage: bench_cgroup_v2.py [RESULTS.json]
env:   BENCH_CGROUP_N (100), BENCH_CGROUP_ROUNDS (3), BENCH_SLURM_JOBS (6),
       BENCH_SLURM_PROFILE_JOBS (2); SK_VM_TIMEOUT for the guest (1800 s)
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sklib as B  # noqa: E402

SIZES = {"BENCH_CGROUP_N": "100", "BENCH_CGROUP_ROUNDS": "3", "BENCH_SLURM_JOBS": "6",
         "BENCH_SLURM_PROFILE_JOBS": "2", "BENCH_SLURM_ROUNDS": "1", "BENCH_SLURM_NODES": "1"}


def host_side(env):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump({"benchmarks": {}}, f)
        path = f.name
    try:
        for b in ("bench_cgroups.py", "bench_slurm_start.py"):
            r = subprocess.run([sys.executable, os.path.join(B.SRCDIR, "bench", b), path],
                               env=env, capture_output=True, text=True)
            if r.returncode not in (0, 77):
                B.log("v1 %s failed: %s" % (b, r.stderr[-2000:]))
                return None
        with open(path) as f:
            return json.load(f).get("benchmarks", {})
    finally:
        os.unlink(path)


def guest_side(env):
    vm = os.path.join(B.SRCDIR, "tests", "vm", "vm.sh")
    genv = dict(env, SK_VM_MEM="3072", SK_VM_SHARE=B.SRCDIR,
                SK_VM_ENV=" ".join(["SK_TOP_BUILDDIR"] + list(SIZES)))
    r = subprocess.run(["bash", vm, "run", os.path.join(B.SRCDIR, "tests", "vm", "bench-v2.sh")],
                       env=genv, capture_output=True, text=True)
    out = r.stdout
    if "BENCH-JSON-BEGIN" not in out or r.returncode != 0:
        B.log("v2 (guest) failed, exit %d: %s %s" % (r.returncode, out[-2000:], r.stderr[-2000:]))
        return None
    text = out.split("BENCH-JSON-BEGIN", 1)[1].split("BENCH-JSON-END", 1)[0]
    return json.loads(text).get("benchmarks", {})


def main():
    if os.geteuid() != 0:
        B.log("cgroup_v2: needs root (Slurm, cgroups, the guest): skipped")
        return 77
    if not os.access(os.path.join(B.BUILDDIR, "bench", "pod_cgroup_cost"), os.X_OK):
        B.log("cgroup_v2: needs bench/pod_cgroup_cost (make bench): skipped")
        return 77
    env = dict(os.environ, SK_TOP_BUILDDIR=B.BUILDDIR, SK_TOP_SRCDIR=B.SRCDIR)
    for k, v in SIZES.items():
        env.setdefault(k, v)
    v1 = host_side(env)
    v2 = guest_side(env)
    if v1 is None or v2 is None:
        return 1
    B.write_result("cgroup_v2", {"v1": v1, "v2": v2,
                                 "sizes": {k: env[k] for k in SIZES}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
