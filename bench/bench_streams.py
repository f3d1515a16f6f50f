#!/usr/bin/python3
"""kubectl exec and port-forward through the test API server to the real agent and shim, each
next to its reference in the same run:

- exec round trip: `kubectl exec POD -- true` (kubectl 1.28 over SPDY, 1.32 over WebSocket),
  next to `kubectl get pod POD` (the same kubectl, the same API server, no session: what is
  kubectl's and the API server's) and a local fork+exec of `true`;
- port-forward throughput: BENCH_PF_MIB MiB sent and echoed through `kubectl port-forward`,
  next to the same transfer on a direct connection to the pod's port.

- pod status under sessions: a pod created -> Running (as the API shows it), with no session
  open and with 4 `kubectl exec -i cat` sessions moving data all the while (BENCH_STATUS_N pods
  each): what many sessions cost the pod sync of the same agent.

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


def streaming_sessions(kubectl, kc, n, stop):
    """n `kubectl exec -i echo -- cat` sessions fed with data until stop is set."""
    procs = [subprocess.Popen([kubectl] + kc + ["exec", "-i", "echo", "--", "cat"],
                              stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) for _ in range(n)]
    chunk = os.urandom(64 << 10)

    def feed(p):
        try:
            while not stop.is_set():
                p.stdin.write(chunk)
                p.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass
    threads = [threading.Thread(target=feed, args=(p,), daemon=True) for p in procs]
    for t in threads:
        t.start()
    return procs, threads


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
        while not T.running(env, "echo"):
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
        quiet = [pod_to_running(env, "quiet-%d" % i) for i in range(n_status)]
        stop = threading.Event()
        procs, threads = streaming_sessions(kubectl, kc, 4, stop)
        time.sleep(1)  # the sessions are open and moving data before the first pod
        busy = [pod_to_running(env, "busy-%d" % i) for i in range(n_status)]
        stop.set()
        for p in procs:
            p.kill()
            p.wait()
        res["pod_running_no_sessions"] = B.summary_ms(quiet)
        res["pod_running_4_streaming_sessions"] = B.summary_ms(busy)
        ok = True
    finally:
        env.stop()
        if ok and os.environ.get("BENCH_KEEP") != "1":
            shutil.rmtree(env.dir, ignore_errors=True)
        else:
            B.log("files kept in " + env.dir)
    B.write_result("streams", res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
