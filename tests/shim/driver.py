#!/usr/bin/env python3
"""Component tests for slurm-k8s-shim: real processes, no agent.

This script plays the agent's side of the socket: it listens
on a unix socket, starts the shim, answers `attach` with {node_name, gpus,
state_dir}, sends pod_run/pod_kill/pod_list/shutdown and checks the
pod_status notifications. Time is scaled with SLURM_K8S_SHIM_TEST_TIME_SCALE
(test-only), so a 10 s back-off takes 0.5 s.

usage: driver.py SHIM_BINARY [TEST-NAME...]     prints "N passed, N failed"
"""
import base64
import json
import os
import re
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from sktest.host import alive, free_port  # noqa: E402
from sktest.programs import shim_argv  # noqa: E402

SCALE = 0.05
SHIM = None
# common/daemons/supervisor.h: kSupervisorComm, supervisor_kill_signal().
SUPERVISOR_COMM = "sk-supervise"
SUPERVISOR_KILL_SIGNAL = signal.SIGRTMAX - 1


class Agent:
    def __init__(self, gpus=(0, 1, 2, 3), state_dir=None, extra_args=(), tmp=None, wrap=(),
                 pod_cgroups=False):
        self.tmp = tmp or tempfile.mkdtemp(prefix="shimtest-")
        self.cleanup = []    # paths outside tmp a test made (removed after it)
        self.state_dir = state_dir or os.path.join(self.tmp, "state")
        self.sock_path = os.path.join(self.tmp, "agent.sock")
        if os.path.exists(self.sock_path):
            os.unlink(self.sock_path)
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(self.sock_path)
        self.srv.listen(1)
        env = dict(os.environ, SLURM_K8S_SHIM_TEST_TIME_SCALE=str(SCALE))
        self.stderr = open(os.path.join(self.tmp, "shim.stderr"), "ab")
        self.proc = subprocess.Popen(
            list(wrap) + shim_argv(SHIM, 42, self.sock_path, log_level="verbose") + list(extra_args),
            env=env, stderr=self.stderr)
        self.srv.settimeout(5)
        self.conn, _ = self.srv.accept()
        self.buf = b""
        self.statuses = {}   # uid -> list of (time, status)
        self.events = {}     # uid -> the events of its pod_status messages, in order
        self.next_id = 1000
        req = self.read_msg(5)
        assert req["op"] == "attach", req
        assert req["body"]["job_id"] == 42 and req["body"]["slurm_node"] == "n1", req
        body = {"node_name": "slurm-n1-42", "gpus": list(gpus), "state_dir": self.state_dir}
        if pod_cgroups:
            body["pod_cgroups"] = True
        self.send({"id": req["id"], "ok": True, "body": body})

    def send(self, obj):
        self.conn.sendall((json.dumps(obj) + "\n").encode())

    def read_msg(self, timeout):
        deadline = time.time() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.time()
            if left <= 0:
                return None
            r, _, _ = select.select([self.conn], [], [], left)
            if not r:
                return None
            data = self.conn.recv(65536)
            if not data:
                raise EOFError("shim closed the connection")
            self.buf += data
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def pump(self, timeout):
        """Reads one message; acks and records pod_status; returns replies."""
        m = self.read_msg(timeout)
        if m is None:
            return None
        if m.get("op") == "pod_status":
            b = m["body"]
            self.statuses.setdefault(b["uid"], []).append((time.time(), b["status"]))
            self.events.setdefault(b["uid"], []).extend(b.get("events", []))
            try:
                self.send({"id": m["id"], "ok": True, "body": {}})
            except (BrokenPipeError, ConnectionResetError):
                # A shim that is shutting down sends its pods' last statuses
                # and its reply, then exits without waiting for the acks:
                # what it sent is still read from the socket; only the ack
                # finds no reader.
                pass
            return None
        return m

    def request(self, op, body, timeout=10):
        self.next_id += 1
        rid = self.next_id
        self.send({"v": 1, "id": rid, "op": op, "body": body})
        deadline = time.time() + timeout
        while time.time() < deadline:
            m = self.pump(deadline - time.time())
            if m is not None and m.get("id") == rid:
                return m
        raise AssertionError("no reply to %s within %ss" % (op, timeout))

    def last(self, uid):
        s = self.statuses.get(uid)
        return s[-1][1] if s else None

    def wait(self, uid, pred, timeout=10, what="condition"):
        deadline = time.time() + timeout
        while True:
            st = self.last(uid)
            if st is not None and pred(st):
                return st
            if time.time() > deadline:
                raise AssertionError("timeout waiting for %s; last status: %s"
                                     % (what, json.dumps(st)[:1500]))
            self.pump(min(0.2, max(0.01, deadline - time.time())))

    def wait_event(self, uid, pred, timeout=10, what="event"):
        deadline = time.time() + timeout
        while True:
            found = [e for e in self.events.get(uid, []) if pred(e)]
            if found:
                return found[0]
            if time.time() > deadline:
                raise AssertionError("timeout waiting for %s; events: %s"
                                     % (what, json.dumps(self.events.get(uid, []))[:1500]))
            self.pump(min(0.2, max(0.01, deadline - time.time())))

    def drain(self, seconds):
        deadline = time.time() + seconds
        while time.time() < deadline:
            self.pump(deadline - time.time())

    def exec_start(self, uid, container, command, stdin=False, stdout=True, stderr=True,
                   tty=False, timeout=10):
        """Sends exec_start and plays the agent's side of the session's data connection:
        accepts the shim's connection, answers its exec_attach. Returns (the exec_start
        reply, an ExecConn or None when the shim refused before connecting)."""
        return self.session_start("exec_start", {
            "uid": uid, "container": container, "command": command, "stdin": stdin,
            "stdout": stdout, "stderr": stderr, "tty": tty}, timeout)

    def attach_start(self, uid, container, stdin=False, stdout=True, stderr=True, tty=False,
                     timeout=10):
        """attach_start, its data connection played as exec_start's: (reply, ExecConn or None)."""
        return self.session_start("attach_start", {
            "uid": uid, "container": container, "stdin": stdin, "stdout": stdout,
            "stderr": stderr, "tty": tty}, timeout)

    def session_start(self, op, body, timeout):
        self.next_id += 1
        rid = self.next_id
        session = "sess-%d" % rid
        self.send({"v": 1, "id": rid, "op": op, "body": dict(body, session=session)})
        deadline = time.time() + timeout
        conn = None
        self.srv.settimeout(0.05)
        try:
            while conn is None:
                assert time.time() < deadline, "no %s data connection within %ss" % (op, timeout)
                m = self.pump(0.05)
                if m is not None and m.get("id") == rid:
                    return m, None  # refused before connecting
                try:
                    c, _ = self.srv.accept()
                except socket.timeout:
                    continue
                c.settimeout(timeout)
                conn = ExecConn(c)
                hello = conn.read_line()
                assert hello["op"] == "exec_attach" and hello["body"] == {"session": session}, hello
                c.sendall((json.dumps({"id": hello["id"], "ok": True, "body": {}}) + "\n").encode())
        finally:
            self.srv.settimeout(5)
        while time.time() < deadline:
            m = self.pump(deadline - time.time())
            if m is not None and m.get("id") == rid:
                return m, conn
        raise AssertionError("no reply to %s within %ss" % (op, timeout))

    def crash(self):
        """The shim killed with SIGKILL (no shutdown), and this agent's side closed."""
        self.proc.kill()
        self.proc.wait()
        self.conn.close()
        self.srv.close()

    def close(self):
        try:
            if self.proc.poll() is None:
                self.request("shutdown", {"grace_s": 2, "reason": "Shutdown"}, timeout=10)
                self.proc.wait(5)
        except Exception:
            pass
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self.conn.close()
            self.srv.close()
            self.stop_recorded_containers()

    def stop_recorded_containers(self):
        """Stops the containers (supervisors) a shim that is gone recorded and left running,
        as a restarted shim or the agent would: a test that failed half-way (a shim killed,
        an assertion before the restart) must leave no process behind. A recorded pid counts
        only while its start time and name still match (the pid may have been reused)."""
        pods = os.path.join(self.state_dir, "pods")
        try:
            uids = os.listdir(pods)
        except OSError:
            return
        for uid in uids:
            try:
                with open(os.path.join(pods, uid, "state.json")) as f:
                    procs = json.load(f).get("processes") or {}
            except (OSError, ValueError, AttributeError):
                continue
            for rec in procs.values():
                pid, ticks = rec.get("pid"), rec.get("start_ticks")
                try:
                    with open("/proc/%d/stat" % pid) as f:
                        stat = f.read()
                except (OSError, TypeError):
                    continue
                comm = stat[stat.index("(") + 1:stat.rindex(")")]
                if comm == SUPERVISOR_COMM and int(stat[stat.rindex(")") + 2:].split()[19]) == ticks:
                    try:
                        os.kill(pid, SUPERVISOR_KILL_SIGNAL)
                    except OSError:
                        pass


class ExecConn:
    """The agent's end of an exec session's data connection: frames of
    [channel][length, 4 bytes big-endian][payload] (common/daemons/exec_frames.h)."""
    STDIN, STDOUT, STDERR, EXIT, RESIZE, CLOSE = 0, 1, 2, 3, 4, 255

    def __init__(self, sock):
        self.sock, self.buf = sock, b""
        self.out, self.err, self.exit, self.eof = b"", b"", None, False

    def _more(self):
        data = self.sock.recv(65536)
        if not data:
            self.eof = True
        self.buf += data

    def read_line(self):
        while b"\n" not in self.buf:
            self._more()
            if self.eof:
                raise EOFError("the shim closed the data connection")
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def send(self, channel, payload=b""):
        self.sock.sendall(bytes([channel]) + struct.pack(">I", len(payload)) + payload)

    def stdin(self, data):
        self.send(self.STDIN, data)

    def close_stdin(self):
        self.send(self.CLOSE, b"\x00")

    def resize(self, width, height):
        self.send(self.RESIZE, json.dumps({"Width": width, "Height": height}).encode())

    def read_frame(self, timeout):
        """The next frame's (channel, payload); None at EOF; raises on a timeout."""
        self.sock.settimeout(timeout)
        while True:
            if len(self.buf) >= 5:
                n = struct.unpack(">I", self.buf[1:5])[0]
                if len(self.buf) >= 5 + n:
                    ch, payload, self.buf = self.buf[0], self.buf[5:5 + n], self.buf[5 + n:]
                    return ch, payload
            if self.eof:
                return None
            self._more()

    def wait_output(self, pred, timeout=10):
        """Reads frames until pred(stdout bytes) holds; the stdout so far."""
        deadline = time.time() + timeout
        while not pred(self.out):
            f = self.read_frame(max(0.01, deadline - time.time()))
            assert f is not None, "EOF before the output: %r %r" % (self.out, self.err)
            self._take(f)
        return self.out

    def _take(self, f):
        ch, payload = f
        assert ch in (self.STDOUT, self.STDERR, self.EXIT), "channel %d from the shim" % ch
        assert self.exit is None, "a frame after the exit: %r" % (f,)
        if ch == self.STDOUT:
            self.out += payload
        elif ch == self.STDERR:
            self.err += payload
        else:
            self.exit = json.loads(payload)

    def finish(self, timeout=10):
        """Reads to EOF: (stdout, stderr, the Exit frame's object or None)."""
        deadline = time.time() + timeout
        while True:
            f = self.read_frame(max(0.01, deadline - time.time()))
            if f is None:
                self.sock.close()
                return self.out, self.err, self.exit
            self._take(f)

    def close(self):
        self.sock.close()


def pod(name, containers, init=None, restart="Always", uid=None, grace=None, volumes=None,
        spec_extra=None):
    spec = {"containers": containers, "restartPolicy": restart}
    if init:
        spec["initContainers"] = init
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    if volumes:
        spec["volumes"] = volumes
    if spec_extra:
        spec.update(spec_extra)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "rl", "uid": uid or ("uid-" + name)},
            "spec": spec}


def sh(name, script, **kw):
    c = {"name": name, "image": "busybox", "command": ["/bin/sh", "-c", script]}
    c.update(kw)
    return c


def cstatus(st, name, key="containerStatuses"):
    for c in st.get(key, []):
        if c["name"] == name:
            return c
    return None


def cond(st, t):
    for c in st.get("conditions", []):
        if c["type"] == t:
            return c
    return {}


def read_log(agent, uid, cname, n=0):
    path = os.path.join(agent.state_dir, "pods", uid, cname, "%d.log" % n)
    with open(path) as f:
        return f.read()


CRI_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z (stdout|stderr) [FP] .*$")


def log_content(text):
    out = []
    for line in text.splitlines():
        assert CRI_LINE.match(line), "not a CRI log line: %r" % line
        out.append(line.split(" ", 3)[3])
    return out


def running(st, name):
    """The container (an app or an init container) of that name runs."""
    c = cstatus(st, name) or cstatus(st, name, "initContainerStatuses")
    return c is not None and "running" in c["state"]


# ---- tests ----

def test_init_and_two_containers(a):
    p = pod("two", [
        sh("app-a", 'trap "exit 0" TERM; cat $SLURM_K8S_VOLUME_WORK/x; echo "A=$A B=$B"; '
                    'echo "args:" "$0" "$1"; while :; do sleep 0.1; done',
           env=[{"name": "A", "value": "1"}, {"name": "B", "value": "$(A)-2-$(NOPE)-$$(A)"}],
           args=["$(A)", "$(B)"]),
        sh("app-b", 'trap "exit 0" TERM; pwd; while :; do sleep 0.1; done',
           workingDir="/tmp"),
    ], init=[sh("init", "sleep 0.3; echo from-init > $SLURM_K8S_VOLUME_WORK/x")],
        volumes=[{"name": "work", "emptyDir": {}}])
    uid = p["metadata"]["uid"]
    r = a.request("pod_run", {"pod": p, "files": {}})
    assert r["ok"], r
    st = a.wait(uid, lambda s: cstatus(s, "init", "initContainerStatuses") is not None,
                what="first status")
    first = a.statuses[uid][0][1]
    assert first["phase"] == "Pending", first
    assert cond(first, "Initialized")["status"] == "False", first
    assert cond(first, "Initialized")["reason"] == "ContainersNotInitialized", first
    assert cstatus(first, "app-a")["state"]["waiting"]["reason"] == "PodInitializing", first
    st = a.wait(uid, lambda s: s["phase"] == "Running" and cond(s, "Ready")["status"] == "True",
                what="Running and Ready")
    init = cstatus(st, "init", "initContainerStatuses")
    assert init["state"]["terminated"]["reason"] == "Completed", init
    assert init["ready"] is True, init
    assert cstatus(st, "app-a")["containerID"] == "slurm-k8s://%s/app-a/0" % uid
    # The shim writes the logs as it reads the pipes: wait for each container's last line.
    wait_log(a, uid, "app-a", "args: 1 1-2-$(NOPE)-$(A)")
    wait_log(a, uid, "app-b", "/tmp")
    log = log_content(read_log(a, uid, "app-a"))
    assert "from-init" in log, log
    # Env order + $(VAR): B sees A, unknown refs stay, $$ escapes.
    assert "A=1 B=1-2-$(NOPE)-$(A)" in log, log
    assert "args: 1 1-2-$(NOPE)-$(A)" in log, log
    assert log_content(read_log(a, uid, "app-b")) == ["/tmp"]
    r = a.request("pod_kill", {"uid": uid, "grace_s": 5, "reason": "Killing"})
    assert r["ok"], r
    st = a.wait(uid, lambda s: s["phase"] == "Succeeded", what="Succeeded after kill")
    assert cond(st, "Ready")["reason"] == "PodCompleted", st
    assert cstatus(st, "app-a")["state"]["terminated"]["exitCode"] == 0, st
    # Idempotent: running the same uid again does nothing.
    n = len(a.statuses[uid])
    assert a.request("pod_run", {"pod": p, "files": {}})["ok"]
    a.drain(0.3)
    assert len(a.statuses[uid]) == n, "pod_run of a known uid changed something"


def test_crashloop_backoff(a):
    p = pod("crash", [sh("main", "echo crashing; exit 1")])
    uid = p["metadata"]["uid"]
    assert a.request("pod_run", {"pod": p, "files": {}})["ok"]
    st = a.wait(uid, lambda s: cstatus(s, "main")["restartCount"] >= 3, timeout=15,
                what="3 restarts")
    seq = [s for _, s in a.statuses[uid]]
    msgs = [cstatus(s, "main")["state"]["waiting"].get("message", "") for s in seq
            if "waiting" in cstatus(s, "main")["state"]]
    backoffs = [m for m in msgs if m.startswith("back-off")]
    assert backoffs[:2] == [
        "back-off 10s restarting failed container=main pod=crash_rl(%s)" % uid,
        "back-off 20s restarting failed container=main pod=crash_rl(%s)" % uid], backoffs
    reasons = {cstatus(s, "main")["state"]["waiting"]["reason"] for s in seq
               if "waiting" in cstatus(s, "main")["state"]}
    assert "CrashLoopBackOff" in reasons, reasons
    assert all(s["phase"] in ("Pending", "Running") for s in seq), [s["phase"] for s in seq]
    c = cstatus(st, "main")
    assert c["lastState"]["terminated"]["exitCode"] == 1, c
    assert c["lastState"]["terminated"]["reason"] == "Error", c
    # Start times of each restart: 0, then >= 10 s and >= 20 s (scaled).
    starts = {}
    for t, s in a.statuses[uid]:
        c = cstatus(s, "main")
        if "running" in c["state"] or "terminated" in c["state"]:
            starts.setdefault(c["restartCount"], t)
    gap1 = starts[2] - starts[1]
    gap2 = starts[3] - starts[2]
    assert gap1 >= 10 * SCALE * 0.9 and gap2 >= 20 * SCALE * 0.9, (gap1, gap2)
    assert gap2 > gap1 * 1.5, ("back-off did not double", gap1, gap2)
    # Logs: one file per restart; the previous instance is kept.
    assert log_content(read_log(a, uid, "main", 0)) == ["crashing"]
    assert log_content(read_log(a, uid, "main", 1)) == ["crashing"]
    assert a.request("pod_kill", {"uid": uid, "grace_s": 1})["ok"]
    st = a.wait(uid, lambda s: s["phase"] == "Failed", what="Failed after kill")
    assert cond(st, "Ready")["reason"] == "PodFailed", st


