#!/usr/bin/python3
"""Component tests of slurm-k8s-agent against the test API server.

Starts kube_test_server.py (127.0.0.1, port 0) and the real agent binary with
runtime=fake, drives the agent through its unix socket as a test user
(admin_uids = our uid), checks what a user would see in the API, prints
`N passed, N failed`, and leaves no process behind. The harness is
tests/pylib/sktest (env.AgentEnv, suite).
"""
import json, os, resource, select, shutil, signal, socket, stat, subprocess, sys, tempfile, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from sktest.agent import start_agent, write_agent_conf  # noqa: E402
from sktest.env import NODE, REG, AgentEnv, phase, pod, suite_main  # noqa: E402
from sktest.programs import BUILDDIR, agent_binary  # noqa: E402
from sktest.suite import SCALE, check, wait_for  # noqa: E402

# The agent socket's admission (agent/socket_server.h): the defaults of
# max_connections_per_uid and max_connections, and an idle timeout short
# enough to wait for, long enough for the flood checks to finish inside it on
# a loaded machine (stretched, within reason, under valgrind).
PER_UID, USER_POOL = 16, 256
IDLE_S = int(12 * min(SCALE, 4))
NOBODY = 65534


class Env(AgentEnv):
    def conf_settings(self):
        s = super().conf_settings()
        s["socket_idle_timeout"] = f"{IDLE_S}s"
        return s


def node_ready(env):
    code, n = env.api("GET", "/api/v1/nodes/" + NODE)
    if code != 200:
        return None
    c = {x["type"]: x["status"] for x in n["status"].get("conditions", [])}
    return n if c.get("Ready") == "True" else None


