#!/usr/bin/python3
"""kubectl exec and port-forward through the test API server to the real agent and shim, each
next to its reference in the same run:

- exec round trip: `kubectl exec POD -- true` (kubectl 1.28 over SPDY, 1.32 over WebSocket),
  next to `kubectl get pod POD` (the same kubectl, the same API server, no session: what is
  kubectl's and the API server's) and a local fork+exec of `true`;
- port-forward throughput: BENCH_PF_MIB MiB sent and echoed through `kubectl port-forward`,
  next to the same transfer on a direct connection to the pod's port.

- pod status under sessions: a pod created -> Running (as the API shows it), with no session
  open, with 4 `kubectl exec -i cat` sessions moving data as fast as they can, and with 16 such
  sessions at 256 KiB/s each (every session moving data before the first pod; what they echoed
  is reported): what sessions cost the pod sync of the same agent. Per pod the agent's part
  (slurm_k8s_pod_start_duration_seconds: bound -> the API's answer to its Running status) and
  the node's own part (slurm_k8s_pod_running_duration_seconds: bound -> the shim's report that
  it runs, no API call in it), from its /metrics; over each phase the test API server's GET
  latency, the share of a core the agent and the shim used and how busy the node's CPU was.
  BENCH_STATUS_N pods in each of two modes, one of each in turn, so that both meet the same
  load: as configured (the agent's and the shim's loops at nice -5, their relays and the pods'
  and sessions' commands at 0: docs/architecture.md "Priorities") and with every thread of the
  agent and the shim at nice 0. With more than one CPU the node's processes (the agent, the
  shim and all it starts) run on the last CPU and the cluster's (the test API server, kubectl,
  this script) on the others, as on a real cluster, where neither the API server nor the users'
  kubectl run on the node.

Sizes: BENCH_EXEC_N (30) execs per kubectl, BENCH_PF_MIB (8) MiB each way, BENCH_STATUS_N (5).
"""
import os, shutil, socket, subprocess, sys, threading, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import sklib as B  # noqa: E402

sys.path.insert(0, os.path.join(B.SRCDIR, "tests", "component"))
from sktest.env import ShimEnv  # noqa: E402
from sktest.host import free_port  # noqa: E402
import agent_exec_test as T  # noqa: E402  (its pod, echo server and kubectl helpers)


def timed(argv, n):
    out = []
    for _ in range(n):
        t0 = time.monotonic()
        r = subprocess.run(argv, capture_output=True)
        out.append(time.monotonic() - t0)
        if r.returncode != 0:
            raise RuntimeError("%s: %s" % (" ".join(argv[-4:]), r.stderr[-300:]))
    return out


def throughput(port, mib):
    """MiB/s of sending `mib` MiB to an echo at port and reading them back (both at once)."""
    data = os.urandom(1 << 20)
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    got = [0]

    def reader():
        while got[0] < mib << 20:
            d = s.recv(1 << 20)
            if not d:
                break
            got[0] += len(d)
    t = threading.Thread(target=reader)
    t0 = time.monotonic()
    t.start()
    for _ in range(mib):
        s.sendall(data)
    t.join(300)
    dt = time.monotonic() - t0
    s.close()
    if got[0] != mib << 20:
        raise RuntimeError("echoed %d of %d bytes" % (got[0], mib << 20))
    return round(mib / dt, 1), round(dt, 3)


def pod_to_running(env, name):
    """Seconds from a pod's POST to the API showing it Running."""
    t0 = time.monotonic()
    code, _ = env.api("POST", "/api/v1/namespaces/default/pods",
                      T.pod(name, ["sleep", "600"]))
    if code != 201:
        raise RuntimeError("pod %s: POST answered %s" % (name, code))
    while not T.running(env, name):
        if time.monotonic() - t0 > 60:
            raise RuntimeError("pod %s not Running after 60 s" % name)
        time.sleep(0.005)
    dt = time.monotonic() - t0
    env.api("DELETE", "/api/v1/namespaces/default/pods/" + name)
    return dt