def test_never_exit_codes(a):
    ok = pod("ok", [sh("main", "exit 0")], restart="Never")
    bad = pod("bad", [sh("main", "echo last words; exit 3",
                         terminationMessagePolicy="FallbackToLogsOnError")], restart="Never")
    for p in (ok, bad):
        assert a.request("pod_run", {"pod": p, "files": {}})["ok"]
    st = a.wait("uid-ok", lambda s: s["phase"] == "Succeeded", what="Succeeded")
    t = cstatus(st, "main")["state"]["terminated"]
    assert t["exitCode"] == 0 and t["reason"] == "Completed", t
    assert cstatus(st, "main")["restartCount"] == 0
    st = a.wait("uid-bad", lambda s: s["phase"] == "Failed", what="Failed")
    t = cstatus(st, "main")["state"]["terminated"]
    assert t["exitCode"] == 3 and t["reason"] == "Error", t
    assert t["message"] == "last words\n", t


def test_command_line_limits(a):
    """A command line is bounded by the kernel's limit (ARG_MAX: words and environment
    together), as any process's, not by one environment variable: about 1 MiB of arguments runs;
    one over ARG_MAX fails to start with StartError and a message saying why."""
    word = "x" * (120 * 1024)   # under MAX_ARG_STRLEN (128 KiB) each
    big = pod("bigargs", [{"name": "main", "image": "busybox", "command": ["/bin/sh", "-c",
                           'n=0; for w in "$@"; do n=$((n + ${#w})); done; echo "$# words $n bytes"',
                           "sh"] + [word] * 8}], restart="Never")
    assert a.request("pod_run", {"pod": big, "files": {}})["ok"]
    st = a.wait("uid-bigargs", lambda s: s["phase"] in ("Succeeded", "Failed"), timeout=30, what="end")
    t = cstatus(st, "main")["state"]["terminated"]
    assert st["phase"] == "Succeeded" and t["exitCode"] == 0, t
    out = log_content(read_log(a, "uid-bigargs", "main"))
    assert out == ["8 words %d bytes" % (8 * len(word))], out
    arg_max = os.sysconf("SC_ARG_MAX")
    n = arg_max // len(word) + 2
    if n * len(word) > (12 << 20):
        print("   (ARG_MAX %d here: no command over it is tried)" % arg_max)
        return
    huge = pod("hugeargs", [{"name": "main", "image": "busybox", "command": ["/bin/true"] + [word] * n}],
               restart="Never")
    assert a.request("pod_run", {"pod": huge, "files": {}}, timeout=30)["ok"]
    st = a.wait("uid-hugeargs", lambda s: s["phase"] in ("Succeeded", "Failed"), timeout=30, what="end")
    t = cstatus(st, "main")["state"]["terminated"]
    assert t["reason"] == "StartError" and "argument list too long" in t.get("message", "") \
        and "ARG_MAX" in t.get("message", ""), t


def test_probe_foreign_listener(a):
    """Pods share the node's network: another user's process that took the port first must not
    make the pod Ready. A readiness probe that reaches a listener of another uid fails, says so
    in its event and in the pod's Ready condition; the pod's own listener passes."""
    who = other_user()
    if not who:
        print("   (not root: no other user to own the listener; skipped)")
        return
    port = free_port()
    # The intruder: a listener of user `nobody` on the port, before the pod starts.
    # /usr/bin/python3: the other user may not reach the test's own interpreter.
    py = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
    intruder = subprocess.Popen(
        [py, "-c", "import socket, time\n"
         "l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
         "l.bind(('127.0.0.1', %d)); l.listen(8)\n"
         "while True:\n  c, _ = l.accept(); c.sendall(b'HTTP/1.1 200 OK\\r\\n\\r\\n'); c.close()\n" % port],
        preexec_fn=lambda: (os.setgid(who[1]), os.setuid(who[0])))
    try:
        wait_true(lambda: subprocess.run(["ss", "-Hltn", "sport = :%d" % port], capture_output=True,
                                         text=True).stdout.strip(), 10, "the intruder listens")
        p = pod("victim", [sh("main", 'trap "exit 0" TERM; while :; do sleep 0.1; done',
                              readinessProbe={"httpGet": {"path": "/", "port": port, "host": "127.0.0.1"},
                                              "periodSeconds": 1})])
        assert a.request("pod_run", {"pod": p, "files": {}})["ok"]
        a.wait_event("uid-victim", lambda e: e["reason"] == "Unhealthy" and
                     "belongs to another user (uid %d)" % who[0] in e["message"],
                     what="the probe refused the other user's listener")
        st = a.wait("uid-victim", lambda s: "belongs to another user" in cond(s, "Ready").get("message", ""),
                    what="the Ready condition says why")
        assert cond(st, "Ready")["status"] == "False", cond(st, "Ready")
        assert not cstatus(st, "main")["ready"]
    finally:
        intruder.kill()
        intruder.wait()


def test_started_only_when_started(a):
    """A container whose command never runs (no such program; through the exec helper too, for a
    pod with volumeMounts) is never reported Running (a kubelet posts Started only for a container
    that started): StartError with the reason. One that runs is Running, as before."""
    cases = [
        pod("nocmd", [{"name": "main", "image": "busybox", "command": ["/no/such/program"]}],
            restart="Never"),
        pod("nocmdmnt", [{"name": "main", "image": "busybox", "command": ["/no/such/program"],
                          "volumeMounts": [{"name": "work", "mountPath": a.tmp + "/work"}]}],
            restart="Never", volumes=[{"name": "work", "emptyDir": {}}]),
    ]
    for p in cases:
        uid = p["metadata"]["uid"]
        assert a.request("pod_run", {"pod": p, "files": {}})["ok"]
        st = a.wait(uid, lambda s: s["phase"] == "Failed", what="Failed")
        t = cstatus(st, "main")["state"]["terminated"]
        assert t["reason"] == "StartError" and "/no/such/program" in t.get("message", ""), t
        ran = [s for _, s in a.statuses[uid] if "running" in (cstatus(s, "main") or {}).get("state", {})]
        assert not ran, "%s reported Running: %s" % (uid, ran[0])
    ok = pod("runs", [sh("main", "echo hi; sleep 0.5")], restart="Never")
    assert a.request("pod_run", {"pod": ok, "files": {}})["ok"]
    a.wait("uid-runs", lambda s: running(s, "main"), what="Running")
    a.wait("uid-runs", lambda s: s["phase"] == "Succeeded", what="Succeeded")


# An exec probe whose success a test needs gets this timeout: probe times are
# scaled like every time of the shim here (SHIM_TIME_SCALE), so the default 1 s
# would be 0.2 s, which a sanitizer build on a loaded machine misses (a probe
# is a supervisor, the exec helper and the command: three execs).
PROBE_TIMEOUT_S = 60


def test_readiness_flips_ready(a):
    p = pod("ready", [sh("main", 'trap "exit 0" TERM; sleep 0.6; touch $SLURM_K8S_POD_DIR/ready; '
                                 'while :; do sleep 0.1; done',
                         readinessProbe={"exec": {"command": ["test", "-f", "ready"]},
                                         "periodSeconds": 2, "failureThreshold": 1,
                                         "timeoutSeconds": PROBE_TIMEOUT_S})])
    uid = p["metadata"]["uid"]
    assert a.request("pod_run", {"pod": p, "files": {}})["ok"]
    st = a.wait(uid, lambda s: running(s, "main"), what="running")
    assert cstatus(st, "main")["ready"] is False, st
    assert cstatus(st, "main")["started"] is True, st
    assert cond(st, "Ready")["status"] == "False", st
    assert cond(st, "Ready")["message"] == "containers with unready status: [main]", st
    st = a.wait(uid, lambda s: cond(s, "Ready")["status"] == "True", what="Ready", timeout=30)
    assert cstatus(st, "main")["ready"] is True


def test_http_and_tcp_probes(a):
    # Probe periods and timeouts are scaled (SCALE): a liveness probe with the default
    # failureThreshold gives up after 150 ms, less than a Python interpreter takes to
    # start on a loaded machine. As a real slow-starting server would, the pods carry a
    # startupProbe whose window (failureThreshold x periodSeconds, 50 s scaled) is longer
    # than any wait below, so readiness and liveness run only once the server listens
    # (k8s-shim/probe.h). The server then opens its socket with a large backlog before it
    # imports http.server, so a connect succeeds whenever it listens, even while the
    # machine keeps it from running.
    def server(port):
        return ("import socket\n"
                "l = socket.socket()\n"
                "l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
                "l.bind(('127.0.0.1', %d)); l.listen(128)\n"
                "import http.server as h\n"
                "class H(h.BaseHTTPRequestHandler):\n"
                "  def do_GET(s):\n"
                "    s.send_response(200 if s.path=='/healthz' else 404); s.end_headers()\n"
                "  def log_message(s,*a): pass\n"
                "srv = h.HTTPServer(('127.0.0.1', %d), H, bind_and_activate=False)\n"
                "srv.socket = l\n"
                "srv.serve_forever()\n" % (port, port))

    def startup(port):
        return {"tcpSocket": {"port": port}, "periodSeconds": 1, "failureThreshold": 1000}

    port = free_port()
    p = pod("http", [{"name": "web", "image": "python",
                      "command": [sys.executable, "-c", server(port)],
                      "ports": [{"name": "http", "containerPort": port}],
                      "startupProbe": startup(port),
                      "readinessProbe": {"httpGet": {"path": "/healthz", "port": "http"},
                                         "periodSeconds": 1},
                      "livenessProbe": {"tcpSocket": {"port": port}, "periodSeconds": 1}}])
    uid = p["metadata"]["uid"]
    assert a.request("pod_run", {"pod": p, "files": {}})["ok"]
    st = a.wait(uid, lambda s: cond(s, "Ready")["status"] == "True", timeout=10,
                what="Ready via httpGet")
    a.drain(1.0)
    assert cstatus(a.last(uid), "web")["restartCount"] == 0, "tcp liveness killed a healthy server"
    # A probe on a path that answers 404 never makes the pod ready: the server answered
    # (an Unhealthy event with the status code) and the pod is still not Ready.
    bad_port = free_port()
    bad = pod("http404", [{"name": "web", "image": "python",
                           "command": [sys.executable, "-c", server(bad_port)],
                           "startupProbe": startup(bad_port),
                           "readinessProbe": {"httpGet": {"path": "/nope", "port": bad_port},
                                              "periodSeconds": 1}}])
    assert a.request("pod_run", {"pod": bad, "files": {}})["ok"]
    a.wait("uid-http404", lambda s: running(s, "web"), what="running")
    a.wait_event("uid-http404", lambda e: e["reason"] == "Unhealthy" and e["message"] ==
                 "Readiness probe failed: HTTP probe failed with statuscode: 404",
                 what="a readiness probe answered 404")
    a.drain(1.0)
    assert cond(a.last("uid-http404"), "Ready")["status"] == "False"
    # A tcp liveness probe on a port nobody listens on kills the container.
    dead = pod("tcpdead", [sh("main", 'trap "exit 0" TERM; while :; do sleep 0.1; done',
                              livenessProbe={"tcpSocket": {"port": free_port()},
                                             "periodSeconds": 1})])
    assert a.request("pod_run", {"pod": dead, "files": {}})["ok"]
    a.wait("uid-tcpdead", lambda s: cstatus(s, "main")["restartCount"] >= 1, timeout=10,
           what="restart by tcp liveness")


HTTPS_SERVER = """
import socket, ssl, sys
port, cert, key = int(sys.argv[1]), sys.argv[2], sys.argv[3]
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(('127.0.0.1', port)); l.listen(128)
import http.server as h
class H(h.BaseHTTPRequestHandler):
    def do_GET(s):
        s.send_response(200 if s.path == '/healthz' else 500); s.end_headers()
    def log_message(s, *a): pass
srv = h.HTTPServer(('127.0.0.1', port), H, bind_and_activate=False)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); ctx.load_cert_chain(cert, key)
srv.socket = ctx.wrap_socket(l, server_side=True)
srv.serve_forever()
"""

# grpc.health.v1.Health/Check with grpcio's generic handlers (no generated code): the request's
# field 1 (service) read by hand, SERVING (1) but for the service "down" (NOT_SERVING, 2).
GRPC_SERVER = """
import concurrent.futures, sys, threading, grpc
def check(req, ctx):
    svc = req[2:2 + req[1]].decode() if len(req) > 1 and req[0] == 0x0a else ''
    return bytes([0x08, 2 if svc == 'down' else 1])
h = grpc.method_handlers_generic_handler('grpc.health.v1.Health', {
    'Check': grpc.unary_unary_rpc_method_handler(check)})
s = grpc.server(concurrent.futures.ThreadPoolExecutor(4), handlers=[h])
s.add_insecure_port('127.0.0.1:%s' % sys.argv[1]); s.start(); threading.Event().wait()
"""


def test_https_and_grpc_probes(a):
    """httpGet of scheme HTTPS (the server's certificate is not checked, as by a kubelet) and grpc
    probes (grpc.health.v1 over cleartext HTTP/2, a real grpcio server): passing makes the pod Ready,
    an HTTP 500 and a NOT_SERVING answer fail with the kubelet's words. The servers are containers
    of the pods; a startupProbe holds the others until they listen (their timeouts are scaled)."""
    cert, key = os.path.join(a.tmp, "tls.crt"), os.path.join(a.tmp, "tls.key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=probe",
                    "-days", "1", "-keyout", key, "-out", cert], check=True, capture_output=True)
    tport, gport = free_port(), free_port()

    def startup(port):
        return {"tcpSocket": {"port": port}, "periodSeconds": 1, "failureThreshold": 1000}
    slow = {"periodSeconds": 1, "timeoutSeconds": 100}  # 5 s, scaled: a TLS handshake under load
    p = pod("tlsgrpc", [
        {"name": "tls", "image": "python", "command": [sys.executable, "-c", HTTPS_SERVER, str(tport), cert, key],
         "startupProbe": startup(tport),
         "readinessProbe": dict(slow, httpGet={"path": "/healthz", "port": tport, "scheme": "HTTPS"})},
        {"name": "grpc", "image": "python", "command": [sys.executable, "-c", GRPC_SERVER, str(gport)],
         "startupProbe": startup(gport),
         "readinessProbe": dict(slow, grpc={"port": gport}),
         "livenessProbe": dict(slow, grpc={"port": gport, "service": "api"})}])
    uid = p["metadata"]["uid"]
    assert a.request("pod_run", {"pod": p, "files": {}})["ok"]
    a.wait(uid, lambda s: cond(s, "Ready")["status"] == "True", timeout=30,
           what="Ready via an HTTPS and a grpc readiness probe")
    a.drain(1.0)
    assert cstatus(a.last(uid), "grpc")["restartCount"] == 0, "grpc liveness failed a serving server"
    bad = pod("tlsgrpcbad", [sh("main", "trap 'exit 0' TERM; while :; do sleep 0.1; done",
                                readinessProbe=dict(slow, httpGet={"path": "/bad", "port": tport,
                                                                   "scheme": "HTTPS"})),
                             sh("other", "trap 'exit 0' TERM; while :; do sleep 0.1; done",
                                readinessProbe=dict(slow, grpc={"port": gport, "service": "down"}))])
    buid = bad["metadata"]["uid"]
    assert a.request("pod_run", {"pod": bad, "files": {}})["ok"]
    a.wait_event(buid, lambda e: e["reason"] == "Unhealthy" and e["message"] ==
                 "Readiness probe failed: HTTP probe failed with statuscode: 500", timeout=20,
                 what="an HTTPS probe answered 500")
    a.wait_event(buid, lambda e: e["reason"] == "Unhealthy" and e["message"] ==
                 'Readiness probe failed: service unhealthy (responded with "NOT_SERVING")', timeout=20,
                 what="a grpc probe answered NOT_SERVING")
    assert cond(a.last(buid), "Ready")["status"] == "False"


HOOK_SERVER = """
import socket, sys, time
port, logf = int(sys.argv[1]), sys.argv[2]
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(('127.0.0.1', port)); l.listen(128)
import http.server as h
class H(h.BaseHTTPRequestHandler):
    def do_GET(s):
        open(logf, 'a').write('%s %f\\n' % (s.path, time.time()))
        s.send_response(200); s.end_headers()
    def log_message(s, *a): pass
srv = h.HTTPServer(('127.0.0.1', port), H, bind_and_activate=False)
srv.socket = l
srv.serve_forever()
"""


