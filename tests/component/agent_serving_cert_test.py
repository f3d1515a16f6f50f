#!/usr/bin/python3
"""Component test: the kubelet endpoint's serving certificate from kubernetes.io/kubelet-serving
CSRs (agent.conf kubelet_serving = csr; agent/controllers/csr_certificate.h), so that no CA key
is needed on a compute node.

The real agent and shim (pods are processes) against the test API server, whose csrsigning
signs kubelet-serving CSRs with its CA (the CA it checks kubelet endpoints with, as
--kubelet-certificate-authority) and whose csrapproving, as kube-controller-manager's, never
approves them; the approval is `kubectl certificate approve`, as the admin guide says:
- at start the agent sends one CSR under its own identity: signer kubelet-serving, usages
  digital signature + server auth, CN system:node:<slurm node>, O system:nodes, the node
  address as IP SAN; until it is approved the endpoint closes its connections: `kubectl logs`
  fails, the agent's log and `list` (slurm-k8s status) name the CSR and the command to approve;
- approved with the real kubectl: the certificate is kept in state_dir/pki/kubelet-serving.pem
  (0600, key + certificate), the endpoint serves exactly that certificate and `kubectl logs`
  works through the API server, which verifies it;
- renewal at 70-90 % of the validity through a new CSR; a denied one is followed by another;
  once approved the endpoint serves the new certificate to new connections, and logs still
  work after the first certificate expired; the per-node endpoints (kubelet_node_ports) and the
  shared one serve the same certificate;
- an agent restart uses the kept certificate without a new CSR;
- a kept certificate not valid for the node's address (node_address changed) is not used: a
  new CSR for the new address.
Prints `N passed, N failed`.
"""
import base64, os, re, socket, ssl, stat, subprocess, sys, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from sktest.env import NODE, ShimEnv, phase, shim_suite_main, shim_reg  # noqa: E402
from sktest.host import free_port  # noqa: E402
from sktest import memcheck  # noqa: E402
from sktest.suite import check, wait_for  # noqa: E402

CSRS = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
SERVING = "kubernetes.io/kubelet-serving"
# The double's --cluster-signing-duration: the serving certificate lives this long, so that
# the agent renews it within the test (longer under memcheck).
SIGNING_S = 90 if memcheck.on() else 30


class ServingEnv(ShimEnv):
    def kube_args(self):
        return super().kube_args() + ["--cluster-signing-duration", str(SIGNING_S)]

    def conf_settings(self):
        s = super().conf_settings()
        del s["kubelet_cert"], s["kubelet_key"]
        s["kubelet_serving"] = "csr"
        # A kubelet endpoint per node (the Node names its port) beside the shared one.
        low = free_port()
        s["kubelet_node_ports"] = f"{low}-{low + 20}"
        return s

    def shared_port(self):
        """The shared endpoint's port, from the last start's log line."""
        ports = re.findall(r"kubelet endpoint on https://[0-9.]+:(\d+)", self.log())
        return int(ports[-1]) if ports else None

    def start_agent(self):
        # The agent's rights are exactly etc/rbac.yaml's (its ClusterRoles and Roles as rule lists,
        # its binding of the built-in system:node-bootstrapper by the double's name for it): a
        # right the CSRs need and the manifest lacks fails here.
        if not getattr(self, "rbac_set", False):
            import yaml
            top = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
            roles = []
            for d in yaml.safe_load_all(open(os.path.join(top, "etc", "rbac.yaml"))):
                if d["kind"] in ("ClusterRole", "Role"):
                    ns = d["metadata"].get("namespace")
                    roles += [dict(r, namespaces=[ns]) if d["kind"] == "Role" else r for r in d["rules"]]
                elif d["kind"] == "ClusterRoleBinding" and d["roleRef"]["name"] == "system:node-bootstrapper":
                    roles.append("node-bootstrapper")
            code, _ = self.api("POST", "/_test/rbac", {"subject": "group:slurm-k8s:agent", "role": roles})
            check("the agent holds exactly etc/rbac.yaml's rights", code == 200 and "node-bootstrapper" in roles,
                  roles)
            self.rbac_set = True
        super().start_agent()

    def log(self):
        return open(os.path.join(self.dir, "agent.log")).read()

    def pem_file(self):
        return os.path.join(self.dir, "state", "pki", "kubelet-serving.pem")

    def restart_agent(self, **changes):
        self.kill_agent()
        self.settings.update(changes)
        from sktest.agent import write_agent_conf
        write_agent_conf(self.conf, self.settings)
        self.start_agent()


