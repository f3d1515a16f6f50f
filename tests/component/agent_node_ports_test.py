#!/usr/bin/python3
"""Component test: kubelet_node_ports, a kubelet endpoint per virtual node.

The real agent and two real shims (jobs 42 and 43 on the same host): each Node names a port of
its own from the range; `kubectl get --raw nodes/NAME/proxy/metrics/resource` (the real kubectl,
through the test API server's nodes/proxy with the kubelet client certificate) shows each node's
own pods only, a CPU-burning pod's counter grows on its node alone, a pod of the other node is
404 on a node's port (logs included), the shared port serves no stats (404 naming the key), and
a node's port closes with its job. Prints `N passed, N failed`.
"""
import json, os, re, socket, ssl, subprocess, sys, urllib.error, urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from sktest.env import NODE, ShimEnv, shim_suite_main, shim_reg  # noqa: E402
from sktest.host import free_port  # noqa: E402
from sktest.suite import check, wait_for  # noqa: E402

NODE43 = "slurm-n1-43"


class PortsEnv(ShimEnv):
    def __init__(self, *a):
        super().__init__(*a)
        self.low = free_port()
        self.high = self.low + 20

    def conf_settings(self):
        s = super().conf_settings()
        s["kubelet_node_ports"] = f"{self.low}-{self.high}"
        return s


def pod(name, node, command):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"nodeName": node, "terminationGracePeriodSeconds": 2,
                     "containers": [{"name": "main", "image": "python:3", "command": command}],
                     "tolerations": [{"key": "slurm-k8s/job", "operator": "Exists"}]}}


def node_port(env, name):
    code, n = env.api("GET", "/api/v1/nodes/" + name)
    return n.get("status", {}).get("daemonEndpoints", {}).get("kubeletEndpoint", {}).get("Port") \
        if code == 200 else None


def running(env, name):
    code, p = env.api("GET", "/api/v1/namespaces/default/pods/" + name)
    return code == 200 and p.get("status", {}).get("phase") == "Running"


def scrape(env, node, path):
    rc, out, err = env.kubectl("get", "--raw", f"/api/v1/nodes/{node}/proxy/{path}")
    return out if rc == 0 else "ERR " + err


def cpu_of(text, pod_name):
    for line in text.split("\n"):
        if line.startswith("container_cpu_usage_seconds_total{") and f'pod="{pod_name}"' in line:
            return float(line.split(" ")[1])
    return None


def direct(env, port, path, cert="kubelet-client", token=None):
    """GET on a kubelet port with a client certificate of the kubelet client CA (by default
    the API server's, in system:masters) or none (cert=None), and a bearer token if given."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if cert:
        ctx.load_cert_chain(f"{env.kdir}/{cert}.crt", f"{env.kdir}/{cert}.key")
    req = urllib.request.Request(f"https://127.0.0.1:{port}{path}")
    if token:
        req.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


WS_EXEC = ("Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
           "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
           "Sec-WebSocket-Protocol: v5.channel.k8s.io\r\n")
SPDY_PF = "Upgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: portforward.k8s.io\r\n"


def exec_upgrade(env, port, path, offer=WS_EXEC):
    """An upgrade request (by default kubectl 1.32's WebSocket exec offer)
    straight to a kubelet port; returns the status line's code and the body
    when refused."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.load_cert_chain(f"{env.kdir}/kubelet-client.crt", f"{env.kdir}/kubelet-client.key")
    with ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10)) as s:
        s.sendall((f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\n" + offer +
                   "\r\n").encode())
        got = b""
        while b"\r\n\r\n" not in got:
            more = s.recv(4096)
            if not more:
                break
            got += more
        head, _, body = got.partition(b"\r\n\r\n")
        code = int(head.split()[1]) if head.startswith(b"HTTP/1.1 ") else 0
        if code != 101:
            s.settimeout(2)
            try:
                while True:
                    more = s.recv(4096)
                    if not more:
                        break
                    body += more
            except OSError:
                pass
        return code, body.decode(errors="replace")


