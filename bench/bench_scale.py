#!/usr/bin/python3
"""N virtual nodes registering at once (simulated: no Slurm).

For each N: a fresh test API server and one agent (runtime = fake,
max_jobs > N); N `register` calls are sent at once over up to BENCH_SCALE_CONC
parallel socket connections (each call blocks until its Node is Ready, as the
prolog does). Reported: time until every Node is Ready in the API server
(watch), per-node register -> Ready p50/p99, the agent's API requests during
the burst and their rate, the API server's own request latency (its request
log) as the "not overloaded" check, the agent's CPU and RSS, and the time to
deregister all N again, and the TCP connections the agent holds to the API server
after the burst. Against the test double each N runs twice: over HTTP/1.1 (the
double itself: one connection per open watch) and over HTTP/2 through nghttpx
in front of it with kube-apiserver's 100 streams per connection
(tests/pylib/sktest/h2front.py; skipped without nghttpx), where the agent's
requests share connections. For BENCH_SCALE_IDENTITY_N also with node identities
(node_identity = bootstrap: each node's CSR, its certificate, its requests under
system:node:<node>), with the window's requests counted by identity. For
BENCH_SCALE_SLOTS_N with node identities kept per slot (node_name_template =
slurm-{node}-{slot}) against CSR controllers at kube-controller-manager's
default client rate (20 requests/s: about 6.7 CSRs/s): N first jobs (each slot's
first identity, a CSR each), then N next jobs on the same slots, which must need
no CSR, be all Ready within 10 s with no error (the first jobs' figures are
reported beside them). For BENCH_SCALE_IMPERSONATE_N with node_identity =
impersonate (names per slot, the agent's identity bound to the agent's rules and
what etc/slurm-k8s-impersonation-rbac prints for n1's slots; the same CSR
controllers, which it never needs): each node's requests as system:node:<node>
over the agent's connections, over HTTP/1.1 and, with nghttpx, HTTP/2.

Against BENCH_KUBECONFIG's cluster (sklib.py) nothing is started: the requests, their rate and
the API server's latency come from its audit log (BENCH_AUDIT_LOG; null with the reason
without one), and the API server's CPU is not measured.

usage: bench_scale.py [RESULTS.json]
env:   BENCH_SCALE_N ("10 100 1000")  BENCH_SCALE_CONC (128)  BENCH_SCALE_H2 (1: the HTTP/2 runs too)
       BENCH_SCALE_IDENTITY_N ("10 100": these N also with node_identity = bootstrap)
       BENCH_SCALE_SLOTS_N ("100 1000": these N also with node identities per slot, two rounds)
       BENCH_SCALE_IMPERSONATE_N ("100 1000": these N also with node_identity = impersonate)
"""
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sklib as B  # noqa: E402
from sktest import h2front  # noqa: E402


