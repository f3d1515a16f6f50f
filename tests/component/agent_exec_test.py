#!/usr/bin/python3
"""Component test: `kubectl exec` and `kubectl cp` (the real kubectl, 1.28 over SPDY/3.1 and
1.32 over WebSocket v5) through the test API server's pods/exec proxy to the real agent's
kubelet endpoint (TLS), whose exec session has the real shim start the command as the job's
user in the pod's environment. No Slurm; any user. Prints `N passed, N failed` and leaves no
process behind.
"""
import base64, json, os, pty, select, signal, socket, ssl, subprocess, sys, threading, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from sktest.env import NODE, ShimEnv, shim_suite_main, shim_reg  # noqa: E402
from sktest.host import free_port  # noqa: E402
from sktest.programs import SHIM_NICE  # noqa: E402
from sktest.suite import SCALE, check, wait_for  # noqa: E402


def pod(name, command, env=None, restart="Always"):
    c = {"name": "main", "image": "python:3", "command": command, "env": env or []}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"nodeName": NODE, "terminationGracePeriodSeconds": 5, "containers": [c],
                     "restartPolicy": restart,
                     "tolerations": [{"key": "slurm-k8s/job", "operator": "Exists"}]}}


def running(env, name):
    code, p = env.api("GET", "/api/v1/namespaces/default/pods/" + name)
    return code == 200 and p.get("status", {}).get("phase") == "Running"


_SAID = set()


def versions(kubectl):
    """kubectl 1.28 (SPDY) and 1.32 (WebSocket) found beside `kubectl` (kubectl.1.28,
    kubectl.1.32). One that is missing is said (SKIP, once) and its checks are not run: no
    quiet fallback to another version, which would test the other transport twice."""
    d = os.path.dirname(os.path.realpath(kubectl))
    out = []
    for v, what in (("1.28", "SPDY"), ("1.32", "WebSocket")):
        p = os.path.join(d, "kubectl." + v)
        if os.access(p, os.X_OK):
            out.append((v, p))
        elif v not in _SAID:
            _SAID.add(v)
            print("SKIP kubectl %s (the %s client) not found at %s: its checks are skipped" % (v, what, p))
    return out


def kc(env, binary, *args, input=None, timeout=30):
    r = subprocess.run([binary, "--kubeconfig", os.path.join(env.kdir, "kubeconfig")] + list(args),
                       input=input, capture_output=True, timeout=timeout * SCALE)
    return r.returncode, r.stdout, r.stderr


def under_pty(argv, rows, cols, send, timeout):
    """Runs argv on a new pseudo-terminal of rows x cols, writes `send`, returns what it printed."""
    import fcntl, struct, termios
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(argv[0], argv)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    out, sent, end = b"", False, time.time() + timeout * SCALE
    while time.time() < end:
        r, _, _ = select.select([fd], [], [], 0.2)
        if r:
            try:
                data = os.read(fd, 65536)
            except OSError:
                break
            if not data:
                break
            out += data
        if not sent and b"READY" in out:
            os.write(fd, send)
            sent = True
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    _, status = os.waitpid(pid, 0)
    return out, status


ECHO = """
import socket, sys, threading
def serve(port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(64)
    while True:
        c, _ = s.accept()
        threading.Thread(target=echo, args=(c,), daemon=True).start()
def echo(c):
    while True:
        d = c.recv(65536)
        if not d:
            break
        c.sendall(d)
    c.shutdown(socket.SHUT_WR)
    c.close()
for p in sys.argv[1:]:
    threading.Thread(target=serve, args=(int(p),), daemon=True).start()
threading.Event().wait()
"""


