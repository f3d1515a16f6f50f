#!/usr/bin/python3
"""Agent and shim memory and CPU with N virtual nodes x P pods (real shims).

One agent (runtime = shim, shim_auth = uid) holds N jobs; each job has its
own slurm-k8s-shim (started by hand, as the plugin's extern step would) and P
pods running `sleep`. Reported: RSS and PSS of the agent and of all shims
(the pods' own processes are the workload, not counted), CPU time (user +
system) of agent + shims spent to start the N x P pods, per pod, and the
CPU use while idle afterwards.

Also measured, for the reading of the memory target:
  per_node  the same with one job (one agent, one shim, P pods): what each
            compute node of an N-node job holds, since an agent serves the
            virtual nodes of its own host only;
  floor     bench/rss_floor (built by `make bench`): a process linked with the
            shim's shared libraries that parses one JSON document and waits;
  smaps     the largest mappings of the agent and of one shim (RSS, PSS,
            private KiB per library), the profile behind the figures.

usage: bench_resources.py [RESULTS.json]
env:   BENCH_RES_NODES (10)  BENCH_RES_PODS (20)  BENCH_RES_IDLE_S (20)
"""
import collections
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sklib as B  # noqa: E402


def pss_kib(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def smaps(pid, top=12):
    """{mapping: [rss, pss, private] KiB} of the largest mappings by RSS."""
    agg = collections.defaultdict(lambda: [0, 0, 0])
    cur = "[anon]"
    try:
        with open(f"/proc/{pid}/smaps") as f:
            for line in f:
                parts = line.split()
                if not parts[0].endswith(":"):  # a mapping's header line
                    cur = os.path.basename(parts[5]) if len(parts) > 5 else "[anon]"
                    continue
                key = parts[0]
                if key == "Rss:":
                    agg[cur][0] += int(parts[1])
                elif key == "Pss:":
                    agg[cur][1] += int(parts[1])
                elif key in ("Private_Clean:", "Private_Dirty:"):
                    agg[cur][2] += int(parts[1])
    except OSError:
        return {}
    return dict(sorted(agg.items(), key=lambda kv: -kv[1][0])[:top])


def floor_rss():
    """RSS and PSS (KiB) of bench/rss_floor once it is ready; None without it."""
    path = os.path.join(B.BUILDDIR, "bench", "rss_floor")
    if not os.access(path, os.X_OK):
        return None
    p = subprocess.Popen([path], stdout=subprocess.PIPE)
    try:
        p.stdout.readline()
        return {"rss_kib": B.proc_rss_kib(p.pid), "pss_kib": pss_kib(p.pid)}
    finally:
        p.kill()
        p.wait()


def main():
    B.preflight(need_shim=True)
    n = B.env_int("BENCH_RES_NODES", 10)
    npods = B.env_int("BENCH_RES_PODS", 20)
    idle = B.env_float("BENCH_RES_IDLE_S", 20)
    res = measure(n, npods, idle, profile=True)
    if res is None:
        return 1
    if n > 1:
        one = measure(1, npods, min(idle, 5), profile=False)
        if one is None:
            return 1
        res["per_node"] = {k: one[k] for k in ("pods", "agent_rss_kib", "agent_pss_kib",
                                               "shims_rss_kib", "shims_pss_kib", "total_rss_mib")}
    res["floor"] = floor_rss()
    B.write_result("resources", res)
    return 0


def measure(n, npods, idle, profile):
    """One agent, n jobs with a shim each, npods pods per job: the figures,
    or None when something failed (logs kept)."""
    wd = B.Workdir("sk-bench-res-")
    kube = B.Kube(wd.path)
    agent = None
    shims = []
    ok = False
    try:
        agent = B.Agent(wd.path, kube, runtime="shim",
                        extra={"max_jobs": str(n + 10), "max_pods": str(npods + 10)})
        jobs = [3000 + j for j in range(n)]
        for job in jobs:
            r = agent.call("register", B.reg_body(job))
            if not (r and r.get("ok")):
                raise RuntimeError(f"register failed: {r}")
            shims.append(B.Shim(agent, job))
        for job in jobs:
            if not B.wait_attached(agent, job):
                raise RuntimeError(f"shim of job {job} did not attach")
        time.sleep(1)
        pids = [agent.pid] + [s.pid for s in shims]
        rss_empty = {"agent": B.proc_rss_kib(agent.pid),
                     "shims": sum(B.proc_rss_kib(s.pid) for s in shims)}
        cpu0 = sum(B.proc_cpu_s(p) for p in pids)
        watch = B.Watch(kube, "/api/v1/namespaces/default/pods")
        want, running = set(), set()
        t0 = time.time()
        for job in jobs:
            for i in range(npods):
                pn = f"r{job}-{i}"
                code, body = kube.api("POST", "/api/v1/namespaces/default/pods",
                                      B.pod_manifest(pn, B.node_name(job)))
                if code != 201:
                    raise RuntimeError(f"create {pn}: {code} {body}")
                want.add(pn)
        end = time.time() + 60 + 0.2 * len(want)
        while running != want and time.time() < end:
            watch.wait(lambda ev: ev["type"] != "BOOKMARK" and
                       ev["object"].get("status", {}).get("phase") == "Running" and
                       not running.add(ev["object"]["metadata"]["name"]), 1)
        t_all = time.time() - t0
        if running != want:
            raise RuntimeError(f"only {len(running)}/{len(want)} pods Running")
        time.sleep(2)  # last status PATCHes
        cpu_start = sum(B.proc_cpu_s(p) for p in pids) - cpu0
        cpu1 = sum(B.proc_cpu_s(p) for p in pids)
        time.sleep(idle)
        cpu_idle = sum(B.proc_cpu_s(p) for p in pids) - cpu1
        rss_agent = B.proc_rss_kib(agent.pid)
        rss_shims = [B.proc_rss_kib(s.pid) for s in shims]
        res = {"nodes": n, "pods_per_node": npods, "pods": len(want),
               "all_running_s": round(t_all, 3),
               "agent_rss_kib": rss_agent, "agent_pss_kib": pss_kib(agent.pid),
               "shims_rss_kib": sum(rss_shims), "shim_rss_kib_max": max(rss_shims),
               "shims_pss_kib": sum(pss_kib(s.pid) for s in shims),
               "total_rss_mib": round((rss_agent + sum(rss_shims)) / 1024, 1),
               "rss_before_pods_kib": rss_empty,
               "cpu_s_to_start_all": round(cpu_start, 3),
               "cpu_ms_per_pod_start": round(1000 * cpu_start / len(want), 3),
               "idle_cpu_percent": round(100 * cpu_idle / idle, 3), "idle_window_s": idle}
        if profile:
            res["smaps_kib"] = {"agent": smaps(agent.pid), "shim": smaps(shims[0].pid)}
        watch.close()
        # Leave nothing behind: job end for every node.
        for job in jobs:
            agent.call("deregister", {"job_id": job, "slurm_node": "n1", "grace_s": 5,
                                      "reason": "JobEnded"}, timeout=40)
        ok = True
    finally:
        for s in shims:
            s.stop()
        if agent:
            agent.stop()
        kube.stop()
        wd.done(ok)
    return res if ok else None


if __name__ == "__main__":
    sys.exit(main())
