#!/usr/bin/python3
"""Component test: each virtual node's own identity (agent/controllers/node_identity.h,
agent/controllers/node_credentials.h), obtained as a kubelet's TLS bootstrap obtains it.

The real agent (fake runtime, node_identity = bootstrap) against the test API server, whose
CSR approver and signer follow kube-controller-manager (tests/kube/kubetest), with a short
signing duration so that the agent must renew:
- registering a job sends one kube-apiserver-client-kubelet CSR for system:node:<node> under the
  agent's own identity, auto-approved; the Node, its Lease, its pods' status go out as
  system:node:<node> (the request log's user), the agent's user writes none of them;
- the key and certificate are in state_dir/pki/<node>.pem (0600, key + certificate);
- with that certificate the node may not touch another Node (NodeRestriction's 403);
- the certificate is renewed ahead of its expiry through a new CSR; after the first one
  expired the node's requests still succeed (Lease renewals), the Node stays Ready;
- the job's end: the Node deleted (by the agent's identity), the file removed;
- a CSR nobody approves fails the registration after node_csr_timeout, a denied one at once,
  each with a message that says what to check;
- the Node authorizer's lag (the double's nodeAuthorizerLag, as a real server's informers): the
  node's first reads for a new pod (its TokenRequest, kube-root-ca.crt) are refused with 403 and
  retried until they pass, every pod runs, no Warning is posted for a refusal that passed; one
  that persists becomes a FailedMount Event and a ContainerCreating status that name the Node
  authorizer (not an RBAC binding), and the pod starts once the refusal ends.
Prints `N passed, N failed`.
"""
import json, os, ssl, stat, sys, time, urllib.error, urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "kube"))
from sktest.host import not_after  # noqa: E402
from sktest.env import NODE, REG, AgentEnv, phase, pod, suite_args  # noqa: E402
from sktest import memcheck  # noqa: E402
from sktest.suite import check, run_suite, wait_for  # noqa: E402
from kubetest.auth import AGENT_RULES  # noqa: E402

CSRS = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
NODE_USER = "system:node:" + NODE
AGENT_USER = "slurm-k8s-agent"
# The double's --cluster-signing-duration: every certificate lives 24 s (longer under
# memcheck, where the renewal's retry must still come before the first one expires).
SIGNING_S = 72 if memcheck.on() else 24


class IdEnv(AgentEnv):
    def kube_args(self):
        return super().kube_args() + ["--cluster-signing-duration", str(SIGNING_S)]

    def conf_settings(self):
        s = super().conf_settings()
        s["node_identity"] = "bootstrap"
        s["node_csr_timeout"] = "8s"
        s["node_certificate_seconds"] = 600
        return s

    def log(self):
        return open(os.path.join(self.dir, "agent.log")).read()

    def pem_file(self, node=NODE):
        return os.path.join(self.dir, "state", "pki", node + ".pem")


def csrs_of(env, node):
    _, lst = env.api("GET", CSRS)
    return [c for c in lst.get("items", [])
            if c["metadata"]["name"].startswith("slurm-k8s-%s-" % node)]


def condition(csr, kind):
    return next((c for c in csr.get("status", {}).get("conditions", []) if c["type"] == kind), None)


# The agent's rules without certificatesigningrequests/nodeclient: it may send CSRs, the
# approver does not approve them.
NO_APPROVAL = [r for r in AGENT_RULES if "certificatesigningrequests/nodeclient" not in r.get("resources", [])]


def deny_pending(env, node):
    """Denies the node's pending CSR as `kubectl certificate deny` does; False when none."""
    left = [x for x in csrs_of(env, node) if not x.get("status", {}).get("conditions")]
    if not left:
        return False
    x = left[0]
    x.setdefault("status", {})["conditions"] = [{
        "type": "Denied", "status": "True", "reason": "KubectlDeny",
        "message": "This CSR was denied by kubectl certificate deny."}]
    code, _ = env.api("PUT", CSRS + "/" + x["metadata"]["name"] + "/approval", x)
    return code == 200


def node_ready(env, node=NODE):
    code, n = env.api("GET", "/api/v1/nodes/" + node)
    conds = {c["type"]: c["status"] for c in n.get("status", {}).get("conditions", [])} if code == 200 else {}
    return conds.get("Ready") == "True"


def requests_by(env, since, user):
    return [r for r in env.kube.request_log(since) if r.get("user") == user]


