#!/usr/bin/python3
"""Job start overhead of spank_k8s.so on the real local Slurm (tests/slurm).

Three variants of the same job (`sbatch -N<nodes> --gres=gpu:2`, a script
whose first command records the time):
  off       plugstack.conf empty
  on        plugin loaded, job without --k8s flags
  on+k8s    plugin loaded, job with --k8s-gpus=2: the prolog registers with
            a real agent per node (runtime = fake) against the test API server,
            the extern step starts the real shim
Measured: sbatch invoked (as the test user) -> batch script's first command
(the job is RUNNING and the user's code runs). Rounds alternate an `off` block
(cluster without the plugin) and an `on` block (the two plugin variants
interleaved job by job), so drift of a busy machine hits every variant.
Each job is submitted to an idle cluster (the previous one has left the
queue). Needs root; exits 77 when Slurm, munge or the test user is missing.

Then a profile block (not part of the figures above): the cluster at
SlurmdDebug=debug, where every plugin hook logs its own duration
("spank_k8s: hook prolog (job_script, pid N): 1.234 ms"); summed per hook
and context, that is the plugin's synchronous share of the job start.

usage: bench_slurm_start.py [RESULTS.json]
env:   BENCH_SLURM_JOBS (30)   jobs per variant (split over the rounds)
       BENCH_SLURM_PROFILE_JOBS (10)  jobs per plugin variant in the profile block
       BENCH_SLURM_ROUNDS (2)  BENCH_SLURM_NODES (1)
       BENCH_SLURM_DIR (/tmp/sk-bench-slurm), BENCH_CTLD_PORT (46817),
       BENCH_SLURMD_PORT (47001): a cluster of its own, next to other users
"""
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sklib as B  # noqa: E402

CLUSTER = os.path.join(B.SRCDIR, "tests", "slurm", "cluster.sh")
PLUGIN = os.path.join(B.BUILDDIR, "spank", ".libs", "spank_k8s.so")
USER = os.environ.get("TEST_USER", "k8suser")


HOOK_RE = re.compile(r"^\[([0-9T:.-]+)\] .*spank_k8s: hook (\w+) \((\w+), pid \d+\): ([0-9.]+) ms")


def hook_times(log_dir):
    """Per "hook (context)": the durations (ms) the plugin logged at debug
    level in the slurmd logs (slurmd, its prolog/epilog and slurmstepd)."""
    out = {}
    for name in sorted(os.listdir(log_dir)):
        if not name.startswith("slurmd"):
            continue
        with open(os.path.join(log_dir, name), errors="replace") as f:
            for line in f:
                m = HOOK_RE.search(line)
                if m:
                    out.setdefault(f"{m.group(2)} ({m.group(3)})", []).append(float(m.group(4)))
    return out