def run(env):
    open(os.path.join(env.dir, "alive_42"), "w").close()
    # The double's node-lifecycle controller lifts the admission's not-ready taint only 60 s
    # after Ready from now on: the agent must lift it itself.
    env.api("POST", "/_test/controllers", {"taintRemovalDelay": 60})
    # 1. registration -> Node Ready with the exact fields
    t0 = time.time()
    r = env.call("register", REG)
    check("register replies with the node name", r and r.get("ok") and r["body"]["node_name"] == NODE, r)
    n = wait_for(lambda: node_ready(env), 5)
    check("Node Ready after register", n is not None)
    print(f"     register -> Ready {1000 * (time.time() - t0):.0f} ms")

    def taints():
        _, node = env.api("GET", "/api/v1/nodes/" + NODE)
        return {(t["key"], t["effect"]) for t in node.get("spec", {}).get("taints") or []}
    check("the agent lifts the admission's not-ready:NoSchedule taint (the controller would wait 60 s)",
          wait_for(lambda: ("node.kubernetes.io/not-ready", "NoSchedule") not in taints(), 5)
          and ("slurm-k8s/job", "NoSchedule") in taints(), taints())
    print(f"     register -> not-ready taint lifted {1000 * (time.time() - t0):.0f} ms")
    env.api("POST", "/_test/controllers", {"taintRemovalDelay": 0})
    if n:
        l, s = n["metadata"]["labels"], n["status"]
        check("labels", l.get("slurm-k8s/job-id") == "42" and l.get("slurm-k8s/user") == "alice"
              and l.get("slurm-k8s/partition") == "gpu" and l.get("slurm-k8s/cluster") == "comp"
              and l.get("slurm-k8s/slurm-node") == "n1" and l.get("team") == "rl"
              and l.get("kubernetes.io/hostname") == NODE, l)
        check("capacity", s["capacity"].get("nvidia.com/gpu") == "2" and s["capacity"]["cpu"] == "4"
              and s["capacity"]["memory"] == "8388608Ki", s["capacity"])
        check("conditions", [c["type"] for c in s["conditions"]] ==
              ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"])
        check("taint", {"key": "slurm-k8s/job", "value": "42", "effect": "NoSchedule"}
              in n["spec"].get("taints", []), n["spec"])
        check("kubelet endpoint + address (node_hostname '-': no Hostname address)",
              s["daemonEndpoints"]["kubeletEndpoint"]["Port"] == 10250
              and s["addresses"] == [{"type": "InternalIP", "address": "127.0.0.1"}], s["addresses"])
    # 2. lease renewals
    lease_url = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/" + NODE
    _, lease1 = env.api("GET", lease_url)
    def renewed():
        code, l2 = env.api("GET", lease_url)
        return l2 if code == 200 and l2.get("spec", {}).get("renewTime") != \
            lease1.get("spec", {}).get("renewTime") else None
    lease2 = wait_for(renewed, 5) or env.api("GET", lease_url)[1]
    rt = lease2.get("spec", {}).get("renewTime", "")
    check("lease renewed with MicroTime", rt != lease1.get("spec", {}).get("renewTime") and
          len(rt.split(".")[-1]) == 7, (lease1.get("spec"), lease2.get("spec")))
    check("lease owned by the Node", lease2.get("metadata", {}).get("ownerReferences", [{}])[0].get("uid")
          == (n or {}).get("metadata", {}).get("uid"))
    st = env.call("status", {"job_id": 42, "slurm_node": "n1"})
    check("status op", st and st["ok"] and st["body"]["ready"] and st["body"]["phase"] == "ready", st)
    # 3. pod lifecycle incl. graceful deletion
    env.api("POST", "/api/v1/namespaces/default/pods", pod("p1"))
    check("pod Running", wait_for(lambda: phase(env, "default", "p1") == "Running", 5))
    _, p = env.api("GET", "/api/v1/namespaces/default/pods/p1")
    check("pod IPs and conditions", p["status"].get("podIP") == "127.0.0.1" and
          {c["type"] for c in p["status"]["conditions"]} >= {"PodScheduled", "Initialized", "Ready", "ContainersReady"},
          p["status"])
    env.api("DELETE", "/api/v1/namespaces/default/pods/p1")
    check("graceful delete -> gone", wait_for(lambda: phase(env, "default", "p1") == 404, 5))
    def reasons_of(name):
        _, evs = env.api("GET", "/api/v1/namespaces/default/events")
        return {e["reason"] for e in evs.get("items", []) if e["involvedObject"].get("name") == name}
    # The agent posts events asynchronously, apart from the status and the deletion.
    wait_for(lambda: {"Started", "Killing"} <= reasons_of("p1"), 5)
    reasons = reasons_of("p1")
    check("Started and Killing events", {"Started", "Killing"} <= reasons, reasons)
    env.api("POST", "/api/v1/namespaces/kube-system/pods", pod("intruder"))
    check("pod in a namespace not allowed -> Failed",
          wait_for(lambda: phase(env, "kube-system", "intruder") == "Failed", 5))
    # 4. watch closed / 410 -> relist, nothing lost
    env.api("POST", "/_test/watches/close", {"abrupt": True})
    env.api("POST", "/api/v1/namespaces/default/pods", pod("p2"))
    check("pod after a dropped watch runs", wait_for(lambda: phase(env, "default", "p2") == "Running", 8))
    # 4b. a 410 during a watch (history trimmed): relist, no pod lost or run twice
    env.api("POST", "/_test/history", {"size": 2})
    for i in range(4):  # pod changes elsewhere push our resume point out of the history
        env.api("POST", "/api/v1/namespaces/default/pods",
                dict(pod(f"elsewhere-{i}"), spec=dict(pod("x")["spec"], nodeName="nowhere")))
    env.api("POST", "/_test/watches/close", {"abrupt": False})
    env.api("POST", "/api/v1/namespaces/default/pods", pod("p410"))
    check("410 during a watch -> relist", wait_for(lambda: "watch error 410" in
                                                     open(os.path.join(env.dir, "agent.log")).read(), 5))
    check("pod created around the 410 runs", wait_for(lambda: phase(env, "default", "p410") == "Running", 8))
    check("pods from before the 410 kept", phase(env, "default", "p2") == "Running")
    def started_events():
        _, evs = env.api("GET", "/api/v1/namespaces/default/events")
        return [e for e in evs.get("items", []) if e["involvedObject"].get("name") == "p410"
                and e["reason"] == "Started"]
    # The Started event is posted asynchronously: wait for it, then leave a second
    # start (or a repeat counted on the Event) the time to show.
    wait_for(started_events, 5)
    time.sleep(0.5)
    started = started_events()
    check("relisted pod not started twice", len(started) == 1 and started[0].get("count", 1) == 1,
          started)
    env.api("POST", "/_test/history", {"size": 1000})
    for i in range(4):
        env.api("DELETE", f"/api/v1/namespaces/default/pods/elsewhere-{i}", {"gracePeriodSeconds": 0})
    # 5. API server down for a while, then back -> Ready re-posted
    env.api("POST", "/_test/fault", {"mode": "refuse", "seconds": 9})
    time.sleep(9.5)
    wait_for(lambda: env.api("GET", "/version")[0] == 200, 5)
    def ready_again():
        nn = node_ready(env)
        return nn and not any(t["key"].startswith("node.kubernetes.io/unreachable")
                              for t in nn["spec"].get("taints", []))
    check("after an outage the node is Ready again", wait_for(ready_again, 10))
    env.api("POST", "/api/v1/namespaces/default/pods", pod("p3"))
    check("pods run after the outage", wait_for(lambda: phase(env, "default", "p3") == "Running", 8))
    # 6. Node deleted by hand -> recreated
    env.api("DELETE", "/api/v1/nodes/" + NODE)
    check("deleted Node is recreated", wait_for(lambda: node_ready(env), 6) is not None)
    # 7. agent killed -9 and restarted -> re-adopts
    env.kill_agent(signal.SIGKILL)
    env.start_agent()
    lst = wait_for(lambda: env.call("list", {}), 5)
    check("restarted agent lists the job", lst and lst["ok"] and len(lst["body"]["nodes"]) == 1, lst)
    env.api("POST", "/api/v1/namespaces/default/pods", pod("p4"))
    check("restarted agent runs new pods", wait_for(lambda: phase(env, "default", "p4") == "Running", 8))
    check("old pods still Running", phase(env, "default", "p2") == "Running")
    # 7b. end time from Slurm (the plugin sent end_time=0): cordon ahead of it
    end = time.localtime(time.time() + 30)  # within cordon_before_end (60 s): cordon now
    open(os.path.join(env.dir, "end_43"), "w").write(time.strftime("%Y-%m-%dT%H:%M:%S\n", end))
    open(os.path.join(env.dir, "alive_43"), "w").close()
    r = env.call("register", dict(REG, job_id=43, end_time=0))
    check("second job registers", r and r.get("ok"), r)
    def cordoned():
        code, n43 = env.api("GET", "/api/v1/nodes/slurm-n1-43")
        return code == 200 and n43["spec"].get("unschedulable") and \
            {"key": "slurm-k8s/job-ending", "value": "43", "effect": "NoSchedule"} in n43["spec"].get("taints", [])
    check("cordoned + NoSchedule ahead of the Slurm end time", wait_for(cordoned, 8))
    _, n42 = env.api("GET", "/api/v1/nodes/" + NODE)
    check("a job without an end time is not cordoned", not n42["spec"].get("unschedulable"), n42["spec"])
    r = env.call("deregister", {"job_id": 43, "slurm_node": "n1", "grace_s": 2, "reason": "JobEnded"})
    check("second job deregisters", r and r.get("ok") and env.api("GET", "/api/v1/nodes/slurm-n1-43")[0] == 404, r)
    # 7c. garbage collection: a Node + Lease of this slurm node whose job is
    #     gone (agent down at the epilog) is deleted, and so is the pod bound
    #     to it (no kubelet would ever delete it); those of a live job are kept.
    def leftover(job):
        name = f"slurm-n1-{job}"
        code, nn = env.api("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": name, "labels": {"slurm-k8s/job-id": str(job), "slurm-k8s/slurm-node": "n1",
                                     "slurm-k8s/cluster": "comp"}}})
        env.api("POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", {
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": "kube-node-lease"},
            "spec": {"holderIdentity": name, "leaseDurationSeconds": 40,
                     "renewTime": "2026-01-01T00:00:00.000000Z"}})
        bound = pod(f"gc{job}")
        bound["spec"]["nodeName"] = name
        return code, env.api("POST", "/api/v1/namespaces/default/pods", bound)[0]
    open(os.path.join(env.dir, "alive_78"), "w").close()
    check("leftover Nodes and their pods created", leftover(77) == (201, 201) and
          leftover(78) == (201, 201))
    lease = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/"
    check("gc deletes the Node and Lease of a gone job", wait_for(
        lambda: env.api("GET", "/api/v1/nodes/slurm-n1-77")[0] == 404 and
        env.api("GET", lease + "slurm-n1-77")[0] == 404, 15))
    check("gc deletes the pod bound to the Node of a gone job",
          wait_for(lambda: phase(env, "default", "gc77") == 404, 5))
    check("gc keeps the Node of a live job", env.api("GET", "/api/v1/nodes/slurm-n1-78")[0] == 200)
    check("gc keeps the pod of a live job", phase(env, "default", "gc78") != 404)
    env.api("DELETE", "/api/v1/namespaces/default/pods/gc78", {"gracePeriodSeconds": 0})
    env.api("DELETE", "/api/v1/nodes/slurm-n1-78")
    env.api("DELETE", lease + "slurm-n1-78")
    # 7d. the job ends while the API server is down: deregister still answers
    #     within its bound, and once the server is back the agent itself
    #     deletes the pod, Lease and Node (gc would keep them: the job's
    #     alive file stays, so only the retry can remove them).
    open(os.path.join(env.dir, "alive_45"), "w").close()
    r = env.call("register", dict(REG, job_id=45))
    n45 = "slurm-n1-45"
    check("job 45 registers", r and r.get("ok") and wait_for(
        lambda: env.api("GET", "/api/v1/nodes/" + n45)[0] == 200, 5), r)
    p45 = pod("p45")
    p45["spec"]["nodeName"] = n45
    env.api("POST", "/api/v1/namespaces/default/pods", p45)
    check("job 45 pod Running", wait_for(lambda: phase(env, "default", "p45") == "Running", 5))
    wait_for(lambda: env.api("GET", lease + n45)[0] == 200, 5)
    env.api("POST", "/_test/fault", {"mode": "refuse", "seconds": 7})
    t0 = time.time()
    r = env.call("deregister", {"job_id": 45, "slurm_node": "n1", "grace_s": 0, "reason": "JobEnded"})
    took = time.time() - t0
    check("deregister during an API outage answers within grace + 5 s", r and r.get("ok") and took < 6.5 * SCALE,
          (r, took))
    def api_up():
        try:
            return env.api("GET", "/version")[0] == 200
        except OSError:
            return False
    wait_for(api_up, 10)
    t_back = time.time()
    def all_gone():
        return (env.api("GET", "/api/v1/nodes/" + n45)[0] == 404 and
                env.api("GET", lease + n45)[0] == 404 and phase(env, "default", "p45") == 404)
    gone = wait_for(all_gone, 12)
    check("after the outage the agent deletes the Node, Lease and pod within 10 s",
          gone and time.time() - t_back < 10 * SCALE,
          (time.time() - t_back, env.api("GET", "/api/v1/nodes/" + n45)[0],
           env.api("GET", lease + n45)[0], phase(env, "default", "p45")))
    os.unlink(os.path.join(env.dir, "alive_45"))
    # 8. deregistration leaves nothing behind
    t0 = time.time()
    r = env.call("deregister", {"job_id": 42, "slurm_node": "n1", "grace_s": 5, "reason": "JobEnded"})
    check("deregister ok", r and r.get("ok"), r)
    print(f"     deregister {1000 * (time.time() - t0):.0f} ms")
    check("Node gone", env.api("GET", "/api/v1/nodes/" + NODE)[0] == 404)
    check("Lease gone", env.api("GET", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/" + NODE)[0] == 404)
    _, pods = env.api("GET", "/api/v1/pods")
    check("pods gone", not [p["metadata"]["name"] for p in pods.get("items", []) if p["spec"].get("nodeName") == NODE],
          [p["metadata"]["name"] for p in pods.get("items", [])])
    check("state file gone", not os.listdir(os.path.join(env.dir, "state", "jobs")))
    # 9. refusals on the socket
    bad = env.call("frobnicate", {})
    check("unknown op refused with a reason", bad and not bad["ok"] and bad["error"] == "forbidden", bad)
    s = socket.socket(socket.AF_UNIX)
    s.connect(os.path.join(env.dir, "agent.sock"))
    s.sendall(b"this is not json\n")
    s.settimeout(5)
    data = s.recv(4096)
    closed = s.recv(4096) == b""
    s.close()
    check("malformed message closes that connection only", b'"ok":false' in data and closed and
          env.call("list", {})["ok"])
    socket_admission(env)
    admin_dir_checked(env)


def connect_as(path, uid):
    """A connection that SO_PEERCRED reports as uid's (the kernel takes the credentials,
    the effective uid, at connect)."""
    os.seteuid(uid)
    try:
        s = socket.socket(socket.AF_UNIX)
        s.connect(path)  # blocking: waits while the listen backlog is full
        s.settimeout(10 * SCALE)
    finally:
        os.seteuid(0)
    return s


def request_line(s, line):
    """Sends one request line on s, reads the reply line (until newline or EOF), closes s."""
    s.sendall(line)
    data = b""
    while not data.endswith(b"\n"):
        d = s.recv(65536)
        if not d:
            break
        data += d
    s.close()
    return data


def has_data(s):
    p = select.poll()
    p.register(s, select.POLLIN)
    return bool(p.poll(0))


def read_to_eof(s):
    """Everything the agent sent before closing s (it closes right after a refusal)."""
    data = b""
    try:
        while True:
            d = s.recv(65536)
            if not d:
                break
            data += d
    except OSError:
        pass
    return data


def refusal(s):
    data = read_to_eof(s)
    try:
        return json.loads(data.split(b"\n")[0])
    except ValueError:
        return {"raw": data}


def cli(env, *args, uid=None):
    """slurm-k8s on the test agent's socket, as uid (default: ours); (rc, stdout + stderr)."""
    kw = dict(user=uid, group=uid, extra_groups=[]) if uid is not None else {}
    prog = os.path.join(BUILDDIR, "cli", "slurm-k8s")
    if uid is not None:
        # Another uid may not reach the build tree (a checkout in a 0700 dir):
        # it runs a copy in the agent's dir, which it can reach.
        copy = os.path.join(env.dir, "slurm-k8s")
        if not os.path.exists(copy):
            shutil.copy2(prog, copy)
            os.chmod(copy, 0o755)
        prog = copy
    r = subprocess.run([prog, "--socket",
                        os.path.join(env.dir, "agent.sock"), "--timeout", str(int(10 * SCALE))]
                       + list(args), capture_output=True, text=True, timeout=30 * SCALE, **kw)
    return r.returncode, r.stdout + r.stderr


def connect_nowait(path, uid):
    """A non-blocking connect as uid: the socket, or None when the listen queue is full."""
    os.seteuid(uid)
    try:
        s = socket.socket(socket.AF_UNIX)
        s.setblocking(False)
        try:
            s.connect(path)
        except BlockingIOError:
            s.close()
            return None
    finally:
        os.seteuid(0)
    return s


def admin_socket(env, path):
    """Root's own socket (docs/security.md): in a 0700 dir no other user can enter, so a
    full listen queue of the agent socket never delays root."""
    admin = os.path.join(env.dir, "admin", "agent.sock")
    d = os.lstat(os.path.dirname(admin))
    a = os.lstat(admin)
    check("the admin socket's dir is root's, mode 0700; the socket 0600",
          stat.S_ISDIR(d.st_mode) and d.st_uid == 0 and stat.S_IMODE(d.st_mode) == 0o700
          and stat.S_ISSOCK(a.st_mode) and stat.S_IMODE(a.st_mode) == 0o600,
          (oct(d.st_mode), d.st_uid, oct(a.st_mode)))
    try:
        connect_as(admin, NOBODY).close()
        denied = None
    except PermissionError as e:
        denied = e
    check("another uid cannot connect to the admin socket (EACCES)", denied is not None, denied)
    # The agent stopped: fill the agent socket's listen queue from another uid, as a
    # connect loop of a local user does faster than the agent accepts.
    need = 4096 + 600
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(need, soft), max(need, hard)))
    os.kill(env.agent.pid, signal.SIGSTOP)
    queued = []
    try:
        while len(queued) < need:
            c = connect_nowait(path, NOBODY)
            if c is None:
                break
            queued.append(c)
        full = len(queued) < need
        root_main = connect_nowait(path, 0)
        root_admin = connect_nowait(admin, 0)
    finally:
        os.kill(env.agent.pid, signal.SIGCONT)
    check("the agent socket's listen queue full: root's connect there waits too",
          full and root_main is None, (len(queued), root_main))
    check("root's connect to the admin socket is taken at once beside it", root_admin is not None)
    if root_admin:
        root_admin.setblocking(True)
        root_admin.settimeout(30 * SCALE)
        data = request_line(root_admin, b'{"v":1,"id":1,"op":"list","body":{}}\n')
        check("root's list on the admin socket answered beside the full queue",
              data and json.loads(data).get("ok") is True, data[:200])
    for c in queued:
        c.close()
    if root_main:
        root_main.close()
    r = env.call("list", {})  # after the agent has answered every queued connection
    check("the agent serves the agent socket again", r and r.get("ok"), r)