def listening(port):
    """True when something accepts a connection on 127.0.0.1:port (a pod's server: Running only
    says its process was started, not that it has bound its port yet)."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
        return True
    except OSError:
        return False


def echo_through(port, data):
    """Sends data to 127.0.0.1:port, half-closes, returns everything read until EOF."""
    s = socket.create_connection(("127.0.0.1", port), timeout=30 * SCALE)
    got = []
    t = threading.Thread(target=lambda: got.append(read_all(s)))
    t.start()
    try:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
    except OSError:
        pass  # the far end closed first (a refused forward): what came back tells
    t.join(60 * SCALE)
    s.close()
    return got[0] if got else None


def read_all(s):
    out = b""
    while True:
        try:
            d = s.recv(65536)
        except OSError:
            return out
        if not d:
            return out
        out += d


def port_forward(env, k, local, remote):
    """kubectl port-forward pod/echo local:remote, once it says it forwards."""
    p = subprocess.Popen([k, "--kubeconfig", os.path.join(env.kdir, "kubeconfig"), "port-forward",
                          "pod/echo", "%d:%d" % (local, remote)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    if "Forwarding from" not in line:  # it failed: say why
        p.kill()
        line += p.communicate(timeout=10)[1]
    return p, line


class ExecEnv(ShimEnv):
    """ShimEnv with short stream bounds, so that the limits are reached in a test."""

    def conf_settings(self):
        s = super().conf_settings()
        s.update(kubelet_stream_creation_timeout="2s", kubelet_max_stream_sessions=4,
                 node_hostname="localhost")
        return s


def listen_addresses(port):
    """The local addresses of the sockets listening on TCP `port` (/proc/net/tcp and tcp6)."""
    out = []
    for f, v6 in (("/proc/net/tcp", False), ("/proc/net/tcp6", True)):
        try:
            lines = open(f).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            w = line.split()
            addr, p = w[1].split(":")
            if w[3] != "0A" or int(p, 16) != port:
                continue
            raw = bytes.fromhex(addr)
            # the kernel prints each 32-bit word in host (little-endian) order
            raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
            out.append(socket.inet_ntop(socket.AF_INET6 if v6 else socket.AF_INET, raw))
    return out


def kubelet_port(env):
    _, n = env.api("GET", "/api/v1/nodes/" + NODE)
    return n["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"]


def raw_upgrade(env, path, headers):
    """A TLS connection to the agent's kubelet endpoint with the API server's client certificate,
    an upgrade request; returns (socket, the response head)."""
    ctx = ssl.create_default_context(cafile=os.path.join(env.kdir, "ca.crt"))
    ctx.check_hostname = False
    ctx.load_cert_chain(os.path.join(env.kdir, "kubelet-client.crt"),
                        os.path.join(env.kdir, "kubelet-client.key"))
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", kubelet_port(env)),
                                                 timeout=20 * SCALE))
    req = "%s %s HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\n" % (
        "GET" if "websocket" in headers.get("Upgrade", "") else "POST", path)
    req += "".join("%s: %s\r\n" % kv for kv in headers.items()) + "\r\n"
    s.sendall(req.encode())
    head = b""
    while b"\r\n\r\n" not in head:
        d = s.recv(1)
        if not d:
            break
        head += d
    return s, head.decode("latin-1")


def closed_within(s, seconds):
    """Reads until EOF; returns (bytes read, whether EOF came within `seconds`)."""
    s.settimeout(seconds * SCALE)
    out = b""
    try:
        while True:
            d = s.recv(65536)
            if not d:
                return out, True
            out += d
    except (socket.timeout, ssl.SSLError, OSError):
        return out, False


SPDY = {"Upgrade": "SPDY/3.1", "X-Stream-Protocol-Version": "v4.channel.k8s.io"}
EXEC_Q = "/exec/default/box/main?command=sleep&command=30&output=1"


def hostile(env):
    """Peers that break the protocols: each gets its answer, the agent goes on."""
    s, head = raw_upgrade(env, EXEC_Q, SPDY)
    check("raw SPDY upgrade: 101 with the protocol", head.startswith("HTTP/1.1 101") and
          "v4.channel.k8s.io" in head, head)
    s.sendall(b"\x80\x03\x00\x01\xff\xff\xff\xff" + os.urandom(64))  # a SYN_STREAM of 16 MiB
    out, eof = closed_within(s, 20)
    check("garbage SPDY frames: GOAWAY(PROTOCOL_ERROR), then the connection closes",
          eof and out[:4] == b"\x80\x03\x00\x07" and out[12:16] == b"\x00\x00\x00\x01",
          (eof, out[:20]))
    s.close()
    s, head = raw_upgrade(env, EXEC_Q, SPDY)
    t0 = time.time()
    out, eof = closed_within(s, 20)
    check("a client that never opens its streams is closed after kubelet_stream_creation_timeout",
          head.startswith("HTTP/1.1 101") and eof and time.time() - t0 >= 1.5, (head[:40], eof))
    s.close()
    key = base64.b64encode(os.urandom(16)).decode()
    s, head = raw_upgrade(env, EXEC_Q, {"Upgrade": "websocket", "Sec-WebSocket-Version": "13",
                                        "Sec-WebSocket-Key": key,
                                        "Sec-WebSocket-Protocol": "v5.channel.k8s.io"})
    check("raw WebSocket upgrade: 101 v5", head.startswith("HTTP/1.1 101") and
          "v5.channel.k8s.io" in head, head)
    s.sendall(b"\x82\x03\x00ab")  # an unmasked client frame
    out, eof = closed_within(s, 20)
    i = out.rfind(b"\x88")  # the Close frame: opcode, length, code, reason
    check("an unmasked WebSocket frame: Close 1002, then the connection closes",
          eof and i >= 0 and out[i + 2:i + 4] == b"\x03\xea", (eof, out[-40:]))
    s.close()
    s, head = raw_upgrade(env, EXEC_Q, {"Upgrade": "SPDY/3.1",
                                        "X-Stream-Protocol-Version": "v9.channel.k8s.io"})
    check("a protocol version we do not offer: 403 naming what we accept",
          head.startswith("HTTP/1.1 403"), head[:80])
    s.close()


def exec_attach_as(env, uid, session):
    """exec_attach for `session` on the agent socket as `uid` (a child that drops to it)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            if uid != os.getuid():
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
            c = socket.socket(socket.AF_UNIX)
            c.connect(os.path.join(env.dir, "agent.sock"))
            c.sendall(json.dumps({"id": 1, "op": "exec_attach", "body": {"session": session}})
                      .encode() + b"\n")
            c.settimeout(10)
            os.write(w, c.recv(4096))
        finally:
            os._exit(0)
    os.close(w)
    out = b""
    while True:
        d = os.read(r, 4096)
        if not d:
            break
        out += d
    os.waitpid(pid, 0)
    os.close(r)
    return out.decode("utf-8", "replace")


