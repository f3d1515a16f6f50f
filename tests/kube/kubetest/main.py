"""The command line: options, tokens, certificates, the state dir files (ready, pid,
server.json, kubeconfig, tokens) and the server's lifetime.

--audit-log PATH appends kube-apiserver's audit log (JSON lines, audit.k8s.io/v1 Events at level
Metadata: ResponseComplete per request, ResponseStarted for watches and other long-running
requests; server.AuditLog) to PATH."""

import argparse
import ipaddress
import json
import os
import signal
import socket
import sys
import time
import uuid

from .api import Api
from .auth import parse_roles
from .certificates import DEFAULT_SIGNING_DURATION, CertificateControllers, parse_duration
from .handler import Handler
from .kubelet import PREFERRED_ADDRESS_TYPES
from .node_lifecycle import NodeLifecycle
from .metrics import Metrics
from .scheduler import Scheduler
from .workloads import Workloads
from .server import Server
from .store import ABORT
from .tls import kubelet_client_contexts, make_certs, server_context
from .util import log


def write_file(path, text, mode=0o644):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.chmod(tmp, mode)
    os.rename(tmp, path)


def save_coverage():
    """Under python3-coverage (tests/kube/coverage.sh) its data is saved here: os._exit,
    which ends the server without waiting for its threads, skips coverage's atexit."""
    cov = sys.modules.get("coverage")
    current = cov and cov.Coverage.current()
    if current:
        current.stop()
        current.save()