class Sessions:
    """n `kubectl exec -i echo -- cat` sessions fed with data until stop(): as fast as they
    take it, or kib_s KiB/s each (a 64 KiB chunk, then a pause to keep to that rate); what
    their commands echo back is counted."""

    def __init__(self, kubectl, kc, n, kib_s=None):
        self.procs = [subprocess.Popen([kubectl] + kc + ["exec", "-i", "echo", "--", "cat"],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       stderr=subprocess.DEVNULL) for _ in range(n)]
        self.kib_s, self.done = kib_s, threading.Event()
        self.back = [0] * n
        self.threads = [threading.Thread(target=f, args=(i,), daemon=True)
                        for i in range(n) for f in (self.feed, self.drain)]
        for t in self.threads:
            t.start()

    def feed(self, i):
        p, chunk = self.procs[i], os.urandom(64 << 10)
        t0, sent = time.monotonic(), 0
        try:
            while not self.done.is_set():
                p.stdin.write(chunk)
                p.stdin.flush()
                sent += len(chunk)
                if self.kib_s:
                    ahead = t0 + sent / (self.kib_s * 1024.0) - time.monotonic()
                    if ahead > 0:
                        self.done.wait(ahead)
        except (BrokenPipeError, ValueError, OSError):
            pass

    def drain(self, i):
        try:
            while True:
                b = self.procs[i].stdout.read1(1 << 20)
                if not b:
                    return
                self.back[i] += len(b)
        except (ValueError, OSError):
            pass

    def flowing(self, timeout):
        """Once every session has echoed data back (its command runs and the relay moves)."""
        deadline = time.monotonic() + timeout
        while not all(self.back):
            if time.monotonic() > deadline:
                raise RuntimeError("%d of %d sessions moved no data in %d s"
                                   % (self.back.count(0), len(self.back), timeout))
            time.sleep(0.05)

    def stop(self):
        self.done.set()
        for p in self.procs:
            p.kill()
            p.wait()


STARTED = "slurm_k8s_pod_start_duration_seconds"  # bound -> Running posted (the API's answer)
RUNNING = "slurm_k8s_pod_running_duration_seconds"  # bound -> the runtime's Running


def agent_histograms(env):
    """{name: (sum, count)} of the agent's two pod-start histograms, from its /metrics."""
    import urllib.request
    text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % env.metrics_port,
                                  timeout=10).read().decode()
    vals = {}
    for line in text.splitlines():
        for name in (STARTED, RUNNING):
            for key in ("_sum", "_count"):
                if line.startswith(name + key + " "):
                    vals[name + key] = float(line.split()[1])
    return {name: (vals.get(name + "_sum", 0.0), vals.get(name + "_count", 0.0))
            for name in (STARTED, RUNNING)}


def api_gets(env, n):
    """n GETs of one pod from the test API server, one after the other (its own latency under
    the same load: the reference for the agent's PATCH in its pod start)."""
    out = []
    for _ in range(n):
        t0 = time.monotonic()
        env.api("GET", "/api/v1/namespaces/default/pods/echo")
        out.append(time.monotonic() - t0)
    return B.summary_ms(out)


def status_phase(env, prefix, n, modes):
    """Pod created -> Running for n pods in each of `modes` (name -> a function that sets it),
    one pod of each in turn, so that each mode meets the same load: per mode the times, the
    agent's mean part of it (ms: bound -> Running posted) and the node's (bound -> the
    runtime's Running); and over the phase the API server's GET latency and the share of a
    core the agent, the shim and the node's CPU were busy."""
    node_cpu = max(os.sched_getaffinity(env.agent.pid))
    out = {m: ([], [], []) for m in modes}
    a0, h0, t0 = B.proc_cpu_s(env.agent.pid), B.proc_cpu_s(env.shim.pid), time.monotonic()
    b0 = cpu_busy(node_cpu)
    for i in range(n):
        for m, set_mode in modes.items():
            set_mode()
            before = agent_histograms(env)
            dt = pod_to_running(env, "%s%s-%d" % (prefix, m, i))
            deadline = time.monotonic() + 10
            while True:  # the agent observes its PATCH's answer just after the API shows it
                after = agent_histograms(env)
                if all(after[k][1] == before[k][1] + 1 for k in after):
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError("the agent did not count the pod's start: %s -> %s"
                                       % (before, after))
                time.sleep(0.01)
            out[m][0].append(dt)
            out[m][1].append(after[STARTED][0] - before[STARTED][0])
            out[m][2].append(after[RUNNING][0] - before[RUNNING][0])
    b1 = cpu_busy(node_cpu)
    a1, h1, t1 = B.proc_cpu_s(env.agent.pid), B.proc_cpu_s(env.shim.pid), time.monotonic()
    cores = {"agent": round((a1 - a0) / (t1 - t0), 2), "shim": round((h1 - h0) / (t1 - t0), 2),
             "node_cpu_busy": round((b1[0] - b0[0]) / max(1, b1[1] - b0[1]), 2)}
    per_mode = {m: (B.summary_ms(v[0]), B.summary_ms(v[1]), B.summary_ms(v[2]))
                for m, v in out.items()}
    return per_mode, api_gets(env, 10), cores