def admin_dir_checked(env):
    """The agent makes the admin socket's dir 0700 and refuses one it cannot trust."""
    if os.getuid() != 0:
        print("     not root: the admin dir checks need a dir of another uid; skipped")
        return
    base = tempfile.mkdtemp(prefix="admin-", dir=env.dir)
    os.chmod(base, 0o755)
    target = os.path.join(base, "elsewhere")
    os.mkdir(target, 0o777)
    os.symlink(target, os.path.join(base, "link"))
    theirs = os.path.join(base, "theirs")
    os.mkdir(theirs, 0o700)
    os.chown(theirs, NOBODY, NOBODY)
    loose = os.path.join(base, "loose")
    os.mkdir(loose, 0o777)
    for name, what, want in (("link", "a symlink", "not a link"),
                             ("theirs", "of another uid", "belongs to uid 65534")):
        conf = os.path.join(base, name + ".conf")
        settings = dict(env.settings, socket_path=os.path.join(base, name + ".sock"),
                        state_dir=os.path.join(base, name + "-state"),
                        shim_state_dir=os.path.join(base, name + "-shim"),
                        admin_socket_path=os.path.join(base, name, "agent.sock"),
                        metrics_port=0, kubelet_port=0)
        write_agent_conf(conf, settings)
        r = subprocess.run([agent_binary(env.settings["runtime"], env.agent_bin), "--config", conf],
                           capture_output=True, text=True, timeout=30 * SCALE)
        out = r.stdout + r.stderr
        check(f"an admin socket dir {what}: the agent does not start, saying '{want}'",
              r.returncode != 0 and want in out and not os.path.exists(settings["socket_path"]),
              (r.returncode, out[-300:]))
    check("  nothing was made in the link's target", os.listdir(target) == [])
    # A dir of its own with a loose mode is set to 0700 (an agent of an older layout left it).
    conf = os.path.join(base, "loose.conf")
    settings = dict(env.settings, socket_path=os.path.join(base, "loose.sock"),
                    state_dir=os.path.join(base, "loose-state"),
                    shim_state_dir=os.path.join(base, "loose-shim"),
                    admin_socket_path=os.path.join(loose, "agent.sock"),
                    metrics_port=0, kubelet_port=0)
    write_agent_conf(conf, settings)
    p = start_agent([agent_binary(env.settings["runtime"], env.agent_bin), "--config", conf],
                    settings["socket_path"], os.path.join(base, "loose.log"), 5 * SCALE)
    mode = stat.S_IMODE(os.stat(loose).st_mode)
    p.terminate()
    p.wait(10 * SCALE)
    check("an admin socket dir of mode 0777 of the agent's own is set to 0700", mode == 0o700,
          oct(mode))