class Cluster:
    def __init__(self, d, nodes):
        self.d, self.nodes = d, nodes
        self.env = dict(os.environ, SK_SLURM_DIR=d, NUM_NODES=str(nodes),
                        CTLD_PORT=os.environ.get("BENCH_CTLD_PORT", "46817"),
                        SLURMD_BASE_PORT=os.environ.get("BENCH_SLURMD_PORT", "47001"),
                        # job ids (and so job cgroup paths) apart from other clusters'
                        SLURM_CONF_EXTRA="FirstJobId=700000", SLURM_DEBUG="info")
        self.conf = os.path.join(d, "etc", "slurm.conf")
        self.jobs = os.path.join(d, "jobs")
        self.home = subprocess.run(["getent", "passwd", USER], capture_output=True,
                                   text=True).stdout.split(":")[5]

    def start(self, plugstack, debug=None):
        env = dict(self.env, PLUGSTACK_LINES=plugstack)
        if debug:
            env["SLURM_DEBUG"] = debug
        r = subprocess.run([CLUSTER, "start"], env=env, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError("cluster start failed:\n" + r.stdout[-2000:] + r.stderr[-2000:])

    def stop(self):
        subprocess.run([CLUSTER, "stop"], env=self.env, capture_output=True)

    def as_user(self, *argv):
        return ["runuser", "-u", USER, "--", "env", "-i", f"HOME={self.home}", f"USER={USER}",
                f"LOGNAME={USER}", "SHELL=/bin/bash", "PATH=/usr/local/bin:/usr/bin:/bin",
                "LANG=C.UTF-8", f"SLURM_CONF={self.conf}"] + list(argv)

    def squeue_empty(self, job):
        r = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True,
                           text=True, env=dict(os.environ, SLURM_CONF=self.conf))
        return r.stdout.strip() == ""

    def run_job(self, tag, args, kube=None):
        """Seconds from sbatch to the script's first command; None on failure. With `kube`
        (the test API server): a pod created beforehand, pending until a node labelled
        bench-run=TAG appears, which the job asks for (--k8s-labels); the job runs until the pod
        is Running. Then (first command, pod bound, pod Running), each from sbatch."""
        stamp = os.path.join(self.jobs, f"start-{tag}.t")
        script = os.path.join(self.jobs, "start.sh" if kube is None else "start-wait.sh")
        if not os.path.exists(script):
            with open(script, "w") as f:
                # start-wait.sh: holds the job (at most 60 s) until the benchmark saw the pod.
                f.write('#!/bin/bash\ndate +%s.%N > "$1"\n' if kube is None else
                        '#!/bin/bash\ndate +%s.%N > "$1"\n'
                        'for _ in $(seq 1200); do [ -e "$1.done" ] && break; sleep 0.05; done\n')
            os.chmod(script, 0o755)
        for f in (stamp, stamp + ".done"):
            if os.path.exists(f):
                os.unlink(f)
        watch = None
        if kube is not None:
            name = "first-" + tag.replace("+", "-")
            pod = B.pod_manifest(name, None, ("sleep", "3600"), grace=1)
            pod["spec"].pop("nodeName", None)
            pod["spec"]["nodeSelector"] = {"bench-run": tag.replace("+", "-")}
            pod["spec"]["tolerations"] = [{"key": "slurm-k8s/job", "operator": "Exists"}]
            code, _ = kube.api("POST", "/api/v1/namespaces/default/pods", pod)
            if code != 201:
                B.log(f"pod create failed: {code}")
                return None
            watch = B.Watch(kube, "/api/v1/namespaces/default/pods?fieldSelector=metadata.name%3D" + name)
            args = list(args) + [f"--k8s-labels=bench-run={tag.replace('+', '-')}"]
        t0 = time.time()
        r = subprocess.run(self.as_user("sbatch", "--parsable", f"-N{self.nodes}",
                                        "--gres=gpu:2", "-o", "/dev/null", *args, script, stamp),
                           cwd=self.jobs, capture_output=True, text=True)
        job = r.stdout.strip().split(";")[0]
        if r.returncode != 0 or not job.isdigit():
            B.log(f"sbatch failed: {r.stdout} {r.stderr}")
            return None
        end = time.time() + 60
        t1 = bound = running = None
        if watch is not None:
            bound = watch.wait(lambda ev: (ev["object"].get("spec") or {}).get("nodeName"), 60)
            running = watch.wait(lambda ev: (ev["object"].get("status") or {}).get("phase") == "Running", 60)
            watch.close()
            open(stamp + ".done", "w").close()
        while time.time() < end:
            try:
                with open(stamp) as f:
                    t1 = float(f.read().strip())
                break
            except (OSError, ValueError):
                time.sleep(0.01)
        while time.time() < end and not self.squeue_empty(job):
            time.sleep(0.05)
        if watch is not None:
            if t1 is None or bound is None or running is None:
                return None
            return t1 - t0, bound - t0, running - t0
        return None if t1 is None else t1 - t0


