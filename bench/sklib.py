"""Shared pieces of the slurm-k8s benchmarks (Python 3 standard library only).

Starts the test API server (tests/kube/kube_test_server.py) and the real
slurm-k8s-agent, drives the agent's unix socket, watches the API server
(event arrival times are the measurement, so nothing polls the server while a
timing runs), reads RSS and CPU time of processes from /proc, and writes one
JSON result per benchmark. The server, agent, watch and /proc pieces are the
test layers' (tests/pylib/sktest); this module adds the benchmarks' own. Every benchmark takes its sizes from environment
variables (see each script's docstring) so that a quick run and the final
measurement use the same code.
"""
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time

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
SHIM_BIN = shim_binary()


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


# ---------------------------------------------------------------- agent
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
            "allowed_namespaces": "*",
            "log_level": "info",
        }
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
    progs = [SERVER_PY, agent_binary("fake")]
    if need_shim:
        progs += [agent_binary("shim"), SHIM_BIN]
    missing = sorted({p for p in progs if not os.path.exists(p)})
    if missing:
        print("missing: " + ", ".join(missing) + " (make bench builds them; set SK_TOP_BUILDDIR)")
        sys.exit(77)
