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
  sessions at 256 KiB/s each (BENCH_STATUS_N pods each): what sessions cost the pod sync of the
  same agent. Next to each, the agent's part: its slurm_k8s_pod_start_duration_seconds (the pod
  seen bound to its node -> the API's answer to its Running status: the shim's start and one
  PATCH included) from its /metrics, the mean over the same pods; the rest is the watch's
  delivery and the poll. And the test API server's own latency meanwhile (a GET of a pod): the
  machine's 2 cores are shared by all, the sessions' kubectl and cat and the double's Python
  relay too.

Sizes: BENCH_EXEC_N (30) execs per kubectl, BENCH_PF_MIB (8) MiB each way, BENCH_STATUS_N (5).
BENCH_STATUS_NICE=N (a diagnosis, not a setting): the agent and the shim run the pod-status phases
at nice N (-10, say), so that what the scheduler's queue costs them shows apart from their own work.
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
                      T.pod(name, ["python3", "-c", "import time\ntime.sleep(600)"]))
    if code != 201:
        raise RuntimeError("pod %s: POST answered %s" % (name, code))
    while not T.running(env, name):
        if time.monotonic() - t0 > 60:
            raise RuntimeError("pod %s not Running after 60 s" % name)
        time.sleep(0.005)
    dt = time.monotonic() - t0
    env.api("DELETE", "/api/v1/namespaces/default/pods/" + name)
    return dt


def streaming_sessions(kubectl, kc, n, stop, kib_s=None):
    """n `kubectl exec -i echo -- cat` sessions fed with data until stop is set: as fast as
    they take it, or kib_s KiB/s each (a 64 KiB chunk, then a pause to keep to that rate)."""
    procs = [subprocess.Popen([kubectl] + kc + ["exec", "-i", "echo", "--", "cat"],
                              stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) for _ in range(n)]
    chunk = os.urandom(64 << 10)

    def feed(p):
        t0, sent = time.monotonic(), 0
        try:
            while not stop.is_set():
                p.stdin.write(chunk)
                p.stdin.flush()
                sent += len(chunk)
                if kib_s:
                    ahead = t0 + sent / (kib_s * 1024.0) - time.monotonic()
                    if ahead > 0:
                        stop.wait(ahead)
        except (BrokenPipeError, ValueError, OSError):
            pass
    threads = [threading.Thread(target=feed, args=(p,), daemon=True) for p in procs]
    for t in threads:
        t.start()
    return procs, threads


def agent_pod_starts(env):
    """(sum, count) of the agent's slurm_k8s_pod_start_duration_seconds, from its /metrics."""
    import urllib.request
    text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % env.metrics_port,
                                  timeout=10).read().decode()
    vals = {}
    for line in text.splitlines():
        for key in ("_sum", "_count"):
            if line.startswith("slurm_k8s_pod_start_duration_seconds" + key + " "):
                vals[key] = float(line.split()[1])
    return vals.get("_sum", 0.0), vals.get("_count", 0.0)


def api_gets(env, n):
    """n GETs of one pod from the test API server, one after the other (its own latency under
    the same load: the reference for the agent's PATCH in its pod start)."""
    out = []
    for _ in range(n):
        t0 = time.monotonic()
        env.api("GET", "/api/v1/namespaces/default/pods/echo")
        out.append(time.monotonic() - t0)
    return B.summary_ms(out)


def status_phase(env, prefix, n):
    """Pod created -> Running for n pods, the agent's own mean part of it (ms), the API
    server's GET latency meanwhile, and the share of a core the agent and the shim used."""
    s0, c0 = agent_pod_starts(env)
    a0, h0, t0 = cpu_s(env.agent.pid), cpu_s(env.shim.pid), time.monotonic()
    times = [pod_to_running(env, "%s-%d" % (prefix, i)) for i in range(n)]
    a1, h1, t1 = cpu_s(env.agent.pid), cpu_s(env.shim.pid), time.monotonic()
    s1, c1 = agent_pod_starts(env)
    if c1 - c0 != n:
        raise RuntimeError("the agent counted %d pod starts for %d pods" % (c1 - c0, n))
    cores = {"agent": round((a1 - a0) / (t1 - t0), 2), "shim": round((h1 - h0) / (t1 - t0), 2)}
    return B.summary_ms(times), round((s1 - s0) * 1000 / n, 2), api_gets(env, 10), cores


def cpu_s(pid):
    """utime + stime of a process so far, in seconds (/proc/PID/stat)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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
            c0 = cpu_s(agent_pid)
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
                (cpu_s(agent_pid) - c0) * 1000 / mib, 2)
        local = free_port()
        pf = subprocess.Popen([kubectl] + kc + ["port-forward", "pod/echo", "%d:%d" % (local, port)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if "Forwarding from" not in pf.stdout.readline():
            raise RuntimeError("port-forward did not start")
        c0 = cpu_s(agent_pid)
        res["pf_mib_s"], res["pf_s"] = throughput(local, mib)
        res["pf_agent_cpu_ms_per_mib"] = round((cpu_s(agent_pid) - c0) * 1000 / mib, 2)
        res["direct_mib_s"], res["direct_s"] = throughput(port, mib)
        pf.terminate()
        pf.wait(10)
        res["pf_mib"] = mib
        n_status = B.env_int("BENCH_STATUS_N", 5)
        if os.environ.get("BENCH_STATUS_NICE"):
            nice = int(os.environ["BENCH_STATUS_NICE"])
            for pid in (env.agent.pid, env.shim.pid):
                os.setpriority(os.PRIO_PROCESS, pid, nice)
            res["status_phases_nice"] = nice
        (res["pod_running_no_sessions"], res["agent_pod_start_mean_ms_no_sessions"],
         res["api_get_no_sessions"], res["cores_no_sessions"]) = status_phase(env, "quiet", n_status)
        for name, count, rate in (("4_streaming_sessions", 4, None),
                                  ("16_sessions_256kib_s", 16, 256)):
            stop = threading.Event()
            procs, _ = streaming_sessions(kubectl, kc, count, stop, rate)
            time.sleep(1)  # the sessions are open and moving data before the first pod
            try:
                (res["pod_running_" + name], res["agent_pod_start_mean_ms_" + name],
                 res["api_get_" + name], res["cores_" + name]) = \
                    status_phase(env, name.split("_")[0] + "s", n_status)
            finally:
                stop.set()
                for p in procs:
                    p.kill()
                    p.wait()
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