def held_data_connection(env, argv):
    """Starts `argv` (a kubectl exec) with the agent's socket path lent to a listener of ours for
    the shim's one data connection: returns (the kubectl process, that connection or None, its
    exec_attach line). The agent's socket is back at its path on return, and the session waits
    for its shim until the caller passes the connection on."""
    sock = os.path.join(env.dir, "agent.sock")
    os.rename(sock, sock + ".real")  # the agent's listener stays bound to the renamed file
    hold = socket.socket(socket.AF_UNIX)
    conn, line = None, b""
    try:
        hold.bind(sock)
        hold.listen(1)
        hold.settimeout(20 * SCALE)
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            conn, _ = hold.accept()
            conn.settimeout(10 * SCALE)
            while not line.endswith(b"\n"):
                d = conn.recv(4096)
                if not d:
                    break
                line += d
        except OSError:
            pass
    finally:
        hold.close()
        os.unlink(sock)
        os.rename(sock + ".real", sock)
    return p, conn, line


def relay(a, b):
    """Copies a to b until EOF, then half-closes b."""
    try:
        while True:
            d = a.recv(65536)
            if not d:
                break
            b.sendall(d)
        b.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def uid_check_alone(env):
    """An exec_attach from another uid while the session still waits for its shim: only the
    comparison with the job's uid can refuse it (the one-connection rule cannot)."""
    p, conn, line = held_data_connection(
        env, [env.kubectl_bin, "--kubeconfig", os.path.join(env.kdir, "kubeconfig"), "exec", "box",
              "--", "echo", "attached-late"])
    try:
        sid = json.loads(line)["body"]["session"]
    except (ValueError, KeyError, TypeError):
        sid = None
    check("the shim's exec_attach held on the way: the session waits, its id known",
          conn is not None and sid, line)
    os.chmod(env.dir, 0o711)  # the other user reaches the socket, as on a node
    ans = exec_attach_as(env, 65534, sid or "x")
    unknown = exec_attach_as(env, 65534, "0" * len(sid or "x"))
    os.chmod(env.dir, 0o700)
    check("exec_attach from another uid while the session waits for its shim: refused as unknown",
          '"not_found"' in ans and
          ans.replace(sid or "x", "ID") == unknown.replace("0" * len(sid or "x"), "ID"),
          (ans, unknown))
    if conn is None:
        p.kill()
        p.communicate()
        return
    # The shim's own connection, passed on from the job's uid: still accepted.
    up = socket.socket(socket.AF_UNIX)
    up.connect(os.path.join(env.dir, "agent.sock"))
    up.sendall(line)
    ts = [threading.Thread(target=relay, args=(conn, up)),
          threading.Thread(target=relay, args=(up, conn))]
    for t in ts:
        t.start()
    try:
        out, err = p.communicate(timeout=30 * SCALE)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    for t in ts:
        t.join(10 * SCALE)
    conn.close()
    up.close()
    check("then the shim's exec_attach (the job's uid) is accepted: the session runs its command",
          p.returncode == 0 and out.strip() == b"attached-late", (p.returncode, out, err[-300:]))


