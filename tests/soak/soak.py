#!/usr/bin/python3
"""Soak test: one virtual node churning pods while the API server breaks the
agent's watches at random, for a bounded time.

The real slurm-k8s-agent (runtime=shim, shim_auth=uid) and the real
slurm-k8s-shim of one registered job (42 on n1) run against the test API
server (tests/kube/kube_test_server.py); pods are real `sh` processes. For
SOAK_SECONDS (default 120) the test keeps at most SOAK_MAX_PODS (default 6)
pods alive, each of a kind with a known correct end:

  ok         exit 0, restartPolicy Never      -> Succeeded, exit 0, restartCount 0
  fail       exit 1, restartPolicy Never      -> Failed, exit 1 (Error), restartCount 0
  crash      exit 1 N times (N = 1..2), OnFailure, then exit 0
                                              -> Succeeded, restartCount N, lastState exit 1
  forever    runs until DELETEd after 1-8 s   -> gone; it got SIGTERM; started once
  crashloop  exit 1, restartPolicy Always, DELETEd once restarted
                                              -> gone; restarted (CrashLoopBackOff between)
  flap       runs with an exec readiness probe that flaps every 2 s, DELETEd once
             Ready was seen both True and False -> gone; never restarted
Hostile kinds, beside them (k8s-shim/supervise.h):
  daemon     starts a daemon (setsid, fork) that keeps stdout, exits 0, Never
                                              -> Succeeded, exit 0, restartCount 0
  forkbomb   4 loops forking as fast as they can (one in its own session,
             ignoring SIGTERM), DELETEd after 1-4 s -> gone; SIGTERM; started once
  logbomb    writes to stdout as fast as it can, DELETEd after 1-4 s
                                              -> gone; SIGTERM; started once
No process of a hostile pod outlives it (each pod's processes carry
SOAK_POD=<name> in their environment).

Terminal pods are checked in the API when they finish, then DELETEd; a
forever, forkbomb or logbomb pod is DELETEd once its time is up and its start
line is written (Running only says its process was started). Every
container start appends "<pod uid> start <pid> <uptime>" to a file, so the
test proves that no pod ran twice: starts == restartCount + 1 (a crashloop
pod's last instance may be killed before it wrote its line, and it may restart
after the last status the test saw), every restart of a restarting pod after
its crash back-off, no start after the pod was terminal or gone, and
(sampled every second from /proc) never two live main processes for one pod.

Meanwhile a seeded RNG (seed printed; SOAK_SEED=N replays the same schedule of
kinds, delays and faults) ends every open watch every 2-10 s via
POST /_test/watches/close, abrupt (TCP drop) or clean, and sometimes makes the
API server refuse connections for 1-2 s (/_test/fault refuse).

Resource bounds (sampled every 2 s from /proc/PID/status VmRSS and
/proc/PID/fd), for the agent and for the shim: the warm-up value is the
median of the samples in the last 10 s of the warm-up (SOAK_WARMUP, default
a quarter of the run, 20-60 s). After warm-up,
  agent RSS <= warm-up + SOAK_AGENT_RSS_KIB   (default 4096 KiB)
  shim  RSS <= warm-up + SOAK_SHIM_RSS_KIB    (default 4096 KiB)
and once the churn stopped and every pod is gone, each process's open fds
are within SOAK_FD_SLACK (default 4) of the warm-up count. A failing bound
prints the series.

Once the churn stopped and every pod is gone, the shim's per-pod dirs must be
gone too (it forgets a pod deleted from the API, as the kubelet does).

At the end the job is deregistered as the plugin does it (the extern step's
deregister with grace 5 s, then the epilog's) and the test checks: the shim
exited 0, no process carrying the soak's marker is left, Node, Lease and pods
are gone, and the agent's job state and the shim's state dir are removed.
Beside the churn, when the test runs as root, a forked child as `nobody` floods
the agent socket: it keeps SOAK_FLOOD (default 300) connections open and idle
and reopens each one the agent refuses or closes (after socket_idle_timeout),
as an attacker would. The agent must refuse it beyond max_connections_per_uid
and answer root's `status` (as the prolog and the epilog would ask, on the
admin socket, which the flood cannot reach) every half second throughout,
each within 5 s.
Beside it (as any user), a forked child floods the agent's kubelet endpoint
from 127.0.0.2: SOAK_TCP_FLOOD (default 200) TCP connections that never start
TLS, each reopened as the agent closes it, at most SOAK_TCP_RATE (default
1000) connects a second. The soak's agent.conf has the default limits
(kubelet_max_connections_per_address 64, kubelet_max_connections 256) and
kubelet_handshake_timeout 5 s. Every 0.5 s the test makes, from 127.0.0.1
(the API server's address) with the test server's kubelet client
certificate, the request of the API server's pods/log proxy for a pod that
prints a line every 0.5 s (probe-logs, deleted after the churn). The flood
must be refused beyond the per-address limit (closed within half the
handshake timeout), held connections closed after the handshake timeout
(none open longer than it + 10 s, never more than the limit held at once),
and every probe answered with the pod's log within 5 s.

CPU shares. On a node the agent is a service in a cgroup of its own, a job's
pods are in the job's cgroup and another user's processes in theirs, so no
one of them takes the others' CPU, whatever it runs. Here, when run as root
where the cgroup v1 cpu controller is writable, the soak makes that
arrangement before it starts anything (SoakCgroups): `node` (the soak itself,
the test API server, the agent), `job` (the shim, so every pod), `user` (the
floods), equal cpu.shares, removed at the end. Without it the kernel's
autogroups gave each pod's session as much CPU as the agent and the whole
harness together: beside two CPU hogs the agent waited 2.4 s on the run
queue to use 0.01 s of CPU, and starting `slurm-k8s --version` took up to 6 s,
which measured the machine, not the agent. Elsewhere the soak says that the
pods share the CPU with the agent and runs all the same.

Prints check lines and `N passed, N failed`; exits 1 on a failure; leaves no
process behind (processes with the marker are killed on the way out).
"""
import http.client, json, os, random, select, shutil, signal, socket, ssl, statistics, struct
import subprocess, sys, threading, time
import urllib.error

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from sktest.env import NODE, SHIM_TIME_SCALE, ShimEnv, suite_args  # noqa: E402
from sktest.host import marked_procs, proc_rss_kib  # noqa: E402
from sktest.suite import check, run_suite, wait_for  # noqa: E402

