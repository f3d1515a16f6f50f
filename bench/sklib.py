"""Shared pieces of the slurm-k8s benchmarks (Python 3 standard library only).

Starts the test API server (tests/kube/kube_test_server.py) and the real
slurm-k8s-agent, drives the agent's unix socket, watches the API server
(event arrival times are the measurement, so nothing polls the server while a
timing runs), reads RSS and CPU time of processes from /proc, and writes one
JSON result per benchmark. The server, agent, watch and /proc pieces are the
test layers' (tests/pylib/sktest); this module adds the benchmarks' own. Every benchmark takes its sizes from environment
variables (see each script's docstring) so that a quick run and the final
measurement use the same code.

The API server (open_api): the test double by default; with BENCH_KUBECONFIG the cluster of that
kubeconfig for the benchmarks that call cluster_mode() first (lifecycle, scale, steady;
docs/benchmarks.md, "Against your own cluster"):
  BENCH_KUBECONFIG         the benchmark's own watches and calls (token, tokenFile or client
                           certificate; kubeapi.py); BENCH_KUBECONTEXT its context
  BENCH_AGENT_KUBECONFIG   the agent's `kubeconfig` (default: BENCH_KUBECONFIG);
                           BENCH_AGENT_KUBECONTEXT its context
  BENCH_AUDIT_LOG          kube-apiserver's audit log (JSON lines): request counts, rates and the
                           API server's latency; without it they are null with the reason
  BENCH_AGENT_USER         the agent's user name in the audit log (default: its SelfSubjectReview)
  BENCH_NAMESPACE          where the benchmark's pods are made (default: default)
The virtual nodes of a run are named skb-RUNID-n1-JOB with cluster_name sk-bench-RUNID, and the
run deletes its Nodes, Leases and pods at its end, also when it fails.
"""
import http.client
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse

# The test layers' helpers (tests/pylib/sktest): one implementation of the test API server
# launcher, the agent's start and socket client, /proc readings and the programs to run.
sys.path.insert(0, os.path.join(os.environ.get("SK_TOP_SRCDIR") or os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "tests", "pylib"))
from sktest.agent import agent_call, start_agent, write_agent_conf  # noqa: E402
from sktest.host import proc_cpu_s, proc_rss_kib  # noqa: E402,F401 (B.proc_*)
from sktest.kube import AGENT_USER, Watch  # noqa: E402,F401 (B.AGENT_USER, B.Watch)
from sktest.kube import KubeServer as Kube  # noqa: E402,F401 (B.Kube)
from sktest.programs import BUILDDIR, SRCDIR  # noqa: E402,F401 (B.BUILDDIR, B.SRCDIR)
from sktest.programs import SERVER_PY, agent_binary, shim_argv, shim_binary, shim_priority  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kubeapi  # noqa: E402
SHIM_BIN = shim_binary()
# what the scripts use through this module only (B.Watch, B.BUILDDIR, ...)
REEXPORTED = (BUILDDIR, SRCDIR, Watch, proc_rss_kib)

# The API server the benchmarks talk to: the test double, or BENCH_KUBECONFIG's cluster for
# the benchmarks that call cluster_mode() (the others always use the double).
KUBECONFIG = os.environ.get("BENCH_KUBECONFIG", "")
CLUSTER = False
RUN_ID = os.urandom(3).hex()
CLUSTER_NAME = "bench"
NODE_TEMPLATE = "slurm-{node}-{job}"
NAMESPACE = "default"


def cluster_mode():
    """Called first by a benchmark that can measure a cluster: with BENCH_KUBECONFIG set, its
    API server is that cluster's (open_api) and the run's names are its own. A real cluster
    has nodes of its own (maybe slurm-k8s' virtual nodes too): a run's nodes carry a name and a
    cluster_name no other has, and only those are ever deleted. True in cluster mode."""
    global CLUSTER, CLUSTER_NAME, NODE_TEMPLATE, NAMESPACE
    if KUBECONFIG:
        CLUSTER = True
        CLUSTER_NAME = "sk-bench-" + RUN_ID
        NODE_TEMPLATE = "skb-" + RUN_ID + "-{node}-{job}"
        NAMESPACE = os.environ.get("BENCH_NAMESPACE") or "default"
    return CLUSTER


