"""The component suites' environment: a private directory with the test API server and the real
agent (AgentEnv: runtime=fake), and with the real shim of a job (ShimEnv: runtime=shim), plus
the job the suites register (REG, NODE) and helpers on its pods.

The agent runs as the test user with admin_uids = our uid and shim_auth = uid; its
job_alive_command says a job runs while DIR/alive_JOB exists, and job_end_command reads the
job's end time from DIR/end_JOB.
"""
import argparse
import os
import signal
import subprocess
import tempfile

from . import memcheck
from .agent import agent_call, start_agent, write_agent_conf
from .host import free_port
from .kube import KubeServer
from .programs import agent_binary, shim_argv, shim_priority
from .suite import SCALE, check, run_suite

REG = {"job_id": 42, "slurm_node": "n1", "user": "alice", "uid": 1000, "partition": "gpu",
       "cluster": "comp", "gpus": [2, 3], "cpus": 4, "memory_mib": 8192,
       "labels": {"team": "rl"}, "namespaces": ["default"]}
NODE = "slurm-n1-42"
SHIM_TIME_SCALE = "0.2"  # SLURM_K8S_SHIM_TEST_TIME_SCALE: probe periods and back-off 5x faster


class AgentEnv:
    def __init__(self, agent, server):
        self.dir = tempfile.mkdtemp(prefix="sk-agent-comp-")
        self.agent_bin, self.server_py = agent, server
        self.kube = self.agent = None
        self.exited = []  # pids that exited normally: their memcheck log is complete

    def kube_args(self):
        """The test API server's command line (suites add their flags)."""
        return ["--lease-grace", "6", "--monitor-period", "1"]

    def start_kube(self):
        self.kube = KubeServer(self.dir, self.kube_args(), server_py=self.server_py)
        self.url, self.kdir = self.kube.url, self.kube.dir

    def conf_settings(self):
        """The agent's config, in file order."""
        return {
            "api_server": self.url,
            "api_ca_file": f"{self.kdir}/ca.crt",
            "api_token_file": f"{self.kdir}/agent.token",
            "cluster_name": "comp",
            "slurm_node": "n1",
            "node_address": "127.0.0.1",
            "node_hostname": "-",
            "state_dir": f"{self.dir}/state",
            "shim_state_dir": f"{self.dir}/shim",
            "socket_path": f"{self.dir}/agent.sock",
            "admin_uids": os.getuid(),
            "shim_auth": "uid",
            "runtime": "fake",
            "lease_duration": "10s",
            "lease_renew_interval": "1s",
            "node_check_interval": 0,
            "gc_interval": "10s",
            "job_alive_command": f"test -e {self.dir}/alive_{{job}}",
            "job_end_command": f"cat {self.dir}/end_{{job}}",
            "log_level": "verbose",
            # The component tests' pods live in several namespaces.
            "allowed_namespaces": "*",
            # The agent's own identity, an explicit choice (the shipped default is
            # bootstrap): these suites check what it writes; test_agent_node_identity.sh
            # and the e2e run the nodes' own identities.
            "node_identity": "agent",
        }

    def write_conf(self):
        self.settings = self.conf_settings()
        self.conf = os.path.join(self.dir, "agent.conf")
        write_agent_conf(self.conf, self.settings)

    def start_agent(self):
        argv = memcheck.wrapper("agent", self.dir) + [
            agent_binary(self.settings["runtime"], self.agent_bin), "--config", self.conf]
        self.agent = start_agent(argv, os.path.join(self.dir, "agent.sock"),
                                 os.path.join(self.dir, "agent.log"), 5 * SCALE)

    def kill_agent(self, sig=signal.SIGTERM):
        if self.agent and self.agent.poll() is None:
            self.agent.send_signal(sig)
            self.agent.wait(10 * SCALE)
            if sig != signal.SIGKILL:
                self.exited.append(self.agent.pid)

    def stop(self):
        self.kill_agent()
        if self.kube:
            self.kube.stop(10)
        if memcheck.checking():
            memcheck.verify(self.dir, check, self.exited)

    def api(self, method, path, body=None, ctype="application/json"):
        return self.kube.api(method, path, body, ctype, timeout=10)

    def call(self, op, body, timeout=30):
        """One request on the agent socket."""
        return agent_call(os.path.join(self.dir, "agent.sock"), op, body, timeout * SCALE)


def shim_reg(**changes):
    """A `register` body for the shim suites' job 42 on n1, as the test user (the shim runs as
    us), with `changes` applied."""
    reg = {"job_id": 42, "slurm_node": "n1", "user": os.environ.get("USER", "me"),
           "uid": os.getuid(), "gid": os.getgid(), "partition": "gpu", "cluster": "comp",
           "gpus": [2, 3], "cpus": 4, "memory_mib": 8192, "namespaces": ["default"]}
    reg.update(changes)
    return reg


