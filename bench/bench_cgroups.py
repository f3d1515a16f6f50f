#!/usr/bin/python3
"""What a pod's own cgroup costs at its start and at its end (cgroup v1, root).

Runs bench/pod_cgroup_cost (built by `make bench`): on this host's real
cgroup v1 hierarchies, a parent like a Slurm job's extern step in devices and
memory and the project's own tree in cpu, cpuacct and pids; per pod start the
agent's enter_pod_cgroup (directories, deny rules, memory limit, CFS quota and
shares, pids.max, the move of a waiting process), per pod end the kill and
reap of that process and the removal of its directories, next to the same
fork/kill/reap without a cgroup. The agent-socket round trip of cgroup_enter
is not in it (one local request, as every other agent op).

usage: bench_cgroups.py [RESULTS.json]     env: BENCH_CGROUP_N (200), BENCH_CGROUP_ROUNDS (3)
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sklib as B  # noqa: E402


def main():
    path = os.path.join(B.BUILDDIR, "bench", "pod_cgroup_cost")
    if os.geteuid() != 0 or not os.access(path, os.X_OK):
        B.log("cgroups: needs root and bench/pod_cgroup_cost (make bench): skipped")
        return 77
    n = B.env_int("BENCH_CGROUP_N", 200)
    rounds = []
    for _ in range(B.env_int("BENCH_CGROUP_ROUNDS", 3)):
        r = subprocess.run([path, str(n)], capture_output=True, text=True, timeout=600)
        if r.returncode == 77:
            B.log("cgroups: " + r.stderr.strip())
            return 77
        if r.returncode != 0:
            B.log("cgroups: pod_cgroup_cost failed: " + r.stderr.strip())
            return 1
        rounds.append(json.loads(r.stdout))
    # the round with the median start p50 stands for the run; all are kept
    mid = sorted(rounds, key=lambda x: x["start_us"]["p50"])[len(rounds) // 2]
    B.write_result("cgroups", dict(mid, rounds=rounds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