def client_cert(env, name, subj):
    """A client certificate of the kubelet client CA (the test API server's CA) for subj."""
    k = env.kdir
    subprocess.run(["openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-keyout", f"{k}/{name}.key", "-out", f"{k}/{name}.csr", "-subj", subj],
                   check=True, capture_output=True)
    with open(f"{k}/{name}.ext", "w") as f:
        f.write("extendedKeyUsage=clientAuth\n")
    subprocess.run(["openssl", "x509", "-req", "-in", f"{k}/{name}.csr", "-CA", f"{k}/ca.crt",
                    "-CAkey", f"{k}/ca.key", "-CAcreateserial", "-out", f"{k}/{name}.crt",
                    "-days", "1", "-extfile", f"{k}/{name}.ext"], check=True, capture_output=True)


def refused(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
        return False
    except OSError:
        return True


def run(env):
    d = env.dir
    for job in (42, 43):
        open(os.path.join(d, f"alive_{job}"), "w").close()
    reg = shim_reg(gpus=[], cpus=2, memory_mib=1024)
    check("job 42 registers", (env.call("register", reg) or {}).get("ok"))
    check("job 43 registers", (env.call("register", dict(reg, job_id=43)) or {}).get("ok"))
    env.start_shim()
    shim43 = env.spawn_shim(43, "shim43.log", "verbose")
    p42 = wait_for(lambda: node_port(env, NODE), 30)
    p43 = wait_for(lambda: node_port(env, NODE43), 30)
    # the shared endpoint listens on node_address (127.0.0.1), as the per-node ones
    m = wait_for(lambda: re.search(r"kubelet endpoint on https://127\.0\.0\.1:(\d+)",
                                   open(os.path.join(d, "agent.log")).read()), 10)
    shared = int(m.group(1)) if m else 0
    check("each Node names a port of its own from the range",
          p42 and p43 and p42 != p43 and all(env.low <= p <= env.high for p in (p42, p43)) and
          shared not in (p42, p43), (p42, p43, shared, env.low))

    env.api("POST", "/api/v1/namespaces/default/pods",
            pod("burn42", NODE, ["python3", "-c", "while True: pass"]))
    env.api("POST", "/api/v1/namespaces/default/pods",
            pod("idle43", NODE43, ["python3", "-c",
                                   "import time\nprint('idle up',flush=True)\ntime.sleep(600)"]))
    check("both pods Running", wait_for(lambda: running(env, "burn42") and running(env, "idle43"),
                                        60))
    t42, t43 = scrape(env, NODE, "metrics/resource"), scrape(env, NODE43, "metrics/resource")
    check("node 42's metrics: its pod, not the other node's",
          'pod="burn42"' in t42 and 'pod="idle43"' not in t42 and "\nscrape_error 0\n" in t42,
          t42[:800])
    check("node 43's metrics: its pod, not the other node's",
          'pod="idle43"' in t43 and 'pod="burn42"' not in t43, t43[:800])
    first = cpu_of(t42, "burn42")
    grown = wait_for(lambda: (lambda v: v if v is not None and first is not None and
                              v >= first + 0.3 else None)(cpu_of(scrape(env, NODE, "metrics/resource"),
                                                                  "burn42")), 60)
    check("the burning pod's counter grows on its node", grown is not None, first)
    s43 = scrape(env, NODE43, "stats/summary")
    try:
        j43 = json.loads(s43)
    except ValueError:
        j43 = {}
    check("node 43's summary names node 43 and only its pod",
          j43.get("node", {}).get("nodeName") == NODE43 and
          [p["podRef"]["name"] for p in j43.get("pods", [])] == ["idle43"], s43[:500])

    rc, out, err = env.kubectl("logs", "idle43")
    check("kubectl logs through the pod's node's own port", rc == 0 and "idle up" in out,
          (rc, out[:200], err[:200]))
    code, body = direct(env, p42, "/containerLogs/default/idle43/main")
    check("another node's pod is 404 on a node's port", code == 404 and "not on this node" in body,
          (code, body[:200]))
    code, body = direct(env, p43, "/containerLogs/default/idle43/main")
    check("its own node's port serves it", code == 200 and "idle up" in body, (code, body[:200]))
    q = "?command=true&output=1&stdout=1"
    code, body = exec_upgrade(env, p42, "/exec/default/idle43/main" + q)
    check("another node's pod: exec on a node's port is 404",
          code == 404 and "not running on this node" in body, (code, body[:200]))
    code, body = exec_upgrade(env, p42, "/portForward/default/idle43", SPDY_PF)
    check("another node's pod: port-forward on a node's port is 404",
          code == 404 and "not running on this node" in body, (code, body[:200]))
    code, body = exec_upgrade(env, p43, "/exec/default/idle43/main" + q)
    check("its own node's port upgrades an exec of its pod", code == 101, (code, body[:200]))
    # Who may use a node's endpoint (kubelet_authorization_mode = Webhook, the
    # default): the API server answers a SubjectAccessReview on nodes/<sub>.
    client_cert(env, "nobody-client", "/O=researchers/CN=nobody-in-particular")
    code, body = direct(env, p43, "/stats/summary", cert="nobody-client")
    check("a client certificate without rights on nodes/stats: 403 with the kubelet's text",
          code == 403 and body == "Forbidden (user=nobody-in-particular, verb=get, "
          "resource=nodes, subresource=stats)", (code, body[:200]))
    code, body = direct(env, p43, "/containerLogs/default/idle43/main", cert="nobody-client")
    check("... and on nodes/proxy (logs)", code == 403 and "subresource=proxy" in body,
          (code, body[:200]))
    code, body = exec_upgrade(env, p43, "/exec/default/idle43/main" + q)
    check("the API server's client (system:masters) may exec", code == 101, (code, body[:200]))
    admin = open(os.path.join(env.kdir, "admin.token")).read().strip()
    noright = open(os.path.join(env.kdir, "noright.token")).read().strip()
    code, body = direct(env, p43, "/stats/summary", cert=None, token=admin)
    check("a bearer token the API server vouches for (admin) reads stats",
          code == 200 and NODE43 in body, (code, body[:200]))
    code, body = direct(env, p43, "/stats/summary", cert=None, token=noright)
    check("a bearer token without rights: 403",
          code == 403 and body.startswith("Forbidden (user=") and "subresource=stats" in body,
          (code, body[:200]))
    code, body = direct(env, p43, "/stats/summary", cert=None, token="not-a-token")
    check("an unknown bearer token: 401", code == 401, (code, body[:200]))
    code, body = direct(env, p43, "/stats/summary", cert=None)
    check("neither certificate nor token: 401", code == 401, (code, body[:200]))
    code, body = direct(env, shared, "/metrics/resource")
    check("the shared port serves no stats, naming the key",
          code == 404 and "kubelet_node_ports" in body, (code, body[:200]))

    r = env.call("deregister", {"job_id": 43, "slurm_node": "n1", "grace_s": 2,
                                "reason": "JobEnded"})
    check("job 43 deregisters", r and r.get("ok"), r)
    try:
        shim43.wait(30)
    except Exception:  # noqa: BLE001
        shim43.kill()
    check("node 43's port closes with its job", wait_for(lambda: refused(p43), 20), p43)
    check("node 42's port still serves", "pod=\"burn42\"" in scrape(env, NODE, "metrics/resource"))
    env.end_job(42, 2)


def main():
    return shim_suite_main(PortsEnv, run, ("agent.log", "shim.log", "shim43.log"))


if __name__ == "__main__":
    sys.exit(main())
