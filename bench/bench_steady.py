#!/usr/bin/python3
"""Steady-state API requests per virtual node per second.

One agent with its production intervals (agent.conf defaults: Lease renewed
every 10 s, status report every 5 min, Node check every 60 s, GC every
5 min) holds N registered nodes with P running pods each (fake runtime:
pods do not change, as on an idle kubelet). After everything is Ready and
Running, the API server's counters are reset and the agent's requests are
counted for the window. Reported per node and per request kind.

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
    B.preflight()
    window = B.env_float("BENCH_STEADY_S", 180)
    n = B.env_int("BENCH_STEADY_NODES", 10)
    npods = B.env_int("BENCH_STEADY_PODS", 1)
    wd = B.Workdir("sk-bench-steady-")
    kube = B.Kube(wd.path)
    agent = None
    ok = False
    try:
        agent = B.Agent(wd.path, kube, runtime="fake", extra={"max_jobs": str(n + 10)})
        pods = B.Watch(kube, "/api/v1/namespaces/default/pods")
        for j in range(n):
            r = agent.call("register", B.reg_body(2000 + j))
            if not (r and r.get("ok")):
                raise RuntimeError(f"register failed: {r}")
        want = set()
        for j in range(n):
            for i in range(npods):
                pn = f"s{2000 + j}-{i}"
                kube.api("POST", "/api/v1/namespaces/default/pods",
                         B.pod_manifest(pn, B.node_name(2000 + j)))
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
        kube.reset_counters()
        t0 = time.time()
        time.sleep(window)
        counts = kube.agent_requests()
        dt = time.time() - t0
        cpu = B.proc_cpu_s(agent.pid) - cpu0
        total = sum(counts.values())
        res = {"nodes": n, "pods_per_node": npods, "window_s": round(dt, 1),
               "requests": total, "by_request": counts,
               "req_per_node_per_s": round(total / dt / n, 4),
               "agent_cpu_percent": round(100 * cpu / dt, 3),
               "agent_rss_kib": B.proc_rss_kib(agent.pid),
               "config": "agent.conf defaults: lease_renew_interval 10s, status_report_interval 5m, "
                         "node_check_interval 0 (off), gc_interval 5m"}
        B.write_result("steady", res)
        ok = True
    finally:
        if agent:
            agent.stop()
        kube.stop()
        wd.done(ok)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