def socket_admission(env):
    """Other local users cannot cut jobs off from the agent (docs/security.md,
    "the agent socket")."""
    if os.getuid() != 0:
        print("     not root: the admission checks need connections of other uids; skipped")
        return
    path = os.path.join(env.dir, "agent.sock")
    os.chmod(env.dir, 0o711)  # other uids reach the socket (mode 0666)
    open(os.path.join(env.dir, "alive_46"), "w").close()
    # 300 idle connections of one user: its 16 are kept, the rest refused with the reason.
    flood = [connect_as(path, NOBODY) for _ in range(300)]
    env.call("list", {})  # accepted after the flood: every refusal has been written
    quiet = [c for c in flood if not has_data(c)]
    replies = [refusal(c) for c in flood if c not in quiet]
    check("300 connections of one uid: max_connections_per_uid kept, the rest refused",
          len(quiet) == PER_UID and len(replies) == 300 - PER_UID, (len(quiet), len(replies)))
    check("a refusal is a framed error reply of id 0 that names the limit",
          replies and all(r.get("id") == 0 and r.get("ok") is False and r.get("error") == "unavailable"
                          and "too many connections from uid 65534" in r.get("message", "")
                          and "max_connections_per_uid=16" in r["message"] for r in replies),
          replies[:1])
    r = env.call("register", dict(REG, job_id=46))
    check("root's register beside 300 idle connections of another uid", r and r.get("ok"), r)
    st = env.call("status", {"job_id": 46, "slurm_node": "n1"})
    check("root's status beside the flood", st and st.get("ok"), st)
    rc, out = cli(env, "status")
    check("slurm-k8s status (root) beside the flood, on the admin socket",
          rc == 0 and "version:" in out and "/admin/agent.sock" in out, (rc, out))
    admin_socket(env, path)
    rc, out = cli(env, "list", uid=NOBODY)
    check("slurm-k8s prints the agent's refusal to the flooding uid",
          rc != 0 and "agent: too many connections from uid 65534" in out
          and "replied to request" not in out, (rc, out))
    # Fill the users' pool with 15 more uids: the next uid is refused, root and a job's user
    # (its shim's slot) still get in.
    others = [connect_as(path, 60001 + i // PER_UID) for i in range(USER_POOL - PER_UID)]
    env.call("list", {})
    check("the users' pool holds max_connections", not [c for c in others if has_data(c)])
    late = connect_as(path, 60100)
    r = refusal(late)
    check("a full users' pool refuses the next uid, naming max_connections",
          r.get("id") == 0 and "max_connections=256" in r.get("message", ""), r)
    late.close()
    st = env.call("status", {"job_id": 46, "slurm_node": "n1"})
    check("root still served when the users' pool is full", st and st.get("ok"), st)
    shim = connect_as(path, REG["uid"])
    data = request_line(shim, b'{"v":1,"id":1,"op":"status","body":{"job_id":46,"slurm_node":"n1"}}\n')
    check("a job's user gets its shim's slot when the users' pool is full",
          data and json.loads(data).get("ok") is True, data)
    # Close and reopen quickly: each refused at once, logged once in a while, nothing leaks.
    for _ in range(200):
        c = connect_as(path, 60100)
        read_to_eof(c)
        c.close()
    log = open(os.path.join(env.dir, "agent.log")).read()
    check("refusals of one uid are logged once per 10 s",
          1 <= log.count("refused a connection from uid 60100") <= 3)
    for c in others:
        c.close()
    def admitted():
        c = connect_as(path, 60100)
        env.call("list", {})
        if has_data(c):
            c.close()
            return None
        return c
    back = wait_for(admitted, 10)
    check("closed connections give their slots back", back is not None)
    if back:
        back.close()
    # A frame over 1 MiB, even unterminated: too_large, closed.
    big = connect_as(path, 60200)
    try:
        big.sendall(b"{" + b" " * (2 << 20))
    except OSError:
        pass
    r = refusal(big)
    check("a frame over 1 MiB is refused with too_large and closed",
          r.get("id") == 0 and r.get("error") == "too_large", r)
    # Idle connections are closed after socket_idle_timeout: the flood's, one idle after a
    # reply, and a slow loris (a partial request, a byte at a time).
    t0 = time.time()
    after = socket.socket(socket.AF_UNIX)
    after.settimeout(10 * SCALE)
    after.connect(path)
    after.sendall(b'{"v":1,"id":1,"op":"list","body":{}}\n')
    first = b""
    while not first.endswith(b"\n"):
        d = after.recv(65536)
        if not d:
            break
        first += d
    check("a list reply before the idle wait", b'"ok":true' in first, first)
    loris = connect_as(path, 60201)
    loris.sendall(b'{"v":1,')
    words = {}
    def all_closed():
        try:
            loris.send(b" ")
        except OSError:
            pass
        for c in quiet + [after, loris]:
            if c not in words and has_data(c):
                words[c] = read_to_eof(c)
        return len(words) == len(quiet) + 2
    closed = wait_for(all_closed, IDLE_S + 30, step=0.5)
    took = time.time() - t0
    check("idle connections closed after socket_idle_timeout", closed and took >= IDLE_S - 1,
          (len(words), took))
    check("the idle close says why", all(b"no complete request within" in w for w in words.values()),
          list(words.values())[:1])
    for c in quiet + [after, loris]:
        c.close()
    r = env.call("deregister", {"job_id": 46, "slurm_node": "n1", "grace_s": 0, "reason": "JobEnded"})
    check("job 46 deregisters", r and r.get("ok"), r)
    os.unlink(os.path.join(env.dir, "alive_46"))


    # 10. garbage collection of what gone jobs left on disk (an agent stalled
    #     or killed during a job's end): shim dirs, unreadable job records,
    #     temporary files of dead writers; at start and every gc_interval. A
    #     job Slurm says runs keeps its files; when Slurm cannot be asked,
    #     nothing is removed.
    gc_files(env)
    # 11. a registered job whose deregister never comes (the node's extern
    #     step and epilog lost: slurmd killed -9 during the job's end): the
    #     periodic gc deregisters it once Slurm says it is gone, never while
    #     Slurm cannot be asked.
    gc_registered(env)


def gc_registered(env):
    d = env.dir
    down = os.path.join(d, "slurm_down")  # gc_files' job_alive_command: Slurm unreachable
    lease = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/"
    for job in (95, 96):
        open(os.path.join(d, f"alive_{job}"), "w").close()
        r = env.call("register", dict(REG, job_id=job))
        check(f"job {job} registers", r and r.get("ok"), r)
    check("  their Nodes and Leases exist", wait_for(lambda: all(
        env.api("GET", f"/api/v1/nodes/slurm-n1-{j}")[0] == 200 and
        env.api("GET", lease + f"slurm-n1-{j}")[0] == 200 for j in (95, 96)), 10))
    shim95 = seed_shim_dir(env, 95)
    record95 = os.path.join(d, "state", "jobs", "job_95_n1.json")
    check("  job 95's record is on disk", os.path.exists(record95))
    log = os.path.join(d, "agent.log")
    before = len(open(log).read())
    open(down, "w").close()
    os.unlink(os.path.join(d, "alive_95"))  # ended, but Slurm cannot be asked
    check("periodic gc, Slurm unreachable: a registered job's query could not tell",
          wait_for(lambda: [x for x in open(log).read()[before:].split("\n")
                            if "could not tell" in x and "alive_95" in x], 30),
          open(log).read()[before:][-600:])
    lst = env.call("list", {})
    check("  the job stays registered, its Node too",
          lst and lst["ok"] and 95 in [n["job_id"] for n in lst["body"]["nodes"]] and
          env.api("GET", "/api/v1/nodes/slurm-n1-95")[0] == 200 and os.path.isdir(shim95),
          lst)
    os.unlink(down)
    check("periodic gc: a registered job Slurm says is gone is deregistered (Node, Lease gone)",
          wait_for(lambda: env.api("GET", "/api/v1/nodes/slurm-n1-95")[0] == 404 and
                   env.api("GET", lease + "slurm-n1-95")[0] == 404, 30),
          env.api("GET", "/api/v1/nodes/slurm-n1-95")[0])
    check("  its record and shim dir are removed, the agent no longer lists it",
          wait_for(lambda: not os.path.exists(record95) and not os.path.exists(shim95) and
                   95 not in [n["job_id"] for n in env.call("list", {})["body"]["nodes"]], 10),
          (os.path.exists(record95), os.path.exists(shim95)))
    check("  the log says why", "job 95 is gone in Slurm but still registered" in
          open(log).read()[before:], open(log).read()[before:][-600:])
    check("  a registered job Slurm says runs is kept",
          env.api("GET", "/api/v1/nodes/slurm-n1-96")[0] == 200 and
          96 in [n["job_id"] for n in env.call("list", {})["body"]["nodes"]])
    r = env.call("deregister", {"job_id": 96, "slurm_node": "n1", "grace_s": 0, "reason": "JobEnded"})
    check("job 96 deregisters", r and r.get("ok"), r)
    os.unlink(os.path.join(d, "alive_96"))


def seed_shim_dir(env, job):
    """A shim state dir as a shim leaves it (pod state, a log), for job `job` on n1."""
    d = os.path.join(env.dir, "shim", f"job_{job}_n1", "pods", "u1", "main")
    os.makedirs(d, exist_ok=True)
    open(os.path.join(d, "0.log"), "w").write("2024-01-01T00:00:00Z stdout F left behind\n")
    return os.path.dirname(os.path.dirname(os.path.dirname(d)))


def dead_pid():
    """A pid that no process has (a writer that died)."""
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def gc_files(env):
    d = env.dir
    down = os.path.join(d, "slurm_down")
    # squeue's failure when slurmctld is unreachable: exit 1 and a message on stderr
    env.settings["job_alive_command"] = (
        f"if test -e {down}; then echo 'slurm_load_jobs error: Unable to contact slurm controller "
        f"(connect failure)' >&2; exit 1; fi; test -e {d}/alive_{{job}}")
    write_agent_conf(env.conf, env.settings)
    env.kill_agent()
    jobs = os.path.join(d, "state", "jobs")
    gone_dir = seed_shim_dir(env, 90)       # job 90 ended during an agent stall
    open(os.path.join(d, "alive_91"), "w").close()
    live_dir = seed_shim_dir(env, 91)       # job 91 runs (its shim not attached yet)
    bad_rec = os.path.join(jobs, "job_92_n1.json")
    open(bad_rec, "w").write("{truncated")  # unreadable record of a gone job
    stale_tmp = os.path.join(jobs, f"job_92_n1.json.tmp.{dead_pid()}.0")
    open(stale_tmp, "w").write("{}")
    live_tmp = os.path.join(jobs, f"job_93_n1.json.tmp.{os.getpid()}.0")  # its writer lives
    open(live_tmp, "w").write("{}")
    shim_tmp = os.path.join(d, "shim", f"gpus.json.tmp.{dead_pid()}.3")
    open(shim_tmp, "w").write("{}")
    open(down, "w").close()
    log = os.path.join(d, "agent.log")
    before = len(open(log).read())
    env.start_agent()
    # each seeded job's query (90, 91, 92) logs "could not tell" once per gc
    check("gc at start, Slurm unreachable: the query fails for each seeded job",
          wait_for(lambda: open(log).read()[before:].count("could not tell") >= 3 and
                   "Unable to contact slurm controller" in open(log).read()[before:], 15),
          open(log).read()[before:][-600:])
    check("  nothing of a job is removed while Slurm cannot be asked",
          os.path.isdir(gone_dir) and os.path.exists(bad_rec) and os.path.isdir(live_dir),
          (os.path.isdir(gone_dir), os.path.exists(bad_rec), os.path.isdir(live_dir)))
    check("  temporary files of dead writers are removed, a live writer's kept",
          not os.path.exists(stale_tmp) and not os.path.exists(shim_tmp) and os.path.exists(live_tmp),
          sorted(os.listdir(jobs)))
    env.kill_agent()
    os.unlink(down)
    env.start_agent()
    check("gc at start: the shim dir of a gone job is removed",
          wait_for(lambda: not os.path.exists(gone_dir), 15), os.listdir(os.path.join(d, "shim")))
    check("  and the unreadable record of a gone job",
          wait_for(lambda: not os.path.exists(bad_rec), 5), sorted(os.listdir(jobs)))
    check("  a running job's shim dir is kept", os.path.isdir(live_dir) and
          os.path.exists(os.path.join(live_dir, "pods", "u1", "main", "0.log")))
    late = seed_shim_dir(env, 94)  # left after the agent started: the periodic gc takes it
    check("periodic gc (gc_interval): a gone job's shim dir is removed",
          wait_for(lambda: not os.path.exists(late), 30), os.listdir(os.path.join(d, "shim")))
    check("  a running job's still kept", os.path.isdir(live_dir))
    os.unlink(live_tmp)
    shutil.rmtree(live_dir)


def main():
    return suite_main(run, Env)



if __name__ == "__main__":
    sys.exit(main())
