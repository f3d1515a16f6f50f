#!/usr/bin/python3
"""Lifecycle latencies of one virtual node, measured at the test API server.

For each runtime (fake: pods in the agent's memory; shim: the real
slurm-k8s-shim running pods as processes) and each repetition:
  register  -> Node Ready      (what the prolog's `register` costs; the watch
                                sees Ready=True)
  pod create with spec.nodeName (bound) -> phase Running
  pod DELETE (process exits on SIGTERM) -> DELETED
  deregister (job end, remaining pods running `sleep`) -> reply, and the
                                last of pods/Node/Lease DELETED
Times are event arrival times on watches opened before the runs.

Against the test double (default) or BENCH_KUBECONFIG's cluster (sklib.py, docs/benchmarks.md
"Against your own cluster"): the same runs, the shim's pods as processes of this machine.

usage: bench_lifecycle.py [RESULTS.json]
env:   BENCH_REPS (20)  jobs per runtime
       BENCH_PODS (3)   pods per job (each one measured)
       BENCH_GRACE (5)  grace_s of the deregister
       BENCH_RUNTIMES ("fake shim")
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sklib as B  # noqa: E402

LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"


def run_runtime(wd, runtime, reps, npods, grace, api_info):
    kube = B.open_api(os.path.join(wd, runtime))
    agent = shim = None
    out = {"register_ready": [], "register_reply": [], "pod_running": [], "pod_delete_gone": [],
           "deregister_reply": [], "deregister_all_gone": [], "errors": 0}
    try:
        api_info.setdefault("api", kube.info())
        agent = B.Agent(os.path.join(wd, runtime), kube, runtime=runtime,
                        extra={"max_pods": "250"})
        nodes = B.Watch(kube, "/api/v1/nodes")
        pods = B.Watch(kube, B.pods_path())
        leases = B.Watch(kube, LEASES)
        for rep in range(reps):
            job = 1000 + rep
            name = B.node_name(job)
            t0 = time.time()
            r = agent.call("register", B.reg_body(job))
            t_reply = time.time()
            if not (r and r.get("ok")):
                B.log(f"register {job} failed: {r}")
                out["errors"] += 1
                continue
            t_ready = nodes.wait(B.is_node_ready_event(name), 10)
            if t_ready is None:
                out["errors"] += 1
                continue
            out["register_reply"].append(t_reply - t0)
            out["register_ready"].append(t_ready - t0)
            if runtime == "shim":
                shim = B.Shim(agent, job)
                if not B.wait_attached(agent, job):
                    raise RuntimeError("shim did not attach; see " + shim.log_path)
            names = []
            for i in range(npods):
                pn = B.pod_name(f"p{job}-{i}")
                t0 = time.time()
                code, _ = kube.api("POST", B.pods_path(), B.pod_manifest(pn, name))
                t_run = pods.wait(B.is_phase(pn, "Running"), 10) if code == 201 else None
                if t_run is None:
                    B.log(f"pod {pn}: not Running (create {code})")
                    out["errors"] += 1
                    continue
                out["pod_running"].append(t_run - t0)
                names.append(pn)
            if names:  # the first pod: graceful delete, sleep exits on SIGTERM
                pn = names.pop(0)
                t0 = time.time()
                kube.api("DELETE", B.pods_path(pn))
                t_gone = pods.wait(B.is_deleted(pn), grace + 10)
                if t_gone is None:
                    out["errors"] += 1
                else:
                    out["pod_delete_gone"].append(t_gone - t0)
            time.sleep(0.05)
            nodes.drain()
            leases.drain()
            t0 = time.time()
            r = agent.call("deregister", {"job_id": job, "slurm_node": "n1", "grace_s": grace,
                                          "reason": "JobEnded"}, timeout=grace + 30)
            t_reply = time.time()
            if not (r and r.get("ok")):
                B.log(f"deregister {job} failed: {r}")
                out["errors"] += 1
                continue
            t_node = nodes.wait(B.is_deleted(name), 10)
            t_lease = leases.wait(B.is_deleted(name), 10)
            on_node = "?fieldSelector=spec.nodeName%3D" + name if B.CLUSTER else ""  # not all pods
            left = [p for p in kube.api("GET", "/api/v1/pods" + on_node)[1].get("items", [])
                    if p["spec"].get("nodeName") == name]
            if t_node is None or t_lease is None or left:
                B.log(f"job {job}: node gone {t_node}, lease gone {t_lease}, pods left {len(left)}")
                out["errors"] += 1
            else:
                out["deregister_reply"].append(t_reply - t0)
                out["deregister_all_gone"].append(max(t_reply, t_node, t_lease) - t0)
            if shim:
                try:
                    shim.proc.wait(10)
                except Exception:  # noqa: BLE001 - a shim that does not exit is an error, not a crash
                    out["errors"] += 1
                shim.stop()
                shim = None
        for w in (nodes, pods, leases):
            w.close()
    finally:
        if shim:
            shim.stop()
        if agent:
            agent.stop()
        kube.stop()   # a cluster's: deletes this run's Nodes, Leases and pods
    res = {k: B.summary_ms(v) for k, v in out.items() if k != "errors"}
    res["errors"] = out["errors"]
    return res


def main():
    B.cluster_mode()
    B.preflight(need_shim=True)
    reps = B.env_int("BENCH_REPS", 20)
    npods = B.env_int("BENCH_PODS", 3)
    grace = B.env_int("BENCH_GRACE", 5)
    runtimes = os.environ.get("BENCH_RUNTIMES", "fake shim").split()
    wd = B.Workdir("sk-bench-life-")
    ok = False
    try:
        res = {"reps": reps, "pods_per_job": npods, "grace_s": grace}
        for rt in runtimes:
            B.log(f"lifecycle, runtime={rt}: {reps} jobs x {npods} pods")
            res[rt] = run_runtime(wd.path, rt, reps, npods, grace, res)
        B.write_result("lifecycle", res)
        ok = all(res[rt]["errors"] == 0 for rt in runtimes)
    finally:
        wd.done(ok)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