class ShimEnv(AgentEnv):
    """The agent with runtime=shim, its kubelet endpoint (the test server's serving certificate
    and CA) and metrics port, and the shim of job 42 started as the plugin's extern step would."""

    def __init__(self, agent, server, shim, kubectl):
        super().__init__(agent, server)
        self.shim_bin, self.kubectl_bin = shim, kubectl
        self.shim = None
        self.metrics_port = free_port()

    def conf_settings(self):
        s = super().conf_settings()
        s["runtime"] = "shim"
        s.update(kubelet_port=0, kubelet_cert=f"{self.kdir}/kubelet-serving.crt",
                 kubelet_key=f"{self.kdir}/kubelet-serving.key", kubelet_client_ca=f"{self.kdir}/ca.crt",
                 metrics_port=self.metrics_port)
        return s

    def spawn_shim(self, job_id, log_name, log_level=None, preexec_fn=None):
        """A shim of job_id (memcheck-wrapped when asked for), output appended to DIR/log_name,
        at the plugin's nice value (shim_priority); preexec_fn runs in the child before the
        exec too."""
        env = dict(os.environ, SLURM_K8S_SHIM_TEST_TIME_SCALE=SHIM_TIME_SCALE)
        argv = shim_argv(self.shim_bin, job_id, os.path.join(self.dir, "agent.sock"), log_level=log_level)
        return subprocess.Popen(memcheck.wrapper("shim", self.dir) + argv,
                                stdout=open(os.path.join(self.dir, log_name), "a"),
                                stderr=subprocess.STDOUT, env=env,
                                preexec_fn=lambda: (shim_priority(), preexec_fn and preexec_fn()))

    def start_shim(self):
        self.shim = self.spawn_shim(42, "shim.log", "verbose")

    def end_job(self, job_id, grace_s):
        """The extern step's deregister; then waits for the shim (it exits
        after `shutdown`). Returns (reply, the shim's exit code or None)."""
        r = self.call("deregister", {"job_id": job_id, "slurm_node": "n1", "grace_s": grace_s,
                                     "reason": "JobEnded"})
        try:
            rc = self.shim.wait(10 * SCALE)
            self.exited.append(self.shim.pid)
        except subprocess.TimeoutExpired:
            rc = None
        return r, rc

    def stop(self):
        # The job's end first, as the extern step's: the shim stops its pods and exits. A
        # SIGKILLed shim would leave its pods' supervisors running (in sessions of their own).
        # Its exit is not added to `exited` (memcheck verifies those): a teardown, not a check.
        if self.shim and self.shim.poll() is None and self.agent and self.agent.poll() is None:
            try:
                self.call("deregister", {"job_id": 42, "slurm_node": "n1", "grace_s": 1,
                                         "reason": "JobEnded"}, timeout=5)
                self.shim.wait(10 * SCALE)
            except Exception:  # noqa: BLE001  (the kill below ends it all the same)
                pass
        if self.shim and self.shim.poll() is None:
            self.shim.kill()
            self.shim.wait(10)
        super().stop()

    def kubectl(self, *args, timeout=20):
        r = subprocess.run([self.kubectl_bin, "--kubeconfig", os.path.join(self.kdir, "kubeconfig")]
                           + list(args), capture_output=True, text=True, timeout=timeout * SCALE)
        return r.returncode, r.stdout, r.stderr


def pod(name, extra_meta=None):
    """A pod bound to NODE for runtime=fake."""
    md = {"name": name}
    md.update(extra_meta or {})
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md,
            "spec": {"nodeName": NODE, "terminationGracePeriodSeconds": 5,
                     "containers": [{"name": "main", "image": "busybox:1.35"}]}}


def phase(env, ns, name):
    """The pod's status.phase, or the HTTP status when it cannot be read (404: gone)."""
    code, p = env.api("GET", f"/api/v1/namespaces/{ns}/pods/{name}")
    return p.get("status", {}).get("phase") if code == 200 else code


def suite_args(shim=False):
    """The component suites' command line: --agent BIN --server kube_test_server.py, and with
    `shim` --shim BIN."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--agent", required=True)
    ap.add_argument("--server", required=True)
    if shim:
        ap.add_argument("--shim", required=True)
    return ap.parse_args()


def shim_suite_main(env_class, body, logs=("agent.log", "shim.log")):
    """main() of a suite on ShimEnv or a subclass (suite_args(shim=True)): 77 (skip) without the
    test API server, kubectl or openssl."""
    import shutil
    a = suite_args(shim=True)
    kubectl = shutil.which("kubectl")
    if not os.path.exists(a.server) or not kubectl or not shutil.which("openssl"):
        print("test API server, kubectl or openssl missing; skipping")
        return 77
    return run_suite(env_class(a.agent, a.server, a.shim, kubectl), body, logs)


def suite_main(body, env_class=None):
    """main() of a suite on AgentEnv, or on the subclass `env_class` (suite_args()); 77 (skip)
    without the test API server."""
    a = suite_args()
    if not os.path.exists(a.server):
        print("test API server missing; skipping")
        return 77
    return run_suite((env_class or AgentEnv)(a.agent, a.server), body, ("agent.log",))