def shim_killed_mid_session(env):
    """SIGKILL to the job's shim while `kubectl exec` runs: the client ends, told why; the
    session's slot comes back; a new shim's pod serves exec."""
    d, k = env.dir, env.kubectl_bin
    marker = "sk-exec-shim-lost"
    p = subprocess.Popen([k, "--kubeconfig", os.path.join(env.kdir, "kubeconfig"), "exec", "box",
                          "--", "sh", "-c", "sleep 600; : %s" % marker],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def pids():  # the command's, not kubectl's (its argv carries the marker too)
        r = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True)
        return [int(x) for x in r.stdout.split() if int(x) != p.pid]
    check("shim lost: a session's command runs", wait_for(pids, 20), "")
    env.shim.kill()
    env.shim.wait(10)
    t0 = time.time()
    try:
        out, err = p.communicate(timeout=20 * SCALE)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    took = time.time() - t0
    check("shim lost: kubectl exec ends within 20 s, non-zero, told the shim went away",
          p.returncode not in (0, -signal.SIGKILL) and b"shim went away" in err,
          (p.returncode, round(took, 1), err[-300:]))
    check("shim lost: the session's command is stopped", wait_for(lambda: not pids(), 15), pids())
    attached = open(os.path.join(d, "agent.log")).read().count("shim attached")
    env.start_shim()
    # A pod bound before the new shim attached fails at once (ShimLost), by design.
    wait_for(lambda: open(os.path.join(d, "agent.log")).read().count("shim attached") > attached,
             10)
    code, _ = env.api("POST", "/api/v1/namespaces/default/pods",
                      pod("box2", ["python3", "-c", "import time\nwhile True: time.sleep(1)"]))
    check("shim lost: a new shim of the job runs a pod", code == 201 and
          wait_for(lambda: running(env, "box2"), 30), code)
    rc, out, err = kc(env, k, "exec", "box2", "--", "echo", "again")
    check("shim lost: exec into the new shim's pod works", rc == 0 and out.strip() == b"again",
          (rc, out, err))
    opened = [line for line in open(os.path.join(d, "agent.log"))
              if "[exec default/box2] session " in line and " opened (" in line]
    check("shim lost: the lost session's slot came back (the next session opened as 1 of 1)",
          opened and opened[-1].rstrip().endswith("opened (1 now)"), opened[-1:])


def nice_of(pid, tid=None):
    """The nice value of a process (or one of its threads), /proc/PID/stat's 19th field."""
    path = "/proc/%d/task/%d/stat" % (pid, tid) if tid else "/proc/%d/stat" % pid
    with open(path) as f:
        return int(f.read().rsplit(")", 1)[1].split()[16])


