"""Shared pieces of the slurm-k8s benchmarks (Python 3 standard library only).

Starts the test API server (tests/kube/kube_test_server.py) and the real
slurm-k8s-agent, drives the agent's unix socket, watches the API server
(event arrival times are the measurement, so nothing polls the server while a
timing runs), reads RSS and CPU time of processes from /proc, and writes one
JSON result per benchmark. Every benchmark takes its sizes from environment
variables (see each script's docstring) so that a quick run and the final
measurement use the same code.
"""
import http.client
import json
import os
import platform
import queue
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

SRCDIR = os.environ.get("SK_TOP_SRCDIR") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILDDIR = os.environ.get("SK_TOP_BUILDDIR") or SRCDIR
SERVER_PY = os.path.join(SRCDIR, "tests", "kube", "kube_test_server.py")
# The agent socket client is the component tests' (one implementation).
sys.path.insert(0, os.path.join(SRCDIR, "tests", "component"))
from agent_lib import agent_call  # noqa: E402
AGENT_BIN = os.path.join(BUILDDIR, "agent", "slurm-k8s-agent")
# The agent's test build: the same daemon plus runtime = fake (tests/agent/).
TEST_AGENT_BIN = os.path.join(BUILDDIR, "tests", "agent", "slurm-k8s-test-agent")
SHIM_BIN = os.path.join(BUILDDIR, "k8s-shim", "slurm-k8s-shim")
AGENT_USER = "slurm-k8s-agent"  # the user agent.token authenticates as (test server)


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


# ---------------------------------------------------------------- /proc
CLK_TCK = os.sysconf("SC_CLK_TCK")


def proc_cpu_s(pid):
    """utime + stime of a live process, seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def proc_rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


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
class Kube:
    """The test API server in a private state dir (127.0.0.1, any free port)."""

    def __init__(self, workdir, extra_args=()):
        self.dir = os.path.join(workdir, "kube")
        os.makedirs(self.dir, exist_ok=True)
        self.proc = subprocess.Popen(
            [sys.executable, SERVER_PY, "--listen", "127.0.0.1:0", "--state-dir", self.dir]
            + list(extra_args),
            stdout=open(os.path.join(workdir, "kube.log"), "w"), stderr=subprocess.STDOUT)
        ready = os.path.join(self.dir, "ready")
        for _ in range(300):
            if os.path.exists(ready) and open(ready).read().strip():
                break
            if self.proc.poll() is not None:
                raise RuntimeError("test API server exited; see " + workdir + "/kube.log")
            time.sleep(0.05)
        else:
            raise RuntimeError("test API server not ready; see " + workdir + "/kube.log")
        self.url = open(ready).read().strip()
        self.host, self.port = self.url.split("//")[1].rsplit(":", 1)
        self.token = open(os.path.join(self.dir, "admin.token")).read().strip()
        self.ctx = ssl.create_default_context(cafile=os.path.join(self.dir, "ca.crt"))

    def api(self, method, path, body=None, ctype="application/json", timeout=30):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, method=method, data=data)
        req.add_header("Authorization", "Bearer " + self.token)
        if body is not None:
            req.add_header("Content-Type", ctype)
        try:
            with urllib.request.urlopen(req, context=self.ctx, timeout=timeout) as r:
                return r.status, json.loads(r.read() or b"{}")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"{}")

    def reset_counters(self):
        self.api("POST", "/_test/reset")

    def agent_requests(self):
        """{"METHOD template STATUS": n} of the agent's user since the last reset."""
        _, c = self.api("GET", "/_test/counters")
        return c.get("byUser", {}).get(AGENT_USER, {})

    def request_log(self, since=0):
        _, r = self.api("GET", "/_test/requests?since=%d" % since)
        return r.get("items", r.get("requests", [])) if isinstance(r, dict) else r

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Watch(threading.Thread):
    """A streaming watch; every event is queued with its arrival time.

    The bench measures with these arrival times instead of polling, so the
    API server (a Python process on the same cores) is not loaded by the
    measurement itself."""

    def __init__(self, kube, path):
        super().__init__(daemon=True)
        sep = "&" if "?" in path else "?"
        self.kube, self.path = kube, path + sep + "watch=1&timeoutSeconds=3600"
        self.events = queue.Queue()
        self.conn = http.client.HTTPSConnection(kube.host, int(kube.port), context=kube.ctx,
                                                timeout=3600)
        self.conn.request("GET", self.path, headers={"Authorization": "Bearer " + kube.token})
        self.resp = self.conn.getresponse()
        if self.resp.status != 200:
            raise RuntimeError("watch %s: HTTP %d" % (path, self.resp.status))
        self.start()

    def run(self):
        try:
            while True:
                line = self.resp.readline()
                if not line:
                    break
                t = time.time()
                self.events.put((t, json.loads(line)))
        except Exception:  # noqa: BLE001 - closed by close(): the stream just ends
            pass
        self.events.put((time.time(), None))

    def wait(self, pred, timeout):
        """Consumes events until pred(event) is true; returns its arrival time or None."""
        end = time.time() + timeout
        while True:
            left = end - time.time()
            if left <= 0:
                return None
            try:
                t, ev = self.events.get(timeout=left)
            except queue.Empty:
                return None
            if ev is None:
                return None
            if pred(ev):
                return t

    def drain(self):
        while True:
            try:
                self.events.get_nowait()
            except queue.Empty:
                return

    def close(self):
        try:
            self.conn.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.conn.close()


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