def main():
    ap = argparse.ArgumentParser(description="Kubernetes API test double (not a Kubernetes API server)")
    ap.add_argument("--listen", default="127.0.0.1:0")
    ap.add_argument("--state-dir", required=True)
    ap.add_argument("--cert-ip", action="append", default=[], metavar="ADDR",
                    help="one more IP subjectAltName of the server's and the kubelet serving certificate the "
                         "state dir's CA signs (repeatable; made with the state dir, kept with it)")
    ap.add_argument("--token-file", help="CSV token,user,uid,\"group1,group2\" like kube-apiserver")
    ap.add_argument("--role", action="append", default=[], metavar="SUBJECT=ROLE[,ROLE...]",
                    help="bind user:NAME or group:NAME to admin|agent|none|node-bootstrapper|nodeclient|"
                         "selfnodeclient, or several of them comma-separated (repeatable)")
    ap.add_argument("--history", type=int, default=1000, help="watch history per resource type")
    ap.add_argument("--no-scheduler", action="store_true")
    ap.add_argument("--no-node-lifecycle", action="store_true")
    ap.add_argument("--lease-grace", type=float, default=40.0)
    ap.add_argument("--monitor-period", type=float, default=5.0)
    ap.add_argument("--taint-removal-delay", type=float, default=0.0)
    ap.add_argument("--no-full-disruption", dest="full_disruption", action="store_false",
                    help="add unreachable:NoExecute even when every node is NotReady")
    ap.add_argument("--bookmark-interval", type=float, default=60.0)
    ap.add_argument("--kubelet-ca", help="CA that signs kubelet serving certs (default: our own CA)")
    ap.add_argument("--kubelet-insecure", action="store_true", help="do not verify kubelet serving certs")
    ap.add_argument("--node-proxy-global-only", action="store_true",
                    help="nodes/proxy refuses node addresses that are not global unicast (400 address not allowed), "
                         "as kube-apiserver does")
    ap.add_argument("--kubelet-preferred-address-types", default=",".join(PREFERRED_ADDRESS_TYPES),
                    help="node address types tried in order to reach a kubelet, as kube-apiserver's flag "
                         "(default %(default)s)")
    ap.add_argument("--min-token-expiration", type=int, default=600, metavar="SEC",
                    help="the shortest expirationSeconds a TokenRequest may ask for (default %(default)s, the real "
                         "minimum; 1 lets tests issue tokens that expire at once)")
    ap.add_argument("--token-expiry-leeway", type=float, default=60.0, metavar="SEC",
                    help="how long after its exp a ServiceAccount token still authenticates (default %(default)s, "
                         "the real leeway)")
    ap.add_argument("--cluster-signing-duration", default=str(DEFAULT_SIGNING_DURATION), metavar="DURATION",
                    help="the longest certificate the CSR signer issues, in seconds or as a Go duration (8760h), as "
                         "kube-controller-manager's flag (default one year); it caps spec.expirationSeconds")
    ap.add_argument("--no-csr-approving", action="store_true", help="no csrapproving controller (CSRs stay pending)")
    ap.add_argument("--no-csr-signing", action="store_true", help="no csrsigning controller (approved CSRs are not "
                                                                   "issued)")
    ap.add_argument("--csr-controller-qps", type=float, default=0.0, metavar="QPS",
                    help="the CSR controllers' API client rate, as kube-controller-manager's --kube-api-qps "
                         "(its default 20: about 6.7 CSRs/s, three requests each); 0 = unlimited (default)")
    ap.add_argument("--csr-controller-burst", type=int, default=30, metavar="N",
                    help="their burst, as --kube-api-burst (default %(default)s)")
    ap.add_argument("--node-authorizer-lag", type=float, default=0.0, metavar="SEC",
                    help="the Node authorizer and NodeRestriction learn of a pod's binding SEC seconds after "
                         "it is written, as kube-apiserver's informers do (a node's reads for the pod are "
                         "refused with 403 until then)")
    ap.add_argument("--log-requests", action="store_true")
    ap.add_argument("--audit-log", metavar="PATH",
                    help="append an audit log as kube-apiserver's --audit-log-path writes it (JSON lines, "
                         "audit.k8s.io/v1 Event, level Metadata, no RequestReceived stage)")
    opts = ap.parse_args()
    if opts.audit_log:
        opts.audit_log = os.path.abspath(opts.audit_log)
    try:
        opts.cluster_signing_duration = parse_duration(opts.cluster_signing_duration)
    except ValueError as e:
        ap.error("--cluster-signing-duration: %s" % e)
    opts.kubelet_preferred_address_types = tuple(
        t.strip() for t in opts.kubelet_preferred_address_types.split(",") if t.strip())
    try:
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = hard if hard != resource.RLIM_INFINITY else 65536
        if soft < want:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    except (ImportError, ValueError, OSError):
        pass

    d = os.path.abspath(opts.state_dir)
    os.makedirs(d, exist_ok=True)
    for f in ("ready",):
        if os.path.exists(os.path.join(d, f)):
            os.unlink(os.path.join(d, f))
    api = Api(opts)
    if opts.token_file:
        api.auth.load_csv(opts.token_file)
    else:
        toks = {}
        for name, user, groups in (("admin", "admin", "system:masters"), ("agent", "slurm-k8s-agent", "slurm-k8s:agent"),
                                   ("noright", "noright", "")):
            tp = os.path.join(d, name + ".token")
            if os.path.exists(tp):
                tok = open(tp).read().strip()
            else:
                tok = uuid.uuid4().hex + uuid.uuid4().hex
                write_file(tp, tok + "\n", 0o600)
            toks[name] = tok
            api.auth.tokens[tok] = (user, user, [g for g in groups.split(",") if g])
        write_file(os.path.join(d, "tokens.csv"), "".join(
            '%s,%s,%s,"%s"\n' % (toks[n], u, u, g) for n, u, g in (("admin", "admin", "system:masters"),
                                                                   ("agent", "slurm-k8s-agent", "slurm-k8s:agent"),
                                                                   ("noright", "noright", ""))), 0o600)
    for r in opts.role:
        s, _, role = r.partition("=")
        try:
            roles = parse_roles(role)
        except ValueError as e:
            ap.error("--role %s: %s" % (r, e))
        api.auth.bindings[s] = roles[0] if len(roles) == 1 else roles
    admin_tok = next((t for t, v in api.auth.tokens.items() if "system:masters" in v[2]), None)

    for ip in opts.cert_ip:
        try:
            ipaddress.ip_address(ip)
        except ValueError:
            ap.error("--cert-ip %s: not an IP address" % ip)
    make_certs(d, opts.cert_ip)
    ctx = server_context(d)
    host, _, port = opts.listen.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    Server.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
    srv = Server((host, int(port)), Handler, api, opts, ctx)
    srv.kubelet_ctx, srv.kubelet_ctx_insecure = kubelet_client_contexts(d, opts.kubelet_ca)
    if opts.kubelet_insecure:
        log("WARNING: --kubelet-insecure: kubelet serving certificates are not verified")
    srv.metrics = Metrics(srv)
    srv.scheduler = Scheduler(api, opts)
    srv.nlc = NodeLifecycle(api, opts)
    srv.workloads = Workloads(api, opts)
    srv.certs = CertificateControllers(api, opts, d)
    srv.scheduler.start()
    srv.nlc.start()
    srv.workloads.start()
    srv.certs.start()

    port = srv.server_address[1]
    hp = "[%s]" % host if ":" in host else host
    url = "https://%s:%d" % (hp, port)
    kc = ["apiVersion: v1", "kind: Config", "clusters:", "- name: kube-test-double", "  cluster:",
          "    server: %s" % url, "    certificate-authority: %s" % os.path.join(d, "ca.crt")]
    kc += ["users:", "- name: admin", "  user:", "    token: %s" % (admin_tok or ""), "contexts:",
           "- name: kube-test-double", "  context:", "    cluster: kube-test-double", "    user: admin",
           "    namespace: default", "current-context: kube-test-double", ""]
    write_file(os.path.join(d, "kubeconfig"), "\n".join(kc), 0o600)
    write_file(os.path.join(d, "pid"), "%d\n" % os.getpid())
    write_file(os.path.join(d, "server.json"), json.dumps({
        "url": url, "port": port, "pid": os.getpid(), "ca": os.path.join(d, "ca.crt"),
        "kubeconfig": os.path.join(d, "kubeconfig"), "adminToken": os.path.join(d, "admin.token"),
        "agentToken": os.path.join(d, "agent.token"), "norightToken": os.path.join(d, "noright.token"),
        "kubeletClientCert": os.path.join(d, "kubelet-client.crt"), "kubeletClientKey": os.path.join(d, "kubelet-client.key"),
        "kubeletServingCert": os.path.join(d, "kubelet-serving.crt"),
        "kubeletServingKey": os.path.join(d, "kubelet-serving.key")}, indent=1) + "\n")

    def stop(signum, frame):
        srv.stopping = True
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    def clear_fault(signum, frame):
        srv.fault = {"mode": "none"}
        if srv.refuse_until:
            srv.refuse_until = time.monotonic()
    signal.signal(signal.SIGUSR1, clear_fault)
    write_file(os.path.join(d, "ready"), url + "\n")
    log("listening on %s (state dir %s, pid %d)" % (url, d, os.getpid()))
    srv.loop()
    log("stopping")
    try:
        os.unlink(os.path.join(d, "ready"))
    except OSError:
        pass
    with srv.watchers_lock:
        for w in list(srv.watchers):
            w.q.put(ABORT)
    try:
        srv.socket.close()
    except OSError:
        pass
    srv.drop_all()
    if srv.audit:
        srv.audit.close()
    sys.stderr.flush()
    save_coverage()
    os._exit(0)
