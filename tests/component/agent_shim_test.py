#!/usr/bin/python3
"""Component test: the real slurm-k8s-agent with the REAL slurm-k8s-shim, no Slurm.

The agent runs with runtime=shim and shim_auth=uid; after `register` the test
starts `slurm-k8s-shim --job-id 42 --slurm-node n1 --socket S` itself, as the
plugin's extern step would. Pods are real processes. `kubectl logs` (the real
kubectl) goes through the test API server's pods/log proxy to the agent's
kubelet endpoint over TLS (serving cert and client CA from the test server's
state dir). Prints `N passed, N failed` and leaves no process behind.
"""
import json, os, signal, subprocess, sys, threading, time, urllib.error, urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from sktest.env import NODE, ShimEnv, shim_suite_main, shim_reg  # noqa: E402
from sktest.host import alive, free_port, marked_procs  # noqa: E402
from sktest.suite import SCALE, check, wait_for  # noqa: E402


def pod(name, command, extra_container=None, extra_spec=None):
    c = {"name": "main", "image": "python:3", "command": command}
    c.update(extra_container or {})
    spec = {"nodeName": NODE, "terminationGracePeriodSeconds": 5, "containers": [c],
            "tolerations": [{"key": "slurm-k8s/job", "operator": "Exists"}]}
    spec.update(extra_spec or {})
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def get_pod(env, name):
    code, p = env.api("GET", "/api/v1/namespaces/default/pods/" + name)
    return p if code == 200 else None


def cond(p, t):
    for c in (p or {}).get("status", {}).get("conditions", []):
        if c["type"] == t:
            return c["status"]
    return None


def events_of(env, name):
    _, evs = env.api("GET", "/api/v1/namespaces/default/events")
    return [e for e in evs.get("items", []) if e["involvedObject"].get("name") == name]


