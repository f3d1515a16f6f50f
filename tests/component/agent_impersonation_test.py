#!/usr/bin/python3
"""Component test: node_identity = impersonate (docs/admin-guide.md, "Node identities by
impersonation").

The real agent (fake runtime, node_name_template = slurm-{node}-{slot}, max_jobs 3) against the
test API server, whose impersonation filter, Node authorizer and NodeRestriction follow
kube-apiserver (tests/kube/kubetest/impersonation.py), the agent's identity bound to exactly the
rules of etc/rbac-node-identity.yaml less its CSR bindings plus what
etc/slurm-k8s-impersonation-rbac prints for Slurm node n1 with 2 slots:
- a job's Node is created, Ready and leased as system:node:<slot name> (the double's request log:
  the user, the agent's identity as the impersonator), without a CSR;
- pods whose first reads the Node authorizer refuses for a moment (its lag behind the binding)
  run: the reads went out as the node and were retried;
- what a node may not do stays refused: another node's status (NodeRestriction);
- a job on a slot the RBAC does not name (the third) does not get a Node: the agent's log and the
  job's state say that the agent's identity may not act as it, naming the generator;
- the agent lists each node's identity as impersonated (its connections, shared between nodes
  over HTTP/2, are bench_scale.py's to count: over the double's HTTP/1.1 every watch holds one);
- the agent refuses to start with impersonate and names per job ({job}), saying why.
Prints `N passed, N failed`.
"""
import os, subprocess, sys

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from sktest.env import REG, AgentEnv, phase, pod, suite_args  # noqa: E402
from sktest.suite import check, run_suite, wait_for  # noqa: E402

TOP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
CSRS = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
SLOT0, SLOT1, SLOT2 = "slurm-n1-0", "slurm-n1-1", "slurm-n1-2"
CSR_BINDINGS = ("system:node-bootstrapper", "system:certificates.k8s.io:certificatesigningrequests:nodeclient")


def manifest_rules(docs):
    """The double's rule lists of (Cluster)Roles, a Role's namespace kept."""
    rules = []
    for d in docs:
        if d and d["kind"] in ("ClusterRole", "Role"):
            for r in d["rules"]:
                r = dict(r)
                if d["kind"] == "Role":
                    r["namespaces"] = [d["metadata"]["namespace"]]
                rules.append(r)
    return rules


def agent_rules():
    """etc/rbac-node-identity.yaml's rules (its CSR bindings are left out, as the admin guide says
    for impersonation) and the generator's for n1, 2 slots."""
    docs = list(yaml.safe_load_all(open(os.path.join(TOP, "etc", "rbac-node-identity.yaml"))))
    assert any(d.get("roleRef", {}).get("name") in CSR_BINDINGS for d in docs if d)
    gen = subprocess.run([os.path.join(TOP, "etc", "slurm-k8s-impersonation-rbac"), "--slots", "2", "n1"],
                         capture_output=True, text=True, check=True).stdout
    return manifest_rules(docs) + manifest_rules(yaml.safe_load_all(gen))


class ImpEnv(AgentEnv):
    def kube_args(self):
        return super().kube_args() + ["--node-authorizer-lag", "0.5"]

    def conf_settings(self):
        s = super().conf_settings()
        s["node_identity"] = "impersonate"
        s["node_name_template"] = "slurm-{node}-{slot}"
        s["max_jobs"] = 3
        return s

    def log(self):
        return open(os.path.join(self.dir, "agent.log")).read()


def seq_now(env):
    return max([r.get("seq", 0) for r in env.kube.request_log(0)] or [0])


def register(env, job, **changes):
    open(os.path.join(env.dir, "alive_%d" % job), "w").close()
    return env.call("register", dict(REG, job_id=job, **changes))


def node_ready(env, name):
    code, n = env.api("GET", "/api/v1/nodes/" + name)
    conds = {c["type"]: c["status"] for c in n.get("status", {}).get("conditions", [])} if code == 200 else {}
    return conds.get("Ready") == "True"