NS = "default"
LEASE = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/" + NODE
KINDS = ["ok", "fail", "crash", "forever", "crashloop", "flap", "daemon", "forkbomb", "logbomb"]
HOSTILE = ("daemon", "forkbomb", "logbomb")
RUN_UNTIL_DELETED = ("forever", "flap", "forkbomb", "logbomb")


def min_restart_gap_s(k):
    """The shortest gap before restart k+1 of a container (k = 0 for the first restart):
    the kubelet's crash back-off (k8s-shim/backoff.h: the first restart at once, then
    10 s doubling to 5 min) at the soak's time scale, less a tenth for the timers'
    granularity."""
    if k == 0:
        return 0.0
    return min(10 * 2 ** (k - 1), 300) * float(SHIM_TIME_SCALE) * 0.9

KUBELET_PER_ADDRESS = 64  # kubelet_max_connections_per_address in the soak's agent.conf
KUBELET_HANDSHAKE_S = 5  # kubelet_handshake_timeout
PROBE_POD = "probe-logs"  # the running pod whose log the kubelet probe reads
FLOOD_ADDRESS = "127.0.0.2"  # the TCP flood's source; the API server reaches the agent from 127.0.0.1


def env_num(name, default, cast=float):
    v = os.environ.get(name, "")
    return cast(v) if v.strip() else default


class SoakCgroups:
    """The node's, the job's and another user's CPU shares (module docstring, "CPU shares"):
    cgroup v1 cpu groups node, job and user under CPU_CGROUP_ROOT/sk-soak-PID."""

    GROUPS = ("node", "job", "user")

    def __init__(self):
        self.base, self.why_not = None, None

    def setup(self):
        if os.getuid() != 0:
            self.why_not = "not root"
            return
        if not os.access(os.path.join(CPU_CGROUP_ROOT, "cgroup.procs"), os.W_OK):
            self.why_not = f"no writable cgroup v1 cpu controller at {CPU_CGROUP_ROOT}"
            return
        base = os.path.join(CPU_CGROUP_ROOT, f"sk-soak-{os.getpid()}")
        try:
            for g in self.GROUPS:
                os.makedirs(os.path.join(base, g), exist_ok=True)
            self.base = base
            self.enter("node")
        except OSError as e:
            self.why_not = f"cannot make cpu cgroups under {CPU_CGROUP_ROOT}: {e}"
            self.remove()

    def enter(self, group):
        """Moves the calling process (all its threads) into group; none when there are no groups."""
        if self.base:
            with open(os.path.join(self.base, group, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))

    def enter_job(self):
        self.enter("job")

    def enter_user(self):
        self.enter("user")

    def describe(self):
        return (f"cpu cgroups node/job/user under {self.base}, equal shares" if self.base else
                f"no cpu cgroups ({self.why_not}): the pods share the CPU with the agent")

    def remove(self):
        """Back to the root group; the groups removed (they are empty once every child is gone)."""
        if not self.base:
            return
        base, self.base = self.base, None
        try:
            with open(os.path.join(CPU_CGROUP_ROOT, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
        except OSError:
            pass
        for g in self.GROUPS:
            for _ in range(50):
                try:
                    os.rmdir(os.path.join(base, g))
                    break
                except FileNotFoundError:
                    break
                except OSError:  # EBUSY: a process of the group not reaped yet
                    time.sleep(0.1)
        try:
            os.rmdir(base)
        except OSError as e:
            print(f"     could not remove {base}: {e}")


CPU_CGROUP_ROOT = "/sys/fs/cgroup/cpu"
CGROUPS = SoakCgroups()


class SoakEnv(ShimEnv):
    def __init__(self, agent, server, shim):
        super().__init__(agent, server, shim, shutil.which("kubectl") or "kubectl")
        self.marker = "sksoak%d" % os.getpid()

    def conf_settings(self):
        # info, not verbose: an hour of churn must not fill /tmp with agent logs. The kubelet
        # endpoint's limits are the defaults (docs/security.md) but for a handshake timeout
        # short enough that the TCP flood sees it many times in a short run.
        return dict(super().conf_settings(), log_level="info", kubelet_max_connections=256,
                    kubelet_max_connections_per_address=KUBELET_PER_ADDRESS,
                    kubelet_handshake_timeout=f"{KUBELET_HANDSHAKE_S}s")

    def start_shim(self):
        # The shim, and so every pod, in the job's cgroup (see "CPU shares" above).
        self.shim = self.spawn_shim(42, "shim.log", "verbose", preexec_fn=CGROUPS.enter_job)

    def safe_api(self, method, path, body=None, timeout=20.0):
        """env.api that rides out a refuse fault: retries connection errors
        for up to `timeout` s; (0, {}) when the server never answered."""
        end = time.time() + timeout
        while True:
            try:
                return self.api(method, path, body)
            except (urllib.error.URLError, OSError):
                if time.time() > end:
                    return 0, {}
                time.sleep(0.2)

    def stop(self):
        super().stop()
        left = marked_procs(self.marker, by_env=True)
        for pid in left:  # never leave a pod process behind, even on failure
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        if left:
            print("     killed %d leftover pod processes on the way out" % len(left))


def proc_sample(pid):
    """(VmRSS KiB, open fd count) of pid, or None when it is gone."""
    try:
        return proc_rss_kib(pid), len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


# ---- pods ----

def script(kind, starts, n_crash):
    # Kubernetes expands $(VAR) in command and args and turns $$ into $: the
    # shell's $$ is written $$$$, and command substitution uses backquotes.
    # A start records the system's uptime too (a builtin read, no process).
    rec = (f'read up rest < /proc/uptime; echo "$SLURM_K8S_POD_UID start $$$$ $up" >> {starts}; ')
    if kind == "ok":
        return rec + "sleep 0.3; exit 0"
    if kind == "fail":
        return rec + "sleep 0.3; exit 1"
    if kind == "crash":
        return (rec + f'n=`grep -c "^$SLURM_K8S_POD_UID start" {starts}`; sleep 0.2; '
                f'[ "$n" -gt {n_crash} ] && exit 0; exit 1')
    if kind == "crashloop":
        return rec + "sleep 0.3; exit 1"
    term = f'trap \'echo "$SLURM_K8S_POD_UID term $$$$" >> {starts}; exit 0\' TERM; '
    if kind == "daemon":
        # setsid -f: the daemon's fork never carries the main's command line
        # (scan_overlaps counts those).
        return (rec + f'f={os.path.dirname(starts)}/daemon-$SLURM_K8S_POD_UID; '
                'setsid -f sh -c \'echo $$$$ > "$0.tmp"; mv "$0.tmp" "$0"; exec sleep 1000\' "$f"; '
                'while [ ! -s "$f" ]; do sleep 0.05; done; exit 0')
    if kind == "forkbomb":
        loop = "while :; do sh -c :; done"
        return (term + rec + f"for i in 1 2 3; do sh -c '{loop}' & done; "
                f"setsid -f sh -c 'trap \"\" TERM; {loop}'; while :; do sleep 0.5; done")
    if kind == "logbomb":
        return term + rec + "yes 0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz"
    # forever, flap: record the SIGTERM, then exit 0
    return (f'trap \'echo "$SLURM_K8S_POD_UID term $$$$" >> {starts}; exit 0\' TERM; ' + rec +
            "while :; do sleep 0.5; done")


def manifest(env, name, kind, starts, n_crash):
    c = {"name": "main", "image": "busybox:1.36",
         "command": ["sh", "-c", script(kind, starts, n_crash), f"{env.marker}:{name}"],
         "env": [{"name": "SOAK_MARK", "value": env.marker}, {"name": "SOAK_POD", "value": name}]}
    if kind == "flap":
        # period 5 s at the shim's test time scale 0.2 -> a probe a second; its timeout
        # too (the default 1 s would be 0.2 s, which a loaded machine misses)
        c["readinessProbe"] = {"exec": {"command": ["sh", "-c", "test $(( $(date +%s) % 4 )) -lt 2"]},
                               "periodSeconds": 5, "timeoutSeconds": 5, "failureThreshold": 1,
                               "successThreshold": 1}
    policy = {"ok": "Never", "fail": "Never", "crash": "OnFailure", "daemon": "Never"}.get(kind, "Always")
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"soak": kind}},
            "spec": {"nodeName": NODE, "terminationGracePeriodSeconds": 5, "restartPolicy": policy,
                     "containers": [c],
                     "tolerations": [{"key": "slurm-k8s/job", "operator": "Exists"}]}}


