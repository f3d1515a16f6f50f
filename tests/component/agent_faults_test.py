#!/usr/bin/python3
"""Component test: the agent behind a faulty API (issue: back-off as the API asks).

The real agent (fake runtime) against the test API server, whose fault injection answers the
agent's requests, and only the agent's (the admin's polls go through), as a failing front would:
windows of 4 s in which every request of the agent gets 503 with Retry-After 2, 500, or 429 with
Retry-After 1, each followed by 3.2 s of normal service, with every watch cut abruptly at the
start of a window. The Lease lasts 10 s and is renewed every 4 s, so a renewal that waited for
its next period after a failure would let it lapse; the agent retries with back-off within the
lease's duration instead, honouring Retry-After unless that would let the Lease lapse:
- the Lease's renewTime, polled every 0.2 s, never goes 10 s (its duration) without moving;
- the double's node lifecycle (lease grace 10 s) never marks the Node NotReady/Unknown;
- afterwards a new pod runs (the pod watch came back);
- no failed-pod storm: a one-replica Deployment in a namespace the job does not allow,
  tolerating every taint, makes in a minute a handful of pods, each refused (NamespaceNotAllowed),
  not thousands (the agent spaces one owner's refusals: 0, 1, 2, 4 ... s apart);
- with etc/vap-pod-namespaces.yaml applied, the same Deployment's pod is refused before it is
  bound: one pod, Pending, its Event "binding rejected", in 20 s.
Prints `N passed, N failed`.
"""
import datetime, os, sys, threading, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from sktest.env import NODE, REG, AgentEnv, phase, pod, suite_args  # noqa: E402
from sktest.suite import check, run_suite, wait_for  # noqa: E402

LEASE = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/" + NODE
DURATION_S = 10
# The agent's users: its own identity, and the nodes' own under node_identity = bootstrap.
AGENT_USERS = ["slurm-k8s-agent", "system:node:*"]
# Each window shorter than the lease's duration less a period, each calm longer than the agent's
# longest wait between two tries (a quarter of the duration, 2.5 s, + 25 % jitter; Retry-After 2 s):
# a renewal lands in every calm, so the Lease cannot lapse unless the retries do not come.
# These are the scenario's own durations, measured against the Lease's: they never stretch with
# SK_TIME_SCALE (a window three times as long would let any Lease lapse), only the waits do.
WINDOWS = [({"mode": "status", "code": 503, "retryAfter": 2}, 4.0),
           ({"mode": "status", "code": 500}, 4.0),
           ({"mode": "status", "code": 429, "retryAfter": 1}, 4.0),
           ({"mode": "status", "code": 503, "retryAfter": 2}, 4.0)]
CALM_S = 3.2


class FaultEnv(AgentEnv):
    def kube_args(self):
        return ["--lease-grace", str(DURATION_S), "--monitor-period", "1"]

    def conf_settings(self):
        s = super().conf_settings()
        s["lease_duration"] = "%ds" % DURATION_S
        s["lease_renew_interval"] = "4s"
        s["log_level"] = "info"
        return s


def micro_ts(s):
    return datetime.datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ").timestamp()


class LeaseWatcher(threading.Thread):
    """Polls the Lease (as the admin, whom no fault meets) and the Node's Ready condition."""

    def __init__(self, env):
        super().__init__(daemon=True)
        self.env, self.stop_ = env, threading.Event()
        self.renewals, self.not_ready, self.errors = [], [], []

    def run(self):
        while not self.stop_.is_set():
            code, lease = self.env.api("GET", LEASE)
            if code == 200:
                rt = lease.get("spec", {}).get("renewTime")
                if rt and (not self.renewals or self.renewals[-1] != rt):
                    self.renewals.append(rt)
            else:
                self.errors.append(code)
            code, n = self.env.api("GET", "/api/v1/nodes/" + NODE)
            for c in n.get("status", {}).get("conditions", []) if code == 200 else []:
                if c.get("type") == "Ready" and c.get("status") != "True":
                    self.not_ready.append((c.get("status"), c.get("reason")))
            self.stop_.wait(0.2)

    def max_gap(self, now):
        ts = [micro_ts(r) for r in self.renewals] + [now]
        return max(b - a for a, b in zip(ts, ts[1:])) if len(ts) > 1 else float("inf")


STORM_S = 60


def everywhere_deployment(name):
    """A one-replica Deployment in namespace storm (the job does not allow it) for the job's
    node, tolerating every taint."""
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "storm"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"nodeSelector": {"slurm-k8s/job-id": "42"},
                                           "tolerations": [{"operator": "Exists"}],
                                           "containers": [{"name": "main", "image": "busybox:1.35"}]}}}}


def refusal_storm(env):
    """A Deployment the job's namespaces do not allow, bound to its node for a minute."""
    env.api("POST", "/api/v1/namespaces", {"metadata": {"name": "storm"}})
    dep = everywhere_deployment("storm")
    code, _ = env.api("POST", "/apis/apps/v1/namespaces/storm/deployments", dep)
    check("a Deployment in namespace storm, tolerating every taint", code == 201, code)
    t0 = time.monotonic()
    time.sleep(STORM_S)
    _, lst = env.api("GET", "/api/v1/namespaces/storm/pods")
    pods = lst.get("items", [])
    failed = [p for p in pods if p.get("status", {}).get("phase") == "Failed"]
    reasons = {p.get("status", {}).get("reason") for p in failed}
    print("     %d pods in %.0f s, %d Failed (%s)" % (len(pods), time.monotonic() - t0, len(failed),
                                                     ", ".join(sorted(r or "?" for r in reasons))))
    check("a refused Deployment made a handful of pods in a minute, not a storm (%d)" % len(pods),
          2 <= len(pods) <= 12, len(pods))
    check("... each refused: NamespaceNotAllowed", failed and reasons == {"NamespaceNotAllowed"}, reasons)
    env.api("DELETE", "/apis/apps/v1/namespaces/storm/deployments/storm")