def token_pod(name, node):
    """A pod as the ServiceAccount admission leaves it (a bound token and kube-root-ca.crt), bound."""
    p = pod(name)
    p["spec"]["nodeName"] = node
    p["spec"]["serviceAccountName"] = "impsa"
    p["spec"]["volumes"] = [{"name": "kube-api-access-imp", "projected": {"sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}}]
    return p


def run(env):
    code, _ = env.api("POST", "/_test/rbac", {"subject": "group:slurm-k8s:agent", "role": agent_rules()})
    check("the agent bound to etc/rbac-node-identity.yaml (no CSR bindings) + the generator's rules", code == 200)
    env.api("POST", "/api/v1/namespaces/default/configmaps",
            {"metadata": {"name": "kube-root-ca.crt"}, "data": {"ca.crt": "test CA"}})
    env.api("POST", "/api/v1/namespaces/default/serviceaccounts", {"metadata": {"name": "impsa"}})
    seq = seq_now(env)
    r = register(env, 42)
    check("a job registers on slot 0", r and r.get("ok") and r["body"].get("node_name") == SLOT0, r)
    check("... its Node Ready", wait_for(lambda: node_ready(env, SLOT0), 15))
    log = env.kube.request_log(seq)
    mine = [x for x in log if x.get("user") == "system:node:" + SLOT0]
    check("its Node and Lease written as system:node:%s, the agent's identity impersonating it" % SLOT0,
          {("POST", "/api/v1/nodes"), ("POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases")}
          <= {(x["method"], x["path"]) for x in mine if x["status"] == 201}
          and all(x.get("impersonator") == "slurm-k8s-agent" for x in mine), [(x["method"], x["path"]) for x in mine][:8])
    _, csrs = env.api("GET", CSRS)
    check("no CSR sent", not csrs.get("items"), [c["metadata"]["name"] for c in csrs.get("items", [])])

    names = ["imp-%d" % i for i in range(3)]
    for n in names:
        env.api("POST", "/api/v1/namespaces/default/pods", token_pod(n, SLOT0))
    check("pods run although the node's first reads for them were refused (the Node authorizer's lag)",
          wait_for(lambda: all(phase(env, "default", n) == "Running" for n in names), 20),
          [phase(env, "default", n) for n in names])
    reads = [(x["status"], x["path"]) for x in env.kube.request_log(seq) if x.get("user") == "system:node:" + SLOT0
             and ("/token" in x["path"] or "kube-root-ca.crt" in x["path"])]
    check("... read as the node: refused first (403), then allowed",
          any(s == 403 for s, _ in reads) and any(s in (200, 201) for s, _ in reads), reads[:6])

    r = register(env, 43)
    check("a second job on slot 1, Ready", r and r.get("ok") and r["body"].get("node_name") == SLOT1
          and wait_for(lambda: node_ready(env, SLOT1), 15), r)
    status = env.call("list", {})
    idents = {n["node_name"]: n.get("identity", "") for n in (status or {}).get("body", {}).get("nodes", [])}
    check("the agent lists each node's identity as impersonated",
          idents.get(SLOT0, "").startswith("system:node:%s, impersonated" % SLOT0), idents)

    r = register(env, 44)
    check("a third job takes slot 2, which the RBAC does not name", r and r.get("ok") and
          r["body"].get("node_name") == SLOT2, r)
    check("... it gets no Node; the log says the agent's identity may not act as it, naming the generator",
          wait_for(lambda: "cannot impersonate" in env.log() and "slurm-k8s-impersonation-rbac" in env.log(), 15)
          and env.api("GET", "/api/v1/nodes/" + SLOT2)[0] == 404,
          [ln for ln in env.log().splitlines() if SLOT2 in ln][-3:])

    r = register(env, 45, labels={"node-role.kubernetes.io/worker": ""})
    check("a label NodeRestriction refuses a node is refused at registration, saying so",
          r and not r.get("ok") and "NodeRestriction" in str(r), r)

    for job, name in ((42, SLOT0), (43, SLOT1), (44, SLOT2)):
        os.unlink(os.path.join(env.dir, "alive_%d" % job))
        env.call("deregister", {"job_id": job, "slurm_node": "n1", "grace_s": 1, "reason": "JobEnded"})
    check("the jobs' ends remove their Nodes",
          wait_for(lambda: all(env.api("GET", "/api/v1/nodes/" + n)[0] == 404 for n in (SLOT0, SLOT1)), 15))

    # Names per job cannot be listed in RBAC: refused at start, saying why.
    conf = os.path.join(env.dir, "perjob.conf")
    with open(env.conf) as f:
        text = f.read().replace("slurm-{node}-{slot}", "slurm-{node}-{job}")
    with open(conf, "w") as f:
        f.write(text)
    p = subprocess.run([env.agent_bin, "--config", conf], capture_output=True, text=True, timeout=30)
    check("impersonate with names per job: the agent refuses the config, saying it needs {slot}",
          p.returncode != 0 and "needs {slot}" in p.stderr, (p.returncode, p.stderr[-300:]))


if __name__ == "__main__":
    a = suite_args()
    sys.exit(run_suite(ImpEnv(a.agent, a.server), run, ("agent.log",)))
