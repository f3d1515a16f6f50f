"""An HTTP/2 front for the test API server, and the connections a process holds.

kube-apiserver speaks HTTP/2 over TLS and lets one connection carry 100
streams (--http2-max-streams-per-connection's default since the HTTP/2
rapid-reset fixes); the test API server speaks HTTP/1.1. nghttpx (Debian's
nghttp2-proxy) in front of it terminates TLS with the test server's own
certificate, speaks HTTP/2 to clients with that stream limit and forwards each
stream to the test server (bearer tokens pass through; client certificates do
not, so node identities cannot be used through it). Used by
tests/component/agent_http2_test.py and bench/bench_scale.py.
"""
import os
import shutil
import subprocess
import time

from .host import free_port

STREAMS = 100  # kube-apiserver's streams per HTTP/2 connection


def available():
    return shutil.which("nghttpx") is not None


def tcp_established(pid, port):
    """TCP connections of process `pid` to port `port` (IPv4) that are ESTABLISHED."""
    inodes = set()
    fd_dir = "/proc/%d/fd" % pid
    for fd in os.listdir(fd_dir):
        try:
            link = os.readlink(os.path.join(fd_dir, fd))
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    n = 0
    with open("/proc/net/tcp") as f:
        for line in f.read().splitlines()[1:]:
            fl = line.split()
            if fl[3] == "01" and int(fl[2].split(":")[1], 16) == port and fl[9] in inodes:
                n += 1
    return n


def _listening(port):
    with open("/proc/net/tcp") as f:
        return any(int(line.split()[1].split(":")[1], 16) == port and line.split()[3] == "0A"
                   for line in f.read().splitlines()[1:])


class H2Front:
    """nghttpx on 127.0.0.1:<free port> in front of the test API server at `kube_url`, whose
    state dir `kube_dir` holds server.crt/server.key; its logs in `workdir`."""

    def __init__(self, kube_dir, kube_url, workdir, streams=STREAMS, timeout=10):
        self.port = free_port()
        self.url = "https://127.0.0.1:%d" % self.port
        self.access_log = os.path.join(workdir, "nghttpx-access.log")
        self.log = os.path.join(workdir, "nghttpx.log")
        kport = kube_url.rsplit(":", 1)[1]
        self.proc = subprocess.Popen(
            ["nghttpx", "--conf=/dev/null", "--no-ocsp", "--workers=1",
             "-f127.0.0.1,%d" % self.port, "-b127.0.0.1,%s;;tls" % kport, "-k",
             "--frontend-http2-max-concurrent-streams=%d" % streams,
             # watches stay open for minutes; every stream is its own backend connection
             "--backend-read-timeout=1h", "--frontend-read-timeout=1h",
             "--backend-connections-per-host=8192", "--log-level=WARN",
             "--accesslog-file=" + self.access_log, "--accesslog-format=$alpn $status $method $path",
             os.path.join(kube_dir, "server.key"), os.path.join(kube_dir, "server.crt")],
            stdout=open(self.log, "w"), stderr=subprocess.STDOUT)
        end = time.time() + timeout
        while not _listening(self.port):
            if self.proc.poll() is not None or time.time() > end:
                self.stop()
                raise RuntimeError("nghttpx did not listen on %d (see %s)" % (self.port, self.log))
            time.sleep(0.05)

    def access(self):
        """The access log's lines: "ALPN STATUS METHOD PATH" ("h2 ..." over HTTP/2)."""
        return open(self.access_log).read().splitlines() if os.path.exists(self.access_log) else []

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