# ---------------------------------------------------------------- agent
def agent_binary(runtime):
    """The agent program for agent.conf's runtime: the shipped daemon offers
    only the shim; runtime = fake exists in the test build alone."""
    return TEST_AGENT_BIN if runtime == "fake" else AGENT_BIN


class Agent:
    """The real slurm-k8s-agent with a private config, socket and state dir."""

    def __init__(self, workdir, kube, runtime="fake", slurm_node="n1", extra=None, name="agent"):
        self.dir = os.path.join(workdir, name)
        os.makedirs(self.dir, exist_ok=True)
        self.sock = os.path.join(self.dir, "agent.sock")
        self.log_path = os.path.join(self.dir, "agent.log")
        conf = {
            "api_server": kube.url,
            "api_ca_file": os.path.join(kube.dir, "ca.crt"),
            "api_token_file": os.path.join(kube.dir, "agent.token"),
            "cluster_name": "bench",
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
            "log_level": "info",
        }
        conf.update(extra or {})
        self.conf = os.path.join(self.dir, "agent.conf")
        with open(self.conf, "w") as f:
            for k, v in conf.items():
                f.write(f"{k} = {v}\n")
        self.proc = subprocess.Popen([agent_binary(runtime), "--config", self.conf],
                                     stdout=open(self.log_path, "a"), stderr=subprocess.STDOUT)
        for _ in range(200):
            if self.proc.poll() is not None:
                raise RuntimeError("agent exited at start; see " + self.log_path)
            try:
                s = socket.socket(socket.AF_UNIX)
                s.connect(self.sock)
                s.close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("agent did not open its socket; see " + self.log_path)

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
            "gid": os.getgid(), "partition": "gpu", "cluster": "bench", "gpus": list(gpus),
            "cpus": 64, "memory_mib": 65536, "labels": {},
            "taints": [f"slurm-k8s/job={job_id}:NoSchedule"],
            "namespaces": ["default"]}


def node_name(job_id, slurm_node="n1"):
    return f"slurm-{slurm_node}-{job_id}".lower()


def pod_manifest(name, node, command=("sleep", "3600"), grace=5):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
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
            [SHIM_BIN, "--job-id", str(job_id), "--slurm-node", slurm_node, "--socket", agent.sock,
             "--log-level", "info"],
            stdout=open(self.log_path, "a"), stderr=subprocess.STDOUT, start_new_session=True)

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
    missing = [p for p in [SERVER_PY, AGENT_BIN, TEST_AGENT_BIN] + ([SHIM_BIN] if need_shim else [])
               if not os.path.exists(p)]
    if missing:
        print("missing: " + ", ".join(missing) + " (make bench builds them; set SK_TOP_BUILDDIR)")
        sys.exit(77)