def burst(agent, bodies, conc, op, timeout):
    """Sends every body with `op` over `conc` worker threads; returns (t_done, errors)."""
    lock = threading.Lock()
    todo = list(bodies)
    errs = []

    def worker():
        while True:
            with lock:
                if not todo:
                    return
                b = todo.pop()
            try:
                r = agent.call(op, b, timeout=timeout)
                if not (r and r.get("ok")):
                    errs.append(r)
            except OSError as e:
                errs.append(str(e))
    ts = [threading.Thread(target=worker, daemon=True) for _ in range(min(conc, len(bodies)))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return time.time(), errs


def run_n(wd, n, conc, api_info, h2=False, identity="agent", slots=False):
    """One measurement of N registrations at once (the result of the last round). slots: the
    nodes named per slot (node_name_template = slurm-{node}-{slot}) against a double whose CSR
    controllers run at kube-controller-manager's default client rate (20 requests/s, three a
    CSR): a first round of N jobs (their slots' first identities, each a CSR) then, after they
    ended, a second round of N other jobs on the same slots (measured; the first one's result in
    "first_jobs")."""
    per_slot = slots or identity == "impersonate"
    sub = os.path.join(wd, f"n{n}" + ("-h2" if h2 else "") + ("-" + identity if identity != "agent" else "")
                       + ("-slots" if slots else ""))
    kube = B.open_api(sub, ["--csr-controller-qps", "20", "--csr-controller-burst", "30"] if per_slot else ())
    agent = front = None
    try:
        api_info.setdefault("api", kube.info())
        extra = {"max_jobs": str(n + 16), "max_connections": str(max(1024, 4 * conc)),
                 "node_identity": identity}
        if per_slot:
            extra["node_name_template"] = "slurm-{node}-{slot}"
        if slots:
            # the first jobs wait for the rate-limited CSR controllers (about 6.7/s)
            extra["node_csr_timeout"] = str(120 + n // 4) + "s"
        if identity == "impersonate":
            bind_impersonation(kube, n + 16)
        api_port = int(kube.port)
        if h2:
            front = h2front.H2Front(kube.dir, kube.url, sub)
            extra["api_server"] = front.url
            api_port = front.port
        agent = B.Agent(sub, kube, runtime="fake", extra=extra)
        res = None
        for rnd in range(2 if slots else 1):
            first = res
            res = one_round(kube, agent, [10000 * (rnd + 1) + j for j in range(n)], n, conc, h2, api_port,
                            per_slot, 120 + (n // 4 if slots and rnd == 0 else 0))
            res["node_identity"] = identity
            if per_slot:
                res["node_names"] = "per slot (slurm-{node}-{slot}), CSR controllers at 20 requests/s"
                res["csrs_sent"] = sum(v for k, v in (res["by_request"] or {}).items()
                                       if k.startswith("POST /apis/certificates.k8s.io/v1/certificatesigningrequests"))
            if first is not None:
                res["first_jobs"] = first
        return res
    finally:
        if agent:
            agent.stop()
        if front:
            front.stop()
        kube.stop()


def bind_impersonation(kube, slots):
    """The double's agent identity: its usual rules and those etc/slurm-k8s-impersonation-rbac
    prints for n1's first `slots` slots (as an admin would apply them)."""
    import yaml
    top = os.environ.get("SK_TOP_SRCDIR") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    gen = subprocess.run([os.path.join(top, "etc", "slurm-k8s-impersonation-rbac"), "--slots", str(slots), "n1"],
                         capture_output=True, text=True, check=True).stdout
    rules = [r for d in yaml.safe_load_all(gen) if d and d["kind"] == "ClusterRole" for r in d["rules"]]
    code, body = kube.api("POST", "/_test/rbac", {"subject": "group:slurm-k8s:agent", "role": ["agent"] + rules})
    if code != 200:
        raise RuntimeError("the double refused the impersonation rules: %s %s" % (code, body))


def one_round(kube, agent, jobs, n, conc, h2, api_port, slots, window):
    """N jobs registered at once, measured until all their Nodes are Ready (within `window` s),
    then deregistered."""
    nodes = B.Watch(kube, "/api/v1/nodes")
    wanted = {str(j) for j in jobs}
    names = {f"slurm-n1-{s}" for s in range(n)} if slots else {B.node_name(j) for j in jobs}
    ready_at = {}

    def seen(ev):
        o = ev["object"]
        job = (o["metadata"].get("labels") or {}).get("slurm-k8s/job-id")
        if ev["type"] in ("ADDED", "MODIFIED") and o["metadata"]["name"] in names and job in wanted \
                and B.node_ready(o):
            ready_at.setdefault(job, time.time())
        return len(ready_at) >= n

    def collect():
        nodes.wait(seen, window)
    win = kube.window_start(latency=True)
    cpu0 = B.proc_cpu_s(agent.pid)
    kcpu0 = kube.server_cpu_s()
    col = threading.Thread(target=collect, daemon=True)
    col.start()
    t0 = time.time()
    t_replies, errs = burst(agent, [B.reg_body(j) for j in jobs], conc, "register", 120)
    col.join(window)
    t_ready = max(ready_at.values()) if len(ready_at) == n else None
    conns = h2front.tcp_established(agent.pid, api_port)
    cpu_reg = B.proc_cpu_s(agent.pid) - cpu0
    kcpu = kube.server_cpu_s() - kcpu0 if kcpu0 is not None else None
    dur = (t_ready or time.time()) - t0
    got = kube.window_end(win, latency=True)
    counts = got["agent"]
    agent_lat = got["latency_s"]
    total = sum(counts.values()) if counts is not None else None
    # An error: a register call that failed, or a registration whose Node never became
    # Ready within the window (the call may answer before, e.g. before a CSR is signed).
    res = {"n": n, "concurrency": min(conc, n), "errors": len(errs) + max(0, n - len(ready_at)),
           "call_errors": len(errs), "never_ready": max(0, n - len(ready_at)), "ready": len(ready_at),
           "all_ready_s": round(t_ready - t0, 3) if t_ready else None,
           "all_replied_s": round(t_replies - t0, 3),
           "register_ready": B.summary_ms([t - t0 for t in ready_at.values()]),
           "agent_requests": total,
           "req_per_s": round(total / dur, 1) if total is not None else None,
           "requests_per_node": round(total / n, 2) if total is not None else None,
           "by_request": counts,
           "server_latency": B.summary_ms(agent_lat) if agent_lat is not None else None,
           "agent_cpu_s": round(cpu_reg, 3),
           "agent_cpu_ms_per_node": round(1000 * cpu_reg / n, 3),
           "agent_rss_kib": B.proc_rss_kib(agent.pid),
           # TCP connections the agent holds to the API server (or the front) once all are
           # Ready: each node keeps a pod watch open
           "agent_connections": conns,
           "transport": ("HTTP/2 through nghttpx, %d streams per connection" % h2front.STREAMS
                         if h2 else "the cluster's API server" if B.CLUSTER
                         else "HTTP/1.1: the test double"),
           # the test API server is one Python process (GIL): near 100 % of a
           # core here means it, not the agent, sets the pace
           "api_server_cpu_s": round(kcpu, 3) if kcpu is not None else None,
           "api_server_cpu_percent": round(100 * kcpu / dur, 1) if kcpu is not None else None}
    if "by_identity" in got:
        res["requests_by_identity"] = got["by_identity"]
    if B.CLUSTER:
        res.update(B.counts_extra(got))
        res["api_server_cpu_absent"] = "the API server is not a process of this machine"
    if errs:
        B.log(f"N={n}: {len(errs)} errors, first: {errs[0]}")
    if len(ready_at) < n:
        B.log(f"N={n}: {n - len(ready_at)} Nodes never Ready within {window} s (counted as errors)")
    nodes.close()
    t0 = time.time()
    t_end, derrs = burst(agent, [{"job_id": j, "slurm_node": "n1", "grace_s": 5,
                                  "reason": "JobEnded"} for j in jobs], conc, "deregister", 120)
    res["deregister_all_s"] = round(t_end - t0, 3)
    res["deregister_errors"] = len(derrs)
    if derrs:
        B.log(f"N={n}: {len(derrs)} deregister errors, first: {derrs[0]}")
    return res


def main():
    B.cluster_mode()
    B.preflight()
    ns = B.env_list("BENCH_SCALE_N", [10, 100, 1000])
    conc = B.env_int("BENCH_SCALE_CONC", 128)
    h2 = B.env_int("BENCH_SCALE_H2", 1) == 1
    # node_identity = bootstrap too for these N (each node's key, CSR and certificate: the
    # double signs with openssl, about 40 ms a node here)
    ids_n = [int(x) for x in B.env_list("BENCH_SCALE_IDENTITY_N", [10, 100])]
    # and per slot (the next jobs on a slot reuse its identity) for these N
    slots_n = [int(x) for x in B.env_list("BENCH_SCALE_SLOTS_N", [100, 1000])]
    # and as impersonated node identities for these N
    imp_n = [int(x) for x in B.env_list("BENCH_SCALE_IMPERSONATE_N", [100, 1000])]
    if h2 and not B.CLUSTER and not h2front.available():
        B.log("scale: nghttpx (nghttp2-proxy) missing: no HTTP/2 runs")
        h2 = False
    wd = B.Workdir("sk-bench-scale-")
    ok = False
    try:
        res = {}
        for n in ns:
            B.log(f"scale: {n} registrations at once")
            res[str(n)] = run_n(wd.path, n, conc, res)
            B.log(f"  all Ready after {res[str(n)]['all_ready_s']} s, "
                  f"{res[str(n)]['agent_requests']} requests, "
                  f"{res[str(n)]['agent_connections']} connections")
            if n in ids_n and not B.CLUSTER:
                r3 = res[str(n)]["node_identities"] = run_n(wd.path, n, conc, {}, identity="bootstrap")
                B.log(f"  with node identities: all Ready after {r3['all_ready_s']} s, "
                      f"{r3['agent_connections']} connections, requests {r3.get('requests_by_identity')}")
            if n in slots_n and not B.CLUSTER:
                r4 = res[str(n)]["slot_identities"] = run_n(wd.path, n, conc, {}, identity="bootstrap", slots=True)
                f4 = r4["first_jobs"]
                B.log(f"  node identities per slot, CSR controllers at 20 requests/s: first jobs all Ready "
                      f"after {f4['all_ready_s']} s ({f4['errors']} errors, {f4['csrs_sent']} CSRs); the next "
                      f"jobs after {r4['all_ready_s']} s ({r4['errors']} errors, {r4['csrs_sent']} CSRs), "
                      f"{r4['agent_connections']} connections")
            if n in imp_n and not B.CLUSTER:
                for key, over in (("impersonated", False), ("impersonated_http2", True)) if h2 else \
                        (("impersonated", False),):
                    r5 = res[str(n)][key] = run_n(wd.path, n, conc, {}, h2=over, identity="impersonate")
                    B.log(f"  node identities by impersonation{' over HTTP/2' if over else ''}: all Ready after "
                          f"{r5['all_ready_s']} s ({r5['errors']} errors), {r5['agent_connections']} connections, "
                          f"requests {r5.get('requests_by_identity')}")
            if h2 and not B.CLUSTER:
                r2 = res[str(n)]["http2"] = run_n(wd.path, n, conc, {}, h2=True)
                B.log(f"  over HTTP/2: all Ready after {r2['all_ready_s']} s, "
                      f"{r2['agent_connections']} connections")
        B.write_result("scale", res)
        runs = [r for k, r in res.items() if k != "api"]
        runs += [r[v] for r in list(runs) for v in ("http2", "node_identities", "slot_identities", "impersonated",
                                                    "impersonated_http2") if v in r]
        # A slot's first job waits for the CSR controllers (1000 of them at their default rate
        # take longer than the window: the cost the kept identities avoid); only the next
        # jobs must have no error.
        ok = all(r["errors"] == 0 and r["ready"] == r["n"] for r in runs)
    finally:
        wd.done(ok)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