def thread_nices(pid):
    """{tid: nice} of every thread of pid now."""
    return {int(t): os.getpriority(os.PRIO_PROCESS, int(t)) for t in os.listdir("/proc/%d/task" % pid)}


def set_nices(saved, flat):
    """The threads back to their saved nice values, or all at 0 (flat)."""
    for tid, v in saved.items():
        try:
            os.setpriority(os.PRIO_PROCESS, tid, 0 if flat else v)
        except OSError:  # a thread that ended
            pass


def tree(pid):
    """pid and its descendants now (/proc/*/stat's ppid)."""
    kids = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            kids.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def pin(pid, cpus):
    """Every thread of pid and of its descendants onto cpus (what they start later inherits)."""
    for p in tree(pid):
        try:
            for t in os.listdir("/proc/%d/task" % p):
                os.sched_setaffinity(int(t), cpus)
        except OSError:
            pass


def cpu_busy(cpu):
    """(busy, total) jiffies of one CPU so far (/proc/stat)."""
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("cpu%d " % cpu):
                # user nice system idle iowait irq softirq steal (guest is in user)
                v = [int(x) for x in line.split()[1:9]]
                return v[0] + v[1] + v[2] + v[5] + v[6], sum(v)
    return 0, 0


def main():
    B.preflight(need_shim=True)
    kubectl = shutil.which("kubectl")
    if not kubectl:
        print("no kubectl")
        return 77
    n = B.env_int("BENCH_EXEC_N", 30)
    mib = B.env_int("BENCH_PF_MIB", 8)
    env = ShimEnv(B.agent_binary("shim"), B.SERVER_PY, B.SHIM_BIN, kubectl)
    res, ok = {}, False
    try:
        env.start_kube()
        env.write_conf()
        env.start_agent()
        open(os.path.join(env.dir, "alive_42"), "w").close()
        env.call("register", {"job_id": 42, "slurm_node": "n1", "user": "bench",
                              "uid": os.getuid(), "gid": os.getgid(), "partition": "gpu",
                              "cluster": "comp", "gpus": [0], "cpus": 4, "memory_mib": 8192,
                              "namespaces": ["default"]})
        env.start_shim()
        port = free_port()
        echo = T.pod("echo", ["python3", "-c", T.ECHO, str(port)])
        echo["spec"]["containers"][0]["ports"] = [{"containerPort": port}]
        env.api("POST", "/api/v1/namespaces/default/pods", echo)
        deadline = time.time() + 60
        while not (T.running(env, "echo") and T.listening(port)):
            if time.time() > deadline:
                raise RuntimeError("the echo pod does not run")
            time.sleep(0.2)
        kc = ["--kubeconfig", os.path.join(env.kdir, "kubeconfig")]
        for ver, k in T.versions(kubectl):
            timed([k] + kc + ["exec", "echo", "--", "true"], 2)  # warm caches
            res["exec_" + ver] = B.summary_ms(timed([k] + kc + ["exec", "echo", "--", "true"], n))
            res["get_" + ver] = B.summary_ms(timed([k] + kc + ["get", "pod", "echo"], n))
        res["fork_exec_true"] = B.summary_ms(timed(["true"], n))
        blob = os.urandom(mib << 20)
        agent_pid = env.agent.pid
        for ver, k in T.versions(kubectl):
            c0 = B.proc_cpu_s(agent_pid)
            t0 = time.monotonic()
            r = subprocess.run([k] + kc + ["exec", "-i", "echo", "--", "cat"], input=blob,
                               capture_output=True)
            dt = time.monotonic() - t0
            if r.stdout != blob:
                raise RuntimeError("exec -i cat: %d of %d bytes back" % (len(r.stdout), len(blob)))
            res["exec_cat_mib_s_" + ver] = round(mib / dt, 1)
            # The agent's own cost, whatever the machine's other processes
            # (kubectl, the test API server's relay) leave it: CPU per MiB
            # through it (each MiB crosses it twice, in and back).
            res["exec_cat_agent_cpu_ms_per_mib_" + ver] = round(
                (B.proc_cpu_s(agent_pid) - c0) * 1000 / mib, 2)
        local = free_port()
        pf = subprocess.Popen([kubectl] + kc + ["port-forward", "pod/echo", "%d:%d" % (local, port)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if "Forwarding from" not in pf.stdout.readline():
            raise RuntimeError("port-forward did not start")
        c0 = B.proc_cpu_s(agent_pid)
        res["pf_mib_s"], res["pf_s"] = throughput(local, mib)
        res["pf_agent_cpu_ms_per_mib"] = round((B.proc_cpu_s(agent_pid) - c0) * 1000 / mib, 2)
        res["direct_mib_s"], res["direct_s"] = throughput(port, mib)
        pf.terminate()
        pf.wait(10)
        res["pf_mib"] = mib
        n_status = B.env_int("BENCH_STATUS_N", 5)
        # The node's processes (the agent, the shim, its pods and sessions' commands) on one
        # CPU, the cluster's (the test API server, the kubectl clients, this script) on the
        # others: on a real cluster the API server and the users' kubectl are not on the node.
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) > 1:
            node, cluster = {cpus[-1]}, set(cpus[:-1])
            pin(env.agent.pid, node)
            pin(env.shim.pid, node)
            pin(env.kube.proc.pid, cluster)
            os.sched_setaffinity(0, cluster)
            res["status_cpus"] = {"node": sorted(node), "cluster": sorted(cluster)}
        # As configured (the agent and the shim at nice -5, the pods' and sessions' commands
        # at the job's 0) and with everything at 0, a pod of each in turn: what the
        # priorities give, under the same load.
        saved = {**thread_nices(env.agent.pid), **thread_nices(env.shim.pid)}
        modes = {"": lambda: set_nices(saved, False), "flat": lambda: set_nices(saved, True)}
        for name, count, rate in (("no_sessions", 0, None), ("4_streaming_sessions", 4, None),
                                  ("16_sessions_256kib_s", 16, 256)):
            B.log("pod status: " + name)
            sessions = Sessions(kubectl, kc, count, rate)
            try:
                sessions.flowing(60)  # every session moves data before the first pod
                back0, t0 = sum(sessions.back), time.monotonic()
                per_mode, res["api_get_" + name], res["cores_" + name] = \
                    status_phase(env, name.split("_")[0], n_status, modes)
                res["sessions_kib_s_" + name] = round(
                    (sum(sessions.back) - back0) / 1024 / (time.monotonic() - t0))
                for m, (times, agent_part, node_part) in per_mode.items():
                    key = name + ("_" + m if m else "")
                    res["pod_running_" + key] = times
                    res["agent_pod_start_" + key] = agent_part
                    res["node_pod_running_" + key] = node_part
            finally:
                sessions.stop()
            set_nices(saved, False)
        ok = True
    finally:
        env.stop()  # ends the job first: the shim stops its pods
        if ok and os.environ.get("BENCH_KEEP") != "1":
            shutil.rmtree(env.dir, ignore_errors=True)
        else:
            B.log("files kept in " + env.dir)
    B.write_result("streams", res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