def env_int(name, default):
    v = os.environ.get(name, "")
    return int(v) if v.strip() else default


def env_float(name, default):
    v = os.environ.get(name, "")
    return float(v) if v.strip() else default


def env_list(name, default):
    v = os.environ.get(name, "")
    return [int(x) for x in v.replace(",", " ").split()] if v.strip() else default


def log(msg):
    print("[bench] " + msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- statistics
def pct(values, p):
    """Nearest-rank percentile (p in 0..100); None for no values."""
    if not values:
        return None
    v = sorted(values)
    k = max(0, min(len(v) - 1, int(round(p / 100.0 * len(v) + 0.5)) - 1))
    return v[k]


def summary_ms(values_s):
    """{n, p50, p99, min, max, mean} in milliseconds from seconds."""
    ms = [1000.0 * x for x in values_s]
    if not ms:
        return {"n": 0}
    return {"n": len(ms), "p50": round(pct(ms, 50), 2), "p99": round(pct(ms, 99), 2),
            "min": round(min(ms), 2), "max": round(max(ms), 2),
            "mean": round(sum(ms) / len(ms), 2)}


# ---------------------------------------------------------------- machine
def machine():
    def first(path, key):
        try:
            for line in open(path):
                if line.startswith(key):
                    return line.split(":", 1)[1].strip()
        except OSError:
            pass
        return ""
    return {"nproc": os.cpu_count(), "cpu_model": first("/proc/cpuinfo", "model name"),
            "mem_total": first("/proc/meminfo", "MemTotal"), "kernel": platform.release(),
            "python": platform.python_version(),
            "loadavg_at_start": open("/proc/loadavg").read().split()[:3]}


# ---------------------------------------------------------------- API server
def node_ready(obj):
    conds = {c.get("type"): c.get("status") for c in obj.get("status", {}).get("conditions", [])}
    return conds.get("Ready") == "True"


def is_node_ready_event(name):
    return lambda ev: (ev["type"] in ("ADDED", "MODIFIED") and ev["object"]["metadata"]["name"] == name
                       and node_ready(ev["object"]))


def is_deleted(name):
    return lambda ev: ev["type"] == "DELETED" and ev["object"]["metadata"]["name"] == name


def is_phase(name, phase):
    return lambda ev: (ev["type"] in ("ADDED", "MODIFIED") and ev["object"]["metadata"]["name"] == name
                       and ev["object"].get("status", {}).get("phase") == phase)


# ---------------------------------------------------------------- the API server: double or cluster
def open_api(workdir, double_args=()):
    """The API server of one measurement: a fresh test double in WORKDIR/kube (the default), or
    with BENCH_KUBECONFIG that kubeconfig's cluster (nothing is started). Both have url, api(),
    info(), agent_settings(), window_start()/window_end() for request counts, server_cpu_s()
    and stop() (the cluster's deletes what the run made); sktest.kube.Watch watches either."""
    if not CLUSTER:
        return DoubleApi(workdir, double_args)
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        # a run stopped with SIGTERM (a timeout) still deletes what it made: SystemExit runs
        # the benchmarks' finally blocks
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    try:
        return ClusterTarget(workdir)
    except kubeapi.KubeconfigError as e:
        print("bench against a cluster (BENCH_KUBECONFIG): %s" % e, file=sys.stderr)
        sys.exit(2)


class DoubleApi(Kube):
    """The test double, counted through its /_test controls (as the benchmarks always did)."""
    kind = "double"

    def info(self):
        code, v = self.api("GET", "/version")
        return {"kind": "double", "server": self.url,
                "version": v.get("gitVersion") if code == 200 else None}

    def agent_settings(self):
        return {"api_server": self.url, "api_ca_file": os.path.join(self.dir, "ca.crt"),
                "api_token_file": os.path.join(self.dir, "agent.token")}

    def window_start(self, latency=False):
        self.reset_counters()
        seq0 = 0
        if latency:
            _, log0 = self.api("GET", "/_test/requests?since=0")
            seq0 = max([e["seq"] for e in log0.get("items", [])] or [0])
        return {"seq0": seq0, "t0": time.time()}

    def window_end(self, w, latency=False):
        """{"source", "agent": {"METHOD template STATUS": n}, "latency_s" (with latency)}."""
        res = {"source": "test double /_test/counters", "agent": self.agent_requests()}
        if latency:
            _, lg = self.api("GET", "/_test/requests?since=%d" % w["seq0"])
            res["latency_s"] = [e.get("ms", 0) / 1000.0 for e in lg.get("items", [])
                                if e.get("user") == AGENT_USER
                                and "watch" not in (e.get("query") or "")]
            # who sent the window's requests: the virtual nodes' own identities (as kubelets
            # are classed) apart from the agent's
            ids = {}
            for e in lg.get("items", []):
                u = e.get("user") or "(anonymous)"
                u = "system:node:*" if u.startswith("system:node:") else u
                ids[u] = ids.get(u, 0) + 1
            res["by_identity"] = ids
        return res

    def server_cpu_s(self):
        return proc_cpu_s(self.proc.pid)


def counts_extra(got):
    """The result fields of a cluster's request count (window_end): where the counts come
    from, why they are absent, every user's requests of the window, the window itself."""
    out = {"counted_by": got.get("source"), "requests_by_user": got.get("by_user")}
    if got.get("absent"):
        out["requests_absent"] = got["absent"]
    if got.get("window"):
        out["count_window"] = got["window"]
    if got.get("notes"):
        out["count_notes"] = got["notes"]
    return out


# what the benchmark's own identity must be allowed: (verb, resource, group, namespace)
BENCH_RIGHTS = [("get", "nodes", "", None), ("list", "nodes", "", None),
                ("watch", "nodes", "", None), ("delete", "nodes", "", None),
                ("list", "pods", "", None),
                ("create", "pods", "", "NS"), ("get", "pods", "", "NS"), ("watch", "pods", "", "NS"),
                ("delete", "pods", "", "NS"),
                ("list", "leases", "coordination.k8s.io", "kube-node-lease"),
                ("watch", "leases", "coordination.k8s.io", "kube-node-lease"),
                ("delete", "leases", "coordination.k8s.io", "kube-node-lease")]
# and the agent's (etc/rbac.yaml grants them; the part the benchmarks use)
AGENT_RIGHTS = [("create", "nodes", "", None), ("patch", "nodes", "", None),
                ("delete", "nodes", "", None), ("watch", "nodes", "", None),
                ("watch", "pods", "", None), ("delete", "pods", "", None),
                ("patch", "pods/status", "", None), ("patch", "nodes/status", "", None),
                ("create", "leases", "coordination.k8s.io", "kube-node-lease"),
                ("update", "leases", "coordination.k8s.io", "kube-node-lease"),
                ("delete", "leases", "coordination.k8s.io", "kube-node-lease"),
                ("create", "events", "", "NS")]
_cluster_checked = {}


def _missing_rights(client, rights):
    out = []
    for verb, res, group, ns in rights:
        res, _, sub = res.partition("/")
        ns = NAMESPACE if ns == "NS" else ns
        if client.can_i(verb, res, group, ns, sub or None) is False:
            out.append("%s %s%s%s%s" % (verb, res, "/" + sub if sub else "",
                                        "." + group if group else "",
                                        " in " + ns if ns else " (cluster-wide)"))
    return out


class ClusterTarget:
    """BENCH_KUBECONFIG's API server in place of the test double: the benchmark's watches and
    calls as that kubeconfig's user, the agent with `kubeconfig = BENCH_AGENT_KUBECONFIG`,
    request counts from BENCH_AUDIT_LOG (never /_test). stop() deletes what this run made."""
    kind = "cluster"

    def __init__(self, workdir):
        self.dir = workdir
        os.makedirs(workdir, exist_ok=True)
        creds = kubeapi.load_kubeconfig(KUBECONFIG, os.environ.get("BENCH_KUBECONTEXT") or None)
        self.client = kubeapi.ClusterApi(creds, tmpdir=workdir)
        self.url, self.host, self.port = self.client.url, self.client.host, self.client.port
        self.ctx, self.prefix = self.client.ctx, self.client.prefix
        self.api = self.client.api
        self.auth_headers = self.client.auth_headers
        self.connection = self.client.connection
        own = os.environ.get("BENCH_AGENT_KUBECONFIG", "")
        self.agent_kubeconfig = os.path.abspath(own or KUBECONFIG)
        self.agent_context = os.environ.get("BENCH_AGENT_KUBECONTEXT") or (
            None if own else os.environ.get("BENCH_KUBECONTEXT")) or None
        self.audit = os.environ.get("BENCH_AUDIT_LOG") or None
        self.marks = 0
        key = (KUBECONFIG, self.agent_kubeconfig, self.agent_context)
        if key not in _cluster_checked:
            _cluster_checked[key] = self._check()
        self.version, self.user, self.agent_user, self.agent_user_from = _cluster_checked[key]

    def _check(self):
        """Once per process: the server answers, who the two identities are, their rights."""
        try:
            version = self.client.version()
        except (OSError, http.client.HTTPException) as e:
            raise kubeapi.KubeconfigError("%s: %s" % (self.url, e))
        if version is None:
            raise kubeapi.KubeconfigError("%s/version did not answer 200" % self.url)
        user = self.client.whoami()
        missing = _missing_rights(self.client, BENCH_RIGHTS)
        if missing:
            raise kubeapi.KubeconfigError(
                "the benchmark's user %s may not: %s (docs/benchmarks.md, \"Against your own "
                "cluster\", lists its rights)" % (user or "(unknown)", "; ".join(missing)))
        agent_user, source = os.environ.get("BENCH_AGENT_USER") or None, "BENCH_AGENT_USER"
        try:
            acl = kubeapi.ClusterApi(kubeapi.load_kubeconfig(self.agent_kubeconfig,
                                                             self.agent_context), self.dir)
        except kubeapi.KubeconfigError as e:
            # the agent reads more forms (exec plugins): it checks its own kubeconfig at start
            log("agent kubeconfig not checked here (%s)" % e)
            acl = None
        if acl:
            try:
                if not agent_user:
                    agent_user, source = acl.whoami(), "SelfSubjectReview"
                missing = _missing_rights(acl, AGENT_RIGHTS)
            finally:
                acl.close()
            if missing:
                raise kubeapi.KubeconfigError(
                    "the agent's user %s may not: %s (it needs what etc/rbac.yaml grants)"
                    % (agent_user or "(unknown)", "; ".join(missing)))
        log("API server %s (%s) as %s; agent as %s" % (self.url, version, user, agent_user))
        return version, user, agent_user, source if agent_user else None

    def info(self):
        return {"kind": "cluster", "server": self.url, "version": self.version,
                "user": self.user, "agent_user": self.agent_user,
                "namespace": NAMESPACE, "cluster_name": CLUSTER_NAME,
                "node_name_template": NODE_TEMPLATE,
                "audit_log": bool(self.audit)}

    def agent_settings(self):
        s = {"kubeconfig": self.agent_kubeconfig}
        if self.agent_context:
            s["kubeconfig_context"] = self.agent_context
        s["node_name_template"] = NODE_TEMPLATE
        return s

    # -- request counts from the audit log
    def _mark(self):
        """A request that finds its own event in the audit log: its receipt time bounds the
        window on the API server's clock (a GET of a pod that does not exist, 404)."""
        self.marks += 1
        token = "sk-bench-mark-%s-%d" % (RUN_ID, self.marks)
        self.api("GET", "/api/v1/namespaces/%s/pods/%s" % (NAMESPACE, token))
        return token

    def window_start(self, latency=False):
        w = {"t0": time.time()}
        if self.audit:
            w["pos"] = kubeapi.audit_position(self.audit)
            w["mark"] = self._mark()
        return w

    def window_end(self, w, latency=False):
        """{"source", "agent": {"VERB resource CODE": n} | None, "by_user", "absent": reason,
        "latency_s" (with latency), "window"}: the requests the API server received in the
        window, from its audit log; None with the reason without one."""
        t1 = time.time()
        res = {"source": None, "agent": None, "by_user": None, "absent": None}
        if latency:
            res["latency_s"] = None
        if not self.audit:
            res["absent"] = ("no audit log (BENCH_AUDIT_LOG): against a cluster the requests are "
                             "counted from the API server's audit log")
            return res
        end_mark = self._mark()
        wait = env_float("BENCH_AUDIT_WAIT", 15)
        deadline = time.time() + wait
        settled = False
        while True:
            try:
                events, notes = kubeapi.read_audit(self.audit, w.get("pos"))
            except OSError as e:
                res["absent"] = "audit log %s: %s" % (self.audit, e.strerror)
                return res
            reqs = kubeapi.audit_requests(events)
            t_from = kubeapi.find_marker(reqs, w["mark"])
            t_to = kubeapi.find_marker(reqs, end_mark)
            if t_to is not None and not settled:
                # requests received before the end mark that finish just after it
                settled = True
                time.sleep(1.0)
                continue
            if settled or time.time() > deadline:
                break
            time.sleep(0.2)
        res["source"] = "audit log"
        if t_from is not None and t_to is not None:
            res["window"] = {"by": "markers (the API server's clock)", "s": round(t_to - t_from, 3)}
        else:
            t_from, t_to = w["t0"], t1
            res["window"] = {"by": "this machine's clock (the window's marker requests are not in "
                                   "the audit log within %.0f s: does the policy log the "
                                   "benchmark's user?)" % wait, "s": round(t1 - w["t0"], 3)}
        if notes:
            res["notes"] = notes
        win = kubeapi.audit_window(reqs, t_from, t_to, exclude=("sk-bench-mark-",))
        res["by_user"] = win["by_user"]
        if not win["requests"]:
            res["absent"] = "no request of the window in the audit log (its policy logs none?)"
            res["source"] = None
            return res
        if not self.agent_user:
            res["absent"] = ("the agent's user name is unknown (its SelfSubjectReview failed): "
                             "set BENCH_AGENT_USER")
            return res
        res["agent"] = win["by_user"].get(self.agent_user, {})
        if latency:
            res["latency_s"] = kubeapi.window_latencies(reqs, t_from, t_to, self.agent_user)
        return res

    def server_cpu_s(self):
        return None   # not a process of this machine

    # -- the end
    def cleanup(self):
        """Deletes this run's Nodes (name skb-RUNID-..., label slurm-k8s/cluster=sk-bench-RUNID),
        their Leases and the pods bound to them (any namespace, forced: no kubelet is left to
        confirm); stop the agent first. Returns what could not be deleted."""
        prefix = NODE_TEMPLATE.split("{", 1)[0]
        left = []
        sel = urllib.parse.quote("slurm-k8s/cluster=" + CLUSTER_NAME)
        code, nl = self.api("GET", "/api/v1/nodes?labelSelector=" + sel)
        nodes = [n["metadata"]["name"] for n in nl.get("items", [])
                 if n["metadata"]["name"].startswith(prefix)] if code == 200 else []
        pods, cont = [], ""
        while True:
            code, pl = self.api("GET", "/api/v1/pods?limit=500" + (
                "&continue=" + urllib.parse.quote(cont) if cont else ""), timeout=120)
            if code != 200:
                left.append("pods not listed (HTTP %d)" % code)
                break
            pods += [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in pl.get("items", [])
                     if (p.get("spec", {}).get("nodeName") or "").startswith(prefix)]
            cont = pl.get("metadata", {}).get("continue")
            if not cont:
                break
        for ns, name in pods:
            code, _ = self.api("DELETE", "/api/v1/namespaces/%s/pods/%s" % (ns, name),
                               {"apiVersion": "v1", "kind": "DeleteOptions",
                                "gracePeriodSeconds": 0})
            if code not in (200, 202, 404):
                left.append("pod %s/%s (HTTP %d; the pod garbage collector deletes the pods of "
                            "a deleted Node)" % (ns, name, code))
        leases = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
        code, ll = self.api("GET", leases)
        names = set(nodes)
        if code == 200:
            names |= {x["metadata"]["name"] for x in ll.get("items", [])
                      if x["metadata"]["name"].startswith(prefix)}
        for name in sorted(names):
            code, _ = self.api("DELETE", leases + "/" + name)
            if code not in (200, 202, 404):
                left.append("lease %s (HTTP %d)" % (name, code))
        for name in nodes:
            code, _ = self.api("DELETE", "/api/v1/nodes/" + name)
            if code not in (200, 202, 404):
                left.append("node %s (HTTP %d)" % (name, code))
        if nodes or pods:
            log("cleanup: deleted %d nodes, their leases and %d pods" % (len(nodes), len(pods)))
        for x in left:
            log("cleanup: NOT deleted: " + x)
        return left

    def stop(self):
        try:
            self.cleanup()
        finally:
            self.client.close()


# ---------------------------------------------------------------- agent
class Agent:
    """The real slurm-k8s-agent with a private config, socket and state dir."""

    def __init__(self, workdir, kube, runtime="fake", slurm_node="n1", extra=None, name="agent"):
        self.dir = os.path.join(workdir, name)
        os.makedirs(self.dir, exist_ok=True)
        self.sock = os.path.join(self.dir, "agent.sock")
        self.log_path = os.path.join(self.dir, "agent.log")
        # the double's token and CA, or `kubeconfig = ...` (+ node_name_template) of a cluster
        conf = kube.agent_settings() if hasattr(kube, "agent_settings") else {
            "api_server": kube.url,
            "api_ca_file": os.path.join(kube.dir, "ca.crt"),
            "api_token_file": os.path.join(kube.dir, "agent.token")}
        conf.update({
            "cluster_name": CLUSTER_NAME,
            "slurm_node": slurm_node,
            "node_address": "127.0.0.1",
            "kubelet_port": "0",
            # BENCH_AGENT_STATE_DIR: put the agent's (fsync'ed) job records on
            # another file system, e.g. /dev/shm, to see what the fsyncs cost
            "state_dir": os.path.join(os.environ.get("BENCH_AGENT_STATE_DIR") or self.dir,
                                      os.path.basename(workdir) + "-" + name + "-state"),
            "shim_state_dir": os.path.join(self.dir, "shim"),
            "socket_path": self.sock,
            "admin_uids": str(os.getuid()),
            "shim_auth": "uid",
            "runtime": runtime,
            "job_alive_command": "true {job}",
            "allowed_namespaces": "*",
            "log_level": "info",
            # The agent's identity unless a benchmark asks for node identities
            # (the shipped default, bootstrap: bench_scale's identity runs).
            "node_identity": "agent",
        })
        conf.update(extra or {})
        self.conf = os.path.join(self.dir, "agent.conf")
        write_agent_conf(self.conf, conf)
        self.proc = start_agent([agent_binary(conf["runtime"]), "--config", self.conf], self.sock,
                                self.log_path, 10)

    @property
    def pid(self):
        return self.proc.pid

    def call(self, op, body, timeout=60):
        return agent_call(self.sock, op, body, timeout)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def reg_body(job_id, slurm_node="n1", gpus=(0, 1), uid=None):
    uid = os.getuid() if uid is None else uid
    return {"job_id": job_id, "slurm_node": slurm_node, "user": "bench", "uid": uid,
            "gid": os.getgid(), "partition": "gpu", "cluster": CLUSTER_NAME, "gpus": list(gpus),
            "cpus": 64, "memory_mib": 65536, "labels": {},
            "taints": [f"slurm-k8s/job={job_id}:NoSchedule"],
            "namespaces": [NAMESPACE]}


def node_name(job_id, slurm_node="n1"):
    """The agent's node_name_template expanded (the agent lowercases it)."""
    return NODE_TEMPLATE.format(node=slurm_node, job=job_id).lower()


def pod_name(name):
    """A pod name of the benchmark's: on a cluster with this run's prefix (its namespace may
    hold pods of that name)."""
    return NODE_TEMPLATE.split("{", 1)[0] + name if CLUSTER else name


def pods_path(name=None):
    """The benchmark's pods: /api/v1/namespaces/NAMESPACE/pods[/NAME]."""
    return f"/api/v1/namespaces/{NAMESPACE}/pods" + (f"/{name}" if name else "")


def pod_manifest(name, node, command=("sleep", "3600"), grace=5):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"nodeName": node, "terminationGracePeriodSeconds": grace,
                     "tolerations": [{"operator": "Exists"}],
                     "containers": [{"name": "main", "image": "busybox:1.35",
                                     "command": list(command)}]}}


