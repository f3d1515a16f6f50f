#!/usr/bin/python3
"""Component test: the agent's API traffic over HTTP/2 shares its connections.

kube-apiserver speaks HTTP/2 and lets a connection carry 100 streams (its
--http2-max-streams-per-connection default since the HTTP/2 rapid-reset fixes).
The test API server speaks HTTP/1.1, so nghttpx (Debian's nghttp2-proxy) stands
in front of it as an HTTP/2 server with that limit, as a real API server's
frontend would. The real agent (fake runtime, the agent's own credential,
max_jobs 128) then:
- negotiates HTTP/2 and carries a few virtual nodes on one connection;
- after 100 registrations at once (each node holds a pod watch open: the first
  connection fills up) holds at most max_jobs / 50 + 2 connections, not one
  per node (libcurl's pool opened 33 for 100 nodes before the cap);
- still serves every node past the first connection's limit: every Node Ready,
  a pod bound to the 100th node runs, every node's Lease renewed.
Prints `N passed, N failed`; skips (77) without nghttpx.
"""
import os, sys, threading, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from sktest.env import REG, AgentEnv, phase, pod, suite_args  # noqa: E402
from sktest.h2front import STREAMS, H2Front, available, tcp_established  # noqa: E402
from sktest.suite import SCALE, check, run_suite, wait_for  # noqa: E402

MAX_JOBS = 128  # the agent's cap is then 128 / 50 + 2 = 4 connections
BURST = 100


class H2Env(AgentEnv):
    """The test API server behind nghttpx (HTTP/2 over TLS, STREAMS per connection)."""

    def start_kube(self):
        super().start_kube()
        self.front = H2Front(self.kdir, self.url, self.dir)

    def conf_settings(self):
        s = super().conf_settings()
        s["api_server"] = self.front.url
        s["max_jobs"] = MAX_JOBS
        s["log_level"] = "info"
        return s

    def stop(self):
        try:
            super().stop()
        finally:
            if getattr(self, "front", None):
                self.front.stop()

    def connections(self):
        return tcp_established(self.agent.pid, self.front.port)


def reg(job):
    r = dict(REG)
    r["job_id"] = job
    return r


def node(job):
    return "slurm-n1-%d" % job


def ready(env, job):
    code, n = env.api("GET", "/api/v1/nodes/" + node(job))
    conds = {c["type"]: c["status"] for c in n.get("status", {}).get("conditions", [])} if code == 200 else {}
    return conds.get("Ready") == "True"


def register_all(env, jobs):
    """Registers `jobs` at once (one thread each, as the prologs of many jobs would)."""
    out = {}

    def one(j):
        out[j] = env.call("register", reg(j), timeout=60)
    ts = [threading.Thread(target=one, args=(j,)) for j in jobs]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return out


def run(env):
    first = [100 + j for j in range(5)]
    for j in first:
        open(os.path.join(env.dir, "alive_%d" % j), "w").close()
    r = register_all(env, first)
    check("5 registrations through the HTTP/2 front", all(x and x.get("ok") for x in r.values()), r)
    check("their Nodes Ready", wait_for(lambda: all(ready(env, j) for j in first), 20 * SCALE))
    lines = env.front.access()
    check("the agent's requests reach the front over HTTP/2 (access log: h2)",
          lines and all(line.startswith("h2 ") for line in lines), lines[:5])
    check("5 virtual nodes on one connection", env.connections() == 1, env.connections())

    burst = [1000 + j for j in range(BURST)]
    for j in burst:
        open(os.path.join(env.dir, "alive_%d" % j), "w").close()
    r = register_all(env, burst)
    bad = {j: x for j, x in r.items() if not (x and x.get("ok"))}
    check("%d registrations at once" % BURST, not bad, list(bad.items())[:3])
    check("every Node Ready", wait_for(lambda: all(ready(env, j) for j in burst), 60 * SCALE),
          [j for j in burst if not ready(env, j)][:5])
    cap = MAX_JOBS // 50 + 2
    n = env.connections()
    check("%d nodes' watches share at most %d connections (%d streams each)"
          % (BURST + len(first), cap, STREAMS), 2 <= n <= cap, n)
    print("     agent connections to the front: %d" % n)

    # past the first connection's streams: the last node's watch is open and serves
    last = burst[-1]
    p = pod("h2-last")
    p["spec"]["nodeName"] = node(last)
    env.api("POST", "/api/v1/namespaces/default/pods", p)
    check("a pod bound to the %dth node runs" % (BURST + len(first)),
          wait_for(lambda: phase(env, "default", "h2-last") == "Running", 20 * SCALE),
          phase(env, "default", "h2-last"))
    t_mark = time.time()

    def renewed(job):
        code, lease = env.api("GET", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/" + node(job))
        if code != 200:
            return False
        rt = lease["spec"].get("renewTime", "")
        return rt and time.mktime(time.strptime(rt[:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone >= int(t_mark)
    check("every node's Lease renewed after the burst (1 s interval)",
          wait_for(lambda: all(renewed(j) for j in first + burst), 20 * SCALE),
          [j for j in first + burst if not renewed(j)][:5])
    check("still at most %d connections" % cap, env.connections() <= cap, env.connections())

    for j in first + burst:
        env.call("deregister", {"job_id": j, "slurm_node": "n1", "grace_s": 1, "reason": "JobEnded"}, timeout=60)
    code, nodes = env.api("GET", "/api/v1/nodes")
    left = [x["metadata"]["name"] for x in nodes.get("items", [])] if code == 200 else None
    check("every Node gone after deregister", left == [], left)


def main():
    a = suite_args()
    if not os.path.exists(a.server):
        print("test API server missing; skipping")
        return 77
    if not available():
        print("SKIP: nghttpx (Debian: nghttp2-proxy) not installed")
        return 77
    return run_suite(H2Env(a.agent, a.server), run, ("agent.log", "kube.log", "nghttpx.log"))


if __name__ == "__main__":
    sys.exit(main())
