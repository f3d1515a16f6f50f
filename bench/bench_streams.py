#!/usr/bin/python3
"""kubectl exec and port-forward through the test API server to the real agent and shim, each
next to its reference in the same run:

- exec round trip: `kubectl exec POD -- true` (kubectl 1.28 over SPDY, 1.32 over WebSocket),
  next to `kubectl get pod POD` (the same kubectl, the same API server, no session: what is
  kubectl's and the API server's) and a local fork+exec of `true`;
- port-forward throughput: BENCH_PF_MIB MiB sent and echoed through `kubectl port-forward`,
  next to the same transfer on a direct connection to the pod's port.

Sizes: BENCH_EXEC_N (30) execs per kubectl, BENCH_PF_MIB (8) MiB each way.
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