def serving_csrs(env):
    _, lst = env.api("GET", CSRS)
    if not isinstance(lst, dict):
        return []
    items = [c for c in lst.get("items", []) if c["spec"].get("signerName") == SERVING]
    return sorted(items, key=lambda c: c["metadata"]["creationTimestamp"] + c["metadata"]["name"])


def pending(env):
    return [c for c in serving_csrs(env) if not c.get("status", {}).get("conditions")]


def request_text(csr):
    pem = base64.b64decode(csr["spec"]["request"])
    return subprocess.run(["openssl", "req", "-noout", "-text"], input=pem, capture_output=True).stdout.decode()


def kubelet_port(env):
    code, n = env.api("GET", "/api/v1/nodes/" + NODE)
    if code != 200 or not isinstance(n, dict):
        return None
    return n.get("status", {}).get("daemonEndpoints", {}).get("kubeletEndpoint", {}).get("Port")


def served_cert(port, address="127.0.0.1"):
    """The DER certificate the endpoint presents to a new connection, or why there is none."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection((address, port), timeout=5) as raw:
            with ctx.wrap_socket(raw) as s:
                return s.getpeercert(binary_form=True)
    except (OSError, ssl.SSLError) as e:
        return "no certificate: %s" % e


def issued_der(csr):
    pem = base64.b64decode(csr["status"]["certificate"]).decode()
    return ssl.PEM_cert_to_DER_cert(pem)


def logs_ok(env):
    rc, out, err = env.kubectl("logs", "web")
    return rc == 0 and "hello from web" in out


def approve(env, csr):
    rc, out, err = env.kubectl("certificate", "approve", csr["metadata"]["name"])
    return rc == 0, out + err


def run(env):
    d = env.dir
    open(os.path.join(d, "alive_42"), "w").close()
    # 1. at start: one CSR, waiting for an admin
    first = wait_for(lambda: pending(env), 10)
    check("at start one kubelet-serving CSR, pending", first and len(serving_csrs(env)) == 1,
          [c["metadata"]["name"] for c in serving_csrs(env)])
    if not first:
        return
    csr = first[0]
    spec = csr["spec"]
    check("  sent under the agent's own identity", spec.get("username") == "slurm-k8s-agent", spec.get("username"))
    check("  usages digital signature + server auth",
          sorted(spec.get("usages", [])) == ["digital signature", "server auth"], spec.get("usages"))
    text = request_text(csr)
    check("  subject O system:nodes, CN system:node:n1",
          "O = system:nodes, CN = system:node:n1" in text, text[:400])
    check("  the node address as IP SAN, no DNS name (node_hostname -)",
          "IP Address:127.0.0.1" in text and "DNS:" not in text, text)
    check("  the double's approver leaves it pending (as kube-controller-manager's)",
          not wait_for(lambda: not pending(env), 2))
    reg = shim_reg()
    r = env.call("register", reg)
    check("register", r and r.get("ok"), r)
    env.start_shim()
    port = wait_for(lambda: kubelet_port(env), 10)
    env.api("POST", "/api/v1/namespaces/default/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
        "spec": {"nodeName": NODE, "terminationGracePeriodSeconds": 5,
                 "tolerations": [{"key": "slurm-k8s/job", "operator": "Exists"}],
                 "containers": [{"name": "main", "image": "python:3", "command": [
                     "python3", "-c", "import time; print('hello from web', flush=True); time.sleep(600)"]}]}})
    check("the pod runs", wait_for(lambda: phase(env, "default", "web") == "Running", 30),
          phase(env, "default", "web"))
    rc, out, err = env.kubectl("logs", "web")
    check("before the approval kubectl logs fails (the endpoint has no certificate)",
          rc != 0 and "hello" not in out, (rc, out[:200], err[:300]))
    name = csr["metadata"]["name"]
    check("  served: nothing (the connection is closed)",
          isinstance(served_cert(port), str), served_cert(port))
    check("  the log names the CSR and the command that approves it",
          "kubectl certificate approve %s" % name in env.log()
          and "closed a connection from 127.0.0.1: no serving certificate yet" in env.log(),
          env.log()[-1500:])
    rc, out, err = env.kubectl("get", "csr", "--field-selector", "spec.signerName=" + SERVING)
    check("  the admin guide's kubectl get csr --field-selector lists it as Pending",
          rc == 0 and name in out and "Pending" in out, (rc, out, err))
    lst = env.call("list", {})
    kubelet = (lst or {}).get("body", {}).get("api", {}).get("kubelet_serving", "")
    check("  list (slurm-k8s status): no certificate yet, the CSR unanswered",
          "no certificate yet" in kubelet and name in kubelet, kubelet)

    # 2. approved with the real kubectl
    ok, out = approve(env, csr)
    first_approved = time.time()
    check("kubectl certificate approve", ok, out)
    check("  the agent takes the certificate",
          wait_for(lambda: "serving certificate for 127.0.0.1: certificate %s valid until" % name in env.log(), 10),
          env.log()[-1500:])
    pem = env.pem_file()
    mode = stat.S_IMODE(os.stat(pem).st_mode) if os.path.exists(pem) else None
    body = open(pem).read() if mode is not None else ""
    check("  kept in state_dir/pki/kubelet-serving.pem, 0600, key and certificate",
          mode == 0o600 and "PRIVATE KEY" in body and "CERTIFICATE" in body, mode)
    signed = [c for c in serving_csrs(env) if c["metadata"]["name"] == name][0]
    check("  the node's endpoint serves exactly the issued certificate",
          wait_for(lambda: served_cert(port) == issued_der(signed), 5))
    check("  the shared endpoint serves it too", env.shared_port() not in (None, port)
          and served_cert(env.shared_port()) == issued_der(signed), env.shared_port())
    check("  kubectl logs through the API server, which verifies it", wait_for(lambda: logs_ok(env), 10),
          env.kubectl("logs", "web"))
    lst = env.call("list", {})
    kubelet = (lst or {}).get("body", {}).get("api", {}).get("kubelet_serving", "")
    check("  list: serving certificate until ...", "serving certificate for 127.0.0.1, certificate until" in kubelet,
          kubelet)

    # 3. an agent restart uses the kept certificate, no new CSR
    env.restart_agent()
    check("restart: the kept certificate is used",
          wait_for(lambda: "serving certificate for 127.0.0.1 from %s" % pem in env.log(), 10), env.log()[-1000:])
    check("  no new CSR", not wait_for(lambda: len(serving_csrs(env)) > 1, 2), len(serving_csrs(env)))
    check("  logs work at once", wait_for(lambda: logs_ok(env), 10))

    # 4. renewal: the first renewal CSR denied, the next one approved
    renewal = wait_for(lambda: pending(env), SIGNING_S)
    check("renewal: a new CSR ahead of the expiry", renewal, len(serving_csrs(env)))
    if not renewal:
        return
    rc, out, err = env.kubectl("certificate", "deny", renewal[0]["metadata"]["name"])
    check("  kubectl certificate deny", rc == 0, out + err)
    check("  the agent says the renewal was denied",
          wait_for(lambda: "certificate renewal failed: its certificate signing request %s was denied"
                   % renewal[0]["metadata"]["name"] in env.log(), 10), env.log()[-1000:])
    again = wait_for(lambda: [c for c in pending(env) if c["metadata"]["name"] != renewal[0]["metadata"]["name"]], 10)
    check("  and asks again", again)
    if not again:
        return
    ok, out = approve(env, again[0])
    check("  the next one approved", ok, out)
    second = wait_for(lambda: [c for c in serving_csrs(env) if c["metadata"]["name"] == again[0]["metadata"]["name"]
                               and c.get("status", {}).get("certificate")], 10)
    check("  new connections get the new certificate",
          second and wait_for(lambda: served_cert(kubelet_port(env)) == issued_der(second[0]), 10),
          (kubelet_port(env), env.shared_port()))
    check("  ... on the shared endpoint too",
          second and wait_for(lambda: served_cert(env.shared_port()) == issued_der(second[0]), 10))
    with open(pem) as f:
        check("  the file holds the new certificate", base64.b64decode(second[0]["status"]["certificate"]).decode()
              in f.read() if second else False)
    # The first certificate ends SIGNING_S after its approval: logs keep working past it.
    time.sleep(max(0.0, first_approved + SIGNING_S + 1 - time.time()))
    check("  logs work after the first certificate's end", wait_for(lambda: logs_ok(env), 10))

    # 5. a kept certificate for another address is not used
    before = len(serving_csrs(env))
    env.restart_agent(node_address="127.0.0.2")
    check("node_address changed: the kept certificate is not used",
          wait_for(lambda: "the kept certificate in %s is not used (the certificate is not valid for 127.0.0.2)"
                   % pem in env.log(), 10), env.log()[-1500:])
    new = wait_for(lambda: [c for c in pending(env)], 10)
    check("  a new CSR for 127.0.0.2", new and len(serving_csrs(env)) == before + 1
          and "IP Address:127.0.0.2" in request_text(new[0]), len(serving_csrs(env)))


def main():
    return shim_suite_main(ServingEnv, run)


if __name__ == "__main__":
    sys.exit(main())