def priorities(env):
    """The agent and the shim run ahead of the pods in the CPU scheduler (agent.conf nice,
    plugstack shim_nice: docs/architecture.md "Priorities"); the pods' and the sessions'
    commands at the job's own nice value, their supervisors at the shim's."""
    workload = os.getpriority(os.PRIO_PROCESS, 0)
    root = os.geteuid() == 0
    def comm(tid):
        with open("/proc/%d/task/%d/comm" % (env.agent.pid, tid)) as f:
            return f.read().strip()
    agent_tasks = {(t, comm(t)): nice_of(env.agent.pid, t)
                   for t in map(int, os.listdir("/proc/%d/task" % env.agent.pid))}
    relays = sorted((c, n) for (t, c), n in agent_tasks.items() if c in ("sk-tls", "sk-streams"))
    if root:
        check("the agent's loop runs at its nice value (-5)",
              agent_tasks[(env.agent.pid, comm(env.agent.pid))] == -5, agent_tasks)
        check("the kubelet endpoint's TLS thread and the sessions' thread run at the nice the "
              "agent started with", relays == [("sk-streams", workload), ("sk-tls", workload)],
              agent_tasks)
        check("the shim runs at the plugin's shim_nice", nice_of(env.shim.pid) == SHIM_NICE,
              nice_of(env.shim.pid))
    else:
        check("not root: the agent says it could not set its nice value",
              "cannot set the agent's nice value to -5" in open(
                  os.path.join(env.dir, "agent.log")).read(), "")
    marker = "while True: time.sleep(1)"
    def cmdline(pid):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                return f.read()
        except OSError:  # gone meanwhile
            return b""
    def find():  # Running comes with the supervisor: its command may still be on its way
        return [int(p) for p in os.listdir("/proc")
                if p.isdigit() and cmdline(p).startswith(b"python3\0")
                and marker.encode() in cmdline(p)]
    mains = wait_for(find, 10)
    check("the pod's main process runs at the job's nice value, its supervisor at the shim's",
          len(mains) == 1 and nice_of(mains[0]) == workload and
          nice_of(int(open("/proc/%d/stat" % mains[0]).read().rsplit(")", 1)[1].split()[1])) ==
          nice_of(env.shim.pid), [(m, nice_of(m)) for m in mains])
    rc, out, err = kc(env, env.kubectl_bin, "exec", "box", "--", "cat", "/proc/self/stat")
    check("an exec'd command runs at the job's nice value",
          rc == 0 and int(out.decode().rsplit(")", 1)[1].split()[16]) == workload, (rc, out, err))
    shim_threads = {}
    for t in os.listdir("/proc/%d/task" % env.shim.pid):
        with open("/proc/%d/task/%s/comm" % (env.shim.pid, t)) as f:
            shim_threads[f.read().strip()] = nice_of(env.shim.pid, int(t))
    check("the shim's exec sessions relay on a thread of their own at the job's nice value",
          shim_threads.get("sk-sessions") == workload, shim_threads)


