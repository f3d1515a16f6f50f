#!/usr/bin/python3
"""What a pod's own network costs (agent.conf pod_network = cni, root).

Runs bench/pod_network_cost (built by `make bench`) in a network and mount
namespace of its own, with the real CNI plugins: per pod start the shim's
sandbox (`slurm-k8s-shim --pod-sandbox` as `nobody`, up to "ready") plus
the agent's attach (its checks, the namespaces held, the bridge plugin's
ADD with host-local), which a pod with its own network waits for before
its containers start, and a pod on the node's network does not; per pod end
the agent's detach (DEL, the namespaces let go). Then the weight push of a
trainer on the host to a rollout server: 2 GiB over one TCP connection to a
pod's address next to the host's own network (loopback), with the plugin's
MTU (1500) and with pod_network_mtu = 65520, side by side.

usage: bench_pod_network.py [RESULTS.json]
env:   BENCH_NET_N (100) starts per round, BENCH_NET_ROUNDS (3)
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sklib as B  # noqa: E402


def run(path, n, mtu):
    env = dict(os.environ)
    if mtu:
        env["BENCH_NET_MTU"] = str(mtu)
    r = subprocess.run([path, B.SHIM_BIN, "/usr/lib/cni", str(n)], capture_output=True,
                       text=True, timeout=900, env=env)
    if r.returncode == 77:
        return None
    if r.returncode != 0:
        raise RuntimeError("pod_network_cost failed: " + r.stderr.strip()[-500:])
    return json.loads(r.stdout)


def main():
    path = os.path.join(B.BUILDDIR, "bench", "pod_network_cost")
    if os.geteuid() != 0 or not os.access(path, os.X_OK) or not os.path.exists(B.SHIM_BIN):
        B.log("pod_network: needs root, bench/pod_network_cost and the shim (make bench): skipped")
        return 77
    n = B.env_int("BENCH_NET_N", 100)
    out = {}
    for mtu in (0, 65520):
        rounds = []
        for _ in range(B.env_int("BENCH_NET_ROUNDS", 3)):
            r = run(path, n, mtu)
            if r is None:
                B.log("pod_network: cannot run here (no CNI plugins?): skipped")
                return 77
            rounds.append(r)
        # the round with the median start p50 stands for the run; all are kept
        mid = sorted(rounds, key=lambda x: x["start_us"]["p50"])[len(rounds) // 2]
        out["mtu_%d" % (mtu or 1500)] = dict(mid, rounds=rounds)
    B.write_result("pod_network", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