def test_lifecycle_hooks(a):
    """postStart and preStop as a kubelet runs them: a container is not Running until its postStart
    (exec, httpGet) passed; a failing postStart kills it (FailedPostStartHook) and it restarts; a
    preStop httpGet is answered before the container's SIGTERM, a preStop sleep delays it."""
    hport, hlog = free_port(), os.path.join(a.tmp, "hooks.log")
    srv = subprocess.Popen([sys.executable, "-c", HOOK_SERVER, str(hport), hlog])
    try:
        wait_true(lambda: socket_open(hport), 20, "the hook server listens")
        marker = os.path.join(a.tmp, "poststart-done")
        term = os.path.join(a.tmp, "term-%s")
        loop = "trap 'date +%%s.%%N > %s; exit 0' TERM; touch %s.ready; while :; do sleep 0.1; done"
        p = pod("hooks", [
            sh("exechook", loop % (term % "exechook", term % "exechook"),
               lifecycle={"postStart": {"exec": {"command": ["/bin/sh", "-c", "sleep 1; touch " + marker]}}}),
            sh("httphook", loop % (term % "httphook", term % "httphook"),
               lifecycle={"postStart": {"httpGet": {"port": hport, "path": "/start", "host": "127.0.0.1"}},
                          "preStop": {"httpGet": {"port": hport, "path": "/stop", "host": "127.0.0.1"}}}),
            sh("sleephook", loop % (term % "sleephook", term % "sleephook"),
               lifecycle={"preStop": {"sleep": {"seconds": 1}}})], grace=20)
        uid = p["metadata"]["uid"]
        assert a.request("pod_run", {"pod": p, "files": {}})["ok"]
        a.wait(uid, lambda s: running(s, "exechook"), timeout=20, what="exechook Running")
        assert os.path.exists(marker), "Running before its postStart hook ended"
        a.wait(uid, lambda s: running(s, "httphook"), timeout=20, what="httphook Running")
        assert "/start " in open(hlog).read(), open(hlog).read()
        a.wait(uid, lambda s: running(s, "sleephook"), what="sleephook Running")
        # Each holds its TERM trap (a signal before it would leave no time).
        wait_true(lambda: all(os.path.exists(term % n + ".ready") for n in ("exechook", "httphook", "sleephook")),
                  20, "the containers' traps set")
        killed = time.time()
        assert a.request("pod_kill", {"uid": uid, "grace_s": 20, "reason": "Killing"})["ok"]
        a.wait(uid, lambda s: s["phase"] in ("Succeeded", "Failed"), timeout=30, what="stopped")
        stop_at = [float(l.split()[1]) for l in open(hlog) if l.startswith("/stop ")]
        assert stop_at, open(hlog).read()
        assert stop_at[0] <= float(open(term % "httphook").read()), "SIGTERM before the preStop httpGet"
        assert float(open(term % "sleephook").read()) - killed >= 0.9, "the preStop sleep did not delay SIGTERM"

        bad = pod("badhook", [sh("main", "while :; do sleep 0.1; done",
                                 lifecycle={"postStart": {"exec": {"command": ["/bin/sh", "-c", "exit 3"]}}})])
        buid = bad["metadata"]["uid"]
        assert a.request("pod_run", {"pod": bad, "files": {}})["ok"]
        ev = a.wait_event(buid, lambda e: e["reason"] == "FailedPostStartHook", timeout=20,
                          what="FailedPostStartHook")
        assert ev["type"] == "Warning" and "Exec lifecycle hook ([/bin/sh -c exit 3])" in ev["message"] \
            and "exit code 3" in ev["message"], ev
        a.wait(buid, lambda s: cstatus(s, "main")["restartCount"] >= 1, timeout=20,
               what="restarted after its postStart failed")
    finally:
        srv.kill()
        srv.wait()


def test_native_sidecars(a):
    """Init containers of restartPolicy Always, as a kubelet (1.29+) runs them: the next init
    container starts once the sidecar started (its startupProbe passed), the sidecar runs beside the
    app container and restarts whatever the pod's policy; when the app container completed, the
    sidecar gets SIGTERM after it and the pod is Succeeded; a stopped pod's app containers end
    before its sidecars, the last sidecar first."""
    d = a.tmp
    side = ("trap 'date +%%s.%%N > %s/%s-term; exit 0' TERM; sleep 0.3; touch %s/%s-ready; "
            "while :; do sleep 0.1; done")
    # Exec probes' timeouts are scaled (SCALE): 100 s is 5 s, what a shell takes to start under
    # the sanitizers on a loaded machine.
    startup = {"exec": {"command": ["/bin/sh", "-c", "test -e %s/proxy-ready" % d]},
               "periodSeconds": 1, "failureThreshold": 1000, "timeoutSeconds": 100}
    p = pod("sidecars", [sh("main", "test -e %s/setup-done && date +%%s.%%N > %s/main-done" % (d, d))],
            init=[sh("proxy", side % (d, "proxy", d, "proxy"), restartPolicy="Always",
                     startupProbe=startup,
                     readinessProbe={"exec": {"command": ["true"]}, "periodSeconds": 1, "timeoutSeconds": 100}),
                  sh("setup", "test -e %s/proxy-ready && touch %s/setup-done" % (d, d))],
            restart="Never", grace=10)
    uid = p["metadata"]["uid"]
    assert a.request("pod_run", {"pod": p, "files": {}})["ok"]
    st = a.wait(uid, lambda s: s["phase"] in ("Succeeded", "Failed") and
                not running(s, "proxy") and cstatus(s, "proxy", "initContainerStatuses")["state"].get("terminated"),
                timeout=30, what="the pod completed and its sidecar stopped")
    assert st["phase"] == "Succeeded", st
    assert os.path.exists(os.path.join(d, "setup-done")), "setup ran before the sidecar started"
    proxy = cstatus(st, "proxy", "initContainerStatuses")
    assert proxy["state"]["terminated"]["exitCode"] == 0, proxy
    assert float(open(os.path.join(d, "proxy-term")).read()) >= float(open(os.path.join(d, "main-done")).read())
    assert cond(st, "Initialized")["status"] == "True", st

    # A sidecar that exits is restarted though the pod's policy is Never; a stop ends the app
    # container first, then the sidecars, the last first.
    crash = ("n=$(cat %s/crashes 2>/dev/null || echo 0); echo $((n+1)) > %s/crashes; "
             "[ $n -ge 1 ] || exit 1; " % (d, d)) + side % (d, "late", d, "late")
    q = pod("sidecars2", [sh("app", "trap 'date +%%s.%%N > %s/app-term; exit 0' TERM; "
                                    "touch %s/app-ready; while :; do sleep 0.1; done" % (d, d))],
            init=[sh("early", side % (d, "early", d, "early"), restartPolicy="Always"),
                  sh("late", crash, restartPolicy="Always")],
            restart="Never", grace=10)
    quid = q["metadata"]["uid"]
    assert a.request("pod_run", {"pod": q, "files": {}})["ok"]
    # Each holds its TERM trap once its ready file is there (a restarted instance killed
    # before would end by the signal, leaving no time).
    st = a.wait(quid, lambda s: running(s, "app") and
                cstatus(s, "late", "initContainerStatuses")["restartCount"] >= 1 and
                all(os.path.exists(os.path.join(d, n + "-ready")) for n in ("app", "early", "late")),
                timeout=30, what="the app running, its crashed sidecar restarted")
    assert a.request("pod_kill", {"uid": quid, "grace_s": 10, "reason": "Killing"})["ok"]
    a.wait(quid, lambda s: s["phase"] in ("Succeeded", "Failed") and not running(s, "early")
           and not running(s, "late"), timeout=30, what="stopped")
    t = {n: float(open(os.path.join(d, n + "-term")).read()) for n in ("app", "late", "early")}
    assert t["app"] <= t["late"] <= t["early"], t