HELD_S = 20
VAP = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies"
VAPB = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings"


def refused_before_binding(env):
    """etc/vap-pod-namespaces.yaml applied as the admin guide says: the same Deployment's pod is
    never bound to the node (its Binding refused), so one pod, Pending, in 20 s."""
    import yaml
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "etc", "vap-pod-namespaces.yaml")
    docs = [d for d in yaml.safe_load_all(open(path)) if d]
    made = []
    for d in docs:
        url = VAP if d["kind"] == "ValidatingAdmissionPolicy" else VAPB
        code, body = env.api("POST", url, d)
        check("kubectl apply of etc/vap-pod-namespaces.yaml: %s" % d["kind"], code == 201, (code, body))
        made.append(url + "/" + d["metadata"]["name"])
    dep = everywhere_deployment("held")
    code, _ = env.api("POST", "/apis/apps/v1/namespaces/storm/deployments", dep)
    check("the Deployment again (as held), the policy in force", code == 201, code)
    time.sleep(HELD_S)
    _, lst = env.api("GET", "/api/v1/namespaces/storm/pods?labelSelector=app%3Dheld")
    pods = lst.get("items", [])
    _, evs = env.api("GET", "/api/v1/namespaces/storm/events?fieldSelector=reason%3DFailedScheduling")
    rejected = [e.get("message", "") for e in evs.get("items", []) if "binding rejected" in e.get("message", "")]
    check("refused before binding: one pod in %d s, Pending, never bound (%s)"
          % (HELD_S, [(p["metadata"]["name"], p.get("status", {}).get("phase"), p["spec"].get("nodeName"))
                      for p in pods]),
          len(pods) == 1 and pods[0].get("status", {}).get("phase") == "Pending"
          and not pods[0]["spec"].get("nodeName"), len(pods))
    check("... its Event says the Binding was rejected for its namespace",
          rejected and "namespace is not allowed on this slurm-k8s node" in rejected[0], rejected[:1])
    env.api("POST", "/api/v1/namespaces/default/pods", pod("allowed"))
    check("a pod of an allowed namespace still runs there",
          wait_for(lambda: phase(env, "default", "allowed") == "Running", 15))
    env.api("DELETE", "/api/v1/namespaces/default/pods/allowed")
    env.api("DELETE", "/apis/apps/v1/namespaces/storm/deployments/held")
    for url in reversed(made):
        env.api("DELETE", url)


def run(env):
    open(os.path.join(env.dir, "alive_42"), "w").close()
    r = env.call("register", REG)
    check("register", r and r.get("ok"), r)
    check("Node Ready and its Lease written", wait_for(lambda: env.api("GET", LEASE)[0] == 200, 10))
    w = LeaseWatcher(env)
    w.start()
    seq0 = max([x.get("seq", 0) for x in env.kube.request_log(0)] or [0])
    for fault, secs in WINDOWS:
        env.api("POST", "/_test/watches/close", {"abrupt": True})
        env.api("POST", "/_test/fault", dict(fault, users=AGENT_USERS))
        time.sleep(secs)
        env.api("POST", "/_test/fault", {"mode": "none"})
        time.sleep(CALM_S)
    time.sleep(4)
    w.stop_.set()
    w.join(5)
    log = env.kube.request_log(seq0)
    faulted = [x for x in log if x.get("status") in (429, 500, 503) and "/leases/" in x.get("path", "")]
    check("the agent's Lease renewals met the faults (429, 500, 503)",
          {x["status"] for x in faulted} == {429, 500, 503}, sorted({x["status"] for x in faulted}))
    gap = w.max_gap(time.time())
    puts = [(round(x.get("time", 0) % 1000, 2), x.get("method"), x.get("status")) for x in log
            if "/leases/" in x.get("path", "")]
    check("the Lease never went its duration (%d s) without a renewal: longest %.1f s" % (DURATION_S, gap),
          gap < DURATION_S, (w.renewals[-12:], puts))
    check("the Node never NotReady or Unknown", not w.not_ready, w.not_ready[:5])
    check("the admin's polls were not faulted", not w.errors, w.errors[:5])
    env.api("POST", "/api/v1/namespaces/default/pods", pod("after-faults"))
    check("a pod created after the faults runs (the cut watch came back)",
          wait_for(lambda: phase(env, "default", "after-faults") == "Running", 15))
    env.api("DELETE", "/api/v1/namespaces/default/pods/after-faults")
    refusal_storm(env)
    refused_before_binding(env)
    os.unlink(os.path.join(env.dir, "alive_42"))
    r = env.call("deregister", {"job_id": 42, "slurm_node": "n1", "grace_s": 2, "reason": "JobEnded"})
    check("deregister", r and r.get("ok"), r)


def main():
    a = suite_args()
    if not os.path.exists(a.server):
        print("test API server missing; skipping")
        return 77
    return run_suite(FaultEnv(a.agent, a.server), run, ("agent.log",))


if __name__ == "__main__":
    sys.exit(main())
