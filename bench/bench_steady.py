#!/usr/bin/python3
"""Steady-state API requests per virtual node per second.

One agent with its production intervals (agent.conf defaults: Lease renewed
every 10 s, status report every 5 min, Node check every 60 s, GC every
5 min) holds N registered nodes with P running pods each (fake runtime:
pods do not change, as on an idle kubelet). After everything is Ready and
Running, the API server's counters are reset and the agent's requests are
counted for the window. Reported per node and per request kind.

Against BENCH_KUBECONFIG's cluster (sklib.py) the requests are counted from the API server's
audit log (BENCH_AUDIT_LOG: the agent's user, and every user's of the window); without one
they are null with the reason.

usage: bench_steady.py [RESULTS.json]
env:   BENCH_STEADY_S (180)     window, seconds
       BENCH_STEADY_NODES (10)  virtual nodes
       BENCH_STEADY_PODS (1)    running pods per node
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sklib as B  # noqa: E402


def main():
    B.cluster_mode()
    B.preflight()
    window = B.env_float("BENCH_STEADY_S", 180)
    n = B.env_int("BENCH_STEADY_NODES", 10)
    npods = B.env_int("BENCH_STEADY_PODS", 1)
    wd = B.Workdir("sk-bench-steady-")
    kube = B.open_api(wd.path)
    agent = None
    ok = False
    try:
        api = kube.info()
        agent = B.Agent(wd.path, kube, runtime="fake", extra={"max_jobs": str(n + 10)})
        pods = B.Watch(kube, B.pods_path())
        for j in range(n):
            r = agent.call("register", B.reg_body(2000 + j))
            if not (r and r.get("ok")):
                raise RuntimeError(f"register failed: {r}")
        want = set()
        for j in range(n):
            for i in range(npods):
                pn = B.pod_name(f"s{2000 + j}-{i}")
                kube.api("POST", B.pods_path(), B.pod_manifest(pn, B.node_name(2000 + j)))
                want.add(pn)
        running = set()
        end = time.time() + 30
        while running != want and time.time() < end:
            pods.wait(lambda ev: ev["type"] != "BOOKMARK" and
                      ev["object"].get("status", {}).get("phase") == "Running" and
                      not running.add(ev["object"]["metadata"]["name"]), 1)
        if running != want:
            raise RuntimeError(f"only {len(running)}/{len(want)} pods Running")
        pods.close()
        time.sleep(2)
        B.log(f"steady state: {n} nodes x {npods} pods, counting for {window:.0f} s")
        cpu0 = B.proc_cpu_s(agent.pid)
        win = kube.window_start()
        t0 = time.time()
        time.sleep(window)
        dt = time.time() - t0
        cpu = B.proc_cpu_s(agent.pid) - cpu0
        got = kube.window_end(win)
        counts = got["agent"]
        total = sum(counts.values()) if counts is not None else None
        # against a cluster the window the audit log counted is the API server's own
        dt_count = (got.get("window") or {}).get("s") or dt
        res = {"nodes": n, "pods_per_node": npods, "window_s": round(dt, 1),
               "requests": total, "by_request": counts,
               "req_per_node_per_s": round(total / dt_count / n, 4) if total is not None else None,
               "agent_cpu_percent": round(100 * cpu / dt, 3),
               "agent_rss_kib": B.proc_rss_kib(agent.pid),
               "config": "agent.conf defaults: lease_renew_interval 10s, status_report_interval 5m, "
                         "node_check_interval 0 (off), gc_interval 5m",
               "api": api}
        if B.CLUSTER:
            res.update(B.counts_extra(got))
        B.write_result("steady", res)
        ok = True
    finally:
        if agent:
            agent.stop()
        kube.stop()   # a cluster's: deletes this run's Nodes, Leases and pods
        wd.done(ok)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