def socket_open(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def test_liveness_restarts(a):
    # The probe fails only once the TERM trap is set ("armed"): a kill before it
    # would end the shell with 143 on a slow machine (under ASan it did).
    p = pod("live", [sh("main", 'trap "exit 0" TERM; echo up; touch armed; '
                                'while :; do sleep 0.1; done',
                        livenessProbe={"exec": {"command": ["sh", "-c", "test ! -e armed"]},
                                       "periodSeconds": 3, "failureThreshold": 2})])
    uid = p["metadata"]["uid"]
    assert a.request("pod_run", {"pod": p, "files": {}})["ok"]
    st = a.wait(uid, lambda s: cstatus(s, "main")["restartCount"] >= 1 and running(s, "main"),
                timeout=10, what="restart by liveness")
    last = cstatus(st, "main")["lastState"]["terminated"]
    assert last["exitCode"] == 0 and last["reason"] == "Completed", last  # TERM trap exits 0
    assert os.path.exists(os.path.join(a.state_dir, "pods", uid, "main", "1.log"))


def test_termination_grace_kills_group(a):
    marker = os.path.join(a.tmp, "prestop-ran")
    script = ('trap "" TERM; sleep 1000 & echo $! > $SLURM_K8S_POD_DIR/child; '
              'while :; do sleep 0.1; done')
    p = pod("stubborn", [sh("main", script, lifecycle={"preStop": {"exec": {
        "command": ["/bin/sh", "-c", "touch " + marker]}}})], grace=1)
    uid = p["metadata"]["uid"]
    assert a.request("pod_run", {"pod": p, "files": {}})["ok"]
    a.wait(uid, lambda s: running(s, "main"), what="running")
    child = pod_file_int(a, uid, "child")
    t0 = time.time()
    assert a.request("pod_kill", {"uid": uid, "grace_s": 1, "reason": "Killing"})["ok"]
    st = a.wait(uid, lambda s: s["phase"] in ("Failed", "Succeeded"), timeout=5,
                what="terminal phase")
    took = time.time() - t0
    assert 0.9 <= took < 3, took
    t = cstatus(st, "main")["state"]["terminated"]
    assert t["exitCode"] == 137, t
    assert st["phase"] == "Failed", st
    assert os.path.exists(marker), "preStop hook did not run"
    assert gone(child), "a process of the container's group survived"


def test_active_deadline(a):
    """spec.activeDeadlineSeconds, as a kubelet: past it the pod is Failed (DeadlineExceeded, the
    kubelet's message) at once, its containers stopped with the grace period (a TERM trap's exit 0
    does not make it Succeeded), a Warning Event says so; a pod done before it is not touched."""
    p = pod("deadline", [sh("main", "trap 'exit 0' TERM; while :; do sleep 0.1; done")], grace=5,
            spec_extra={"activeDeadlineSeconds": 1})
    uid = p["metadata"]["uid"]
    assert a.request("pod_run", {"pod": p, "files": {}})["ok"]
    a.wait(uid, lambda s: running(s, "main"), what="running")
    st = a.wait(uid, lambda s: s["phase"] == "Failed" and not running(s, "main"), timeout=10,
                what="Failed after its deadline")
    assert st.get("reason") == "DeadlineExceeded", st
    assert st.get("message") == "Pod was active on the node longer than the specified deadline", st
    t = cstatus(st, "main")["state"]["terminated"]
    # Stopped by TERM, as with a deletion: its trap's 0 (or 143 had the signal come before the
    # shell set it, on a loaded machine); Failed all the same.
    assert t["exitCode"] in (0, 143), t
    a.wait_event(uid, lambda e: e["reason"] == "DeadlineExceeded" and e["type"] == "Warning",
                 what="DeadlineExceeded event")
    quick = pod("quick", [sh("main", "exit 0")], restart="Never", spec_extra={"activeDeadlineSeconds": 30})
    assert a.request("pod_run", {"pod": quick, "files": {}})["ok"]
    st = a.wait(quick["metadata"]["uid"], lambda s: s["phase"] in ("Succeeded", "Failed"), what="done")
    assert st["phase"] == "Succeeded" and not st.get("reason"), st
    bad = pod("baddeadline", [sh("main", "true")], spec_extra={"activeDeadlineSeconds": 0})
    r = a.request("pod_run", {"pod": bad, "files": {}})
    assert not r["ok"] and "activeDeadlineSeconds must be a positive integer" in json.dumps(r), r


def wait_true(pred, timeout, what, detail=None):
    """Waits for pred; on timeout the error says what, and detail() when given."""
    deadline = time.time() + timeout
    while not pred():
        if time.time() > deadline:
            raise AssertionError("timeout waiting for " + what + (": " + detail() if detail else ""))
        time.sleep(0.05)


def group_states(pid):
    """The state of pid and of every process in its process group, for a failure's message."""
    try:
        pgid = os.getpgid(pid)
    except OSError as e:
        return "pid %d: %s" % (pid, e)
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if os.getpgid(int(d)) == pgid:
                    out.append("%s:%s" % (d, proc_state(int(d))))
            except OSError:
                pass
    return "pid %d state %s, group %d: %s" % (pid, proc_state(pid), pgid, " ".join(out))


def stopped(pid):
    """pid is stopped (T), or will stop before it runs any code of its own: D (a
    vfork parent waits, uninterruptibly, for a child the same SIGSTOP stopped before
    its exec: dash does that) with SIGSTOP pending."""
    st = proc_state(pid)
    if st == "T":
        return True
    if st != "D":
        return False
    try:
        with open("/proc/%d/status" % pid) as f:
            pending = {k: int(v, 16) for k, v in
                       (l.split(":\t", 1) for l in f if l.startswith(("SigPnd:", "ShdPnd:")))}
    except OSError:
        return False
    return any(m & (1 << (signal.SIGSTOP - 1)) for m in pending.values())


def test_pods_pause(a):
    # pods_pause (the Slurm job suspended, then resumed): the container's processes
    # stopped, no probe run (its liveness probe would fail on the stopped heartbeat and
    # restart it), Ready=False with the reason JobSuspended; a pod that arrives is held
    # and exec refused; the resume continues the processes, Ready again after the
    # readiness probe, not restarted, the held pod started. A pod killed while paused
    # still runs its SIGTERM trap.
    d = lambda uid: os.path.join(a.state_dir, "pods", uid)
    # (No heartbeat yet is alive: the first probe may run before the command's first write.)
    live = {"exec": {"command": ["sh", "-c",
                                 "test ! -e beat || test `expr \\`date +%s\\` - \\`cat beat\\`` -lt 4"]},
            "periodSeconds": 20, "failureThreshold": 1, "timeoutSeconds": PROBE_TIMEOUT_S}
    ready = {"exec": {"command": ["test", "-f", "ready"]}, "periodSeconds": 2,
             "failureThreshold": 1, "timeoutSeconds": PROBE_TIMEOUT_S}
    # The heartbeat is renamed into place: the probe never reads it half written.
    p = pod("susp", [sh("main", 'echo $$$$ > $SLURM_K8S_POD_DIR/pid; date +%s > $SLURM_K8S_POD_DIR/beat; '
                                'trap "echo term > $SLURM_K8S_POD_DIR/term; exit 0" TERM; '
                                'touch $SLURM_K8S_POD_DIR/ready; '
                                'while :; do date +%s > $SLURM_K8S_POD_DIR/beat.new; '
                                'mv $SLURM_K8S_POD_DIR/beat.new $SLURM_K8S_POD_DIR/beat; sleep 0.05; done',
                        readinessProbe=ready, livenessProbe=live)], grace=30)
    uid = p["metadata"]["uid"]
    assert a.request("pod_run", {"pod": p, "files": {}})["ok"]
    a.wait(uid, lambda s: cond(s, "Ready")["status"] == "True", what="Ready", timeout=30)
    pid = pod_file_int(a, uid, "pid")
    assert proc_state(pid) not in ("T", None), proc_state(pid)

    r = a.request("pods_pause", {"pause": True, "message": "Slurm job 42 is suspended"})
    assert r["ok"], r
    st = a.wait(uid, lambda s: cond(s, "Ready")["status"] == "False", what="not Ready")
    assert cond(st, "Ready")["reason"] == "JobSuspended", st
    assert cond(st, "Ready")["message"] == "Slurm job 42 is suspended", st
    assert cond(st, "ContainersReady")["reason"] == "JobSuspended", st
    # Waited on, not timed: a loaded machine runs the stopped group late.
    wait_true(lambda: stopped(pid), 30, "the container's process stopped",
              lambda: group_states(pid))
    # A pod that arrives meanwhile is held; exec is refused with the reason.
    q = pod("later", [sh("main", "touch $SLURM_K8S_POD_DIR/started; exec sleep 1000")])
    assert a.request("pod_run", {"pod": q, "files": {}})["ok"]
    r, c = a.exec_start(uid, "main", ["true"])
    assert not r["ok"] and r["error"] == "unavailable" and "suspended" in r["message"], r
    beat = open(os.path.join(d(uid), "beat")).read()
    a.drain(5)  # past the liveness probe's 4 s: it would fail and restart the container
    assert open(os.path.join(d(uid), "beat")).read() == beat, "the heartbeat went on"
    assert stopped(pid), group_states(pid)
    assert not os.path.exists(os.path.join(d("uid-later"), "started")), "a held pod started"
    st = a.last(uid)
    assert cstatus(st, "main")["restartCount"] == 0 and running(st, "main"), st

    r = a.request("pods_pause", {"pause": False})
    assert r["ok"], r
    wait_true(lambda: proc_state(pid) not in ("T", None), 30, "the container's process continued",
              lambda: group_states(pid))
    st = a.wait(uid, lambda s: cond(s, "Ready")["status"] == "True", what="Ready again", timeout=30)
    assert cstatus(st, "main")["restartCount"] == 0, st
    wait_true(lambda: os.path.exists(os.path.join(d("uid-later"), "started")), 10,
              "the held pod started at the resume")
    # The liveness probe runs again one period (1 s here) after the resume, on a
    # heartbeat that caught up: an immediate check would see it 5 s stale.
    a.drain(1.5)
    assert cstatus(a.last(uid), "main")["restartCount"] == 0, a.last(uid)

    # Killed while paused: continued, so the trap runs and the grace is not waited out.
    assert a.request("pods_pause", {"pause": True, "message": "again"})["ok"]
    wait_true(lambda: stopped(pid), 30, "stopped again", lambda: group_states(pid))
    assert a.request("pod_kill", {"uid": uid, "grace_s": 30, "reason": "Killing"})["ok"]
    st = a.wait(uid, lambda s: s.get("phase") in ("Succeeded", "Failed") or
                (cstatus(s, "main") or {}).get("state", {}).get("terminated"),
                what="terminated", timeout=20)
    assert os.path.exists(os.path.join(d(uid), "term")), "the TERM trap did not run"
    assert cstatus(st, "main")["state"]["terminated"]["exitCode"] == 0, st
    assert a.request("pod_kill", {"uid": "uid-later", "grace_s": 1, "reason": "Killing"})["ok"]


def test_step_signals_ignored(a):
    # Signals Slurm may send to a job's steps (docs/user-guide.md, "Signals"):
    # the shim survives them and its pods get none; the containers start with
    # default dispositions (the shim's handlers are not inherited).
    p = pod("steady", [sh("main", "echo $$$$ > $SLURM_K8S_POD_DIR/pid; exec sleep 1000")])
    uid = p["metadata"]["uid"]
    assert a.request("pod_run", {"pod": p, "files": {}})["ok"]
    a.wait(uid, lambda s: running(s, "main"), what="running")
    pid = pod_file_int(a, uid, "pid")
    sigs = [signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2,
            signal.SIGALRM, signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU, signal.SIGXCPU,
            signal.SIGVTALRM, signal.SIGPROF, signal.SIGIO, signal.SIGPWR, signal.SIGCONT]
    for sig in sigs:
        a.proc.send_signal(sig)
    lst = a.request("pod_list", {})  # answered: the shim runs, not stopped
    assert lst["ok"], lst
    assert a.proc.poll() is None, "the shim died of a step signal: %s" % a.proc.returncode
    assert alive(pid), "the container's process died"
    st = a.last(uid)
    assert running(st, "main") and cstatus(st, "main")["restartCount"] == 0, st
    deadline = time.time() + 10  # the shell has exec'd sleep
    while open("/proc/%d/comm" % pid).read().strip() != "sleep" and time.time() < deadline:
        time.sleep(0.05)
    with open("/proc/%d/status" % pid) as f:
        fields = dict(l.split(":", 1) for l in f if l.startswith(("Name", "SigIgn", "SigCgt")))
    assert fields["Name"].strip() == "sleep", fields
    mask = sum(1 << (int(sig) - 1) for sig in sigs)
    assert int(fields["SigCgt"], 16) == 0, fields
    assert int(fields["SigIgn"], 16) & mask == 0, fields


def test_gpus_disjoint_and_refused(a):
    # The trap comes before the line the test waits for: a kill after that line
    # then always finds it set (CI once killed the shell between the two: 143).
    def gpu_pod(name, n):
        return pod(name, [sh("main", 'trap "exit 0" TERM; '
                                     'echo "$CUDA_VISIBLE_DEVICES/$NVIDIA_VISIBLE_DEVICES"; '
                                     'while :; do sleep 0.1; done',
                             resources={"limits": {"nvidia.com/gpu": str(n)}})])
    for name in ("g1", "g2"):
        assert a.request("pod_run", {"pod": gpu_pod(name, 2), "files": {}})["ok"]
    seen = []
    for name in ("g1", "g2"):
        a.wait("uid-" + name, lambda s: running(s, "main"), what="running")
    for name in ("g1", "g2"):
        cuda, nv = wait_log_lines(a, "uid-" + name, "main")[0].split("/")
        assert cuda == nv, (cuda, nv)
        seen.append(set(int(x) for x in cuda.split(",")))
    assert len(seen[0]) == 2 and len(seen[1]) == 2 and not (seen[0] & seen[1]), seen
    assert seen[0] | seen[1] == {0, 1, 2, 3}, seen
    r = a.request("pod_run", {"pod": gpu_pod("g3", 1), "files": {}})
    assert not r["ok"] and "only 0 of the 4 GPUs" in r["message"], r
    st = a.wait("uid-g3", lambda s: s["phase"] == "Failed", what="refused status")
    assert st["reason"] == "OutOfnvidia.com/gpu" and "nvidia.com/gpu" in st["message"], st
    with open(os.path.join(a.state_dir, "gpus.json")) as f:
        persisted = json.load(f)["pods"]
    assert set(persisted) == {"uid-g1", "uid-g2"}, persisted
    # Freed GPUs go back to the pool.
    assert a.request("pod_kill", {"uid": "uid-g1", "grace_s": 2})["ok"]
    a.wait("uid-g1", lambda s: s["phase"] == "Succeeded", what="g1 stopped")
    assert a.request("pod_run", {"pod": gpu_pod("g4", 2), "files": {}})["ok"]
    a.wait("uid-g4", lambda s: running(s, "main"), what="g4 running")


def test_policy_refusals(a):
    cases = [
        ("priv", pod("priv", [sh("main", "true", securityContext={"privileged": True})]),
         "privileged"),
        ("caps", pod("caps", [sh("main", "true", securityContext={
            "capabilities": {"add": ["SYS_ADMIN"]}})]), "capabilities"),
        ("hostpid", pod("hostpid", [sh("main", "true")], spec_extra={"hostPID": True}),
         "hostPID"),
        ("hostpath", pod("hostpath", [sh("main", "true")],
                         volumes=[{"name": "h", "hostPath": {"path": "/etc"}}]), "hostPath"),
        ("runas", pod("runas", [sh("main", "true", securityContext={
            "runAsUser": os.getuid() + 1})]), "runAsUser"),
        ("nocmd", pod("nocmd", [{"name": "main", "image": "nginx"}]), "has no command"),
        ("dev", pod("dev", [sh("main", "true", resources={"limits": {"amd.com/gpu": "1"}})]),
         "amd.com/gpu"),
        # What the shim cannot enforce is refused, never accepted silently.
        ("rofs", pod("rofs", [sh("main", "true", securityContext={
            "readOnlyRootFilesystem": True})]), "readOnlyRootFilesystem"),
        ("seclocal", pod("seclocal", [sh("main", "true", securityContext={
            "seccompProfile": {"type": "Localhost", "localhostProfile": "x.json"}})]),
         "Localhost seccomp profile"),
        ("sysctl", pod("sysctl", [sh("main", "true")], spec_extra={"securityContext": {
            "sysctls": [{"name": "net.core.somaxconn", "value": "1024"}]}}), "sysctls"),
        ("tcphook", pod("tcphook", [sh("main", "true", lifecycle={
            "preStop": {"tcpSocket": {"port": 80}}})]), "no tcpSocket hook"),
        ("unknown", pod("unknown", [sh("main", "true", futureField=True)]),
         "does not know"),
    ]
    for name, p, word in cases:
        r = a.request("pod_run", {"pod": p, "files": {}})
        assert not r["ok"] and word in r["message"], (name, r)
        st = a.wait("uid-" + name, lambda s: s["phase"] == "Failed", what=name + " Failed")
        assert st["reason"] == "PodRefused" and word in st["message"], st


# Prints the confinement of the probing process, then tries keyctl(2) and
# unshare(2), two calls the RuntimeDefault filter denies (k8s-shim/confine.cc).
CONFINEMENT_PROBE = r"""
import ctypes, platform
for line in open("/proc/self/status"):
    if line.split(":")[0] in ("NoNewPrivs", "Seccomp", "CapEff", "CapPrm"):
        print(" ".join(line.split()))
libc = ctypes.CDLL(None, use_errno=True)
nr = {"x86_64": 250, "aarch64": 219}[platform.machine()]
r = libc.syscall(nr, 0, -3, 0)  # KEYCTL_GET_KEYRING_ID, the session keyring
print("keyctl", "denied" if r < 0 and ctypes.get_errno() == 1 else "ran")
r = libc.unshare(0x10000000)  # CLONE_NEWUSER
print("unshare", "denied" if r < 0 and ctypes.get_errno() == 1 else "ran")
"""


def test_confinement(a):
    """securityContext enforced: no_new_privs and no capabilities for every
    process container; RuntimeDefault is a seccomp filter for the container
    and its exec probes."""
    probe = [sys.executable, "-c", CONFINEMENT_PROBE]
    ready_if_filtered = {"exec": {"command": [
        "/bin/sh", "-c", "grep -q '^Seccomp:[[:space:]]*2' /proc/self/status"]},
        "periodSeconds": 1, "timeoutSeconds": PROBE_TIMEOUT_S}
    pods = [
        pod("plain", [{"name": "main", "image": "x", "command": probe}], restart="Never"),
        pod("nnp", [{"name": "main", "image": "x", "command": probe,
                     "securityContext": {"allowPrivilegeEscalation": False,
                                         "capabilities": {"drop": ["ALL"]}}}],
            restart="Never"),
        pod("filtered", [{"name": "main", "image": "x", "command": probe},
                         sh("server", "sleep 60", readinessProbe=ready_if_filtered)],
            spec_extra={"securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}}),
    ]
    for p in pods:
        assert a.request("pod_run", {"pod": p, "files": {}})["ok"], p["metadata"]["name"]
    # Without the filter a pod is as seccomp-confined as the shim itself (not
    # at all, unless the test runs in a sandbox): the same probe run here.
    host = subprocess.run(probe, stdout=subprocess.PIPE, text=True, check=True).stdout.split("\n")
    unfiltered = [x for x in host if x.startswith(("Seccomp", "keyctl"))]
    no_privs = ["NoNewPrivs: 1", "CapEff: 0000000000000000", "CapPrm: 0000000000000000"]
    for name in ("plain", "nnp"):
        lines = wait_log_lines(a, "uid-" + name, "main", lambda ls: len(ls) >= 6, timeout=20)
        assert set(no_privs + unfiltered) <= set(lines), (name, lines, host)
    lines = wait_log_lines(a, "uid-filtered", "main", lambda ls: len(ls) >= 6, timeout=20)
    assert set(no_privs + ["Seccomp: 2", "keyctl denied", "unshare denied"]) <= set(lines), lines
    # The exec probe ran under the filter too: the server became ready.
    a.wait("uid-filtered", lambda s: (cstatus(s, "server") or {}).get("ready"), timeout=20,
           what="server ready through a probe under the filter")


def test_runtime_template(a):
    # a stand-in "apptainer" that prints what it was asked to run, then runs it
    fake = os.path.join(a.tmp, "fake-apptainer")
    with open(fake, "w") as f:
        f.write('#!/bin/sh\necho "runtime: $*"\nshift 3\nexec "$@"\n')
    os.chmod(fake, 0o755)
    p = pod("tmpl", [{"name": "main", "image": "docker.io/library/alpine:3",
                      "command": ["/bin/echo", "hi"]},
                     {"name": "entry", "image": "docker.io/library/alpine:3"}],
            restart="Never")
    assert a.request("pod_run", {"pod": p, "files": {}})["ok"]
    a.wait("uid-tmpl", lambda s: s["phase"] in ("Succeeded", "Failed"), what="done")
    assert log_content(read_log(a, "uid-tmpl", "main")) == [
        "runtime: exec --nv docker://docker.io/library/alpine:3 /bin/echo hi", "hi"]
    assert log_content(read_log(a, "uid-tmpl", "entry"))[0] == \
        "runtime: exec --nv docker://docker.io/library/alpine:3"


def test_podman_missing_binary(a):
    """A node without the podman runtime's program: the container waits in
    ErrImagePull with the reason, then ImagePullBackOff, and tries again; the
    pod's deletion ends it at once (k8s-shim/podman.h)."""
    p = pod("img", [{"name": "main", "image": "reg.example/app:1"}], restart="Never")
    assert a.request("pod_run", {"pod": p, "files": {}})["ok"]
    waiting = lambda s, r: ((cstatus(s, "main") or {}).get("state", {}).get("waiting") or {}).get("reason") == r
    st = a.wait("uid-img", lambda s: waiting(s, "ErrImagePull"), what="ErrImagePull")
    msg = cstatus(st, "main")["state"]["waiting"]["message"]
    assert msg.startswith("cannot start '/nonexistent/podman': "), msg
    st = a.wait("uid-img", lambda s: waiting(s, "ImagePullBackOff"), what="ImagePullBackOff")
    assert cstatus(st, "main")["state"]["waiting"]["message"] == 'Back-off pulling image "reg.example/app:1"', st
    # the next try (10 s of the pod's time, scaled) fails again
    a.wait("uid-img", lambda s: waiting(s, "ErrImagePull"), what="second ErrImagePull")
    reasons = [(e["reason"], e["message"]) for e in a.events.get("uid-img", [])]
    assert ("Failed", "Error: ErrImagePull") in reasons, reasons
    assert ("Failed", "Error: ImagePullBackOff") in reasons, reasons
    assert any(r == "Failed" and m.startswith('Failed to pull image "reg.example/app:1": cannot start')
               for r, m in reasons), reasons
    assert st["phase"] == "Pending", st
    assert a.request("pod_kill", {"uid": "uid-img", "grace_s": 30, "reason": "Killing"})["ok"]
    a.wait("uid-img", lambda s: s["phase"] in ("Failed", "Succeeded"), timeout=5, what="stopped")


def test_volumes_files(a):
    data = base64.b64encode(b"key=value\n").decode()
    # The files of a configMap volume are read-only (mode 0440), as a kubelet
    # mounts such volumes read-only.
    p = pod("vol", [sh("main", "cat $SLURM_K8S_VOLUME_CONFIG/app.conf; "
                               "cat %s/cfg/app.conf; "
                               "stat -c %%a $SLURM_K8S_VOLUME_CONFIG/app.conf" % a.tmp,
                       volumeMounts=[{"name": "config", "mountPath": a.tmp + "/cfg"}])],
            restart="Never", volumes=[{"name": "config", "configMap": {"name": "c"}}])
    assert a.request("pod_run", {"pod": p, "files": {"config": {"app.conf": data}}})["ok"]
    st = a.wait("uid-vol", lambda s: s["phase"] in ("Succeeded", "Failed"), what="done")
    assert st["phase"] == "Succeeded", st
    assert log_content(read_log(a, "uid-vol", "main")) == ["key=value", "key=value", "440"]


def test_pod_files_replaced(a):
    # pod_files (a refreshed ServiceAccount token): the file is replaced in place while the
    # container reads it in a loop, and no read sees anything but a whole old or new token;
    # only files the pod started with may be replaced.
    b64 = lambda s: base64.b64encode(s.encode()).decode()
    old_tok, new_tok = "A" * 4096, "B" * 4096
    p = pod("tok", [sh("main", 'cd $SLURM_K8S_VOLUME_KUBE_API_ACCESS_X; : > $SLURM_K8S_POD_DIR/reads; '
                               'while :; do t=$(cat token); echo "${#t}${t%%${t#?}}" >> $SLURM_K8S_POD_DIR/reads; '
                               'sleep 0.01; done')],
            volumes=[{"name": "kube-api-access-x", "projected": {"sources": []}},
                     {"name": "scratch", "emptyDir": {}}])
    files = {"kube-api-access-x": {"token": b64(old_tok), "ca.crt": b64("CA")}}
    assert a.request("pod_run", {"pod": p, "files": files})["ok"]
    a.wait("uid-tok", lambda s: s["phase"] == "Running", what="Running")
    reads = os.path.join(a.state_dir, "pods", "uid-tok", "reads")
    wait_true(lambda: os.path.exists(reads) and "4096A" in open(reads).read(), 10, "the old token read")
    for _ in range(20):  # many replacements while the loop reads
        for t in (new_tok, old_tok):
            r = a.request("pod_files", {"uid": "uid-tok", "files": {"kube-api-access-x": {"token": b64(t)}}})
            assert r["ok"], r
    r = a.request("pod_files", {"uid": "uid-tok", "files": {"kube-api-access-x": {"token": b64(new_tok)}}})
    assert r["ok"], r
    vol = os.path.join(a.state_dir, "pods", "uid-tok", "volumes", "kube-api-access-x")
    assert open(os.path.join(vol, "token")).read() == new_tok
    assert oct(os.stat(os.path.join(vol, "token")).st_mode & 0o777) == "0o440"
    wait_true(lambda: "4096B" in open(reads).read(), 10, "the new token read by the container")
    seen = set(open(reads).read().split())
    assert seen <= {"4096A", "4096B"}, seen  # never a part, never empty
    for body, want in (
            ({"uid": "uid-tok", "files": {"kube-api-access-x": {"new-file": b64("x")}}}, "has no file new-file"),
            ({"uid": "uid-tok", "files": {"scratch": {"token": b64("x")}}}, "no files volume scratch"),
            ({"uid": "uid-tok", "files": {"other": {"token": b64("x")}}}, "no files volume other"),
            ({"uid": "uid-none", "files": {}}, "no running pod")):
        r = a.request("pod_files", body)
        assert not r["ok"] and want in r["message"], (body, r)
    assert not os.path.exists(os.path.join(vol, "new-file"))
    assert a.request("pod_kill", {"uid": "uid-tok", "grace_s": 1, "reason": "Killing"})["ok"]
    a.wait("uid-tok", lambda s: s["phase"] in ("Failed", "Succeeded"), what="stopped")


def other_user():
    """(uid, gid) of a user other than the one running the tests, to own a squat
    (os.lchown needs root; as another user the squat is the test user's own,
    which the shim refuses all the same: it exists)."""
    if os.getuid() != 0:
        return None
    import pwd
    try:
        pw = pwd.getpwnam("nobody")
        return pw.pw_uid, pw.pw_gid
    except KeyError:
        return 65534, 65534


def squat_dir(a, secret):
    """A directory of the other user holding app.conf = secret (their data)."""
    d = tempfile.mkdtemp(prefix="shimtest-theirs-")
    with open(os.path.join(d, "app.conf"), "w") as f:
        f.write(secret)
    who = other_user()
    if who:
        os.chown(d, *who)
        os.chown(os.path.join(d, "app.conf"), *who)
    os.chmod(d, 0o755)
    a.cleanup.append(d)
    return d


def squat_link(a, path, target):
    os.symlink(target, path)
    who = other_user()
    if who:
        os.lchown(path, *who)
    a.cleanup.append(path)


def config_pod(name, mount_path, script=None, restart="Never"):
    script = script or "cat %s/app.conf" % mount_path
    return pod(name, [sh("main", script, volumeMounts=[
        {"name": "config", "mountPath": mount_path}])],
        restart=restart, volumes=[{"name": "config", "configMap": {"name": "c"}}])


CONFIG_FILES = {"config": {"app.conf": base64.b64encode(b"ours\n").decode()}}


def test_mount_over_squat(a):
    # Another user's symlink at the mountPath, in the shared sticky /tmp: the
    # container's own mount namespace puts the volume there for the container
    # alone; the squat, and what it points at, neither read nor changed.
    theirs = squat_dir(a, "their-secret\n")
    path = "/tmp/shimtest-squat-%d" % os.getpid()
    squat_link(a, path, theirs)
    p = config_pod("squat", path)
    assert a.request("pod_run", {"pod": p, "files": CONFIG_FILES})["ok"]
    st = a.wait("uid-squat", lambda s: s["phase"] in ("Succeeded", "Failed"), what="done")
    assert st["phase"] == "Succeeded", st
    assert log_content(read_log(a, "uid-squat", "main")) == ["ours"]
    assert os.readlink(path) == theirs and os.listdir(theirs) == ["app.conf"]
    assert open(os.path.join(theirs, "app.conf")).read() == "their-secret\n"


def host_entries(*paths):
    return {p: os.path.lexists(p) for p in paths}


def test_mount_namespace_paths(a):
    # mountPaths where the node has nothing (under /, under a root directory
    # the job's user cannot write, deep under the user's own symlink) are
    # there for the container, and nothing of them on the node, during the run
    # or after; the container sees the node's files around them.
    tag = "shimtest-%d" % os.getpid()
    top, etc = "/" + tag, "/etc/" + tag + "/conf"
    real = os.path.join(a.tmp, "real")
    os.mkdir(real)
    os.symlink(real, os.path.join(a.tmp, "alias"))
    deep = os.path.join(a.tmp, "alias", "deep", "cfg")
    script = ('trap "exit 0" TERM; cat %s/app.conf %s/app.conf %s/app.conf; echo w > %s/f; '
              'test -e /etc/passwd && test -d /proc/self && echo node-files; echo up; '
              'while :; do sleep 0.1; done') % (top, etc, deep, top + "/work")
    p = pod("ns", [sh("main", script, workingDir=top + "/work", volumeMounts=[
        {"name": "config", "mountPath": top}, {"name": "config", "mountPath": etc},
        {"name": "config", "mountPath": deep}, {"name": "work", "mountPath": top + "/work"}])],
        volumes=[{"name": "config", "configMap": {"name": "c"}}, {"name": "work", "emptyDir": {}}])
    before = host_entries(top, "/etc/" + tag, os.path.join(real, "deep"))
    assert not any(before.values()), before
    assert a.request("pod_run", {"pod": p, "files": CONFIG_FILES})["ok"]
    a.wait("uid-ns", lambda s: running(s, "main"), what="running")
    wait_log(a, "uid-ns", "main", "up")
    assert log_content(read_log(a, "uid-ns", "main")) == ["ours", "ours", "ours", "node-files", "up"]
    # The emptyDir got the write (through the working directory, a mountPath).
    pod_dir = os.path.join(a.state_dir, "pods", "uid-ns")
    assert open(os.path.join(pod_dir, "volumes", "work", "f")).read() == "w\n"
    assert host_entries(top, "/etc/" + tag, os.path.join(real, "deep")) == before
    assert os.listdir(real) == []
    assert a.request("pod_kill", {"uid": "uid-ns", "grace_s": 5, "reason": "Deleted"})["ok"]
    a.wait("uid-ns", lambda s: s["phase"] in ("Succeeded", "Failed"), what="stopped")
    assert host_entries(top, "/etc/" + tag, os.path.join(real, "deep")) == before


def test_mount_nested_shadows(a):
    # A mountPath under /etc (its view made first: fewer levels) and a deeper
    # one under / (the root's view made after it, binding that of /etc):
    # both are there; the node has neither.
    tag = "shimtest-nest-%d" % os.getpid()
    etc, deep = "/etc/%s/conf" % tag, "/%s/a/b/c" % tag
    p = pod("nest", [sh("main", "cat %s/app.conf %s/app.conf" % (etc, deep), volumeMounts=[
        {"name": "config", "mountPath": etc}, {"name": "config", "mountPath": deep}])],
        restart="Never", volumes=[{"name": "config", "configMap": {"name": "c"}}])
    assert a.request("pod_run", {"pod": p, "files": CONFIG_FILES})["ok"]
    st = a.wait("uid-nest", lambda s: s["phase"] in ("Succeeded", "Failed"), what="done")
    assert st["phase"] == "Succeeded", (st, read_log(a, "uid-nest", "main"))
    assert log_content(read_log(a, "uid-nest", "main")) == ["ours", "ours"]
    assert not os.path.lexists("/etc/" + tag) and not os.path.lexists("/" + tag)


def test_mount_read_only_and_sub_path(a):
    # readOnly on an emptyDir holds for that container only; subPath (missing:
    # made in the volume) and subPathExpr; two containers with different
    # volumes at one mountPath; exec probes and exec sessions see the
    # container's mounts.
    tag = "/shimtest-ro-%d" % os.getpid()
    writer = sh("writer", 'trap "exit 0" TERM; echo data > %s/v/x && echo wrote; '
                          'echo sub > %s/s/y; while :; do sleep 0.1; done' % (tag, tag),
                volumeMounts=[{"name": "work", "mountPath": tag + "/v"},
                              {"name": "work", "mountPath": tag + "/s", "subPath": "a/b"}],
                readinessProbe={"exec": {"command": ["test", "-f", tag + "/v/x"]},
                                "periodSeconds": 1, "timeoutSeconds": PROBE_TIMEOUT_S})
    reader = sh("reader", 'trap "exit 0" TERM; sleep 0.5; cat %s/v/app.conf; '
                          'touch %s/w/z 2>/dev/null || echo read-only; '
                          'cat %s/p/y; echo up; while :; do sleep 0.1; done' % (tag, tag, tag),
                env=[{"name": "SUB", "value": "b"}],
                volumeMounts=[{"name": "config", "mountPath": tag + "/v"},
                              {"name": "work", "mountPath": tag + "/w", "readOnly": True},
                              {"name": "work", "mountPath": tag + "/p", "subPathExpr": "a/$(SUB)"}])
    p = pod("ro", [writer, reader],
            volumes=[{"name": "config", "configMap": {"name": "c"}}, {"name": "work", "emptyDir": {}}])
    assert a.request("pod_run", {"pod": p, "files": CONFIG_FILES})["ok"]
    a.wait("uid-ro", lambda s: running(s, "writer") and running(s, "reader"), what="running")
    wait_log(a, "uid-ro", "reader", "up")
    assert log_content(read_log(a, "uid-ro", "reader")) == ["ours", "read-only", "sub", "up"]
    assert log_content(read_log(a, "uid-ro", "writer")) == ["wrote"]
    vol = os.path.join(a.state_dir, "pods", "uid-ro", "volumes", "work")
    assert open(os.path.join(vol, "a", "b", "y")).read() == "sub\n"
    assert not os.path.exists(os.path.join(vol, "z"))
    # The readiness probe reads a path only the container's namespace has.
    a.wait("uid-ro", lambda s: cstatus(s, "writer").get("ready"), what="writer ready")
    r, c = a.exec_start("uid-ro", "reader", ["sh", "-c", "pwd; cat %s/v/app.conf; ls %s/w" % (tag, tag)],
                        stderr=False)
    assert r["ok"], r
    out, err, ex = c.finish()
    assert out.decode().split()[1:] == ["ours", "a", "x"] and ex == {"exit_code": 0}, (out, ex)
    assert not os.path.lexists(tag)
    assert a.request("pod_kill", {"uid": "uid-ro", "grace_s": 5, "reason": "Deleted"})["ok"]
    a.wait("uid-ro", lambda s: s["phase"] in ("Succeeded", "Failed"), what="stopped")


def test_mount_bad_paths(a):
    # A volume directory onto a regular file of the node, or a mountPath under
    # a file: the container does not start, its log and status say why; the
    # node keeps its file.
    f = os.path.join(a.tmp, "afile")
    with open(f, "w") as fh:
        fh.write("mine\n")
    for name, path, words in (("onfile", f, "not a directory"),
                              ("underfile", f + "/x", "not a directory")):
        p = config_pod(name, path)
        assert a.request("pod_run", {"pod": p, "files": CONFIG_FILES})["ok"]
        st = a.wait("uid-" + name, lambda s: s["phase"] == "Failed", what=name + " Failed")
        log = "\n".join(log_content(read_log(a, "uid-" + name, "main")))
        assert words in log.lower() and path in log, log
        term = cstatus(st, "main")["state"]["terminated"]
        assert term["exitCode"] == 128 and term["reason"] == "StartError", term
        assert path in term["message"] and words in term["message"].lower(), term
    assert open(f).read() == "mine\n"


# The shim as the same uid, in a user namespace (B) inside another (A) that
# allows one namespace below it, B itself: the shim's own unshare gets ENOSPC,
# as on a node with user.max_user_namespaces = 0.
NO_USERNS = ["unshare", "-Ur", "sh", "-c",
             'echo 1 > /proc/sys/user/max_user_namespaces && '
             'exec unshare -U --map-user=%d --map-group=%d "$@"' % (os.getuid(), os.getgid()),
             "sh"]


def test_mount_namespace_refused(a):
    # Where the node refuses user namespaces, a container with volumeMounts
    # does not start and says why; one without runs.
    p = pod("nons", [sh("main", "cat /shimtest-nons/app.conf", volumeMounts=[
        {"name": "config", "mountPath": "/shimtest-nons"}]), sh("plain", "echo plain")],
        restart="Never", volumes=[{"name": "config", "configMap": {"name": "c"}}])
    assert a.request("pod_run", {"pod": p, "files": CONFIG_FILES})["ok"]
    st = a.wait("uid-nons", lambda s: s["phase"] == "Failed", what="Failed")
    log = "\n".join(log_content(read_log(a, "uid-nons", "main")))
    assert "runs in user and mount namespaces of its own, and this node refuses them" in log, log
    assert "User namespaces" in log, log
    term = cstatus(st, "main")["state"]["terminated"]
    assert term["exitCode"] == 128 and term["reason"] == "StartError", st
    assert "User namespaces" in term["message"], st
    assert cstatus(st, "plain")["state"]["terminated"]["exitCode"] == 0, st
    assert log_content(read_log(a, "uid-nons", "plain")) == ["plain"]


# The shim in a mount namespace of its own whose mounts are shared, as on a
# node with systemd: the test mounts there later (as an automounter would).
SHARED_MOUNTS = ["unshare", "-m", "--propagation", "unchanged", "sh", "-c",
                 'mount --make-rshared / && exec "$@"', "sh"]


def test_mount_sees_later_node_mounts(a):
    # A container whose mountPath shadowed / still sees what the node mounts
    # after it started (an automounted home or project directory): its mounts
    # are slaves of the node's. Needs root (to mount); skipped otherwise.
    if os.getuid() != 0:
        print("  (skipped: needs root to mount)")
        return
    later = os.path.join(a.tmp, "later")
    os.mkdir(later)
    p = pod("later", [sh("main", 'trap "exit 0" TERM; while ! test -e %s/seen; do sleep 0.1; done; '
                                 'echo seen; while :; do sleep 0.1; done' % later, volumeMounts=[
        {"name": "work", "mountPath": "/shimtest-later-%d" % os.getpid()}])],
        volumes=[{"name": "work", "emptyDir": {}}])
    assert a.request("pod_run", {"pod": p, "files": {}})["ok"]
    a.wait("uid-later", lambda s: running(s, "main"), what="running")
    ns = ["nsenter", "-t", str(a.proc.pid), "-m", "--"]
    subprocess.run(ns + ["mount", "-t", "tmpfs", "tmpfs", later], check=True)
    subprocess.run(ns + ["touch", later + "/seen"], check=True)
    wait_log(a, "uid-later", "main", "seen", timeout=10)
    assert a.request("pod_kill", {"uid": "uid-later", "grace_s": 5, "reason": "Deleted"})["ok"]
    a.wait("uid-later", lambda s: s["phase"] in ("Succeeded", "Failed"), what="stopped")


# The shim under a seccomp filter that refuses pivot_root with EINVAL, as a
# node whose root is the initial ramfs does.
NO_PIVOT_ROOT = [sys.executable,
                 os.path.join(os.path.dirname(os.path.abspath(__file__)), "refuse_pivot_root.py")]


def test_mount_without_pivot_root(a):
    # On such a node the container's view of / is moved over / and entered by
    # chroot: the mounts are there, for its exec probe and an exec session too.
    top = "/shimtest-nopivot-%d" % os.getpid()
    p = pod("nopivot", [sh("main", 'trap "exit 0" TERM; cat %s/app.conf; echo up; '
                                   'while :; do sleep 0.1; done' % top,
                           volumeMounts=[{"name": "config", "mountPath": top}],
                           readinessProbe={"exec": {"command": ["test", "-f", top + "/app.conf"]},
                                           "periodSeconds": 1, "timeoutSeconds": PROBE_TIMEOUT_S})],
            volumes=[{"name": "config", "configMap": {"name": "c"}}])
    assert a.request("pod_run", {"pod": p, "files": CONFIG_FILES})["ok"]
    a.wait("uid-nopivot", lambda s: cstatus(s, "main") and cstatus(s, "main").get("ready"),
           what="Ready (its probe read the mount)")
    assert log_content(read_log(a, "uid-nopivot", "main")) == ["ours", "up"]
    r, c = a.exec_start("uid-nopivot", "main", ["cat", top + "/app.conf"], stderr=False)
    assert r["ok"], r
    out, err, ex = c.finish()
    assert out == b"ours\n" and ex == {"exit_code": 0}, (out, ex)
    assert not os.path.lexists(top)
    assert a.request("pod_kill", {"uid": "uid-nopivot", "grace_s": 5, "reason": "Deleted"})["ok"]
    a.wait("uid-nopivot", lambda s: s["phase"] in ("Succeeded", "Failed"), what="stopped")


def test_mount_service_account_path(a):
    # Every pod from an API server mounts its token here: the container finds
    # it, as whichever user the shim runs; the node gets nothing at that path.
    sa = "/var/run/secrets/kubernetes.io/serviceaccount"
    existed = os.path.lexists("/var/run/secrets")
    p = pod("sa", [sh("main", "cat %s/token" % sa, volumeMounts=[
        {"name": "kube-api-access", "mountPath": sa, "readOnly": True}])],
        restart="Never", volumes=[{"name": "kube-api-access", "projected": {"sources": [
            {"serviceAccountToken": {"path": "token"}}]}}])
    files = {"kube-api-access": {"token": base64.b64encode(b"tok\n").decode()}}
    assert a.request("pod_run", {"pod": p, "files": files})["ok"]
    st = a.wait("uid-sa", lambda s: s["phase"] in ("Succeeded", "Failed"), what="done")
    assert st["phase"] == "Succeeded", st
    assert log_content(read_log(a, "uid-sa", "main")) == ["tok"]
    assert os.path.lexists("/var/run/secrets") == existed


def test_gpu_devices_hidden_in_dev(a):
    # runtime.conf gpu_device = /dev/tty{index}: the node's "GPUs" are
    # /dev/tty0.. (char devices of every Linux with virtual terminals). A
    # process container given GPU k sees /dev/ttyk and no other /dev/ttyN,
    # /dev still works around them (null, pts, shm, its own device opens),
    # and an exec into it sees the same; nothing changes on the node.
    before = sorted(os.listdir("/dev"))
    missing = [n for n in ("tty0", "tty1", "tty2", "tty3") if not os.path.exists("/dev/" + n)]
    assert not missing, "this test needs /dev/tty0 to /dev/tty3 (virtual terminals): %s" % missing
    script = ("ls /dev | grep -E '^tty[0-9]+$' | paste -sd, -; echo x >/dev/null && echo null-ok; "
              "test -d /dev/pts && test -d /dev/shm && echo dirs-ok; "
              "test -c /dev/tty$CUDA_VISIBLE_DEVICES && echo own-ok; "
              "trap 'exit 0' TERM; while :; do sleep 0.1; done")
    p = pod("gd", [sh("main", script, resources={"limits": {"nvidia.com/gpu": "1"}})])
    assert a.request("pod_run", {"pod": p, "files": {}})["ok"]
    a.wait("uid-gd", lambda s: running(s, "main"), what="running")
    lines = wait_log_lines(a, "uid-gd", "main", lambda ls: len(ls) >= 4)
    assert lines[0] in ("tty0", "tty1", "tty2", "tty3"), lines
    assert lines[1:4] == ["null-ok", "dirs-ok", "own-ok"], lines
    r, c = a.exec_start("uid-gd", "main", ["sh", "-c", "ls /dev | grep -E '^tty[0-9]+$'"])
    assert r["ok"], r
    out, _, ex = c.finish()
    assert out.decode().split() == [lines[0]] and ex == {"exit_code": 0}, (out, ex)
    assert sorted(os.listdir("/dev")) == before


def test_log_rotation_and_previous(a):
    p = pod("chatty", [sh("main", "i=0; while [ $i -lt 300 ]; do "
                                  "echo line-$i-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx; "
                                  "i=$((i+1)); done; exit 1")], restart="OnFailure")
    uid = p["metadata"]["uid"]
    assert a.request("pod_run", {"pod": p, "files": {}})["ok"]
    a.wait(uid, lambda s: cstatus(s, "main")["restartCount"] >= 1, what="a restart")
    d = os.path.join(a.state_dir, "pods", uid, "main")
    assert os.path.exists(os.path.join(d, "0.log.1")), os.listdir(d)
    assert os.path.getsize(os.path.join(d, "0.log")) <= 4096
    old = log_content(open(os.path.join(d, "0.log.1")).read())
    cur = log_content(open(os.path.join(d, "0.log")).read())
    assert cur[-1] == "line-299-" + "x" * 42, cur[-1]
    assert old and old[0].startswith("line-"), old[:1]


def test_shim_restart_never_runs_twice(a):
    # "$$$$": Kubernetes' $$ escape leaves the shell a "$$".
    p = pod("survivor", [sh("main", 'echo $$$$ > $SLURM_K8S_POD_DIR/pid; '
                                    'while :; do sleep 0.1; done')])
    uid = p["metadata"]["uid"]
    assert a.request("pod_run", {"pod": p, "files": {}})["ok"]
    a.wait(uid, lambda s: running(s, "main"), what="running")
    pid = pod_file_int(a, uid, "pid")
    a.crash()
    b = Agent(state_dir=a.state_dir, tmp=a.tmp)
    try:
        st = b.wait(uid, lambda s: s["phase"] == "Failed", what="lost pod reported")
        assert st["reason"] == "ShimRestarted", st
        # Failed, so not Ready (the shim's lost-pod status once kept Ready=True).
        ready = {c["type"]: c["status"] for c in st.get("conditions", [])}
        assert ready.get("Ready") == "False" and ready.get("ContainersReady") == "False", st
        assert "terminated" in cstatus(st, "main")["state"], st
        assert gone(pid), "the old container process still runs"
        n = len(b.statuses[uid])
        assert b.request("pod_run", {"pod": p, "files": {}})["ok"]
        b.drain(0.3)
        assert len(b.statuses[uid]) == n and not os.path.exists(
            os.path.join(b.state_dir, "pods", uid, "main", "1.log")), "pod ran twice"
        lst = b.request("pod_list", {})
        assert any(x["uid"] == uid and x["status"]["phase"] == "Failed"
                   for x in lst["body"]["pods"]), lst
    finally:
        b.close()


def test_shutdown_stops_pods(a):
    p = pod("sd", [sh("main", 'trap "exit 0" TERM; echo up; while :; do sleep 0.1; done')])
    assert a.request("pod_run", {"pod": p, "files": {}})["ok"]
    a.wait("uid-sd", lambda s: running(s, "main"), what="running")
    wait_log(a, "uid-sd", "main", "up")
    r = a.request("shutdown", {"grace_s": 3, "reason": "JobEnded"})
    assert r["ok"], r
    assert a.last("uid-sd")["phase"] == "Succeeded", a.last("uid-sd")
    assert a.proc.wait(5) == 0
    # Its teardown closed every libuv handle (uv_loop_close() == 0).
    with open(os.path.join(a.tmp, "shim.stderr"), errors="replace") as f:
        assert "handle still open" not in f.read(), "the shim left libuv handles open at exit"


# ---- a container's processes are all its processes (k8s-shim/supervise.h) ----

DAEMONIZE = """#!/bin/sh
# daemonize.sh NAME CMD...: runs CMD as a daemon (setsid, double fork) that
# ignores SIGTERM and keeps stdout/stderr; waits until its pid is in
# $SLURM_K8S_POD_DIR/NAME.
name=$1; shift
( setsid sh -c 'trap "" TERM; d=$SLURM_K8S_POD_DIR; echo $$ > "$d/$0.tmp"; mv "$d/$0.tmp" "$d/$0"
  exec "$@"' "$name" "$@" & )
while [ ! -s "$SLURM_K8S_POD_DIR/$name" ]; do sleep 0.05; done
"""


def daemonize_sh(a):
    path = os.path.join(a.tmp, "daemonize.sh")
    with open(path, "w") as f:
        f.write(DAEMONIZE)
    return path


def test_daemonizing_main_completes(a):
    d = daemonize_sh(a)
    p = pod("daemonizer", [sh("main", "sh %s daemon sleep 1000; echo main-done; exit 0" % d)],
            restart="Never")
    uid = p["metadata"]["uid"]
    assert a.request("pod_run", {"pod": p, "files": {}})["ok"]
    # The daemon holds the log pipes: the container still ends with its main.
    st = a.wait(uid, lambda s: s["phase"] in ("Succeeded", "Failed"), timeout=30,
                what="terminal phase while a daemon holds stdout")
    t = cstatus(st, "main")["state"]["terminated"]
    assert st["phase"] == "Succeeded" and t["exitCode"] == 0, st
    assert gone(pod_file_int(a, uid, "daemon")), "the daemon outlived its container"
    assert "main-done" in log_content(read_log(a, uid, "main"))


def test_delete_kills_daemons_and_new_sessions(a):
    d = daemonize_sh(a)
    # A daemon child, and its own child in a new session; both ignore SIGTERM.
    script = ("sh %s daemon sh -c 'setsid sleep 1000 & echo $! > $SLURM_K8S_POD_DIR/grandchild; "
              "exec sleep 1000'; trap 'exit 0' TERM; echo up; while :; do sleep 0.1; done" % d)
    p = pod("daemons", [sh("main", script)], grace=1)
    uid = p["metadata"]["uid"]
    assert a.request("pod_run", {"pod": p, "files": {}})["ok"]
    a.wait(uid, lambda s: running(s, "main"), what="running")
    wait_log(a, uid, "main", "up", timeout=30)
    daemon = pod_file_int(a, uid, "daemon", timeout=30)
    grandchild = pod_file_int(a, uid, "grandchild", timeout=30)
    assert alive(daemon) and alive(grandchild)
    assert a.request("pod_kill", {"uid": uid, "grace_s": 1, "reason": "Deleted"})["ok"]
    st = a.wait(uid, lambda s: s["phase"] in ("Failed", "Succeeded"), timeout=30,
                what="terminal phase after the delete")
    assert cstatus(st, "main")["state"]["terminated"]["exitCode"] == 0, st  # TERM trap
    assert gone(daemon, timeout=10), "the daemon survived the delete"
    assert gone(grandchild, timeout=10), "the daemon's child in a new session survived"


def test_main_exit_kills_stubborn_children(a):
    # The main exits at SIGTERM; its children ignore it, one in a session of
    # its own: they are killed with the main's exit, long before the grace.
    script = ("trap '' TERM; sleep 1000 & echo $! > $SLURM_K8S_POD_DIR/child; "
              "setsid sleep 1000 & echo $! > $SLURM_K8S_POD_DIR/session; "
              "trap 'exit 5' TERM; echo up; while :; do sleep 0.1; done")
    p = pod("stubborn-kids", [sh("main", script)], grace=60, restart="Never")
    uid = p["metadata"]["uid"]
    assert a.request("pod_run", {"pod": p, "files": {}})["ok"]
    wait_log(a, uid, "main", "up", timeout=30)
    child = pod_file_int(a, uid, "child")
    session = pod_file_int(a, uid, "session")
    t0 = time.time()
    assert a.request("pod_kill", {"uid": uid, "grace_s": 60, "reason": "Killing"})["ok"]
    st = a.wait(uid, lambda s: s["phase"] in ("Failed", "Succeeded"), timeout=30,
                what="terminal phase")
    assert time.time() - t0 < 30, "waited for the grace period"
    assert cstatus(st, "main")["state"]["terminated"]["exitCode"] == 5, st
    assert gone(child) and gone(session), "a child ignoring SIGTERM outlived the main"


def test_always_restarts_after_daemonizing_main(a):
    d = daemonize_sh(a)
    # Each instance leaves a daemon (its pid in daemon-<restart>) and exits 0.
    script = ("n=$(ls $SLURM_K8S_POD_DIR | grep -c '^daemon-'); sh %s daemon-$n sleep 1000; "
              "echo run-$n; exit 0" % d)
    p = pod("redaemon", [sh("main", script)])
    uid = p["metadata"]["uid"]
    assert a.request("pod_run", {"pod": p, "files": {}})["ok"]
    st = a.wait(uid, lambda s: cstatus(s, "main")["restartCount"] >= 2, timeout=60,
                what="2 restarts")
    c = cstatus(st, "main")
    assert c["lastState"]["terminated"]["exitCode"] == 0, c
    assert c["lastState"]["terminated"]["reason"] == "Completed", c
    for n in (0, 1):
        assert gone(pod_file_int(a, uid, "daemon-%d" % n)), "daemon of run %d survived" % n
        assert log_content(read_log(a, uid, "main", n)) == ["run-%d" % n]
    assert a.request("pod_kill", {"uid": uid, "grace_s": 1})["ok"]
    a.wait(uid, lambda s: s["phase"] in ("Failed", "Succeeded"), timeout=30, what="stopped")


def test_probe_and_hook_daemons_die(a):
    # An exec probe and a preStop hook are processes of the container too:
    # a daemon either starts is killed when the probe or hook exits.
    d = daemonize_sh(a)
    c = sh("main", "trap 'exit 0' TERM; while :; do sleep 0.1; done",
           readinessProbe={"exec": {"command": ["sh", d, "probe-daemon", "sleep", "1000"]},
                           "periodSeconds": 60, "timeoutSeconds": PROBE_TIMEOUT_S},
           lifecycle={"preStop": {"exec": {"command": ["sh", d, "hook-daemon", "sleep", "1000"]}}})
    p = pod("probe-daemons", [c], grace=5)
    uid = p["metadata"]["uid"]
    assert a.request("pod_run", {"pod": p, "files": {}})["ok"]
    a.wait(uid, lambda s: cstatus(s, "main")["ready"], timeout=30, what="ready")
    assert gone(pod_file_int(a, uid, "probe-daemon", timeout=30), timeout=10), \
        "the exec probe's daemon survived the probe"
    assert a.request("pod_kill", {"uid": uid, "grace_s": 5, "reason": "Deleted"})["ok"]
    a.wait(uid, lambda s: s["phase"] in ("Failed", "Succeeded"), timeout=30, what="terminal")
    assert gone(pod_file_int(a, uid, "hook-daemon", timeout=30), timeout=10), \
        "the preStop hook's daemon survived"


def test_shorter_grace_shortens_a_stop(a):
    # A pod deleted with a long grace, then stopped with a short one (a second
    # DELETE, the job's end): the short one wins, as on a kubelet.
    p = pod("slow-stop", [sh("main", "trap '' TERM; echo $$$$ > $SLURM_K8S_POD_DIR/main.pid; "
                                     "while :; do sleep 0.1; done")], grace=600)
    uid = p["metadata"]["uid"]
    assert a.request("pod_run", {"pod": p, "files": {}})["ok"]
    main = pod_file_int(a, uid, "main.pid", timeout=30)  # SIGTERM is ignored from here on
    assert a.request("pod_kill", {"uid": uid, "grace_s": 600, "reason": "Deleted"})["ok"]
    assert a.request("pod_kill", {"uid": uid, "grace_s": 1, "reason": "Deleted"})["ok"]
    st = a.wait(uid, lambda s: s["phase"] in ("Failed", "Succeeded"), timeout=60,
                what="stopped within the shorter grace")
    t = cstatus(st, "main")["state"]["terminated"]
    assert t["exitCode"] == 137, t  # killed at the end of the shorter grace
    assert gone(main), main


def crash_and_restart_stops(a, uid, pids):
    """The shim killed -9, a new one started on its state: it reports the pod lost
    (ShimRestarted) and every process in `pids` ({name: pid}) is gone."""
    a.crash()
    b = Agent(state_dir=a.state_dir, tmp=a.tmp)
    try:
        st = b.wait(uid, lambda s: s["phase"] == "Failed", what="lost pod reported")
        assert st["reason"] == "ShimRestarted", st
        for name, pid in sorted(pids.items()):
            assert gone(pid, timeout=30), "%s (pid %d) outlived the shim's restart" % (name, pid)
    finally:
        b.close()


def test_shim_restart_kills_daemons(a):
    # A shim killed -9 leaves its containers' supervisors running; the
    # restarted shim has each kill every process of its container: a daemon
    # (setsid, double fork, out of the recorded process group), its child in
    # a session of its own, and those of a container that stopped its own
    # supervisor (SIGCONT first).
    d = daemonize_sh(a)
    main = ("sh %s daemon sh -c 'setsid sleep 1000 & echo $! > $SLURM_K8S_POD_DIR/grandchild; "
            "exec sleep 1000'; echo $$$$ > $SLURM_K8S_POD_DIR/main.pid; while :; do sleep 0.1; done" % d)
    stopper = ("sh %s stopper-daemon sleep 1000; echo $$PPID > $SLURM_K8S_POD_DIR/stopped; "
               "kill -STOP $$PPID; while :; do sleep 0.1; done" % d)
    p = pod("lost-daemons", [sh("main", main), sh("stopper", stopper)])
    uid = p["metadata"]["uid"]
    assert a.request("pod_run", {"pod": p, "files": {}})["ok"]
    a.wait(uid, lambda s: running(s, "main") and running(s, "stopper"), what="running")
    pids = {n: pod_file_int(a, uid, n, timeout=30)
            for n in ("daemon", "grandchild", "main.pid", "stopper-daemon", "stopped")}
    deadline = time.time() + 30
    while proc_state(pids["stopped"]) != "T":  # the stopper's supervisor
        assert time.time() < deadline, "the stopper's supervisor never stopped"
        time.sleep(0.05)
    assert all(alive(x) for x in pids.values()), pids
    crash_and_restart_stops(a, uid, pids)


def test_shim_restart_stops_hooks_and_probes(a):
    # A shim killed -9 while an exec probe check and a preStop hook run: both
    # are recorded (state.json) with the containers, and the restarted shim
    # stops them, their daemons included.
    d = daemonize_sh(a)
    # (no $(VAR) expansion in probe and hook commands: $$ is the shell's pid)
    probe = ("sh %s probe-daemon sleep 1000; echo $$ > $SLURM_K8S_POD_DIR/probe.pid; "
             "exec sleep 1000" % d)
    hook = ("sh %s hook-daemon sleep 1000; echo $$ > $SLURM_K8S_POD_DIR/hook.pid; "
            "exec sleep 1000" % d)
    c = sh("main", "trap '' TERM; while :; do sleep 0.1; done",
           livenessProbe={"exec": {"command": ["sh", "-c", probe]}, "periodSeconds": 60,
                          "timeoutSeconds": 600})
    h = sh("hooked", "trap '' TERM; while :; do sleep 0.1; done",
           lifecycle={"preStop": {"exec": {"command": ["sh", "-c", hook]}}})
    p = pod("lost-helpers", [c, h], grace=600)
    uid = p["metadata"]["uid"]
    assert a.request("pod_run", {"pod": p, "files": {}})["ok"]
    a.wait(uid, lambda s: running(s, "main") and running(s, "hooked"), what="running")
    pids = {n: pod_file_int(a, uid, n, timeout=30) for n in ("probe-daemon", "probe.pid")}
    assert a.request("pod_kill", {"uid": uid, "grace_s": 600, "reason": "Deleted"})["ok"]
    pids.update({n: pod_file_int(a, uid, n, timeout=30) for n in ("hook-daemon", "hook.pid")})
    state = os.path.join(a.state_dir, "pods", uid, "state.json")
    def recorded():
        try:
            procs = json.load(open(state))["processes"]
        except (OSError, ValueError, KeyError):
            return False
        return (any(k.startswith("main:probe:") for k in procs)
                and any(k.startswith("hooked:preStop:") for k in procs))
    deadline = time.time() + 30
    while not recorded():
        assert time.time() < deadline, "the probe check and the hook are not in state.json"
        time.sleep(0.05)
    assert all(alive(x) for x in pids.values()), pids
    crash_and_restart_stops(a, uid, pids)


def proc_state(pid):
    """The state letter of /proc/PID/stat (R, S, T, Z, ...), None when gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def pod_file_int(a, uid, name, timeout=5):
    """The number a container wrote (echo: one line) to `name` in its pod dir
    ($SLURM_K8S_POD_DIR): waits up to `timeout` s for the whole line."""
    path = os.path.join(a.state_dir, "pods", uid, name)
    deadline = time.time() + timeout
    while True:
        try:
            with open(path) as f:
                text = f.read()
            if text.endswith("\n"):
                return int(text)
        except OSError:
            pass
        if time.time() > deadline:
            raise AssertionError("%s/%s: no complete line within %ss" % (uid, name, timeout))
        time.sleep(0.05)


def wait_log_lines(a, uid, cname, pred=bool, timeout=5):
    """The lines of the container's log once pred(lines) holds (by default: once it
    wrote a line); waits up to `timeout` s."""
    deadline = time.time() + timeout
    lines = None
    while time.time() < deadline:
        try:
            lines = log_content(read_log(a, uid, cname))
            if pred(lines):
                return lines
        except OSError:
            pass
        time.sleep(0.05)
    raise AssertionError("%s/%s: log never matched; last: %r" % (uid, cname, lines))


def wait_log(a, uid, cname, line, timeout=5):
    """Waits until the container wrote `line` (e.g. its signal traps are set)."""
    wait_log_lines(a, uid, cname, lambda lines: line in lines, timeout)


def gone(pid, timeout=5):
    """Whether pid is gone (a zombie counts as gone) within `timeout` s: a process
    that was sent SIGKILL still has to be scheduled to exit."""
    deadline = time.time() + timeout
    while alive(pid):
        if time.time() > deadline:
            return False
        time.sleep(0.05)
    return True


# ---- exec sessions (k8s-shim/exec_session.h) ----

FOREVER = "trap 'exit 0' TERM; while :; do sleep 0.1; done"


def exec_pod(a, name, **kw):
    """A running pod of one container `main` (env FOO=bar); its uid."""
    p = pod(name, [sh("main", FOREVER, env=[{"name": "FOO", "value": "bar"}], **kw)])
    uid = p["metadata"]["uid"]
    assert a.request("pod_run", {"pod": p, "files": {}})["ok"]
    a.wait(uid, lambda s: running(s, "main"), what="running")
    return uid


def test_exec_output_and_exit_code(a):
    # The command runs as the job's user in the container's environment and
    # working directory; stdout and stderr apart; the exit code in the Exit frame.
    uid = exec_pod(a, "ex-out", workingDir="/tmp")
    r, c = a.exec_start(uid, "main", ["sh", "-c", "echo out $FOO; id -u; pwd; echo err >&2; exit 3"])
    assert r["ok"], r
    out, err, ex = c.finish()
    assert out.decode().split() == ["out", "bar", str(os.getuid()), "/tmp"], out
    assert err == b"err\n", err
    assert ex == {"exit_code": 3}, ex
    # Killed by a signal: 128 + the signal, as a container runtime reports it.
    r, c = a.exec_start(uid, "main", ["sh", "-c", "kill -KILL $$"])
    assert r["ok"], r
    assert c.finish()[2] == {"exit_code": 137}
    # Output over many frames arrives whole and in order.
    r, c = a.exec_start(uid, "main", ["sh", "-c", "seq 1 200000"], stderr=False)
    assert r["ok"], r
    out, err, ex = c.finish(timeout=60)
    assert out == "".join("%d\n" % i for i in range(1, 200001)).encode() and ex == {"exit_code": 0}


def test_exec_stdin(a):
    # stdin frames reach the command; the Close frame is its end of input.
    uid = exec_pod(a, "ex-in")
    r, c = a.exec_start(uid, "main", ["sh", "-c", "wc -c; cat"], stdin=True)
    assert r["ok"], r
    block = b"x" * 300000
    for i in range(0, len(block), 65536):
        c.stdin(block[i:i + 65536])
    c.close_stdin()
    out, err, ex = c.finish(timeout=30)
    assert out.split() == [b"300000"] and ex == {"exit_code": 0}, (out, err, ex)


def test_exec_tty(a):
    # With a tty: one stream, a terminal of the command's own (its controlling
    # terminal), the window size from Resize frames.
    uid = exec_pod(a, "ex-tty")
    r, c = a.exec_start(uid, "main", ["sh", "-c", "read x; stty size; echo got $x; tty; exit 5"],
                        stdin=True, tty=True)
    assert r["ok"], r
    c.resize(100, 30)
    c.stdin(b"abc\n")
    out, err, ex = c.finish()
    text = out.decode()
    assert "30 100" in text and "got abc" in text and "/dev/pts/" in text, text
    assert err == b"" and ex == {"exit_code": 5}, (err, ex)


def test_exec_refusals(a):
    # What cannot run is refused with the reason; a command that does not
    # exist runs its supervisor, which says so on stderr and exits 128.
    uid = exec_pod(a, "ex-bad")
    r, c = a.exec_start(uid, "nosuch", ["true"])
    assert not r["ok"] and r["error"] == "not_found" and "has no container nosuch" in r["message"], r
    r, c = a.exec_start("uid-unknown", "main", ["true"])
    assert not r["ok"] and r["error"] == "not_found" and "no pod with uid" in r["message"], r
    r, c = a.exec_start(uid, "main", ["no-such-command-here"])
    assert r["ok"], r
    out, err, ex = c.finish()
    assert b"cannot start 'no-such-command-here'" in err and ex == {"exit_code": 128}, (err, ex)
    done = pod("ex-done", [sh("main", "exit 0")], restart="Never")
    duid = done["metadata"]["uid"]
    assert a.request("pod_run", {"pod": done, "files": {}})["ok"]
    a.wait(duid, lambda s: s["phase"] == "Succeeded", what="done")
    r, c = a.exec_start(duid, "main", ["true"])
    assert not r["ok"] and r["error"] in ("invalid", "not_found"), r
    # Terminating: its container ignores SIGTERM, so it still runs through the grace.
    t = pod("ex-term", [sh("main", "trap '' TERM; while :; do sleep 0.1; done")], grace=600)
    tuid = t["metadata"]["uid"]
    assert a.request("pod_run", {"pod": t, "files": {}})["ok"]
    a.wait(tuid, lambda s: running(s, "main"), what="running")
    assert a.request("pod_kill", {"uid": tuid, "grace_s": 600})["ok"]
    r, c = a.exec_start(tuid, "main", ["true"])
    assert not r["ok"] and r["error"] == "invalid" and "the pod is terminating" in r["message"], r
    assert a.request("pod_kill", {"uid": tuid, "grace_s": 0})["ok"]
    bad = a.request("exec_start", {"session": "x", "uid": uid, "container": "main", "command": []})
    assert not bad["ok"] and "'command' must have 1..1024 words" in bad["message"], bad


def exec_pid(a, uid, extra=""):
    """An exec session whose command prints its pid, then waits: (conn, pid)."""
    r, c = a.exec_start(uid, "main", ["sh", "-c", extra + "echo $$; exec sleep 1000"])
    assert r["ok"], r
    return c, int(c.wait_output(lambda o: o.endswith(b"\n")).split()[-1])


def test_exec_killed_with_its_connection(a):
    # The client went away (the agent closed the connection): every process
    # of the command is killed, one that left its session included.
    uid = exec_pod(a, "ex-conn")
    r, c = a.exec_start(uid, "main", ["sh", "-c", "setsid sleep 1000 & echo $!; echo $$; "
                                                  "exec sleep 1000"])
    assert r["ok"], r
    daemon, pid = [int(x) for x in c.wait_output(lambda o: o.count(b"\n") == 2).split()]
    assert alive(daemon) and alive(pid)
    c.close()
    assert gone(pid, timeout=30), "the exec'd command outlived its connection"
    assert gone(daemon, timeout=30), "the command's daemon outlived the connection"


def test_exec_killed_with_pod_and_container(a):
    # A pod that stops ends its sessions (no Exit frame: the connection closes);
    # so does a container that exits while its session runs.
    uid = exec_pod(a, "ex-pod")
    c, pid = exec_pid(a, uid)
    assert a.request("pod_kill", {"uid": uid, "grace_s": 30})["ok"]
    out, err, ex = c.finish(timeout=30)
    assert ex is None and gone(pid, timeout=30), ex
    p = pod("ex-ctr", [sh("main", "trap 'exit 0' TERM; while [ ! -e $(SLURM_K8S_POD_DIR)/stop ]; "
                                  "do sleep 0.1; done")], restart="Never")
    cuid = p["metadata"]["uid"]
    assert a.request("pod_run", {"pod": p, "files": {}})["ok"]
    a.wait(cuid, lambda s: running(s, "main"), what="running")
    c, pid = exec_pid(a, cuid)
    open(os.path.join(a.state_dir, "pods", cuid, "stop"), "w").close()
    out, err, ex = c.finish(timeout=30)
    assert ex is None and gone(pid, timeout=30), ex


def test_exec_session_limits(a):
    # At most 16 sessions into a pod: the next is refused with what to do.
    uid = exec_pod(a, "ex-many")
    conns = [exec_pid(a, uid)[0] for _ in range(16)]
    r, c = a.exec_start(uid, "main", ["true"])
    assert not r["ok"] and r["error"] == "refused" and "too many exec sessions" in r["message"], r
    conns.pop().close()
    deadline = time.time() + 30
    while True:  # the slot comes back once the closed session ended
        r, c = a.exec_start(uid, "main", ["true"])
        if r["ok"]:
            break
        assert time.time() < deadline, r
        a.pump(0.1)
    assert c.finish()[2] == {"exit_code": 0}
    for x in conns:
        x.close()


def test_shim_restart_stops_exec_sessions(a):
    # A shim killed -9 while a session runs: its supervisor is recorded
    # (state.json "main:exec:<pid>") and the restarted shim stops it.
    uid = exec_pod(a, "ex-lost")
    c, pid = exec_pid(a, uid)
    state = os.path.join(a.state_dir, "pods", uid, "state.json")
    deadline = time.time() + 30
    while not any(k.startswith("main:exec:") for k in
                  (json.load(open(state)).get("processes") or {})):
        assert time.time() < deadline, "the exec session is not in state.json"
        a.pump(0.05)
    crash_and_restart_stops(a, uid, {"exec": pid})
    c.close()


# ---- attach sessions (k8s-shim/attach_session.h) ----

TICKER = ("i=0; trap 'exit 0' TERM; while :; do i=$((i+1)); echo line $i; echo err $i >&2; "
          "sleep 0.05; done")


def numbers(text, word):
    return [int(l.split()[1]) for l in text.splitlines() if l.startswith(word + " ")]


def test_attach_tees_output(a):
    # The container's output from the moment of the attach arrives as frames while
    # its CRI log still gets every line; the agent closing the connection ends the
    # session only: the container keeps running (and logging).
    p = pod("at-tee", [sh("main", TICKER)])
    uid = p["metadata"]["uid"]
    assert a.request("pod_run", {"pod": p, "files": {}})["ok"]
    a.wait(uid, lambda s: running(s, "main"), what="running")
    wait_log_lines(a, uid, "main", lambda lines: "line 3" in lines)
    r, c = a.attach_start(uid, "main")
    assert r["ok"], r
    out = c.wait_output(lambda o: len(numbers(o.decode(), "line")) >= 5, timeout=30).decode()
    got = numbers(out, "line")
    assert got[0] > 1 and got == list(range(got[0], got[0] + len(got))), got
    deadline = time.time() + 30
    while not numbers(c.err.decode(), "err"):
        assert time.time() < deadline, c.err
        c._take(c.read_frame(30))
    # Every line the session got is in the log too (a tee, not a diversion).
    lines = wait_log_lines(a, uid, "main", lambda l: "line %d" % got[-1] in l)
    assert all("line %d" % n in lines for n in range(1, got[-1] + 1)), lines[:20]
    c.close()
    last = got[-1]
    wait_log_lines(a, uid, "main", lambda l: "line %d" % (last + 20) in l, timeout=30)
    st = a.last(uid)
    assert running(st, "main") and cstatus(st, "main")["restartCount"] == 0, st


def test_tty_container(a):
    """spec.tty: the container's stdin, stdout and stderr are a terminal (its output one stream,
    logged as stdout); an attached session with a terminal sizes it and types into it."""
    script = ('[ -t 0 ] && [ -t 1 ] && [ -t 2 ] && echo "all a terminal"; echo "on stderr" >&2; '
              'while read l; do echo "size $(stty size) line $l"; done')
    p = pod("tty", [sh("main", script, tty=True, stdin=True)])
    uid = p["metadata"]["uid"]
    assert a.request("pod_run", {"pod": p, "files": {}})["ok"]
    a.wait(uid, lambda s: running(s, "main"), what="running")
    lines = wait_log_lines(a, uid, "main", lambda l: "on stderr" in " ".join(l), timeout=20)
    assert any("all a terminal" in l for l in lines), lines
    raw = open(os.path.join(a.state_dir, "pods", uid, "main", "0.log")).read()
    assert " stderr " not in raw and " stdout F on stderr" in raw.replace("\r", ""), raw
    r, c = a.attach_start(uid, "main", stdin=True, stderr=False, tty=True)
    assert r["ok"], r
    c.resize(100, 40)
    c.stdin(b"typed\n")
    out = c.wait_output(lambda o: b"line typed" in o, timeout=20).decode()
    assert "size 40 100 line typed" in out, out
    c.close()


def test_attach_exit_code(a):
    # The container's exit ends the session with its exit code; so does the pod's
    # stop (the container's exit after SIGTERM).
    p = pod("at-exit", [sh("main", "echo up; while [ ! -e $SLURM_K8S_POD_DIR/stop ]; do sleep 0.1; "
                                   "done; echo bye; exit 7")], restart="Never")
    uid = p["metadata"]["uid"]
    assert a.request("pod_run", {"pod": p, "files": {}})["ok"]
    a.wait(uid, lambda s: running(s, "main"), what="running")
    # The tee starts at the attach: "up" comes before it, so only "bye" is the session's.
    wait_log_lines(a, uid, "main", lambda lines: "up" in lines, timeout=30)
    r, c = a.attach_start(uid, "main")
    assert r["ok"], r
    open(os.path.join(a.state_dir, "pods", uid, "stop"), "w").close()
    out, err, ex = c.finish(timeout=30)
    assert out == b"bye\n" and ex == {"exit_code": 7}, (out, err, ex)
    # Its TERM trap is set before "ready": a stop before it would exit 143.
    k = pod("at-kill", [sh("main", "trap 'exit 0' TERM; echo ready; while :; do sleep 0.1; done")])
    kuid = k["metadata"]["uid"]
    assert a.request("pod_run", {"pod": k, "files": {}})["ok"]
    a.wait(kuid, lambda s: running(s, "main"), what="running")
    wait_log_lines(a, kuid, "main", lambda lines: "ready" in lines, timeout=30)
    r, c = a.attach_start(kuid, "main")
    assert r["ok"], r
    assert a.request("pod_kill", {"uid": kuid, "grace_s": 30})["ok"]
    assert c.finish(timeout=30)[2] == {"exit_code": 0}


def test_attach_stdin(a):
    # spec.stdin: the container reads what attached sessions send; its answers
    # come back as frames and go to its log. Without stdinOnce a client's end of
    # input leaves the container's stdin open; with it, the container reads EOF.
    echo = "while read l; do echo got $l; done; echo eof; exec sleep 1000"
    p = pod("at-in", [sh("main", echo, stdin=True), sh("once", echo, stdin=True, stdinOnce=True)])
    uid = p["metadata"]["uid"]
    assert a.request("pod_run", {"pod": p, "files": {}})["ok"]
    a.wait(uid, lambda s: running(s, "main") and running(s, "once"), what="running")
    r, c = a.attach_start(uid, "main", stdin=True)
    assert r["ok"], r
    c.stdin(b"one\n")
    c.wait_output(lambda o: b"got one\n" in o)
    c.close_stdin()
    c.stdin(b"two\n")
    out = c.wait_output(lambda o: b"got two\n" in o)
    assert b"eof" not in out, out
    c.close()
    wait_log(a, uid, "main", "got two")
    # A second client writes on: the first one's end closed nothing.
    r, c = a.attach_start(uid, "main", stdin=True)
    assert r["ok"], r
    c.stdin(b"three\n")
    c.wait_output(lambda o: b"got three\n" in o)
    c.close()
    r, c = a.attach_start(uid, "once", stdin=True)
    assert r["ok"], r
    block = b"x" * 300000 + b"\n"  # more than a pipe holds: written as the container reads
    for i in range(0, len(block), 65536):
        c.stdin(block[i:i + 65536])
    c.stdin(b"four\n")
    c.close_stdin()
    out = c.wait_output(lambda o: b"eof\n" in o, timeout=30)
    assert b"got four\neof\n" in out, out[-200:]
    c.close()
    assert running(a.last(uid), "once")


def test_attach_refusals(a):
    # What cannot be attached to is refused with the reason, before any connection.
    uid = exec_pod(a, "at-bad")
    for kw, code, words in [
            ({"container": "nosuch"}, "not_found", "has no container nosuch"),
            ({"stdin": True}, "invalid", "the container does not take stdin (spec.stdin is false)"),
            ({"tty": True}, "invalid", "the container has no terminal"),
    ]:
        r, c = a.attach_start(uid, kw.pop("container", "main"), **kw)
        assert c is None and not r["ok"] and r["error"] == code and words in r["message"], (kw, r)
    r, c = a.attach_start("uid-unknown", "main")
    assert c is None and r["error"] == "not_found" and "no pod with uid" in r["message"], r
    done = pod("at-done", [sh("main", "exit 0")], restart="Never")
    duid = done["metadata"]["uid"]
    assert a.request("pod_run", {"pod": done, "files": {}})["ok"]
    a.wait(duid, lambda s: s["phase"] == "Succeeded", what="done")
    r, c = a.attach_start(duid, "main")
    assert c is None and r["error"] in ("invalid", "not_found"), r
    t = pod("at-term", [sh("main", "trap '' TERM; while :; do sleep 0.1; done")], grace=600)
    tuid = t["metadata"]["uid"]
    assert a.request("pod_run", {"pod": t, "files": {}})["ok"]
    a.wait(tuid, lambda s: running(s, "main"), what="running")
    assert a.request("pod_kill", {"uid": tuid, "grace_s": 600})["ok"]
    r, c = a.attach_start(tuid, "main")
    assert c is None and r["error"] == "invalid" and "the pod is terminating" in r["message"], r
    assert a.request("pod_kill", {"uid": tuid, "grace_s": 0})["ok"]
    # Attach sessions count with exec sessions: 16 into a pod at most.
    conns = [a.attach_start(uid, "main")[1] for _ in range(16)]
    assert all(conns)
    r, c = a.exec_start(uid, "main", ["true"])
    assert not r["ok"] and r["error"] == "refused" and "too many exec sessions" in r["message"], r
    r, c = a.attach_start(uid, "main")
    assert not r["ok"] and r["error"] == "refused", r
    for x in conns:
        x.close()
    assert running(a.last(uid), "main")


def test_attach_stuck_session_dropped(a):
    # A client that never reads: once more than 1 MiB waits for it, its session is
    # dropped (the connection closed); the container never waits and its log gets
    # everything.
    p = pod("at-stuck", [sh("main", "trap 'exit 0' TERM; while :; do head -c 65536 /dev/zero | "
                                    "tr '\\0' x; echo; sleep 0.01; done")])
    uid = p["metadata"]["uid"]
    assert a.request("pod_run", {"pod": p, "files": {}})["ok"]
    a.wait(uid, lambda s: running(s, "main"), what="running")
    log = os.path.join(a.state_dir, "pods", uid, "main", "0.log")
    r, c = a.attach_start(uid, "main")
    assert r["ok"], r
    at_attach = os.path.getsize(log)
    # More than the queue's bound and the socket's buffers reached the log
    # while the client read nothing.
    deadline = time.time() + 60
    while os.path.getsize(log) - at_attach < 8 << 20:
        assert time.time() < deadline, "the log stopped growing: the container waits"
        a.pump(0.1)
    got = 0
    deadline = time.time() + 30
    while True:
        f = c.read_frame(max(0.01, deadline - time.time()))
        if f is None:
            break
        got += len(f[1])
        assert time.time() < deadline, "the stuck session was not dropped"
    assert got < 4 << 20, got
    size = os.path.getsize(log)
    deadline = time.time() + 30
    while os.path.getsize(log) < size + (1 << 20):
        assert time.time() < deadline, "the container stopped after its session was dropped"
        a.pump(0.1)
    st = a.last(uid)
    assert running(st, "main") and cstatus(st, "main")["restartCount"] == 0, st


def pod_stats(a):
    r = a.request("pod_stats", {})
    assert r["ok"], r
    return r["body"]


def stats_of(body, uid):
    for p in body["pods"]:
        if p["uid"] == uid:
            return p, {c["name"]: c for c in p["containers"]}
    return None, {}


def test_pod_stats(a):
    # pod_stats counts every process below a container's supervisor: a
    # burner that left the group (setsid, its parent gone: reparented to the
    # supervisor) and the CPU of a child that exited and was reaped
    # (cutime); memory is the RSS sum; node = the pods' sum without a Slurm
    # cgroup (none here).
    t0 = int(time.time() * 1000)
    p = pod("stats", [
        sh("burn", '(setsid sh -c "while :; do :; done" &); trap "exit 0" TERM; '
                   'while :; do sleep 0.1; done'),
        sh("reaped", 'sh -c "i=0; while [ \\$i -lt 200000 ]; do i=\\$((i+1)); done"; echo done; '
                     'trap "exit 0" TERM; while :; do sleep 0.1; done'),
    ])
    uid = p["metadata"]["uid"]
    assert a.request("pod_run", {"pod": p, "files": {}})["ok"]
    a.wait(uid, lambda st: running(st, "burn") and running(st, "reaped"), what="running")
    # Running comes with the supervisor's start; its command (the first
    # process below it, whose RSS is counted) may still be on its way.
    deadline = time.time() + 30
    while True:
        first, cs = stats_of(pod_stats(a), uid)
        if (first is not None and set(cs) == {"burn", "reaped"}
                and all(c["memory_bytes"] > 0 for c in cs.values())) or time.time() > deadline:
            break
        time.sleep(0.05)
    assert first is not None and first["namespace"] == "rl" and first["name"] == "stats", first
    assert set(cs) == {"burn", "reaped"}, cs
    for c in cs.values():
        assert c["start_ms"] >= t0 - 1000 and c["start_ms"] <= time.time() * 1000 + 1000, c
        assert c["memory_bytes"] > 0, c
    # The burner's counter grows by a quarter of a CPU second (it gets at
    # least a share of one core on a loaded machine).
    base = cs["burn"]["cpu_ns"]
    deadline = time.time() + 60
    while True:
        body = pod_stats(a)
        _, cs = stats_of(body, uid)
        if cs["burn"]["cpu_ns"] >= base + 250 * 10**6:
            break
        assert time.time() < deadline, (base, cs)
        a.pump(0.2)
    assert body["node"]["source"] == "pods", body["node"]
    total = sum(c["cpu_ns"] for p in body["pods"] for c in p["containers"])
    assert body["node"]["cpu_ns"] == total, (body["node"], total)
    # The reaped child's CPU stays counted after it exited.
    deadline = time.time() + 60
    while "done" not in log_content(read_log(a, uid, "reaped")):
        assert time.time() < deadline, "the counting child did not finish"
        a.pump(0.2)
    _, cs = stats_of(pod_stats(a), uid)
    assert cs["reaped"]["cpu_ns"] >= 50 * 10**6, cs["reaped"]
    # A stopped pod has no running containers to report.
    assert a.request("pod_kill", {"uid": uid, "grace_s": 5})["ok"]
    a.wait(uid, lambda st: st.get("phase") in ("Succeeded", "Failed"), timeout=30, what="stopped")
    deadline = time.time() + 30
    while True:
        _, cs = stats_of(pod_stats(a), uid)
        if not cs:
            break
        assert time.time() < deadline, cs
        a.pump(0.2)


def test_pod_cgroup_requests(a):
    # The agent said at attach that pods get cgroups of their own: every
    # container's supervisor asks it, on a connection of its own, to be moved
    # into its pod's cgroup (naming the pod and its GPUs) and starts the
    # command only once answered (the command reads a file this fake agent
    # writes just before its answer); a refusal is a StartError that says why;
    # an unavailable agent is asked again.
    import threading
    import struct as st_
    answered = os.path.join(a.tmp, "answered")
    seen, stop = [], threading.Event()

    def serve():
        a.srv.settimeout(0.1)
        while not stop.is_set():
            try:
                c, _ = a.srv.accept()
            except (socket.timeout, OSError):
                continue
            with c:
                pid = st_.unpack("3i", c.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[0]
                req = json.loads(c.makefile().readline())
                with open("/proc/%d/stat" % pid) as f:
                    stat = f.read()
                comm = stat[stat.index("(") + 1:stat.rindex(")")]
                ppid = int(stat[stat.rindex(")") + 2:].split()[1])
                seen.append((req["op"], req["body"], comm, ppid))
                retry = req["body"]["pod_uid"] == "uid-cgretry" and len(
                    [s for s in seen if s[1]["pod_uid"] == "uid-cgretry"]) == 1
                if retry:  # as the agent answers when this user's connections are all taken
                    c.sendall((json.dumps({"id": 0, "ok": False, "error": "unavailable",
                                           "message": "too many connections"}) + "\n").encode())
                elif req["body"]["pod_uid"] == "uid-cgno":
                    c.sendall((json.dumps({"id": req["id"], "ok": False, "error": "forbidden",
                                           "message": "test refusal"}) + "\n").encode())
                else:
                    with open(answered, "w") as f:
                        f.write("yes\n")
                    c.sendall((json.dumps({"id": req["id"], "ok": True, "body": {}}) + "\n").encode())

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        p = pod("cgok", [sh("main", 'trap "exit 0" TERM; cat %s; while :; do sleep 0.1; done' % answered,
                            resources={"limits": {"nvidia.com/gpu": "2"}})])
        assert a.request("pod_run", {"pod": p, "files": {}})["ok"]
        a.wait("uid-cgok", lambda s: running(s, "main"), what="running")
        assert wait_log_lines(a, "uid-cgok", "main")[0] == "yes"
        ok = [s for s in seen if s[1]["pod_uid"] == "uid-cgok"]
        assert len(ok) == 1 and ok[0][0] == "cgroup_enter", seen
        assert len(ok[0][1]["gpus"]) == 2 and set(ok[0][1]["gpus"]) <= {0, 1, 2, 3}, seen
        assert ok[0][1]["container"] == "main", seen
        assert ok[0][2] == "sk-supervise" and ok[0][3] == a.proc.pid, seen
        p = pod("cgno", [sh("main", "echo never")], restart="Never")
        assert a.request("pod_run", {"pod": p, "files": {}})["ok"]
        st = a.wait("uid-cgno", lambda s: s["phase"] == "Failed", what="Failed")
        term = cstatus(st, "main")["state"]["terminated"]
        assert term["exitCode"] == 128 and term["reason"] == "StartError", term
        assert "not placed in its pod's cgroup: agent: test refusal" in term["message"], term
        assert "never" not in "\n".join(log_content(read_log(a, "uid-cgno", "main")))
        assert [s[1]["gpus"] for s in seen if s[1]["pod_uid"] == "uid-cgno"] == [[]], seen
        # Unavailable (a busy or restarting agent) is asked again.
        p = pod("cgretry", [sh("main", 'trap "exit 0" TERM; echo up; while :; do sleep 0.1; done')])
        assert a.request("pod_run", {"pod": p, "files": {}})["ok"]
        a.wait("uid-cgretry", lambda s: running(s, "main"), what="running")
        assert wait_log_lines(a, "uid-cgretry", "main")[0] == "up"
        assert len([s for s in seen if s[1]["pod_uid"] == "uid-cgretry"]) == 2, seen
    finally:
        stop.set()
        t.join(5)
        a.srv.settimeout(5)


TESTS = [
    ("init_and_two_containers", test_init_and_two_containers, {}),
    ("crashloop_backoff", test_crashloop_backoff, {}),
    ("active_deadline", test_active_deadline, {}),
    ("https_and_grpc_probes", test_https_and_grpc_probes, {}),
    ("lifecycle_hooks", test_lifecycle_hooks, {}),
    ("native_sidecars", test_native_sidecars, {}),
    ("tty_container", test_tty_container, {}),
    ("pod_cgroup_requests", test_pod_cgroup_requests, {"pod_cgroups": True}),
    ("never_exit_codes", test_never_exit_codes, {}),
    ("started_only_when_started", test_started_only_when_started, {}),
    ("probe_foreign_listener", test_probe_foreign_listener, {}),
    ("command_line_limits", test_command_line_limits, {}),
    ("readiness_flips_ready", test_readiness_flips_ready, {}),
    ("pods_pause", test_pods_pause, {}),
    ("http_and_tcp_probes", test_http_and_tcp_probes, {}),
    ("liveness_restarts", test_liveness_restarts, {}),
    ("termination_grace_kills_group", test_termination_grace_kills_group, {}),
    ("gpus_disjoint_and_refused", test_gpus_disjoint_and_refused, {}),
    ("step_signals_ignored", test_step_signals_ignored, {}),
    ("policy_refusals", test_policy_refusals, {}),
    ("confinement", test_confinement, {}),
    ("runtime_template", test_runtime_template, {"runtime": True}),
    ("gpu_devices_hidden_in_dev", test_gpu_devices_hidden_in_dev,
     {"runtime_conf": "gpu_device = /dev/tty{index}\n"}),
    ("podman_missing_binary", test_podman_missing_binary,
     {"runtime_conf": "podman = reg.example/*\npodman_binary = /nonexistent/podman\n"}),
    ("volumes_files", test_volumes_files, {}),
    ("pod_files_replaced", test_pod_files_replaced, {}),
    ("mount_over_squat", test_mount_over_squat, {}),
    ("mount_namespace_paths", test_mount_namespace_paths, {}),
    ("mount_nested_shadows", test_mount_nested_shadows, {}),
    ("mount_read_only_and_sub_path", test_mount_read_only_and_sub_path, {}),
    ("mount_bad_paths", test_mount_bad_paths, {}),
    ("mount_service_account_path", test_mount_service_account_path, {}),
    ("mount_namespace_refused", test_mount_namespace_refused, {"wrap": NO_USERNS}),
    ("mount_without_pivot_root", test_mount_without_pivot_root, {"wrap": NO_PIVOT_ROOT}),
    ("mount_sees_later_node_mounts", test_mount_sees_later_node_mounts,
     {"wrap": SHARED_MOUNTS if os.getuid() == 0 else ()}),
    ("log_rotation_and_previous", test_log_rotation_and_previous,
     {"args": ["--log-max-bytes", "4096"]}),
    ("shim_restart_never_runs_twice", test_shim_restart_never_runs_twice, {}),
    ("shutdown_stops_pods", test_shutdown_stops_pods, {}),
    ("daemonizing_main_completes", test_daemonizing_main_completes, {}),
    ("delete_kills_daemons_and_new_sessions", test_delete_kills_daemons_and_new_sessions, {}),
    ("main_exit_kills_stubborn_children", test_main_exit_kills_stubborn_children, {}),
    ("always_restarts_after_daemonizing_main", test_always_restarts_after_daemonizing_main, {}),
    ("probe_and_hook_daemons_die", test_probe_and_hook_daemons_die, {}),
    ("shim_restart_kills_daemons", test_shim_restart_kills_daemons, {}),
    ("shim_restart_stops_hooks_and_probes", test_shim_restart_stops_hooks_and_probes, {}),
    ("shorter_grace_shortens_a_stop", test_shorter_grace_shortens_a_stop, {}),
    ("exec_output_and_exit_code", test_exec_output_and_exit_code, {}),
    ("exec_stdin", test_exec_stdin, {}),
    ("exec_tty", test_exec_tty, {}),
    ("exec_refusals", test_exec_refusals, {}),
    ("exec_killed_with_its_connection", test_exec_killed_with_its_connection, {}),
    ("exec_killed_with_pod_and_container", test_exec_killed_with_pod_and_container, {}),
    ("exec_session_limits", test_exec_session_limits, {}),
    ("shim_restart_stops_exec_sessions", test_shim_restart_stops_exec_sessions, {}),
    ("attach_tees_output", test_attach_tees_output, {}),
    ("attach_exit_code", test_attach_exit_code, {}),
    ("attach_stdin", test_attach_stdin, {}),
    ("attach_refusals", test_attach_refusals, {}),
    ("attach_stuck_session_dropped", test_attach_stuck_session_dropped,
     {"args": ["--log-max-bytes", str(256 << 20)]}),
    ("pod_stats", test_pod_stats, {}),
]


def main():
    global SHIM
    SHIM = os.path.abspath(sys.argv[1])
    only = set(sys.argv[2:])
    passed = failed = 0
    for name, fn, opts in TESTS:
        if only and name not in only:
            continue
        tmp = tempfile.mkdtemp(prefix="shimtest-")
        args = list(opts.get("args", []))
        if opts.get("runtime"):
            conf = os.path.join(tmp, "runtime.conf")
            with open(conf, "w") as f:
                f.write("# test\ntemplate = docker.io/* %s/fake-apptainer exec --nv "
                        "docker://{image} {command}\n" % tmp)
            args += ["--runtime-config", conf]
        if opts.get("runtime_conf"):
            conf = os.path.join(tmp, "runtime.conf")
            with open(conf, "w") as f:
                f.write(opts["runtime_conf"])
            args += ["--runtime-config", conf]
        t0 = time.time()
        a = None
        try:
            a = Agent(extra_args=args, tmp=tmp, wrap=opts.get("wrap", ()),
                      pod_cgroups=opts.get("pod_cgroups", False))
            fn(a)
            passed += 1
            print("PASS: %s (%.1fs)" % (name, time.time() - t0), flush=True)
        except Exception:
            failed += 1
            print("FAIL: %s (%.1fs)" % (name, time.time() - t0), flush=True)
            traceback.print_exc()
            try:
                with open(os.path.join(tmp, "shim.stderr")) as f:
                    print("---- shim stderr (tail) ----\n" + "".join(f.readlines()[-30:]))
            except OSError:
                pass
        finally:
            if a:
                a.close()
                for path in a.cleanup:
                    if os.path.islink(path) or os.path.isfile(path):
                        os.unlink(path)
                    else:
                        shutil.rmtree(path, ignore_errors=True)
            shutil.rmtree(tmp, ignore_errors=True)
    print("%d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