class Shim:
    """slurm-k8s-shim started by hand (what the plugin does in the extern
    step), attached to an agent with shim_auth=uid."""

    def __init__(self, agent, job_id, slurm_node="n1"):
        self.log_path = os.path.join(agent.dir, f"shim-{job_id}.log")
        self.proc = subprocess.Popen(
            shim_argv(SHIM_BIN, job_id, agent.sock, slurm_node, log_level="info"),
            stdout=open(self.log_path, "a"), stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=shim_priority)

    @property
    def pid(self):
        return self.proc.pid

    def stop(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except OSError:
                pass
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def wait_attached(agent, job_id, slurm_node="n1", timeout=10):
    """True once the agent's log says the job's shim attached."""
    name = node_name(job_id, slurm_node)
    end = time.time() + timeout
    while time.time() < end:
        with open(agent.log_path, errors="replace") as f:
            if f"[node {name}] shim attached" in f.read():
                return True
        time.sleep(0.05)
    return False


# ---------------------------------------------------------------- results
class Workdir:
    def __init__(self, prefix):
        self.path = tempfile.mkdtemp(prefix=prefix)
        self.keep = os.environ.get("BENCH_KEEP") == "1"

    def done(self, ok):
        if ok and not self.keep:
            shutil.rmtree(self.path, ignore_errors=True)
        else:
            log("files kept in " + self.path)


def write_result(name, data, path=None):
    """Merges {name: data} into the results file (BENCH_OUT or argv[1])."""
    path = path or (sys.argv[1] if len(sys.argv) > 1 else os.environ.get("BENCH_OUT", ""))
    data = dict(data, measured_at=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                loadavg_at_end=open("/proc/loadavg").read().split()[:3])
    print(json.dumps({name: data}, indent=1))
    if not path:
        return
    res = {}
    if os.path.exists(path):
        with open(path) as f:
            try:
                res = json.load(f)
            except ValueError:
                res = {}
    res.setdefault("machine", machine())
    res.setdefault("benchmarks", {})[name] = data
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(res, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


def preflight(need_shim=False):
    progs = ([] if CLUSTER else [SERVER_PY]) + [agent_binary("fake")]
    if need_shim:
        progs += [agent_binary("shim"), SHIM_BIN]
    missing = sorted({p for p in progs if not os.path.exists(p)})
    if missing:
        print("missing: " + ", ".join(missing) + " (make bench builds them; set SK_TOP_BUILDDIR)")
        sys.exit(77)
