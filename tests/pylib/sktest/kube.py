"""The test API server (tests/kube/kube_test_server.py) for the component tests, the soak and the
benchmarks: one private instance on 127.0.0.1 (any free port), its state dir with the
certificates and tokens it made, API requests as its admin, its /_test controls, and a
streaming watch that records when each event arrived."""
import http.client
import json
import os
import queue
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

from .programs import SERVER_PY

AGENT_USER = "slurm-k8s-agent"  # the user the state dir's agent.token authenticates as


class KubeServer:
    """Starts the server with state dir WORKDIR/kube and log WORKDIR/kube.log and waits until it
    listens (RuntimeError when it exits first or is not ready within `timeout` s)."""

    def __init__(self, workdir, extra_args=(), server_py=SERVER_PY, timeout=30):
        self.dir = os.path.join(workdir, "kube")
        os.makedirs(self.dir, exist_ok=True)
        log = os.path.join(workdir, "kube.log")
        # KUBE_SERVER_COVERAGE=DIR: under python3-coverage, as start-server.sh runs it
        # (tests/kube/coverage.sh).
        cov = os.environ.get("KUBE_SERVER_COVERAGE")
        wrap = ["-m", "coverage", "run", "--parallel-mode", "--concurrency=thread",
                "--data-file=" + os.path.join(cov, ".coverage"),
                "--include=" + os.path.dirname(os.path.abspath(server_py)) + "/*"] if cov else []
        self.proc = subprocess.Popen(
            [sys.executable] + wrap + [server_py, "--listen", "127.0.0.1:0", "--state-dir", self.dir]
            + list(extra_args), stdout=open(log, "w"), stderr=subprocess.STDOUT)
        ready = os.path.join(self.dir, "ready")
        end = time.time() + timeout
        while not (os.path.exists(ready) and open(ready).read().strip()):
            if self.proc.poll() is not None:
                raise RuntimeError("test API server exited; see " + log)
            if time.time() > end:
                self.stop()
                raise RuntimeError("test API server not ready; see " + log)
            time.sleep(0.05)
        self.url = open(ready).read().strip()
        self.host, self.port = self.url.split("//")[1].rsplit(":", 1)
        self.token = open(self.path("admin.token")).read().strip()
        self.ctx = ssl.create_default_context(cafile=self.path("ca.crt"))

    prefix = ""  # the path of the server's URL before /api (none here; a cluster's may have one)

    def auth_headers(self):
        """The admin's credential as request headers (what a Watch sends)."""
        return {"Authorization": "Bearer " + self.token}

    def connection(self, timeout):
        """A new HTTPS connection to the server (what a Watch streams on)."""
        return http.client.HTTPSConnection(self.host, int(self.port), context=self.ctx,
                                           timeout=timeout)

    def path(self, name):
        """A file of the state dir: ca.crt, agent.token, kubeconfig, kubelet-serving.crt, ..."""
        return os.path.join(self.dir, name)

    def api(self, method, path, body=None, ctype="application/json", timeout=30):
        """(HTTP status, decoded JSON body) of one request as the admin; connection errors raise."""
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

    def stop(self, timeout=15):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Watch(threading.Thread):
    """A streaming watch; every event is queued with its arrival time.

    The benchmarks measure with these arrival times instead of polling, so the API server (a
    Python process on the same cores) is not loaded by the measurement itself. `kube` is a
    KubeServer or anything with its connection(), auth_headers() and prefix (the benchmarks'
    client of a real cluster, bench/kubeapi.py)."""

    def __init__(self, kube, path):
        super().__init__(daemon=True)
        sep = "&" if "?" in path else "?"
        self.kube, self.path = kube, path + sep + "watch=1&timeoutSeconds=3600"
        self.events = queue.Queue()
        self.conn = kube.connection(3600)
        self.conn.request("GET", kube.prefix + self.path, headers=kube.auth_headers())
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