def cstatus(p):
    return ((p or {}).get("status", {}).get("containerStatuses") or [{}])[0]


def ready(p):
    for c in (p or {}).get("status", {}).get("conditions", []):
        if c["type"] == "Ready":
            return c["status"]
    return None


class Tracked:
    """One soak pod: created, watched through the API, finished or deleted."""
    TIMEOUT = 90.0  # a pod not at its end within this is a failure

    def __init__(self, name, kind, rng, now):
        self.name, self.kind = name, kind
        self.n_crash = rng.randint(1, 2) if kind == "crash" else 0
        self.delete_after = {"forever": rng.uniform(1, 8), "forkbomb": rng.uniform(1, 4),
                             "logbomb": rng.uniform(1, 4)}.get(kind, 0.0)
        self.created = now
        self.uid = None
        self.state = "new"  # new -> alive -> deleting -> gone
        self.deleted_at = self.done_at = None
        self.seen_ready = set()
        self.max_restarts = 0
        self.final = None  # the API's status when it finished (terminal kinds)
        self.errors = []

    def terminal_kind(self):
        return self.kind in ("ok", "fail", "crash", "daemon")

    def expect(self):
        """Checks the status the API showed when the pod finished."""
        st = self.final
        cs = cstatus({"status": st})
        term = cs.get("state", {}).get("terminated") or {}
        want_phase, want_code, want_reason = {
            "ok": ("Succeeded", 0, "Completed"), "fail": ("Failed", 1, "Error"),
            "crash": ("Succeeded", 0, "Completed"), "daemon": ("Succeeded", 0, "Completed")}[self.kind]
        bad = []
        if st.get("phase") != want_phase:
            bad.append(f"phase {st.get('phase')} != {want_phase}")
        if term.get("exitCode") != want_code or term.get("reason") != want_reason:
            bad.append(f"terminated {term} != exit {want_code} {want_reason}")
        if cs.get("restartCount", 0) != self.n_crash:
            bad.append(f"restartCount {cs.get('restartCount')} != {self.n_crash}")
        if self.kind == "crash" and (cs.get("lastState", {}).get("terminated") or {}).get("exitCode") != 1:
            bad.append(f"lastState {cs.get('lastState')} is not exit 1")
        if ready({"status": st}) != "False" or cs.get("ready"):
            bad.append("a finished pod is still Ready")
        return bad