def run(env):
    d = env.dir
    open(os.path.join(d, "alive_42"), "w").close()
    reg = shim_reg()
    r = env.call("register", reg)
    check("register", r and r.get("ok"), r)
    env.start_shim()
    code, _ = env.api("POST", "/api/v1/namespaces/default/pods",
                      pod("box", ["python3", "-c", "import time\nwhile True: time.sleep(1)"],
                          env=[{"name": "GREETING", "value": "hello from the pod"}]))
    check("pod created", code == 201, code)
    check("pod runs", wait_for(lambda: running(env, "box"), 30), "")
    priorities(env)
    _, node = env.api("GET", "/api/v1/nodes/" + NODE)
    # localhost resolves to node_address and the serving certificate names it: advertised, and
    # the API server dials it first (Hostname before InternalIP), so every kubectl exec, attach,
    # cp and port-forward below goes through it.
    check("node_hostname usable: the Node's addresses are its InternalIP and Hostname localhost",
          node["status"]["addresses"] == [{"type": "InternalIP", "address": "127.0.0.1"},
                                          {"type": "Hostname", "address": "localhost"}],
          node["status"]["addresses"])
    check("the kubelet endpoint listens on node_address only",
          listen_addresses(kubelet_port(env)) == ["127.0.0.1"], listen_addresses(kubelet_port(env)))

    declared, undeclared = free_port(), free_port()
    echo = pod("echo", ["python3", "-c", ECHO, str(declared), str(undeclared)])
    echo["spec"]["containers"][0]["ports"] = [{"containerPort": declared}]
    code, _ = env.api("POST", "/api/v1/namespaces/default/pods", echo)
    check("an echo pod with one declared port runs and listens", code == 201 and
          wait_for(lambda: running(env, "echo"), 30) and
          wait_for(lambda: listening(declared) and listening(undeclared), 30), code)

    for ver, k in versions(env.kubectl_bin):
        tag = "kubectl " + ver
        local = free_port()
        pf, line = port_forward(env, k, local, declared)
        check(tag + ": port-forward starts", "Forwarding from" in line, line)
        blobs = [os.urandom(1 << 20) for _ in range(4)]
        results = [None] * len(blobs)

        def one(i):
            try:
                results[i] = echo_through(local, blobs[i])
            except OSError as e:
                results[i] = repr(e)
        ts = [threading.Thread(target=one, args=(i,)) for i in range(len(blobs))]
        for t in ts:
            t.start()
        for t in ts:
            t.join(120 * SCALE)
        check(tag + ": port-forward: 4 connections at once, 1 MiB each way, both ends closed",
              results == blobs, [len(r) if isinstance(r, bytes) else r for r in results])
        try:
            again = echo_through(local, b"again")
        except OSError as e:
            again = repr(e)
        check(tag + ": port-forward: a connection after those", again == b"again", again)
        pf.terminate()
        pf.wait(10)
        local = free_port()
        pf, line = port_forward(env, k, local, undeclared)
        try:
            got = echo_through(local, b"x") if "Forwarding from" in line else None
        except OSError as e:
            got = repr(e)
        pf.terminate()
        _, err = pf.communicate(timeout=10)
        check(tag + ": port-forward to a port the pod does not declare is refused",
              got == b"" and "declares no containerPort" in err, (line, got, err[-400:]))

        rc, out, err = kc(env, k, "exec", "box", "--", "sh", "-c", 'echo "$GREETING"; id -u')
        check(tag + ": exec runs in the pod's environment as the job's user",
              rc == 0 and out.decode().split() == ["hello", "from", "the", "pod", str(os.getuid())],
              (rc, out, err))
        rc, out, err = kc(env, k, "exec", "box", "--", "sh", "-c", "echo to-err >&2; exit 7")
        check(tag + ": exec's exit code and stderr", rc == 7 and b"to-err" in err, (rc, out, err))
        rc, out, err = kc(env, k, "exec", "box", "--", "no-such-command-xyz")
        check(tag + ": a command that does not exist says so",
              rc != 0 and b"no-such-command-xyz" in err, (rc, out, err))
        data = os.urandom(3 << 20)
        rc, out, err = kc(env, k, "exec", "-i", "box", "--", "cat", input=data, timeout=60)
        check(tag + ": 3 MiB through stdin and back, whole", rc == 0 and out == data,
              (rc, len(out), err[-300:]))
        rc, out, err = kc(env, k, "exec", "-i", "box", "--", "wc", "-c", input=b"12345")
        check(tag + ": stdin's end reaches the command", rc == 0 and out.strip() == b"5",
              (rc, out, err))
        out, status = under_pty([k, "--kubeconfig", os.path.join(env.kdir, "kubeconfig"), "exec",
                                 "-it", "box", "--", "sh", "-c",
                                 "stty size; tty; echo READY; read x; echo got-$x"],
                                33, 101, b"abc\r", 30)
        text = out.decode("utf-8", "replace")
        check(tag + ": exec -it: a terminal of the client's size, input read from it",
              "33 101" in text and "/dev/pts/" in text and "got-abc" in text and
              os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, (status, text[-400:]))
        # What reaches the client's terminal is the command's output alone: no stray byte
        # before it (a kubelet's first, empty message on the stream carries none).
        check(tag + ": exec -it: nothing but the command's output on the terminal",
              b"\x00" not in out and out.lstrip(b"\r\n").startswith(b"33 101"), out[:40])
        # -t alone: kubectl asks for no terminal without stdin (its SetupTTY drops it), so the
        # command runs without one, as on a kubelet; its output arrives alone, no stray byte.
        out, status = under_pty([k, "--kubeconfig", os.path.join(env.kdir, "kubeconfig"), "exec",
                                 "-t", "box", "--", "sh", "-c", "echo READY; tty; echo done"],
                                24, 90, b"", 30)
        check(tag + ": exec -t (no -i): no terminal asked, the output alone, no stray byte",
              b"\x00" not in out and b"not a tty" in out and b"done" in out
              and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, (status, out[:80]))

        # kubectl cp both ways (exec + tar in the pod's view of the files).
        src = os.path.join(d, "cp-src-" + ver)
        os.makedirs(src, exist_ok=True)
        blob = os.urandom(200000)
        open(os.path.join(src, "blob"), "wb").write(blob)
        dst_in_pod = os.path.join(d, "in-pod-" + ver)
        os.makedirs(dst_in_pod, exist_ok=True)
        rc, out, err = kc(env, k, "cp", os.path.join(src, "blob"), "box:" + dst_in_pod + "/blob")
        got = open(os.path.join(dst_in_pod, "blob"), "rb").read() \
            if os.path.exists(os.path.join(dst_in_pod, "blob")) else b""
        check(tag + ": kubectl cp into the pod", rc == 0 and got == blob, (rc, err[-300:]))
        back = os.path.join(d, "back-" + ver)
        rc, out, err = kc(env, k, "cp", "box:" + dst_in_pod + "/blob", back)
        got = open(back, "rb").read() if os.path.exists(back) else b""
        check(tag + ": kubectl cp out of the pod", rc == 0 and got == blob, (rc, err[-300:]))

        # A client that goes away: the exec'd command is killed.
        marker = "sk-exec-abandoned-" + ver.replace(".", "")
        p = subprocess.Popen([k, "--kubeconfig", os.path.join(env.kdir, "kubeconfig"), "exec",
                              "box", "--", "sh", "-c", "sleep 1000; : %s" % marker],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def pids():  # the command's, not kubectl's (its argv carries the marker too)
            r = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True)
            return [int(x) for x in r.stdout.split() if int(x) != p.pid]
        check(tag + ": the command runs while the client is there", wait_for(pids, 20), "")
        p.kill()
        p.wait()
        check(tag + ": the command is killed when the client goes away",
              wait_for(lambda: not pids(), 20), pids())

    # kubectl attach: the container's own output from now on; its stdin when it has one.
    for ver, k in versions(env.kubectl_bin):
        tag = "kubectl " + ver
        name = "talker" + ver.replace(".", "")
        code, _ = env.api("POST", "/api/v1/namespaces/default/pods", pod(
            name, ["sh", "-c", "i=0; while [ $i -lt 40 ]; do i=$((i+1)); echo tick $i; "
                   "sleep 0.2; done; exit 3"], restart="Never"))
        check(tag + ": a talking pod runs", wait_for(lambda: running(env, name), 30), code)
        rc, out, err = kc(env, k, "attach", name, timeout=60)
        ticks = [int(w.split()[1]) for w in out.decode().splitlines() if w.startswith("tick ")]
        check(tag + ": kubectl attach streams the container's output until it exits",
              ticks and ticks[-1] == 40 and ticks == list(range(ticks[0], 41)),
              (rc, out[-200:], err[-300:]))
        name = "reader" + ver.replace(".", "")
        rd = pod(name, ["sh", "-c", "read line; echo got-$line"], restart="Never")
        rd["spec"]["containers"][0].update(stdin=True, stdinOnce=True)
        code, _ = env.api("POST", "/api/v1/namespaces/default/pods", rd)
        check(tag + ": a pod with stdin runs", wait_for(lambda: running(env, name), 30), code)
        rc, out, err = kc(env, k, "attach", "-i", name, input=b"hello\n", timeout=60)
        check(tag + ": kubectl attach -i writes to the container's stdin",
              b"got-hello" in out, (rc, out[-200:], err[-300:]))

    # Refusals before the upgrade, as the kubelet's.
    rc, out, err = kc(env, env.kubectl_bin, "exec", "nosuchpod", "--", "true")
    check("exec into a missing pod is refused", rc != 0 and b"not found" in err, err)
    two = pod("two", ["python3", "-c", "import time\nwhile True: time.sleep(1)"], restart="Never")
    two["spec"]["containers"].append({"name": "quick", "image": "python:3", "command": ["true"]})
    code, _ = env.api("POST", "/api/v1/namespaces/default/pods", two)

    def quick_done():
        code, p = env.api("GET", "/api/v1/namespaces/default/pods/two")
        return any(c["name"] == "quick" and "terminated" in c.get("state", {})
                   for c in p.get("status", {}).get("containerStatuses", []))
    check("a pod with one container done and one running", wait_for(quick_done, 30), "")
    rc, out, err = kc(env, env.kubectl_bin, "exec", "two", "-c", "quick", "--", "true")
    check("exec into a container that is not running is refused",
          rc != 0 and b"not running" in err, err)

    hostile(env)

    # A session's data connection can only be taken by the job's user, once.
    p = subprocess.Popen([env.kubectl_bin, "--kubeconfig", os.path.join(env.kdir, "kubeconfig"),
                          "exec", "box", "--", "sh", "-c", "sleep 5; echo survived"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def session_id():
        for line in open(os.path.join(d, "shim.log")):
            if "in main: 'sh'" in line and "exec session " in line:
                last = line.split("exec session ")[1].split()[0]
        return last if "last" in locals() else None
    before = [line for line in open(os.path.join(d, "shim.log"))]
    sid = wait_for(lambda: (lambda x: x if x and not any(x in b for b in before) else None)(
        session_id()), 20)
    if os.getuid() == 0:
        os.chmod(d, 0o711)  # the other user reaches the socket, as on a node
        ans = exec_attach_as(env, 65534, sid or "x")
        os.chmod(d, 0o700)
        check("exec_attach of a live session from another uid is refused as unknown",
              '"not_found"' in ans, ans)
    ans = exec_attach_as(env, os.getuid(), sid or "x")
    check("a second exec_attach of a session that has its connection is refused",
          '"not_found"' in ans, ans)
    out, err = p.communicate(timeout=60 * SCALE)
    check("the session goes on unaffected", p.returncode == 0 and out.strip() == b"survived",
          (p.returncode, out, err))
    if os.getuid() == 0:
        uid_check_alone(env)

    # The agent's session bound (4 here): the fifth is refused with 429.
    sleepers = [subprocess.Popen([env.kubectl_bin, "--kubeconfig",
                                  os.path.join(env.kdir, "kubeconfig"), "exec", "box", "--",
                                  "sleep", "60"], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL) for _ in range(4)]

    def four():
        r = subprocess.run(["pgrep", "-fc", "^sleep 60$"], capture_output=True, text=True)
        return r.stdout.strip() == "4"
    check("four sessions run", wait_for(four, 30), "")
    rc, out, err = kc(env, env.kubectl_bin, "exec", "box", "--", "true")
    check("a fifth session is refused: too many streaming sessions",
          rc != 0 and b"too many streaming sessions" in err, err)
    for sp in sleepers:
        sp.kill()
        sp.wait()
    check("their commands end with their clients",
          wait_for(lambda: subprocess.run(["pgrep", "-f", "^sleep 60$"],
                                         capture_output=True).returncode != 0, 20), "")

    # The agent is unaffected by all of it: a last exec still works.
    rc, out, err = kc(env, env.kubectl_bin, "exec", "box", "--", "echo", "still")
    check("the agent still serves exec", rc == 0 and out.strip() == b"still", (rc, out, err))

    shim_killed_mid_session(env)  # last: the job's pods are lost with their shim
    log = open(os.path.join(d, "agent.log")).read()
    check("the agent's log names no session error", "cannot encode" not in log, "")


def main():
    return shim_suite_main(ExecEnv, run)


if __name__ == "__main__":
    sys.exit(main())