def run(env):
    d = env.dir
    open(os.path.join(d, "alive_42"), "w").close()  # job_alive_command: the job runs
    reg = shim_reg()
    r = env.call("register", reg)
    check("register", r and r.get("ok"), r)
    lst = env.call("list", {})
    check("list carries the agent version", lst and lst["ok"] and lst["body"].get("version"), lst)
    env.start_shim()
    code, n = wait_for(lambda: (lambda c_n: c_n if c_n[0] == 200 else None)(
        env.api("GET", "/api/v1/nodes/" + NODE)), 5) or (0, {})
    port = n.get("status", {}).get("daemonEndpoints", {}).get("kubeletEndpoint", {}).get("Port")
    check("Node carries the real kubelet port", port and port != 10250 and port != 0, port)

    # 1. a web pod: real process, readiness httpGet, GPUs, logs through kubectl
    web_port = free_port()
    web = (f"import os,sys,time,signal,threading,http.server\n"
           f"open('{d}/web.pid','w').write(str(os.getpid()))\n"
           f"print('CUDA_VISIBLE_DEVICES='+os.environ.get('CUDA_VISIBLE_DEVICES','unset'),flush=True)\n"
           f"print('hello from web',flush=True)\n"
           f"def term(*a):\n open('{d}/web.sigterm','w').write('x'); os._exit(0)\n"
           f"signal.signal(signal.SIGTERM,term)\n"
           f"def tick():\n i=0\n while True:\n  i+=1; print('tick',i,flush=True); time.sleep(0.3)\n"
           f"threading.Thread(target=tick,daemon=True).start()\n"
           f"class H(http.server.SimpleHTTPRequestHandler):\n def log_message(self,*a): pass\n"
           f"http.server.HTTPServer(('127.0.0.1',{web_port}),H).serve_forever()\n")
    env.api("POST", "/api/v1/namespaces/default/pods", pod(
        "web", ["python3", "-c", web],
        # (probe times are scaled by the shim's test time scale: a 1 s default timeout
        # would be 0.2 s, which a loaded machine misses)
        {"readinessProbe": {"httpGet": {"path": "/", "port": web_port}, "periodSeconds": 1,
                            "timeoutSeconds": 30},
         "resources": {"limits": {"nvidia.com/gpu": "1"}}}))
    p = wait_for(lambda: (lambda x: x if cond(x, "Ready") == "True" else None)(get_pod(env, "web")), 60)
    check("web pod Running and Ready (readiness httpGet)", p is not None,
          (get_pod(env, "web") or {}).get("status"))
    web_pid = int(open(f"{d}/web.pid").read()) if os.path.exists(f"{d}/web.pid") else 0
    check("web pod is a real process", web_pid and alive(web_pid), web_pid)
    rc, out, err = env.kubectl("logs", "web")
    check("kubectl logs through the API server and the kubelet endpoint",
          rc == 0 and "hello from web" in out, (rc, out[:300], err[:300]))
    check("CUDA_VISIBLE_DEVICES from the lent GPUs", "CUDA_VISIBLE_DEVICES=2\n" in out
          or "CUDA_VISIBLE_DEVICES=3\n" in out, out[:200])
    m = urllib.request.urlopen(f"http://127.0.0.1:{env.metrics_port}/metrics", timeout=5).read().decode()
    check("metrics: registration latency observed",
          "slurm_k8s_node_registration_duration_seconds_count 1\n" in m,
          [x for x in m.split("\n") if "registration" in x][-3:])
    rc, out, err = env.kubectl("logs", "web", "--tail", "2")
    lines = out.strip().split("\n")
    check("kubectl logs --tail 2", rc == 0 and len(lines) == 2 and lines[-1].startswith("tick"),
          (rc, out, err))
    f = subprocess.Popen([env.kubectl_bin, "--kubeconfig", os.path.join(env.kdir, "kubeconfig"),
                          "logs", "-f", "--tail", "1", "web"], stdout=subprocess.PIPE, text=True)
    streamed = []

    def read_stream():
        for line in f.stdout:
            streamed.append(line)
    reader = threading.Thread(target=read_stream, daemon=True)
    reader.start()
    # The container ticks every 0.3 s: wait for the lines rather than for a fixed time
    # (kubectl itself takes a while to start on a loaded machine).
    wait_for(lambda: len([x for x in list(streamed) if x.startswith("tick")]) >= 4, 10)
    f.terminate()
    f.wait(10)
    reader.join(10)
    fout = "".join(streamed)
    ticks = [x for x in fout.split("\n") if x.startswith("tick")]
    check("kubectl logs -f streams new lines", len(ticks) >= 4, fout[-300:])
    rc, out, err = env.kubectl("logs", "web", "-c", "nope")
    check("kubectl logs for an unknown container is refused", rc != 0 and "not valid" in err, err)

    # 1b. kubectl top's sources through the API server's nodes/proxy to the
    #     kubelet endpoint: /metrics/resource with the kubelet's names, a
    #     CPU-burning pod's counter growing, /stats/summary with the pod.
    env.api("POST", "/api/v1/namespaces/default/pods", pod(
        "burn", ["python3", "-c", "while True: pass"]))
    check("burn pod Running", wait_for(lambda: (lambda x: x and x["status"].get("phase") ==
                                                "Running")(get_pod(env, "burn")), 60),
          (get_pod(env, "burn") or {}).get("status"))

    def scrape(path):
        rc, out, err = env.kubectl("get", "--raw", f"/api/v1/nodes/{NODE}/proxy/{path}")
        return out if rc == 0 else "ERR " + err

    def burn_cpu():
        for line in scrape("metrics/resource").split("\n"):
            if line.startswith("container_cpu_usage_seconds_total{") and 'pod="burn"' in line:
                return float(line.split(" ")[1])
        return None
    text = scrape("metrics/resource")
    names = {x.split(" ")[2] for x in text.split("\n") if x.startswith("# TYPE ")}
    check("metrics/resource has the kubelet's metric names",
          {"node_cpu_usage_seconds_total", "node_memory_working_set_bytes",
           "pod_cpu_usage_seconds_total", "pod_memory_working_set_bytes",
           "container_cpu_usage_seconds_total", "container_memory_working_set_bytes",
           "container_start_time_seconds", "scrape_error"} <= names and
          "\nscrape_error 0\n" in text, text[:600])
    first = wait_for(burn_cpu, 30)
    check("the burning container has a CPU counter", first is not None, text[:800])
    grown = wait_for(lambda: (lambda v: v if v is not None and first is not None and
                              v >= first + 0.3 else None)(burn_cpu()), 60)
    check("its counter grows", grown is not None, (first, burn_cpu()))
    summ = scrape("stats/summary")
    try:
        sj = json.loads(summ)
    except ValueError:
        sj = {}
    bp = [p for p in sj.get("pods", []) if p["podRef"]["name"] == "burn"]
    check("stats/summary: the node and the pod with its container",
          sj.get("node", {}).get("nodeName") == NODE and bp and
          bp[0]["containers"][0]["name"] == "main" and
          bp[0]["containers"][0]["memory"]["workingSetBytes"] > 0 and
          bp[0]["cpu"]["usageCoreNanoSeconds"] > 0, summ[:600])
    # usageNanoCores is a rate of two samples: the second summary has it.
    sj2 = json.loads(scrape("stats/summary") or "{}")
    bp2 = [p for p in sj2.get("pods", []) if p["podRef"]["name"] == "burn"]
    check("stats/summary: usageNanoCores from two samples",
          bp2 and bp2[0]["containers"][0]["cpu"].get("usageNanoCores", 0) > 0, bp2)
    # The disk figures: the node's fs (statvfs of the job's state dir), and
    # the log use of the pod that has printed its ticks.
    fs = sj2.get("node", {}).get("fs", {})
    check("stats/summary: the node's fs",
          fs.get("capacityBytes", 0) > 0 and
          0 <= fs.get("availableBytes", -1) <= fs["capacityBytes"] and
          fs.get("inodes", 0) >= fs.get("inodesFree", -1) >= 0, fs)
    wp = [p for p in sj2.get("pods", []) if p["podRef"]["name"] == "web"]
    check("stats/summary: a pod that printed has its logs' use and its ephemeral-storage",
          wp and wp[0]["containers"][0].get("logs", {}).get("usedBytes", 0) > 0 and
          wp[0]["containers"][0]["logs"].get("inodesUsed", 0) > 0 and
          wp[0].get("ephemeral-storage", {}).get("usedBytes", 0) >=
          wp[0]["containers"][0]["logs"]["usedBytes"] and "network" not in wp[0], wp)
    check("stats/summary: the node's network lists the host's interfaces",
          isinstance(sj2.get("node", {}).get("network", {}).get("interfaces"), list),
          sj2.get("node", {}).get("network"))
    # A second job's node on this host: the shared kubelet port cannot tell
    # whose figures are asked for, and says so rather than answer for either.
    r = env.call("register", dict(reg, job_id=43))
    check("job 43 registers", r and r.get("ok"), r)
    req = urllib.request.Request(f"{env.kube.url}/api/v1/nodes/{NODE}/proxy/metrics/resource")
    req.add_header("Authorization", "Bearer " + env.kube.token)
    try:
        with urllib.request.urlopen(req, context=env.kube.ctx, timeout=10) as resp:
            code, out = resp.status, resp.read().decode()
    except urllib.error.HTTPError as e:
        code, out = e.code, e.read().decode()
    check("two nodes on the shared port: stats refused (404), naming why",
          code == 404 and "per virtual node" in out, (code, out[:300]))
    r = env.call("deregister", {"job_id": 43, "slurm_node": "n1", "grace_s": 0,
                                "reason": "JobEnded"})
    check("job 43 deregisters", r and r.get("ok"), r)
    env.api("DELETE", "/api/v1/namespaces/default/pods/burn?gracePeriodSeconds=0")
    wait_for(lambda: get_pod(env, "burn") is None, 30)

    # 2. failing liveness -> Unhealthy events (counted), Killing, restart
    env.api("POST", "/api/v1/namespaces/default/pods", pod(
        "sick", ["python3", "-c", "import time\nprint('sick up',flush=True)\ntime.sleep(600)"],
        {"livenessProbe": {"exec": {"command": ["sh", "-c", "echo not today; exit 1"]},
                           "periodSeconds": 1, "failureThreshold": 2}}))
    p = wait_for(lambda: (lambda x: x if x and x["status"].get("containerStatuses") and
                          x["status"]["containerStatuses"][0].get("restartCount", 0) >= 2 else None)(
        get_pod(env, "sick")), 20)
    check("liveness failure restarts the container", p is not None,
          (get_pod(env, "sick") or {}).get("status", {}).get("containerStatuses"))
    def unhealthy():
        evs = [e for e in events_of(env, "sick") if e["reason"] == "Unhealthy"]
        return evs if evs and max(e.get("count", 1) for e in evs) >= 2 else None
    evs = wait_for(unhealthy, 10)
    check("Unhealthy events, repeats counted on one Event", evs and
          evs[0]["message"].startswith("Liveness probe failed:") and
          evs[0]["involvedObject"].get("fieldPath") == "spec.containers{main}" and
          evs[0]["source"] == {"component": "kubelet", "host": NODE} and
          evs[0]["firstTimestamp"] and evs[0]["lastTimestamp"], evs)
    reasons = {e["reason"]: e for e in events_of(env, "sick")}
    check("Killing event for the probe kill", "Killing" in reasons and
          reasons["Killing"]["message"] == "Container main failed liveness probe, will be restarted",
          list(reasons))
    check("BackOff event with kubelet wording", wait_for(lambda: [
        e for e in events_of(env, "sick") if e["reason"] == "BackOff" and e["message"].startswith(
            "Back-off restarting failed container main in pod sick_default(")], 10),
          [(e["reason"], e["message"]) for e in events_of(env, "sick")])
    rc, out, err = env.kubectl("logs", "sick", "--previous")
    check("kubectl logs --previous", rc == 0 and "sick up" in out, (rc, out, err))
    # No previous instance: the kubelet's 400 and words, through the API server.
    rc, out, err = env.kubectl("logs", "web", "--previous")
    check("kubectl logs --previous with none: BadRequest, as a kubelet answers",
          rc != 0 and 'Error from server (BadRequest): previous terminated container "main" in pod "web" '
          "not found" in err, (rc, out, err))

    # 3. kubectl delete -> SIGTERM with grace, pod gone
    t0 = time.time()
    rc, out, err = env.kubectl("delete", "pod", "web", "--wait=true", timeout=30)
    check("kubectl delete pod", rc == 0, (rc, out, err))
    check("the pod got SIGTERM", os.path.exists(f"{d}/web.sigterm"))
    check("web process gone", not alive(web_pid) if web_pid else False)
    check("web pod gone from the API", get_pod(env, "web") is None)
    print(f"     delete -> gone {1000 * (time.time() - t0):.0f} ms")

    # 4. agent kill -9 mid-run: the shim reconnects, the agent re-adopts,
    #    the pod is not run twice (same pid)
    marker = "steady-%d" % os.getpid()
    env.api("POST", "/api/v1/namespaces/default/pods", pod(
        "steady", ["python3", "-c", f"import os,time\nopen('{d}/steady.pid','w').write(str(os.getpid()))\n"
                   f"print('{marker}',flush=True)\ntime.sleep(600)", marker]))
    check("steady pod Running", wait_for(lambda: (get_pod(env, "steady") or {}).get(
        "status", {}).get("phase") == "Running", 10))
    wait_for(lambda: os.path.exists(f"{d}/steady.pid") and open(f"{d}/steady.pid").read(), 5)
    pid1 = int(open(f"{d}/steady.pid").read())
    env.kill_agent(signal.SIGKILL)
    time.sleep(0.5)
    env.start_agent()
    def reattached():
        return "shim attached" in open(os.path.join(d, "agent.log")).read().split(
            "starting (config")[-1]
    check("the shim re-attaches to the restarted agent", wait_for(reattached, 15))
    time.sleep(1.0)
    pids = marked_procs(marker, zombies=True)
    check("the running pod is not run twice (same pid)",
          alive(pid1) and pids == [pid1] and int(open(f"{d}/steady.pid").read()) == pid1, (pid1, pids))
    check("steady still Running", (get_pod(env, "steady") or {}).get("status", {}).get("phase") == "Running")
    env.api("POST", "/api/v1/namespaces/default/pods", pod(
        "after", ["python3", "-c", "import time\ntime.sleep(600)"]))
    check("a new pod runs after the restart", wait_for(lambda: (get_pod(env, "after") or {}).get(
        "status", {}).get("phase") == "Running", 10))
    rc, out, err = env.kubectl("logs", "steady")
    check("kubectl logs after the agent restart", rc == 0 and marker in out, (rc, out, err))

    # 5. metrics
    try:
        m = urllib.request.urlopen(f"http://127.0.0.1:{env.metrics_port}/metrics", timeout=5).read().decode()
    except OSError as e:
        m = str(e)
    check("metrics: API requests by verb and code",
          'slurm_k8s_api_requests_total{verb="PATCH",code="200"}' in m, m[:500])
    check("metrics: pod start latency observed",
          "slurm_k8s_pod_start_duration_seconds_count" in m and
          "slurm_k8s_pod_start_duration_seconds_count 0\n" not in m, m[-800:])
    check("metrics: the node's own part of pod start observed",
          "slurm_k8s_pod_running_duration_seconds_count" in m and
          "slurm_k8s_pod_running_duration_seconds_count 0\n" not in m, m[-800:])
    _, allp = env.api("GET", "/api/v1/pods")
    running = len([x for x in allp.get("items", []) if x["spec"].get("nodeName") == NODE
                   and x["status"].get("phase") == "Running"])
    def metrics():
        return urllib.request.urlopen(f"http://127.0.0.1:{env.metrics_port}/metrics",
                                      timeout=5).read().decode()
    # The gauge is refreshed every 2 s: wait for the refresh that counts these pods.
    wait_for(lambda: f'slurm_k8s_pods{{phase="Running"}} {running}\n' in metrics(), 10)
    m = metrics()
    check("metrics: pods by phase", f'slurm_k8s_pods{{phase="Running"}} {running}\n' in m and running >= 2,
          (running, [x for x in m.split("\n") if x.startswith("slurm_k8s_pods")]))

    # 6. deregister -> shim shutdown -> every pod process gone, Node/Lease gone
    sick_pids = marked_procs("sick up", zombies=True)
    r, rc = env.end_job(42, 5)
    check("deregister ok", r and r.get("ok"), r)
    check("the shim exits 0 after shutdown", rc == 0, rc)
    check("every pod process is gone", not alive(pid1) and not marked_procs(marker, zombies=True) and
          not [x for x in sick_pids if alive(x)], (marked_procs(marker, zombies=True), sick_pids))
    check("Node gone", env.api("GET", "/api/v1/nodes/" + NODE)[0] == 404)
    check("Lease gone", env.api(
        "GET", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/" + NODE)[0] == 404)
    _, pods = env.api("GET", "/api/v1/pods")
    check("pods gone", not [x for x in pods.get("items", []) if x["spec"].get("nodeName") == NODE])

    # 7. the job ends while the agent is down: the restarted agent finds it
    #    gone; the shim's pods are stopped and the shim exits; nothing left.
    open(os.path.join(d, "alive_44"), "w").close()
    r = env.call("register", dict(reg, job_id=44))
    check("job 44 registers", r and r.get("ok"), r)
    env.shim = None
    shim44 = env.spawn_shim(44, "shim44.log")
    env.shim = shim44
    marker44 = "orphan-%d" % os.getpid()
    p44 = pod("orphan", ["python3", "-c", "import time\ntime.sleep(600)", marker44])
    p44["spec"]["nodeName"] = "slurm-n1-44"
    env.api("POST", "/api/v1/namespaces/default/pods", p44)
    check("job 44 pod runs", wait_for(lambda: marked_procs(marker44, zombies=True), 10))
    env.kill_agent(signal.SIGKILL)
    os.unlink(os.path.join(d, "alive_44"))  # scancel while the agent is down
    env.start_agent()
    try:
        rc44 = shim44.wait(15 * SCALE)
        env.exited.append(shim44.pid)
    except subprocess.TimeoutExpired:
        rc44 = None
    check("the shim of a job that ended while the agent was down exits", rc44 is not None, rc44)
    check("and its pod processes are gone", not marked_procs(marker44, zombies=True),
          marked_procs(marker44, zombies=True))
    check("Node of the ended job deleted", wait_for(
        lambda: env.api("GET", "/api/v1/nodes/slurm-n1-44")[0] == 404, 10))
    check("its pod deleted from the API", wait_for(lambda: get_pod(env, "orphan") is None, 5),
          (get_pod(env, "orphan") or {}).get("status"))

    # 8. the shim is killed -9: its pod becomes Failed/ShimLost with a Warning
    #    event, its processes (child included, and a daemon that left the
    #    container's process group: its supervisor kills it) are stopped, the
    #    node is NotReady (no extern step here restarts the shim); a pod bound
    #    meanwhile fails at once; a new shim of the job makes the node Ready
    #    again, gets the dead pod's GPUs back and the ShimLost status stays.
    open(os.path.join(d, "alive_46"), "w").close()
    r = env.call("register", dict(reg, job_id=46))
    check("job 46 registers", r and r.get("ok"), r)

    def pod46(name, command, gpus):
        p = pod(name, command, extra_container={"resources": {"limits": {"nvidia.com/gpu": gpus}}})
        p["spec"]["nodeName"] = "slurm-n1-46"
        env.api("POST", "/api/v1/namespaces/default/pods", p)

    def phase_reason(name):
        st = (get_pod(env, name) or {}).get("status", {})
        return st.get("phase"), st.get("reason")

    env.shim = env.spawn_shim(46, "shim46.log")
    marker46 = "lost-%d" % os.getpid()
    # The daemon: setsid + double fork, its pid in lost46.daemon.
    daemon46 = os.path.join(d, "lost46.daemon")
    pod46("lost", ["python3", "-c", "import os,subprocess,sys,time\n"
                   "subprocess.Popen([sys.executable,'-c','import time; time.sleep(600)',"
                   f"'{marker46}-child'])\n"
                   "if os.fork() == 0:\n os.setsid()\n if os.fork() == 0:\n"
                   f"  open('{daemon46}.tmp','w').write(str(os.getpid()))\n"
                   f"  os.rename('{daemon46}.tmp','{daemon46}')\n"
                   "  os.execv(sys.executable,[sys.executable,'-c','import time; time.sleep(600)'])\n"
                   " os._exit(0)\n"
                   "time.sleep(600)", marker46], "2")
    check("job 46 pod Running with both GPUs", wait_for(
        lambda: phase_reason("lost")[0] == "Running" and len(marked_procs(marker46, zombies=True)) == 2, 10),
        (phase_reason("lost"), marked_procs(marker46, zombies=True)))
    before = marked_procs(marker46, zombies=True)
    check("  its daemon runs", wait_for(lambda: os.path.exists(daemon46), 10))
    daemon_pid = int(open(daemon46).read()) if os.path.exists(daemon46) else 0
    env.shim.kill()
    env.shim.wait(5)
    t0 = time.time()
    check("shim killed -9: pod reported Failed with reason ShimLost",
          wait_for(lambda: phase_reason("lost") == ("Failed", "ShimLost"), 5), phase_reason("lost"))
    took = time.time() - t0
    lost = get_pod(env, "lost") or {}
    st = lost.get("status", {})
    term = ((st.get("containerStatuses") or [{}])[0].get("state") or {}).get("terminated") or {}
    check("  within 2 s, message names the shim, container terminated 137, not Ready",
          took < 2 * SCALE and "slurm-k8s-shim" in st.get("message", "") and term.get("exitCode") == 137
          and cond(lost, "Ready") == "False", (took, st))
    check("  the pod's processes (and its child) are gone",
          wait_for(lambda: not [x for x in before if alive(x)], 3), [x for x in before if alive(x)])
    check("  and its daemon (another session, out of the process group) is gone",
          daemon_pid and wait_for(lambda: not alive(daemon_pid), 15), daemon_pid)
    # The agent posts the event asynchronously, apart from the status patch: wait for it.
    check("  a ShimLost Warning event", wait_for(lambda: [
        e for e in events_of(env, "lost") if e["reason"] == "ShimLost" and e["type"] == "Warning"],
        5), [(e["reason"], e["message"]) for e in events_of(env, "lost")])
    def node46_ready():
        code, n = env.api("GET", "/api/v1/nodes/slurm-n1-46")
        c = [x for x in (n.get("status", {}).get("conditions") or []) if x.get("type") == "Ready"] \
            if code == 200 else []
        return (c[0].get("status"), c[0].get("reason"), c[0].get("message", "")) if c else None

    def node46_events(reason):
        code, evs = env.api("GET", "/api/v1/namespaces/default/events")
        return [e for e in (evs.get("items") or []) if code == 200 and e.get("reason") == reason
                and e.get("involvedObject", {}).get("name") == "slurm-n1-46"]
    check("  the node is NotReady: KubeletNotReady, container runtime is down (no shim restarts it here)",
          wait_for(lambda: (node46_ready() or ("",))[0] == "False", 5)
          and node46_ready()[1] == "KubeletNotReady"
          and node46_ready()[2].startswith("container runtime is down: the job's shim (pid %d) died"
                                           % env.shim.pid), node46_ready())
    check("  a ShimDied Warning event on the node",
          wait_for(lambda: [e for e in node46_events("ShimDied") if e.get("type") == "Warning"], 5),
          node46_events("ShimDied"))
    pod46("late", ["python3", "-c", "import time\ntime.sleep(600)"], "1")
    check("a pod bound while no shim runs fails at once with ShimLost",
          wait_for(lambda: phase_reason("late") == ("Failed", "ShimLost"), 3), phase_reason("late"))
    attached_before = open(os.path.join(d, "agent.log")).read().count("shim attached")
    env.shim = env.spawn_shim(46, "shim46.log")
    # Bind the pod only once the new shim is attached: until then a bound pod
    # fails at once by design (checked just above); slower builds (ASan) show it.
    wait_for(lambda: open(os.path.join(d, "agent.log")).read().count("shim attached")
             > attached_before, 10)
    check("the new shim attached: the node is Ready again, with a ShimAttached event",
          wait_for(lambda: (node46_ready() or ("",))[0] == "True" and node46_events("ShimAttached"), 5),
          (node46_ready(), node46_events("ShimAttached")))
    pod46("regpu", ["python3", "-c", "import time\ntime.sleep(600)"], "2")
    check("a new shim runs a pod on the dead pod's GPUs", wait_for(
        lambda: phase_reason("regpu")[0] == "Running", 10), (get_pod(env, "regpu") or {}).get("status"))
    check("  and the lost pod keeps its ShimLost status", phase_reason("lost") == ("Failed", "ShimLost"),
          phase_reason("lost"))
    r, rc46 = env.end_job(46, 2)
    check("job 46 deregisters", r and r.get("ok"), r)
    check("  its new shim exits 0", rc46 == 0, rc46)

    # 9. large pods: 1 MiB of environment runs and sees it; one whose pod_run
    #    would exceed the link's limit (its ConfigMap volumes) is refused with
    #    a reason, alone: the job's other pods keep Running on an unbroken link
    #    and are stopped gracefully (SIGTERM, their grace) at the job's end.
    open(os.path.join(d, "alive_48"), "w").close()
    r = env.call("register", dict(reg, job_id=48))
    check("job 48 registers", r and r.get("ok"), r)
    env.shim = env.spawn_shim(48, "shim48.log")

    def pod48(name, command, extra_container=None, extra_spec=None):
        p = pod(name, command, extra_container, extra_spec)
        p["spec"]["nodeName"] = "slurm-n1-48"
        return env.api("POST", "/api/v1/namespaces/default/pods", p)[0]

    keeper = (f"import signal,time,os\n"
              f"def term(*a):\n open('{d}/keeper.sigterm','w').write('x'); os._exit(0)\n"
              f"signal.signal(signal.SIGTERM,term)\n"
              f"open('{d}/keeper.pid','w').write(str(os.getpid()))\ntime.sleep(600)")
    pod48("keeper", ["python3", "-c", keeper])
    check("job 48: a pod Running", wait_for(lambda: phase_reason("keeper")[0] == "Running", 10),
          phase_reason("keeper"))
    # 1 MiB of environment in 16 variables (Linux caps one exec string at 128 KiB)
    big_env = [{"name": "BIG%d" % i, "value": chr(ord("a") + i) * (64 << 10)} for i in range(16)]
    seen = (f"import os,time\n"
            f"n=sum(len(os.environ.get('BIG%d'%i,'')) for i in range(16))\n"
            f"open('{d}/bigenv.len','w').write(str(n))\ntime.sleep(600)")
    code = pod48("bigenv", ["python3", "-c", seen], {"env": big_env})
    check("a pod with 1 MiB of environment is accepted by the API", code == 201, code)
    check("  it runs", wait_for(lambda: phase_reason("bigenv")[0] == "Running", 20),
          phase_reason("bigenv"))
    check("  and sees its whole environment", wait_for(
        lambda: os.path.exists(f"{d}/bigenv.len") and open(f"{d}/bigenv.len").read() == str(16 << 16),
        10), os.path.exists(f"{d}/bigenv.len") and open(f"{d}/bigenv.len").read())
    # one ConfigMap of ~1 MB used by 14 volumes: a pod_run of ~18.7 MB (base64),
    # over the agent's 16 MiB limit for one pod
    code, _ = env.api("POST", "/api/v1/namespaces/default/configmaps", {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "big-cm"},
        "data": {"blob": "y" * 1_000_000}})
    check("a ConfigMap of 1 MB", code == 201, code)
    pod48("huge", ["python3", "-c", "import time\ntime.sleep(600)"], None,
          {"volumes": [{"name": "v%d" % i, "configMap": {"name": "big-cm"}} for i in range(14)]})
    check("a pod over the link's limit is refused: Failed, reason PodTooLarge",
          wait_for(lambda: phase_reason("huge") == ("Failed", "PodTooLarge"), 20), phase_reason("huge"))
    hst = (get_pod(env, "huge") or {}).get("status", {})
    check("  its message says why", "too large" in hst.get("message", "") and
          "16777216" in hst.get("message", ""), hst.get("message"))
    check("  the job's other pods keep Running",
          phase_reason("keeper")[0] == "Running" and phase_reason("bigenv")[0] == "Running",
          (phase_reason("keeper"), phase_reason("bigenv")))
    shim48_log = open(os.path.join(d, "shim48.log")).read()
    check("  the link never broke (no reconnect, no re-attach)",
          "reconnecting" not in shim48_log and "re-attached" not in shim48_log,
          [x for x in shim48_log.split("\n") if "reconnect" in x or "exceeds" in x][:3])
    r, rc48 = env.end_job(48, 5)
    check("job 48 deregisters, its shim exits 0", r and r.get("ok") and rc48 == 0, (r, rc48))
    check("  its running pod got SIGTERM (its grace, not Orphaned)",
          os.path.exists(f"{d}/keeper.sigterm"), phase_reason("keeper"))
    agent_log = open(os.path.join(d, "agent.log")).read()
    check("  no pod of the job stopped as Orphaned",
          not [x for x in agent_log.split("\n") if "slurm-n1-48" in x and "Orphaned" in x],
          [x for x in agent_log.split("\n") if "Orphaned" in x][:3])

    service_account_volume(env, reg)


def service_account_volume(env, reg):
    """10. The kube-api-access volume the ServiceAccount admission adds to every pod (its shape as
    kube-apiserver 1.28 writes it) is filled as a kubelet fills it: a token from a TokenRequest
    bound to the pod, the kube-root-ca.crt ConfigMap's ca.crt, the namespace; the pod finds the
    API server in KUBERNETES_SERVICE_HOST/PORT and, with that token and CA, is authenticated as
    its ServiceAccount, bound to itself. A ServiceAccount that does not exist keeps the pod from
    starting, with the API's answer in an Event."""
    d = env.dir
    open(os.path.join(d, "alive_49"), "w").close()
    r = env.call("register", dict(reg, job_id=49, namespaces=["default", "notokens"]))
    check("job 49 registers", r and r.get("ok"), r)
    env.shim = env.spawn_shim(49, "shim49.log")
    code, _ = env.api("POST", "/api/v1/namespaces/default/serviceaccounts",
                      {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "trainer"}})
    check("ServiceAccount default/trainer", code == 201, code)
    ca = open(os.path.join(env.kdir, "ca.crt")).read()
    code, _ = env.api("POST", "/api/v1/namespaces/default/configmaps", {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kube-root-ca.crt"},
        "data": {"ca.crt": ca}})
    check("ConfigMap default/kube-root-ca.crt (the root CA publisher's)", code == 201, code)
    vol = {"name": "kube-api-access-t3st1", "projected": {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                                    "path": "namespace"}]}}]}}
    # Mounted where the admission mounts it: each container sees it there in its own mount
    # namespace (k8s-shim/mount_ns.h), whichever user runs the shim.
    sa_dir = "/var/run/secrets/kubernetes.io/serviceaccount"
    mount = {"volumeMounts": [{"name": "kube-api-access-t3st1", "mountPath": sa_dir,
                               "readOnly": True}]}

    def client(out, wait_new=False):
        """An in-cluster client: its token, CA and namespace from the volume, the API server
        from KUBERNETES_SERVICE_HOST/PORT; a SelfSubjectReview's user written to `out` (after the
        token file has changed, with wait_new)."""
        return (f"import json,os,ssl,time,urllib.request\n"
                f"v='{sa_dir}'\n"
                f"first=open(v+'/token').read()\n"
                f"while {wait_new} and open(v+'/token').read()==first: time.sleep(0.2)\n"
                f"tok=open(v+'/token').read(); ns=open(v+'/namespace').read()\n"
                f"ctx=ssl.create_default_context(cafile=v+'/ca.crt')\n"
                f"url='https://%s:%s/apis/authentication.k8s.io/v1/selfsubjectreviews'%"
                f"(os.environ['KUBERNETES_SERVICE_HOST'],os.environ['KUBERNETES_SERVICE_PORT'])\n"
                f"req=urllib.request.Request(url,method='POST',data=json.dumps({{'apiVersion':"
                f"'authentication.k8s.io/v1','kind':'SelfSubjectReview'}}).encode(),headers={{"
                f"'Authorization':'Bearer '+tok,'Content-Type':'application/json'}})\n"
                f"r=json.load(urllib.request.urlopen(req,context=ctx))\n"
                f"open('{out}.new','w').write(json.dumps({{'ns':ns,'new':tok!=first,"
                f"'user':r['status']['userInfo']}}))\n"
                f"os.rename('{out}.new','{out}')\n"
                f"time.sleep(600)\n")

    def pod49(name, sa, ns="default", volume=vol, script=client(f"{d}/sa.json")):
        p = pod(name, ["python3", "-c", script], mount, {"serviceAccountName": sa, "volumes": [volume]})
        p["spec"]["nodeName"] = "slurm-n1-49"
        return env.api("POST", "/api/v1/namespaces/%s/pods" % ns, p)[0]

    pod49("sa-client", "trainer")
    seen = wait_for(lambda: os.path.exists(f"{d}/sa.json") and json.load(open(f"{d}/sa.json")), 30)
    check("a pod reads its token, CA and namespace from the volume and calls the API server",
          bool(seen), (get_pod(env, "sa-client") or {}).get("status"))
    user = (seen or {}).get("user", {})
    extra = user.get("extra", {})
    uid = ((get_pod(env, "sa-client") or {}).get("metadata") or {}).get("uid")
    check("  as its ServiceAccount", user.get("username") == "system:serviceaccount:default:trainer",
          user)
    check("  with a token bound to the pod (name and uid)",
          extra.get("authentication.kubernetes.io/pod-name") == ["sa-client"] and
          extra.get("authentication.kubernetes.io/pod-uid") == [uid], extra)
    check("  the namespace file says default", (seen or {}).get("ns") == "default", seen)

    pod49("sa-missing", "nobody-here")
    # A kubelet's words for a volume it cannot set up: FailedMount.
    ev = wait_for(lambda: [e for e in events_of(env, "sa-missing") if e["reason"] == "FailedMount"], 15)
    msg = (ev or [{}])[0].get("message", "")
    check("a pod of a ServiceAccount that does not exist does not start; the Event says why",
          "failed to fetch token for service account nobody-here" in msg and "not found" in msg, msg)
    check("  it stays Pending", (get_pod(env, "sa-missing") or {}).get("status", {}).get("phase")
          == "Pending", (get_pod(env, "sa-missing") or {}).get("status"))
    # Renewal: a token reported to live 10 s is requested again after 8 s and written into the
    # running pod's volume; the pod's next call with it is authenticated. (The double allows
    # lifetimes under kube-apiserver's 10-minute minimum when told.)
    env.api("POST", "/_test/controllers", {"minTokenExpiration": 5})
    short = json.loads(json.dumps(vol))
    short["projected"]["sources"][0]["serviceAccountToken"]["expirationSeconds"] = 10
    pod49("sa-renew", "trainer", volume=short, script=client(f"{d}/renew.json", wait_new=True))
    got = wait_for(lambda: os.path.exists(f"{d}/renew.json") and json.load(open(f"{d}/renew.json")),
                   30)
    check("a token past 80 % of its lifetime is renewed in the running pod's volume, and works",
          bool(got) and got.get("new") and got["user"].get("username") ==
          "system:serviceaccount:default:trainer", (got, (get_pod(env, "sa-renew") or {}).get("status")))
    env.api("POST", "/_test/controllers", {"minTokenExpiration": 600})

    # A namespace where the agent's token role is not bound (etc/rbac.yaml binds it per
    # namespace): the Event names the role to bind.
    env.api("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                           "metadata": {"name": "notokens"}})
    env.api("POST", "/api/v1/namespaces/notokens/serviceaccounts",
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "trainer"}})
    pod49("sa-forbidden", "trainer", "notokens")

    def forbidden_events():
        _, evs = env.api("GET", "/api/v1/namespaces/notokens/events")
        return [e["message"] for e in evs.get("items", [])
                if e["involvedObject"].get("name") == "sa-forbidden" and e["reason"] == "FailedMount"]
    ev = wait_for(forbidden_events, 15)
    check("without the token role in its namespace: an Event names the role to bind",
          bool(ev) and "forbidden" in ev[0] and "slurm-k8s-agent-tokens" in ev[0], ev)
    # Retried with back-off while the pod lives (a kubelet's pod sync): bound, the pod starts.
    # (the double's RBAC: the agent's role plus the token rule in notokens; the volume's CA
    # ConfigMap there too)
    env.api("POST", "/api/v1/namespaces/notokens/configmaps",
            {"metadata": {"name": "kube-root-ca.crt"}, "data": {"ca.crt": ca}})
    env.api("POST", "/_test/rbac", {"subject": "group:slurm-k8s:agent", "role": [
        "agent", {"apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"],
                  "namespaces": ["notokens"]}]})
    def forbidden_pod():
        code, p = env.api("GET", "/api/v1/namespaces/notokens/pods/sa-forbidden")
        return (p if code == 200 else {}).get("status", {})

    def started():
        st = forbidden_pod()
        cs = (st.get("containerStatuses") or [{}])[0].get("state", {})
        return st.get("phase") in ("Running", "Succeeded") and "waiting" not in cs
    check("  once the role is bound the pod starts by itself (no change of the pod)",
          wait_for(started, 30), forbidden_pod())
    env.api("POST", "/_test/rbac", {"subject": "group:slurm-k8s:agent", "role": "agent"})
    r, rc49 = env.end_job(49, 5)
    check("job 49 deregisters, its shim exits 0", r and r.get("ok") and rc49 == 0, (r, rc49))


def main():
    return shim_suite_main(ShimEnv, run)


if __name__ == "__main__":
    sys.exit(main())