def main():
    if os.getuid() != 0:
        print("needs root (runs a Slurm cluster)")
        return 77
    for tool in ("slurmctld", "slurmd", "sbatch", "munged"):
        if not shutil.which(tool) and not os.path.exists("/usr/sbin/" + tool):
            print(f"{tool} missing (tests/slurm/cluster.sh install)")
            return 77
    if subprocess.run(["id", USER], capture_output=True).returncode != 0:
        print(f"test user {USER} missing (tests/slurm/cluster.sh install)")
        return 77
    B.preflight(need_shim=True)
    if not os.path.exists(PLUGIN):
        print("no plugin at " + PLUGIN)
        return 77
    jobs = B.env_int("BENCH_SLURM_JOBS", 30)
    rounds = max(1, B.env_int("BENCH_SLURM_ROUNDS", 2))
    nodes = B.env_int("BENCH_SLURM_NODES", 1)
    # shim: pods run in the job's shim, which the extern step starts (the first pod waits for
    # it to attach); fake: the agent's test runtime, no process
    runtime = os.environ.get("BENCH_SLURM_RUNTIME", "shim")
    d = os.environ.get("BENCH_SLURM_DIR", "/tmp/sk-bench-slurm")
    cl = Cluster(d, nodes)
    subprocess.run([CLUSTER, "clean"], env=cl.env, capture_output=True)
    lib = os.path.join(d, "lib")
    os.makedirs(lib, exist_ok=True)
    for p in (d, lib):
        os.chmod(p, 0o755)
    shutil.copy(PLUGIN, os.path.join(lib, "spank_k8s.so"))
    shutil.copy(B.SHIM_BIN, os.path.join(lib, "slurm-k8s-shim"))
    for f in ("spank_k8s.so", "slurm-k8s-shim"):
        os.chmod(os.path.join(lib, f), 0o755)
    wd = B.Workdir("sk-bench-slurm-")
    kube = B.Kube(wd.path)
    agents = []
    times = {"off": [], "on": [], "on+k8s": [], "on+k8s+pod": [], "pod_bound": [],
             "pod_running": []}
    failures = 0
    ok = False
    try:
        for i in range(nodes):
            agents.append(B.Agent(wd.path, kube, runtime=runtime, slurm_node=f"n{i + 1}",
                                  name=f"agent-n{i + 1}",
                                  extra={"shim_auth": "cgroup", "max_jobs": "256"}))
        sock = os.path.join(wd.path, "agent-{node}", "agent.sock")
        os.chmod(wd.path, 0o755)
        for a in agents:
            os.chmod(a.dir, 0o755)
        on_line = (f"required {lib}/spank_k8s.so socket={sock} rundir={d}/rundir "
                   f"shim={lib}/slurm-k8s-shim timeout=5 grace=5 allowed_namespaces=default")
        per_round = [jobs // rounds + (1 if r < jobs % rounds else 0) for r in range(rounds)]
        n = 0
        for rnd in range(rounds):
            B.log(f"slurm start, round {rnd + 1}/{rounds}: {per_round[rnd]} jobs per variant")
            cl.start("")
            cl.run_job("warm", [])  # the first job after a start waits for the scheduler
            for _ in range(per_round[rnd]):
                n += 1
                t = cl.run_job(f"off{n}", [])
                times["off"].append(t) if t is not None else None
                failures += t is None
            cl.start(on_line)
            cl.run_job("warm", [])
            for _ in range(per_round[rnd]):
                n += 1
                for variant, args in (("on", []), ("on+k8s", ["--k8s-gpus=2"])):
                    t = cl.run_job(f"{variant}{n}", args)
                    times[variant].append(t) if t is not None else None
                    failures += t is None
            # The headline, a block of its own (these jobs last until their pod runs, which
            # would change the rhythm of the interleaved jobs above): a rollout pod created
            # beforehand, bound when the job's node appears, Running on it.
            for _ in range(per_round[rnd]):
                n += 1
                t = cl.run_job(f"pod{n}", ["--k8s-gpus=2"], kube=kube)
                failures += t is None
                if t is not None:
                    for k, v in zip(("on+k8s+pod", "pod_bound", "pod_running"), t):
                        times[k].append(v)
        # Profile block (not in the figures above: debug logging costs time):
        # every plugin hook logs its own duration; the sum per job is the
        # plugin's synchronous cost on the job's start path.
        prof_jobs = B.env_int("BENCH_SLURM_PROFILE_JOBS", 10)
        profile = {}
        if prof_jobs > 0:
            B.log(f"slurm start, profile block: {prof_jobs} jobs per variant, SlurmdDebug=debug")
            cl.start(on_line, debug="debug")
            cl.run_job("warm", [])
            log_dir = os.path.join(d, "log")
            for name in os.listdir(log_dir):  # only this block's lines
                if name.startswith("slurmd"):
                    open(os.path.join(log_dir, name), "w").close()
            for k in range(prof_jobs):
                for variant, args in (("on", []), ("on+k8s", ["--k8s-gpus=2"])):
                    if cl.run_job(f"prof-{variant}{k}", args) is None:
                        failures += 1
            for hook, ms in sorted(hook_times(log_dir).items()):
                profile[hook] = dict(B.summary_ms([x / 1000 for x in ms]),
                                     total_ms=round(sum(ms), 2))
        res = {"jobs_per_variant": jobs, "rounds": rounds, "nodes_per_job": nodes,
               "hook_profile": {"jobs_per_variant": prof_jobs, "hooks": profile},
               "failures": failures,
               "what": "sbatch invoked -> first command of the batch script (ms); pod_bound, "
                       "pod_running: sbatch -> a pod created beforehand bound to / Running on the "
                       "job's node (job on+k8s+pod)"}
        for k, v in times.items():
            res[k] = B.summary_ms(v)
        for k in ("on", "on+k8s", "pod_running"):
            if res[k].get("n") and res["off"].get("n"):
                res[k + "_overhead"] = {
                    "p50_diff_ms": round(res[k]["p50"] - res["off"]["p50"], 2),
                    "p99_diff_ms": round(res[k]["p99"] - res["off"]["p99"], 2),
                    "p50_ratio": round(res[k]["p50"] / res["off"]["p50"], 3),
                    "p50_diff_per_node_ms": round((res[k]["p50"] - res["off"]["p50"]) / nodes, 2)}
        # what the agents saw: every on+k8s job registered and deregistered
        res["registrations"] = sum(open(a.log_path, errors="replace").read().count("registering job")
                                   for a in agents)
        B.write_result("slurm_start", res)
        ok = failures == 0
    finally:
        cl.stop()
        for a in agents:
            a.stop()
        kube.stop()
        wd.done(ok)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