class Soak:
    def __init__(self, env, seconds, seed):
        self.env, self.seconds, self.seed = env, seconds, seed
        self.rng = random.Random(seed)
        self.fault_rng = random.Random(seed + 1)  # independent of how many pods ran
        self.starts = os.path.join(env.dir, "starts.log")
        open(self.starts, "w").close()
        self.start_times = {}  # pod uid -> uptime of each start
        self.pods = {}
        self.max_alive = int(env_num("SOAK_MAX_PODS", 6))
        # SOAK_KINDS=ok,fail narrows the mix (to find which kind a growth follows)
        self.kinds = [k for k in os.environ.get("SOAK_KINDS", "").split(",") if k in KINDS] or KINDS
        self.stop = threading.Event()
        self.breaks = {"abrupt": 0, "clean": 0, "refuse": 0}
        self.samples = []  # (t, agent (rss, fds), shim (rss, fds))
        self.overlaps = []
        self.api_errors = 0
        self.t0 = time.time()

    # -- background: faults and resource samples --
    def breaker(self):
        r = self.fault_rng
        while not self.stop.wait(r.uniform(2, 10)):
            if r.random() < 0.1:
                self.breaks["refuse"] += 1
                self.env.safe_api("POST", "/_test/fault", {"mode": "refuse", "seconds": r.uniform(1, 2)})
                continue
            abrupt = r.random() < 0.5
            self.breaks["abrupt" if abrupt else "clean"] += 1
            self.env.safe_api("POST", "/_test/watches/close", {"abrupt": abrupt})

    def sampler(self):
        while not self.stop.wait(2.0):
            self.samples.append((time.time() - self.t0, proc_sample(self.env.agent.pid),
                                 proc_sample(self.env.shim.pid)))

    # -- the starts file --
    def start_lines(self):
        out = {}
        self.start_times = {}
        for line in open(self.starts):
            f = line.split()
            if len(f) == 3:  # term
                out.setdefault(f[0], []).append((f[1], int(f[2])))
            elif len(f) == 4:  # start, with the uptime
                out.setdefault(f[0], []).append((f[1], int(f[2])))
                self.start_times.setdefault(f[0], []).append(float(f[3]))
        return out

    def starts_of(self, lines, uid):
        return [pid for what, pid in lines.get(uid, []) if what == "start"]

    def restart_gaps(self, uid):
        """Seconds between consecutive starts of the pod (start_lines() read them)."""
        t = self.start_times.get(uid, [])
        return [b - a for a, b in zip(t, t[1:])]

    def scan_overlaps(self):
        """Two live main processes of one pod is a pod run twice."""
        per = {}
        marked = marked_procs(self.env.marker)
        for pid in marked:
            try:
                args = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
                ppid = int(open(f"/proc/{pid}/stat").read().rsplit(") ", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if ppid in marked:  # sh's own fork (a command, `...`), not a second run
                continue
            name = next((a.decode().split(":", 1)[1] for a in args
                         if a.startswith(self.env.marker.encode() + b":")), None)
            if name:
                per.setdefault(name, []).append(pid)
        for name, pids in per.items():
            if len(pids) > 1:
                self.overlaps.append((name, pids))

    # -- the churn --
    def create(self, now, i):
        kind = self.rng.choice(self.kinds)
        t = Tracked(f"s{i:04d}-{kind}", kind, self.rng, now)
        code, p = self.env.safe_api("POST", f"/api/v1/namespaces/{NS}/pods",
                                    manifest(self.env, t.name, kind, self.starts, t.n_crash))
        if code == 409:
            # safe_api retried a POST whose answer was lost (a timeout on a loaded machine, a
            # refuse fault) after the server had created the pod: it is ours, track it.
            code, p = self.env.safe_api("GET", f"/api/v1/namespaces/{NS}/pods/{t.name}")
            code = 201 if code == 200 else code
        if code != 201:
            self.api_errors += 1
            return
        t.uid, t.state = p["metadata"]["uid"], "alive"
        self.pods[t.name] = t

    def delete(self, t, now):
        code, _ = self.env.safe_api("DELETE", f"/api/v1/namespaces/{NS}/pods/{t.name}")
        if code in (200, 202, 404):
            t.state, t.deleted_at = "deleting", now
        else:
            self.api_errors += 1

    def step(self, t, p, now, ending):
        if t.state == "deleting":
            if p is None:
                t.state, t.done_at = "gone", now
                t.starts_when_gone = len(self.starts_of(self.start_lines(), t.uid))
            elif now - t.deleted_at > self.env_timeout():
                t.errors.append(f"not gone {now - t.deleted_at:.0f} s after DELETE: {p.get('status')}")
                t.state, t.done_at = "gone", now
                t.starts_when_gone = -1
            return
        if p is None:
            t.errors.append("vanished from the API without a DELETE")
            t.state, t.done_at, t.starts_when_gone = "gone", now, -1
            return
        st = p.get("status", {})
        cs = cstatus(p)
        t.max_restarts = max(t.max_restarts, cs.get("restartCount", 0))
        if ready(p):
            t.seen_ready.add(ready(p))
        if t.terminal_kind():
            if st.get("phase") in ("Succeeded", "Failed"):
                t.final = st
                t.errors += t.expect()
                self.delete(t, now)
            elif now - t.created > Tracked.TIMEOUT:
                t.errors.append(f"not finished after {Tracked.TIMEOUT:.0f} s: {st}")
                self.delete(t, now)
            return
        if st.get("phase") in ("Succeeded", "Failed"):
            t.errors.append(f"a {t.kind} pod ended: {st}")
            self.delete(t, now)
            return
        # Running is posted once the container's process is started, as a kubelet does; its
        # script may not have run a line yet on a loaded machine. A pod whose checks need its
        # SIGTERM trap and its start line (forever, forkbomb, logbomb) is DELETEd only once its
        # start line is there: the trap is set before it.
        running = st.get("phase") == "Running"
        started = (t.kind not in ("forever", "forkbomb", "logbomb")
                   or bool(self.starts_of(self.lines, t.uid)))
        timed = running and started and now - t.created >= t.delete_after
        due = {"forever": timed, "forkbomb": timed, "logbomb": timed,
               "crashloop": t.max_restarts >= 1,
               "flap": t.seen_ready >= {"True", "False"}}[t.kind]
        late = now - t.created > Tracked.TIMEOUT
        if late:
            t.errors.append(f"{t.kind}: expected state not seen in {Tracked.TIMEOUT:.0f} s: {st}")
        if due or late or (ending and running and started):
            self.delete(t, now)

    def env_timeout(self):
        return 30.0

    def live(self):
        return [t for t in self.pods.values() if t.state in ("alive", "deleting")]

    def churn(self):
        t0 = time.time()
        end = t0 + self.seconds
        i, last_scan = 0, 0.0
        while True:
            now = time.time()
            ending = now >= end
            if not ending:
                while len(self.live()) < self.max_alive:
                    i += 1
                    self.create(now, i)
            code, lst = self.env.safe_api("GET", f"/api/v1/namespaces/{NS}/pods?labelSelector=soak")
            if code != 200:
                self.api_errors += 1
                time.sleep(0.5)
                continue
            by_name = {p["metadata"]["name"]: p for p in lst.get("items", [])}
            self.lines = self.start_lines()
            for t in self.live():
                p = by_name.get(t.name)
                if p is not None and p["metadata"]["uid"] != t.uid:
                    p = None
                self.step(t, p, now, ending)
            if now - last_scan >= 1.0:
                self.scan_overlaps()
                last_scan = now
            if ending and not self.live():
                return
            if now > end + 120:
                print("     pods still not gone 120 s after the churn ended: " +
                      ", ".join(t.name for t in self.live()))
                return
            time.sleep(0.3)


def bound_check(label, series, warm_t, rss_slack, fd_slack, final, pods_after):
    """series: [(t, (rss, fds) or None)]. Warm-up value: the median of the
    samples in the 10 s before warm_t."""
    pts = [(t, s) for t, s in series if s]
    warm = [s for t, s in pts if warm_t - 10 <= t <= warm_t] or [s for t, s in pts if t <= warm_t][-1:]
    after = [(t, s) for t, s in pts if t > warm_t]
    if not warm or not after:
        check(f"{label}: enough resource samples", False, pts)
        return
    rss0 = statistics.median(s[0] for s in warm)
    fd0 = statistics.median(s[1] for s in warm)
    peak = max(s[0] for _, s in after)
    text = " ".join(f"{t:.0f}s:{s[0] // 1024}.{(s[0] % 1024) * 10 // 1024}M/{s[1]}fd" for t, s in pts[::max(1, len(pts) // 24)])
    print(f"     {label}: warm-up RSS {rss0:.0f} KiB fds {fd0:.0f}; after warm-up peak RSS {peak} KiB "
          f"(+{peak - rss0:.0f}, {(peak - rss0) / max(1, pods_after):.1f} KiB per pod started after "
          f"warm-up), fds max {max(s[1] for _, s in after)}, final {final}")
    check(f"{label}: RSS after warm-up <= warm-up + {rss_slack} KiB", peak <= rss0 + rss_slack, text)
    check(f"{label}: open fds back within {fd_slack} of warm-up once the pods are gone",
          final is not None and final[1] <= fd0 + fd_slack, (final, text))


NOBODY = 65534


def socket_flood(path, n, stop_fd, report_fd):
    """In a forked child, as nobody: up to n idle connections to the agent socket, each reopened
    as soon as the agent refuses or closes it, until stop_fd is readable; then writes
    {"opened", "refused", "closed_idle"} to report_fd and exits."""
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)
    conns, counts = set(), {"opened": 0, "refused": 0, "closed_idle": 0}
    poller = select.poll()
    poller.register(stop_fd, select.POLLIN)
    while True:
        while len(conns) < n:
            c = socket.socket(socket.AF_UNIX)
            try:
                c.connect(path)
            except OSError:
                c.close()
                break
            counts["opened"] += 1
            conns.add(c)
            poller.register(c, select.POLLIN)
        events = dict(poller.poll(200))
        if stop_fd in events:
            break
        for c in [c for c in conns if c.fileno() in events]:
            try:
                data = c.recv(65536)
            except OSError:
                data = b""
            counts["refused" if b"too many connections" in data else "closed_idle"] += 1
            poller.unregister(c)
            conns.discard(c)
            c.close()
    os.write(report_fd, json.dumps(counts).encode())
    os._exit(0)


class Flood:
    """The socket flood (socket_flood in a child) and root's probe of the agent beside it."""

    def __init__(self, env, n):
        self.env, self.pid = env, None
        self.cli = os.path.join(os.path.dirname(os.path.dirname(env.agent_bin)), "cli", "slurm-k8s")
        self.probes, self.slow, self.failed, self.slowest = 0, [], [], 0.0
        if os.getuid() != 0 or n <= 0:
            return
        os.chmod(env.dir, 0o711)  # nobody reaches the socket (mode 0666)
        self.stop_r, self.stop_w = os.pipe()
        self.rep_r, rep_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                CGROUPS.enter_user()
                socket_flood(os.path.join(env.dir, "agent.sock"), n, self.stop_r, rep_w)
            finally:
                os._exit(1)
        os.close(rep_w)
        self.pid = pid

    def probe(self, stop):
        while self.pid and not stop.wait(0.5):
            t0 = time.time()
            # The plugin's and the CLI's client (common/agent_call.cc); as root it talks to
            # the admin socket, whose listen queue the flood's connect loop cannot fill.
            r = subprocess.run([self.cli, "--socket", os.path.join(self.env.dir, "agent.sock"),
                                "--timeout", "10", "status"], capture_output=True, text=True,
                               timeout=30)
            took = time.time() - t0
            self.probes += 1
            self.slowest = max(self.slowest, took)
            if r.returncode != 0:
                self.failed.append(r.stdout + r.stderr)
            elif took > 5:
                self.slow.append(round(took, 2))

    def finish(self):
        """Stops the child; its counts, or None when there was no flood."""
        if not self.pid:
            return None
        os.write(self.stop_w, b"x")
        _, status = os.waitpid(self.pid, 0)
        data = os.read(self.rep_r, 4096)
        return json.loads(data) if data and status == 0 else {"status": status}


def tcp_flood(port, src, n, rate, handshake_s, stop_fd, report_fd):
    """In a forked child: up to n TCP connections from address src to the kubelet endpoint on
    127.0.0.1:port that never start TLS, each reopened as soon as the agent closes it (at most
    `rate` connects a second, so that the flood is the same on any machine: unpaced it made
    up to 6 400 a second here, as the load allowed), until stop_fd is readable or its write
    end is gone; then writes its counts to report_fd and exits.
    A connection the agent closed within half the handshake timeout counts as refused (beyond
    the per-address limit it closes one at once), a later close as timed out. Also records the
    longest a connection stayed open and the most open at once for longer than half the
    handshake timeout (those the agent holds; a refused one is closed in milliseconds), and the
    CPU seconds the child used."""
    counts = {"opened": 0, "refused": 0, "closed_timeout": 0, "connect_errors": 0,
              "longest_s": 0.0, "most_held": 0}
    conns = {}  # fd -> (socket, opened at)
    poller = select.poll()
    poller.register(stop_fd, select.POLLIN)
    # Our close after the agent's sends a reset, so the agent's side leaves no TIME_WAIT
    # behind for each of the thousands of connections.
    linger = struct.pack("ii", 1, 0)
    half, last_count = handshake_s / 2, 0.0
    tokens, last_fill = float(n), time.monotonic()
    while True:
        now = time.monotonic()
        tokens, last_fill = min(float(n), tokens + (now - last_fill) * rate), now
        while len(conns) < n and tokens >= 1:
            tokens -= 1
            c = socket.socket()
            c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
            c.settimeout(5)
            try:
                c.bind((src, 0))
                c.connect(("127.0.0.1", port))
            except OSError:
                c.close()
                counts["connect_errors"] += 1
                break
            counts["opened"] += 1
            conns[c.fileno()] = (c, time.monotonic())
            poller.register(c, select.POLLIN)
        events = dict(poller.poll(100 if len(conns) >= n else 10))
        if stop_fd in events:
            break
        now = time.monotonic()
        for fd in events:
            if fd in conns:
                c, opened = conns.pop(fd)
                poller.unregister(fd)
                held = now - opened
                counts["refused" if held < half else "closed_timeout"] += 1
                counts["longest_s"] = max(counts["longest_s"], round(held, 2))
                c.close()
        if now - last_count >= 0.1:
            last_count = now
            counts["most_held"] = max(counts["most_held"],
                                      sum(1 for _, opened in conns.values() if now - opened >= half))
    now = time.monotonic()
    for c, opened in conns.values():
        counts["longest_s"] = max(counts["longest_s"], round(now - opened, 2))
    counts["cpu_s"] = round(sum(os.times()[:2]), 1)
    os.write(report_fd, json.dumps(counts).encode())
    os._exit(0)


class TcpFlood:
    """The TCP flood on the agent's kubelet endpoint (tcp_flood in a child, from FLOOD_ADDRESS)
    and, beside it, a probe of what `kubectl logs` needs: every 0.5 s, from 127.0.0.1 with the
    test API server's kubelet client certificate, the request its pods/log proxy makes
    (GET /containerLogs/NS/POD/main over TLS) for PROBE_POD, a pod that prints a line every
    0.5 s for the whole run. The probe talks to the endpoint directly, not through the API
    server, whose refuse faults (Soak.breaker) would fail it for reasons of their own."""

    def __init__(self, env, n, rate):
        self.env, self.n, self.rate, self.pid, self.port, self.pod = env, n, rate, None, None, False
        self.probes, self.slow, self.failed, self.times = 0, [], [], []
        if n <= 0:
            return
        try:
            with socket.socket() as probe_bind:
                probe_bind.bind((FLOOD_ADDRESS, 0))
        except OSError as e:
            print(f"     TCP flood skipped: cannot bind {FLOOD_ADDRESS} ({e})")
            return
        code, n_obj = wait_for(lambda: (lambda c_n: c_n if c_n[0] == 200 and c_n[1].get("status", {}).get(
            "daemonEndpoints") else None)(env.safe_api("GET", "/api/v1/nodes/" + NODE)), 15) or (0, {})
        self.port = n_obj.get("status", {}).get("daemonEndpoints", {}).get("kubeletEndpoint", {}).get("Port")
        check("the Node carries the kubelet endpoint's port", self.port, n_obj.get("status"))
        self.ctx = ssl.create_default_context(cafile=os.path.join(env.kdir, "ca.crt"))
        self.ctx.load_cert_chain(os.path.join(env.kdir, "kubelet-client.crt"),
                                 os.path.join(env.kdir, "kubelet-client.key"))
        script = 'trap "exit 0" TERM; while :; do echo soak-probe tick; sleep 0.5; done'
        code, _ = env.safe_api("POST", f"/api/v1/namespaces/{NS}/pods", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": PROBE_POD},
            "spec": {"nodeName": NODE, "terminationGracePeriodSeconds": 5,
                     "tolerations": [{"key": "slurm-k8s/job", "operator": "Exists"}],
                     "containers": [{"name": "main", "image": "busybox:1.36",
                                     "command": ["sh", "-c", script, f"{env.marker}:{PROBE_POD}"],
                                     "env": [{"name": "SOAK_MARK", "value": env.marker}]}]}})
        self.pod = code == 201
        served = self.port and self.pod and wait_for(lambda: self.read_log()[0], 30, 0.5)
        check("the probe pod runs and the kubelet endpoint serves its log", served,
              (code, self.port and self.read_log()))
        if not served:
            self.port = None

    def read_log(self):
        """(whether the pod's log came, HTTP status or the error, seconds to connect and finish
        TLS, the body's start) of the probe's request."""
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx, timeout=10,
                                           source_address=("127.0.0.1", 0))
        t0 = time.time()
        handshake = None
        try:
            conn.connect()
            handshake = round(time.time() - t0, 2)
            conn.request("GET", f"/containerLogs/{NS}/{PROBE_POD}/main?tailLines=1")
            r = conn.getresponse()
            body = r.read(65536).decode("utf-8", "replace")
            return r.status == 200 and "soak-probe tick" in body, r.status, handshake, body[:200]
        except (OSError, ssl.SSLError, http.client.HTTPException) as e:
            return False, repr(e), handshake, ""
        finally:
            conn.close()

    def start(self):
        """Forks the flood (after Flood's fork, so that child holds none of these pipes)."""
        if not self.port:
            return
        self.stop_r, self.stop_w = os.pipe()
        self.rep_r, rep_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(self.stop_w)  # the parent's end alone: its death ends the flood too
                CGROUPS.enter_user()
                tcp_flood(self.port, FLOOD_ADDRESS, self.n, self.rate, KUBELET_HANDSHAKE_S,
                          self.stop_r, rep_w)
            finally:
                os._exit(1)
        os.close(rep_w)
        os.close(self.stop_r)
        self.pid = pid

    def probe(self, stop):
        while self.pid and not stop.wait(0.5):
            t0 = time.time()
            got = self.read_log()
            took = time.time() - t0
            self.probes += 1
            self.times.append(took)
            if not got[0]:
                self.failed.append((round(took, 1),) + got[1:])
            elif took > 5:
                self.slow.append((round(took, 2), "TLS after", got[2]))

    def finish(self):
        """Stops the child; its counts, or None when there was no flood."""
        if not self.pid:
            return None
        os.write(self.stop_w, b"x")
        _, status = os.waitpid(self.pid, 0)
        data = os.read(self.rep_r, 4096)
        return json.loads(data) if data and status == 0 else {"status": status}

    def remove_pod(self):
        """Deletes the probe pod and waits until it is gone (the checks after the churn count
        the shim's pods and fds)."""
        if not self.pod:
            return
        self.env.safe_api("DELETE", f"/api/v1/namespaces/{NS}/pods/{PROBE_POD}")
        check("the probe pod is gone after its DELETE", wait_for(lambda: self.env.safe_api(
            "GET", f"/api/v1/namespaces/{NS}/pods/{PROBE_POD}")[0] == 404, 30, 0.5))


def run(env):
    seconds = env_num("SOAK_SECONDS", 120.0)
    seed = int(env_num("SOAK_SEED", int(time.time() * 1000) % 1000000, int))
    warm_t = env_num("SOAK_WARMUP", min(60.0, max(20.0, seconds / 4)))
    print(f"     soak {seconds:.0f} s, seed {seed} (replay: SOAK_SEED={seed}), warm-up {warm_t:.0f} s")
    print(f"     {CGROUPS.describe()}")
    open(os.path.join(env.dir, "alive_42"), "w").close()
    reg = {"job_id": 42, "slurm_node": "n1", "user": os.environ.get("USER", "me"),
           "uid": os.getuid(), "gid": os.getgid(), "partition": "gpu", "cluster": "comp",
           "gpus": [0, 1], "cpus": 4, "memory_mib": 8192, "namespaces": [NS]}
    r = env.call("register", reg)
    check("register", r and r.get("ok"), r)
    env.start_shim()
    check("shim attached", wait_for(lambda: "shim attached" in open(os.path.join(env.dir, "agent.log")).read(), 15))

    tcp = TcpFlood(env, env_num("SOAK_TCP_FLOOD", 200, int), env_num("SOAK_TCP_RATE", 1000.0))
    s = Soak(env, seconds, seed)
    flood = Flood(env, env_num("SOAK_FLOOD", 300, int))
    tcp.start()
    threads = [threading.Thread(target=s.breaker, daemon=True), threading.Thread(target=s.sampler, daemon=True),
               threading.Thread(target=flood.probe, args=(s.stop,), daemon=True),
               threading.Thread(target=tcp.probe, args=(s.stop,), daemon=True)]
    for th in threads:
        th.start()
    try:
        s.churn()
    finally:
        s.stop.set()
        for th in threads:
            th.join(15)
        counts = flood.finish()
        tcp_counts = tcp.finish()
    if counts is not None:
        print(f"     socket flood as nobody: {counts}; root's probes {flood.probes}, "
              f"slowest {flood.slowest:.2f} s")
        check("the flood was refused beyond max_connections_per_uid and its idle connections closed",
              counts.get("refused", 0) > 0 and counts.get("closed_idle", 0) > 0, counts)
        check("root's status answered beside the socket flood, each within 5 s",
              flood.probes > 0 and not flood.failed and not flood.slow, (flood.failed[:3], flood.slow[:10]))
    else:
        print("     socket flood skipped (needs root to connect as nobody)")
    if tcp_counts is not None:
        print(f"     TCP flood from {FLOOD_ADDRESS} on the kubelet endpoint: {tcp_counts}; log probes "
              f"{tcp.probes}" + (f", median {statistics.median(tcp.times):.2f} s, max {max(tcp.times):.2f} s"
                                 if tcp.times else ""))
        limited = (tcp_counts.get("closed_timeout", 0) > 0
                   and (tcp_counts.get("refused", 0) > 0 or tcp.n <= KUBELET_PER_ADDRESS)
                   and tcp_counts.get("most_held", 0) <= KUBELET_PER_ADDRESS
                   and tcp_counts.get("longest_s", 1e9) <= KUBELET_HANDSHAKE_S + 10)
        check(f"the TCP flood was refused beyond kubelet_max_connections_per_address "
              f"({KUBELET_PER_ADDRESS}) and closed after kubelet_handshake_timeout ({KUBELET_HANDSHAKE_S} s)",
              limited, tcp_counts)
        check("the kubelet endpoint served the probe pod's log from 127.0.0.1 beside the TCP flood, "
              "each within 5 s", tcp.probes > 0 and not tcp.failed and not tcp.slow,
              (len(tcp.failed), tcp.failed[:3], tcp.slow[:10]))
    tcp.remove_pod()
    env.safe_api("DELETE", "/_test/fault")
    time.sleep(1.0)  # let the last pod's state settle before the final sample
    final_agent, final_shim = proc_sample(env.agent.pid), proc_sample(env.shim.pid)

    pods = list(s.pods.values())
    kinds = {k: len([t for t in pods if t.kind == k]) for k in KINDS}
    print(f"     pods run {len(pods)} {kinds}; watch breaks {s.breaks}; API errors seen by the test "
          f"{s.api_errors}")
    lines = s.start_lines()
    bad = [(t.name, t.errors) for t in pods if t.errors]
    check("every pod reached its correct end (status in the API when it finished, or gone)",
          not bad and all(t.state == "gone" for t in pods), bad[:10])
    check("at least a pod of each kind ran", all(kinds[k] for k in s.kinds), kinds)
    twice = []
    for t in pods:
        st = s.starts_of(lines, t.uid)
        if t.terminal_kind() and t.final is not None and len(st) != t.n_crash + 1:
            twice.append((t.name, "starts", len(st), "restartCount", t.n_crash))
        if t.kind in RUN_UNTIL_DELETED and len(st) != 1:
            twice.append((t.name, "starts", len(st)))
        # A crashloop pod is deleted while it restarts: its last instance may
        # get the SIGTERM before its first line ran, so it may not have
        # recorded its start (>= the restartCount seen, not == + 1). It may
        # also restart after the last status the test saw (a slow machine
        # polls late), so no upper bound on the count; instead every restart
        # waited for its back-off (the kubelet's: the first at once, then 10 s,
        # doubling; scaled here), which a second run of the pod or a skipped
        # back-off would not have.
        if t.kind == "crashloop" and len(st) < t.max_restarts:
            twice.append((t.name, "starts", len(st), "restartCount seen", t.max_restarts))
        if t.kind in ("crashloop", "crash"):
            short = [(k, round(g, 2)) for k, g in enumerate(s.restart_gaps(t.uid))
                     if g < min_restart_gap_s(k)]
            if short:
                twice.append((t.name, "restarted within its back-off (restart, gap s)", short))
        if getattr(t, "starts_when_gone", -1) >= 0 and len(st) != t.starts_when_gone:
            twice.append((t.name, "started after it was gone", len(st), t.starts_when_gone))
    check("no pod ran twice (starts == restartCount + 1, none after the end)", not twice, twice[:10])
    check("never two live processes for one pod", not s.overlaps, s.overlaps[:10])
    noterm = [t.name for t in pods if t.kind in RUN_UNTIL_DELETED and t.state == "gone" and
              not any(w == "term" for w, _ in lines.get(t.uid, []))]
    check("every deleted running pod got SIGTERM", not noterm, noterm[:10])
    check("the agent kept running", env.agent.poll() is None, env.agent.returncode)

    def hostile_left():
        return [(t.name, marked_procs(f"SOAK_POD={t.name}\0", by_env=True))
                for t in pods if t.kind in HOSTILE and t.state == "gone"
                and marked_procs(f"SOAK_POD={t.name}\0", by_env=True)]
    wait_for(lambda: not hostile_left(), 5)
    check("no process of a hostile pod (daemon, fork bomb, log bomb) outlived it",
          not hostile_left(), hostile_left()[:10])
    pods_dir = os.path.join(env.dir, "shim", "job_42_n1", "pods")
    def pod_dirs():
        return os.listdir(pods_dir) if os.path.isdir(pods_dir) else []
    wait_for(lambda: not pod_dirs(), 5)
    check("the shim removed the dirs of the deleted pods (logs, state) while the job runs",
          not pod_dirs(), (len(pod_dirs()), pod_dirs()[:5]))

    rss_agent = env_num("SOAK_AGENT_RSS_KIB", 4096, int)
    rss_shim = env_num("SOAK_SHIM_RSS_KIB", 4096, int)
    fd_slack = env_num("SOAK_FD_SLACK", 4, int)
    after = len([t for t in pods if t.created - s.t0 > warm_t])
    bound_check("agent", [(t, a) for t, a, _ in s.samples], warm_t, rss_agent, fd_slack, final_agent, after)
    bound_check("shim", [(t, b) for t, _, b in s.samples], warm_t, rss_shim, fd_slack, final_shim, after)

    # the end of the job
    r, rc = env.end_job(42, 5)
    check("deregister ok", r and r.get("ok"), r)
    check("the shim exits 0 after shutdown", rc == 0, rc)
    # The epilog's deregister follows the extern step's (spank/hooks_prolog.cc):
    # the job is no longer registered, and the agent removes the shim's dir.
    r = env.call("deregister", {"job_id": 42, "slurm_node": "n1", "grace_s": 5, "reason": "JobEnded"})
    check("the epilog's second deregister ok", r and r.get("ok"), r)
    left = (wait_for(lambda: not marked_procs(env.marker, by_env=True), 5)
            or marked_procs(env.marker, by_env=True))
    check("no process with the soak's marker left", left is True, left)
    check("Node gone", env.safe_api("GET", "/api/v1/nodes/" + NODE)[0] == 404)
    check("Lease gone", env.safe_api("GET", LEASE)[0] == 404)
    _, allp = env.safe_api("GET", "/api/v1/pods")
    check("no pods left", not [p["metadata"]["name"] for p in allp.get("items", [])],
          [p["metadata"]["name"] for p in allp.get("items", [])][:10])
    jobs = os.path.join(env.dir, "state", "jobs")
    check("agent job state removed", not os.listdir(jobs) if os.path.isdir(jobs) else True,
          os.listdir(jobs) if os.path.isdir(jobs) else None)
    shim_dir = os.path.join(env.dir, "shim")
    def shim_dirs():
        return os.listdir(shim_dir) if os.path.isdir(shim_dir) else []
    wait_for(lambda: not shim_dirs(), 5)
    check("shim state dir removed", not shim_dirs(), shim_dirs())


def main():
    a = suite_args(shim=True)
    if not os.path.exists(a.server) or not shutil.which("openssl"):
        print("test API server or openssl missing; skipping")
        return 77
    CGROUPS.setup()  # before any child, so that each starts in its group
    try:
        return run_suite(SoakEnv(a.agent, a.server, a.shim), run, ("agent.log", "shim.log"))
    finally:
        CGROUPS.remove()


if __name__ == "__main__":
    sys.exit(main())