def as_node(env, method, path, body, ctype="application/merge-patch+json"):
    """(status, body) of a request presenting the node's certificate from its pki file."""
    ctx = ssl.create_default_context(cafile=os.path.join(env.kdir, "ca.crt"))
    ctx.load_cert_chain(env.pem_file())  # the key and the certificate, one file
    req = urllib.request.Request(env.url + path, method=method, data=json.dumps(body).encode())
    req.add_header("Content-Type", ctype)
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def lag_pod(name, sa="lagsa"):
    """A pod as the ServiceAccount admission leaves it: a projected kube-api-access volume (a token
    bound to the pod and the namespace's kube-root-ca.crt)."""
    p = pod(name)
    p["spec"]["serviceAccountName"] = sa
    p["spec"]["volumes"] = [{"name": "kube-api-access-lag", "projected": {"sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}}]
    return p


def pod_events(env, name):
    _, lst = env.api("GET", "/api/v1/namespaces/default/events")
    return [e for e in lst.get("items", []) if e.get("involvedObject", {}).get("name") == name]


def authorizer_lag(env):
    """Pods started while the Node authorizer learns of bindings late (facts section 7)."""
    env.api("POST", "/api/v1/namespaces/default/configmaps",
            {"metadata": {"name": "kube-root-ca.crt"}, "data": {"ca.crt": "test CA"}})
    env.api("POST", "/api/v1/namespaces/default/serviceaccounts", {"metadata": {"name": "lagsa"}})
    code, _ = env.api("POST", "/_test/controllers", {"nodeAuthorizerLag": 1.0})
    check("the double's Node authorizer lags 1 s behind bindings", code == 200)
    seq = max([r.get("seq", 0) for r in env.kube.request_log(0)] or [0])
    names = ["lag-%d" % i for i in range(4)]
    for n in names:
        env.api("POST", "/api/v1/namespaces/default/pods", lag_pod(n))
    check("every pod runs although the node's first reads for it were refused",
          wait_for(lambda: all(phase(env, "default", n) == "Running" for n in names), 20),
          [phase(env, "default", n) for n in names])
    refused = [(x["method"], x["path"]) for x in requests_by(env, seq, NODE_USER) if x["status"] == 403]
    check("... refused first (403: TokenRequest or kube-root-ca.crt), then retried",
          len(refused) >= len(names) and all("/token" in p or "kube-root-ca.crt" in p for _, p in refused), refused)
    warned = [(n, e["reason"]) for n in names for e in pod_events(env, n) if e.get("type") == "Warning"]
    check("no Warning for a refusal that passed", not warned, warned)

    # One that persists: said in an Event and the pod's status, in words for a node identity.
    env.api("POST", "/_test/controllers", {"nodeAuthorizerLag": 3600})
    env.api("POST", "/api/v1/namespaces/default/pods", lag_pod("lag-stuck"))

    def waiting():
        _, p = env.api("GET", "/api/v1/namespaces/default/pods/lag-stuck")
        cs = (p.get("status", {}).get("containerStatuses") or [{}])[0]
        return cs.get("state", {}).get("waiting", {})
    check("a refusal that persists: the pod's status says ContainerCreating and why",
          wait_for(lambda: waiting().get("reason") == "ContainerCreating", 20), waiting())
    msg = waiting().get("message", "")
    check("... naming the Node authorizer and the node's identity, not an RBAC binding",
          "Node authorizer" in msg and NODE_USER in msg and "etc/rbac.yaml" not in msg, msg)
    ev = [e for e in pod_events(env, "lag-stuck") if e.get("reason") == "FailedMount"]
    check("... and a FailedMount Event", ev and "Node authorizer" in ev[0].get("message", ""),
          [e.get("reason") for e in pod_events(env, "lag-stuck")])
    env.api("POST", "/_test/controllers", {"nodeAuthorizerLag": 0})
    check("the refusal over, the pod starts by itself",
          wait_for(lambda: phase(env, "default", "lag-stuck") == "Running", 20), phase(env, "default", "lag-stuck"))
    for n in names + ["lag-stuck"]:
        env.api("DELETE", "/api/v1/namespaces/default/pods/" + n)


def run(env):
    open(os.path.join(env.dir, "alive_42"), "w").close()
    seq0 = max([r.get("seq", 0) for r in env.kube.request_log(0)] or [0])
    r = env.call("register", REG)
    check("register with a node identity", r and r.get("ok"), r)
    check("Node Ready", wait_for(lambda: node_ready(env), 10))

    csrs = csrs_of(env, NODE)
    check("one CSR for the node", len(csrs) == 1, [c["metadata"]["name"] for c in csrs])
    c = csrs[0] if csrs else {}
    spec = c.get("spec", {})
    check("the CSR: kubelet client signer, sent by the agent's identity",
          spec.get("signerName") == "kubernetes.io/kube-apiserver-client-kubelet"
          and spec.get("username") == AGENT_USER
          and sorted(spec.get("usages", [])) == ["client auth", "digital signature"], spec)
    appr = condition(c, "Approved") or {}
    check("auto-approved", appr.get("reason") == "AutoApproved", c.get("status"))
    check("log: the identity", "identity %s: certificate %s" % (NODE_USER, c.get("metadata", {}).get("name"))
          in env.log())

    nodes = ((env.call("list", {}) or {}).get("body") or {}).get("nodes", [])
    ident = nodes[0].get("identity", "") if nodes else ""
    check("list (slurm-k8s status): the node's identity and its certificate's end",
          ident.startswith(NODE_USER + ", certificate until 20"), nodes)

    pem = env.pem_file()
    st = os.stat(pem) if os.path.exists(pem) else None
    check("key and certificate kept in state_dir/pki, mode 0600",
          st is not None and stat.S_IMODE(st.st_mode) == 0o600, pem)
    text = open(pem).read() if st else ""
    check("... holding the key and the certificate",
          "BEGIN PRIVATE KEY" in text and "BEGIN CERTIFICATE" in text)

    env.api("POST", "/api/v1/namespaces/default/pods", pod("id-pod"))
    check("a pod runs", wait_for(lambda: phase(env, "default", "id-pod") == "Running", 10))
    log = env.kube.request_log(seq0)
    node_writes = [(x["method"], x["path"], x["status"]) for x in log if x.get("user") == NODE_USER]
    check("the Node was created as system:node:<node>",
          ("POST", "/api/v1/nodes", 201) in node_writes, node_writes[:20])
    check("its Lease written as the node",
          any(m in ("POST", "PUT") and "/leases" in p and s in (200, 201) for m, p, s in node_writes))
    check("the pod's status written as the node",
          any(m == "PATCH" and p.endswith("/pods/id-pod/status") and s == 200 for m, p, s in node_writes))
    agent_writes = [(x["method"], x["path"]) for x in log if x.get("user") == AGENT_USER
                    and x["method"] in ("POST", "PUT", "PATCH")
                    and ("/leases" in x["path"] or "/pods" in x["path"] or x["path"] == "/api/v1/nodes")]
    check("the agent's own identity wrote no Node, Lease or pod", not agent_writes, agent_writes)
    authorizer_lag(env)

    # The Node authorizer and NodeRestriction confine the node's certificate.
    env.api("POST", "/api/v1/nodes", {"metadata": {"name": "other-node"}})
    code, body = as_node(env, "PATCH", "/api/v1/nodes/other-node", {"metadata": {"labels": {"x": "y"}}})
    check("the node's certificate may not modify another Node",
          code == 403 and body.get("message") ==
          'nodes "other-node" is forbidden: node "%s" is not allowed to modify node "other-node"' % NODE,
          (code, body.get("message")))

    # Renewal ahead of the expiry (the double signs for SIGNING_S s only).
    first_end = not_after(pem)
    check("the certificate lives as the signer said",
          0 < first_end - time.time() <= SIGNING_S + 5, first_end - time.time())
    # The renewal's first CSR is left pending (the agent may not have it approved any more) and
    # denied by the admin: the agent keeps its certificate and asks again; approval restored,
    # the next one is signed before the first certificate expires.
    env.api("POST", "/_test/rbac", {"subject": "group:slurm-k8s:agent", "role": NO_APPROVAL})
    check("the renewal's CSR, left pending, denied by the admin",
          wait_for(lambda: deny_pending(env, NODE), SIGNING_S + 5))
    check("log: the renewal failed with the denial",
          wait_for(lambda: "certificate renewal failed: its certificate signing request" in env.log(), 5))
    env.api("POST", "/_test/rbac", {"subject": "group:slurm-k8s:agent", "role": "agent"})
    check("renewal retried: a new CSR approved and signed",
          wait_for(lambda: len([x for x in csrs_of(env, NODE) if x.get("status", {}).get("certificate")]) >= 2,
                   10), len(csrs_of(env, NODE)))
    check("log: renewing", "renewing its certificate" in env.log())
    check("the file holds the new certificate before the first one expires",
          wait_for(lambda: not_after(pem) > first_end, 10) and time.time() < first_end, first_end - time.time())
    wait_for(lambda: time.time() > first_end + 2, SIGNING_S + 10)
    seq1 = max([r.get("seq", 0) for r in env.kube.request_log(0)] or [0])
    check("after the first certificate expired the node still renews its Lease",
          wait_for(lambda: any("/leases/" in x["path"] and x["status"] == 200
                               for x in requests_by(env, seq1, NODE_USER)), 10))
    # An agent restart re-adopts the node with the kept key and certificate (renewed right
    # after: with the signer's 5 min backdating a 24 s certificate is always due).
    env.kill_agent()
    env.start_agent()
    check("restarted agent: the kept certificate used at once",
          wait_for(lambda: "identity %s from %s" % (NODE_USER, pem) in env.log(), 10))
    refused = [x for x in env.kube.request_log(seq0) if x.get("status") == 401]
    check("no request was refused (401)", not refused, refused[:3])
    check("the Node stays Ready", node_ready(env))

    # The job's end: the Node deleted by the agent, the key and certificate removed.
    seq2 = max([r.get("seq", 0) for r in env.kube.request_log(0)] or [0])
    os.unlink(os.path.join(env.dir, "alive_42"))
    r = env.call("deregister", {"job_id": 42, "slurm_node": "n1", "grace_s": 2, "reason": "JobEnded"})
    check("deregister", r and r.get("ok"), r)
    check("Node gone", wait_for(lambda: env.api("GET", "/api/v1/nodes/" + NODE)[0] == 404, 15))
    check("... deleted by the agent's identity",
          any(x["method"] == "DELETE" and x["path"] == "/api/v1/nodes/" + NODE and x["status"] == 200
              for x in requests_by(env, seq2, AGENT_USER)))
    check("the key and certificate removed", wait_for(lambda: not os.path.exists(pem), 5))

    # A CSR nobody approves: the agent may send it but not have it approved (no nodeclient).
    env.api("POST", "/_test/rbac", {"subject": "group:slurm-k8s:agent", "role": NO_APPROVAL})
    open(os.path.join(env.dir, "alive_43"), "w").close()
    # The prolog's register is answered at once; the registration fails in the background
    # (what `status` and --k8s-wait report), logged with the reason.
    fail43 = "[node slurm-n1-43] registration failed: no identity for the node: "
    t0 = time.monotonic()
    r = env.call("register", dict(REG, job_id=43))
    check("register answered", r and r.get("ok"), r)
    check("an unapproved CSR fails the registration after node_csr_timeout",
          wait_for(lambda: fail43 in env.log(), 20) and time.monotonic() - t0 >= 7, time.monotonic() - t0)
    line = next((x for x in env.log().splitlines() if fail43 in x), "")
    check("... saying it was not signed and what to check",
          "was not signed within 8 s (node_csr_timeout)" in line and "nodeclient" in line
          and "kubectl get csr" in line, line)
    pending = csrs_of(env, "slurm-n1-43")
    check("... its CSR stays pending", pending and not pending[0].get("status", {}).get("conditions"))
    check("... the node is forgotten", wait_for(
        lambda: not (env.call("status", {"job_id": 43, "slurm_node": "n1"}) or {}).get("ok"), 5))

    # A denied one: the admin denies it while the registration waits.
    open(os.path.join(env.dir, "alive_44"), "w").close()
    r = env.call("register", dict(REG, job_id=44))
    check("deny: the admin denies the pending CSR", wait_for(lambda: deny_pending(env, "slurm-n1-44"), 5))
    fail44 = "[node slurm-n1-44] registration failed: no identity for the node: "
    check("a denied CSR fails the registration at once, with the denial",
          wait_for(lambda: fail44 in env.log(), 5))
    line = next((x for x in env.log().splitlines() if fail44 in x), "")
    check("... naming it", "was denied (KubectlDeny: This CSR was denied by kubectl certificate deny.)" in line,
          line)
    env.api("POST", "/_test/rbac", {"subject": "group:slurm-k8s:agent", "role": "agent"})

    # A label NodeRestriction would refuse to the node: refused at register, saying why.
    r = env.call("register", dict(REG, job_id=45, labels={"node-role.kubernetes.io/gpu": ""}))
    check("a job label under kubernetes.io refused at register",
          r and not r.get("ok") and "label 'node-role.kubernetes.io/gpu': a node may not set labels "
          "under kubernetes.io or k8s.io" in r.get("message", ""), r)


def main():
    a = suite_args()
    if not os.path.exists(a.server):
        print("test API server missing; skipping")
        return 77
    return run_suite(IdEnv(a.agent, a.server), run, ("agent.log", "kube.log"))


if __name__ == "__main__":
    sys.exit(main())
