#!/usr/bin/python3
"""What the node's image store saves a job: a big image's start in a second job.

An image of about 1.2 GB (e2e/busybox:1 and four layers of 280 MiB of random
data, built here with buildah and pushed to the registry on loopback of
tests/images/registry.sh), then rounds, each from an EMPTY store (a fresh
`image_store` directory and a fresh agent; the shims as the test user,
k8suser, with the podman runtime):
  first:   job A's first pod from the image (IfNotPresent): the node's store
           pulls it from the registry (as its own user, slurm-k8s-images)
  cached:  a second pod of the same job from the same image (the shim knows
           it: no pull, no check); measured in job A (cached_first_job) and
           in each later job (cached, the reference)
  second:  job A ended (its shim and podman storage gone), each later job's
           (C, D, ...: BENCH_STORE_JOBS of them) first pod
           from the image, created once the job settled (SETTLE s after its
           shim attached, as a Deployment's pod scheduled after the node is
           Ready meets it): found in the node's store, no pull
  second_at_attach: the same in job B, the pod created the moment its shim
           attached: it meets the job's podman being set up (its storage and
           user namespace, once per job, whatever the image: the shim starts
           that at the attach) and pays what of it is left
  The registry's access log must show no blob request during jobs B and C.
Each pod is timed from its POST to
  running: phase Running on a watch opened before (what `kubectl get` shows)
  output:  its "up" line in the container's CRI log (the command runs)
then deleted (and gone) before the next. Also measured: the registry's
throughput (each blob of the image fetched with curl to /dev/null) and the
store's pull throughput (image bytes over first - cached, and over the agent's
"image store: pulling" -> "pulled" log lines, timed as they appear), next to
a plain `podman pull` of the image as the test user into a fresh storage of
its own (what every job does without a store), once per round.

Needs root, podman, buildah, docker-registry, fuse-overlayfs, the users
k8suser and slurm-k8s-images (tests/slurm/cluster.sh install) and 8 GB free
where the work directory is; skipped (exit 77) otherwise.

usage: bench_image_store.py [RESULTS.json]
env:   BENCH_STORE_ROUNDS (3)  rounds, each from an empty store
       BENCH_STORE_SETTLE (2)  seconds between a settled job's attach and its first pod
       BENCH_STORE_JOBS (4)  settled jobs per round (C, D, ...: one "second" and
                             one "cached" sample each)
       BENCH_STORE_LAYERS (4), BENCH_STORE_LAYER_MIB (280)  the image's data
"""
import json
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sklib as B  # noqa: E402
from bench_images import REGISTRY_SH, as_user, free_port_pair, log_has_up  # noqa: E402

USER = os.environ.get("TEST_USER", "k8suser")
STORE_USER = "slurm-k8s-images"
IMAGE = "e2e/big:1"
JOB0 = 8760000  # far from the e2e's and the other benchmarks' job ids (/tmp/sk-podman-UID/JOB_n1)
MANIFEST_TYPES = ("application/vnd.oci.image.manifest.v1+json, "
                  "application/vnd.docker.distribution.manifest.v2+json")
NEED_FREE = 8 << 30


class LogTimes(threading.Thread):
    """Tails a log file and notes when each line appeared (the agent's log has no
    timestamps): lines() -> [(time, line)]."""

    def __init__(self, path):
        super().__init__(daemon=True)
        self.path, self.seen, self.stop_ = path, [], threading.Event()
        self.lock = threading.Lock()
        self.start()

    def run(self):
        pos, part = 0, ""
        while not self.stop_.is_set():
            try:
                with open(self.path, errors="replace") as f:
                    f.seek(pos)
                    data = f.read()
                    pos = f.tell()
            except OSError:
                data = ""
            if data:
                t = time.time()
                part += data
                *lines, part = part.split("\n")
                with self.lock:
                    self.seen += [(t, x) for x in lines]
            self.stop_.wait(0.01)

    def first(self, text, after=0.0):
        with self.lock:
            for t, x in self.seen:
                if t >= after and text in x:
                    return t, x
        return None, None

    def close(self):
        self.stop_.set()
        self.join()


def buildah_big(wd, reg, layers, mib):
    """Builds REG/e2e/big:1 (e2e/busybox:1 + LAYERS layers of MIB MiB of random data, a
    commit each) in a buildah storage of its own and pushes it; removes the storage after."""
    root = os.path.join(wd, "buildah")
    b = ["buildah", "--root", root, "--runroot", os.path.join(wd, "buildah-run"),
         "--storage-driver", "vfs"]
    data = os.path.join(wd, "data")
    os.makedirs(data)
    try:
        base = f"{reg}/e2e/busybox:1"
        for i in range(layers):
            c = subprocess.run(b + ["from", "--tls-verify=false", "--quiet", base], check=True,
                               capture_output=True, text=True).stdout.strip()
            f = os.path.join(data, f"blob{i}")
            subprocess.run(["dd", "if=/dev/urandom", f"of={f}", "bs=1M", f"count={mib}",
                            "status=none"], check=True)
            subprocess.run(b + ["copy", c, f, f"/data/blob{i}"], check=True,
                           stdout=subprocess.DEVNULL)
            os.unlink(f)
            base = f"{reg}/e2e/big-step:{i}" if i < layers - 1 else f"{reg}/{IMAGE}"
            subprocess.run(b + ["commit", "-q", c, base], check=True, stdout=subprocess.DEVNULL)
            subprocess.run(b + ["rm", c], check=True, stdout=subprocess.DEVNULL)
        t0 = time.time()
        subprocess.run(b + ["push", "-q", "--tls-verify=false", f"{reg}/{IMAGE}"], check=True,
                       stdout=subprocess.DEVNULL)
        B.log("pushed %s/%s in %.1f s" % (reg, IMAGE, time.time() - t0))
    finally:
        subprocess.run(b + ["rm", "--all"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(os.path.join(wd, "buildah-run"), ignore_errors=True)
        shutil.rmtree(data, ignore_errors=True)


def image_blobs(reg):
    """[(digest, size)] of the pushed image: config and layers."""
    req = urllib.request.Request(f"http://{reg}/v2/e2e/big/manifests/1",
                                 headers={"Accept": MANIFEST_TYPES})
    with urllib.request.urlopen(req, timeout=30) as r:
        m = json.load(r)
    return [(x["digest"], x["size"]) for x in [m["config"]] + m["layers"]]


def registry_mb_s(reg, blobs):
    """Each blob fetched with curl to /dev/null: bytes / the sum of the transfers' times."""
    total_b = total_s = 0.0
    for digest, size in blobs:
        r = subprocess.run(["curl", "-sSf", "-o", "/dev/null", "-w", "%{size_download} %{time_total}",
                            f"http://{reg}/v2/e2e/big/blobs/{digest}"],
                           check=True, capture_output=True, text=True)
        got, secs = r.stdout.split()
        if int(float(got)) != size:
            raise RuntimeError(f"blob {digest}: {got} bytes, the manifest says {size}")
        total_b += size
        total_s += float(secs)
    return total_b / 1e6 / total_s


def blob_gets(reglog):
    try:
        with open(reglog, errors="replace") as f:
            return sum("GET /v2/e2e/big/blobs/" in x for x in f)
    except OSError:
        return 0


def median(x):
    return B.pct(x, 50)


def store_processes(uid, under):
    """Pids of `uid` whose HOME is below `under` (the store's podman pause process: its
    pulls leave one)."""
    out = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            if os.stat(f"/proc/{p}").st_uid != uid:
                continue
            with open(f"/proc/{p}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if any(e.startswith(b"HOME=" + under.rstrip("/").encode() + b"/") for e in env):
            out.append(int(p))
    return out


def plain_pull(wd, pw, image):
    """The reference without a store: `podman pull` of IMAGE as the job's user into a fresh
    storage of its own, with the options of the job's podman (k8s-shim/podman.cc, as
    bench_images.py copies them); seconds, the storage reset and removed after."""
    pdir = os.path.join(wd, "plain")
    for d in (pdir, pdir + "/xdg"):
        os.makedirs(d, 0o700)
        shutil.chown(d, pw.pw_uid, pw.pw_gid)
    run_dir = f"/tmp/sk-podman-{pw.pw_uid}/bench-store-plain"
    podman = ["podman", "--root", pdir + "/storage", "--runroot", run_dir, "--tmpdir", pdir + "/tmp",
              "--storage-driver", "overlay", "--runtime", "runc", "--cgroup-manager", "cgroupfs",
              "--events-backend", "file"]
    env = {"PATH": "/usr/bin:/bin", "HOME": pdir + "/home", "XDG_RUNTIME_DIR": pdir + "/xdg",
           "XDG_CONFIG_HOME": pdir + "/home/.config", "TMPDIR": pdir + "/tmp"}
    try:
        t0 = time.time()
        r = subprocess.run(podman + ["pull", "--quiet", "--tls-verify=false", image],
                           preexec_fn=as_user(pw), env=env, cwd="/", stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"podman pull as {pw.pw_name} failed: {r.stderr[-500:]}")
        return time.time() - t0
    finally:
        # as the shim at a job's end: the storage and podman's pause process go
        subprocess.run(podman + ["system", "reset", "--force"], preexec_fn=as_user(pw), env=env,
                       cwd="/", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(pdir, ignore_errors=True)
        shutil.rmtree(run_dir, ignore_errors=True)


def proc_comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return "?"


class Job:
    """A job registered on the agent and its shim, as bench_images.py starts them."""

    def __init__(self, agent, job, pw, conf):
        self.agent, self.job, self.pw = agent, job, pw
        body = B.reg_body(job, uid=pw.pw_uid)
        body["gid"] = pw.pw_gid  # the state directory's group: the job's, as a prolog's
        r = agent.call("register", body)
        if not (r and r.get("ok")):
            raise RuntimeError(f"register {job} failed: {r}")
        self.node = B.node_name(job)
        self.state = os.path.join(agent.dir, "shim", f"job_{job}_n1")
        log_path = os.path.join(agent.dir, f"shim-{job}.log")
        self.shim = subprocess.Popen(
            B.shim_argv(os.path.abspath(B.SHIM_BIN), job, agent.sock, "n1", log_level="info") +
            ["--runtime-config", conf],
            stdout=open(log_path, "a"), stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=as_user(pw), cwd="/", env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
        if not B.wait_attached(agent, job):
            raise RuntimeError("shim did not attach; see " + log_path)

    def end(self):
        """Deregisters; True once the shim exited (its podman storage reset) by itself."""
        self.agent.call("deregister", {"job_id": self.job, "slurm_node": "n1", "grace_s": 0,
                                       "reason": "JobEnded"}, timeout=60)
        try:
            self.shim.wait(90)
            return True
        except subprocess.TimeoutExpired:
            os.killpg(self.shim.pid, signal.SIGKILL)
            self.shim.wait()
            return False


def run_pod(kube, pods, job, name, image, timeout):
    """POSTs a pod of IMAGE on the job's node; (running, output) seconds after the POST, or
    None for each not seen; the pod deleted and gone after."""
    m = B.pod_manifest(name, job.node, command=("sh", "-c", "echo up; exec sleep 3600"))
    m["spec"]["containers"][0].update({"image": image, "imagePullPolicy": "IfNotPresent"})
    t0 = time.time()
    code, body = kube.api("POST", "/api/v1/namespaces/default/pods", m)
    if code != 201:
        raise RuntimeError(f"pod {name}: create answered {code}")
    uid = body["metadata"]["uid"]
    t_run = pods.wait(B.is_phase(name, "Running"), timeout)
    cri = os.path.join(job.state, "pods", uid, "main", "0.log")
    t_out = None
    end = time.time() + (timeout if t_run is None else 60)
    while time.time() < end:
        if log_has_up(cri):
            t_out = time.time()
            break
        time.sleep(0.005)
    kube.api("DELETE", f"/api/v1/namespaces/default/pods/{name}", {"gracePeriodSeconds": 0})
    gone = pods.wait(B.is_deleted(name), 60) is not None
    if t_run is None or t_out is None or not gone:
        B.log(f"pod {name}: Running {t_run}, output {t_out}, gone {gone}")
    return (None if t_run is None else t_run - t0, None if t_out is None else t_out - t0, gone)


def main():
    missing = [t for t in ("podman", "buildah", "docker-registry", "htpasswd", "fuse-overlayfs",
                           "curl") if not shutil.which(t)]
    if os.getuid() != 0 or missing:
        print("skipped: needs root and " + (", ".join(missing) or "nothing more") +
              " (scripts/install-deps.sh)")
        return 77
    try:
        pw = pwd.getpwnam(USER)
        spw = pwd.getpwnam(STORE_USER)
    except KeyError as e:
        print(f"skipped: no user {e} (tests/slurm/cluster.sh install)")
        return 77
    B.preflight(need_shim=True)
    rounds = B.env_int("BENCH_STORE_ROUNDS", 3)
    layers = B.env_int("BENCH_STORE_LAYERS", 4)
    layer_mib = B.env_int("BENCH_STORE_LAYER_MIB", 280)
    wd = B.Workdir("sk-bench-store-")
    st = os.statvfs(wd.path)
    if st.f_bavail * st.f_frsize < NEED_FREE:
        print("skipped: %.1f GB free in %s, needs 8" % (st.f_bavail * st.f_frsize / 1e9, wd.path))
        wd.done(True)
        return 77
    os.chmod(wd.path, 0o755)
    regdir = os.path.join(wd.path, "registry")
    reglog = os.path.join(regdir, "registry.log")
    port = free_port_pair()
    reg = f"127.0.0.1:{port}"
    image = f"{reg}/{IMAGE}"
    ok = False
    kube = agent = pods = logt = None
    jobs = []
    errors = 0
    try:
        subprocess.run(["bash", REGISTRY_SH, "start", regdir, str(port)], check=True,
                       stdout=subprocess.DEVNULL)
        t0 = time.time()
        buildah_big(wd.path, reg, layers, layer_mib)
        B.log("built and pushed %s in %.1f s" % (image, time.time() - t0))
        blobs = image_blobs(reg)
        image_bytes = sum(s for _, s in blobs)
        reg_mb_s = registry_mb_s(reg, blobs)
        B.log("image %.1f MB in %d blobs; registry %.0f MB/s" % (image_bytes / 1e6, len(blobs),
                                                                 reg_mb_s))
        conf = os.path.join(wd.path, "runtime.conf")
        with open(conf, "w") as f:
            f.write(f"podman = {reg}/*\ninsecure_registry = {reg}\n")
        os.chmod(conf, 0o644)
        kube = B.Kube(os.path.join(wd.path, "kube"))
        pods = B.Watch(kube, "/api/v1/namespaces/default/pods")
        keys = ("first", "cached_first_job", "second_at_attach", "second", "cached")
        settle = float(os.environ.get("BENCH_STORE_SETTLE", "2"))
        later_jobs = B.env_int("BENCH_STORE_JOBS", 4)
        out = {k: {"running": [], "output": []} for k in keys}
        per_round, second_gets, pull_log_s, plain_s = [], [], [], []
        for rnd in range(rounds):
            plain_s.append(plain_pull(wd.path, pw, image))
            store = os.path.join(wd.path, f"store-{rnd}")
            agent = B.Agent(wd.path, kube, runtime="shim", name=f"agent{rnd}", extra={
                "max_pods": "250", "image_store": store, "image_store_user": STORE_USER,
                "image_store_size": "100G",
                "image_store_insecure_registries": f"{reg},127.0.0.1:{port + 1}"})
            os.chmod(agent.dir, 0o755)
            logt = LogTimes(agent.log_path)
            got = {}
            job = Job(agent, JOB0 + 10 * rnd, pw, conf)
            jobs.append(job)
            got["first"] = run_pod(kube, pods, job, f"store-first-{rnd}", image, 900)
            got["cached_first_job"] = run_pod(kube, pods, job, f"store-cached-a-{rnd}", image, 60)
            if not job.end():
                errors += 1
                B.log(f"job {job.job}: the shim did not exit after deregister")
            jobs.remove(job)
            n1 = blob_gets(reglog)
            job = Job(agent, JOB0 + 10 * rnd + 1, pw, conf)
            jobs.append(job)
            got["second_at_attach"] = run_pod(kube, pods, job, f"store-attach-{rnd}", image, 120)
            if not job.end():
                errors += 1
                B.log(f"job {job.job}: the shim did not exit after deregister")
            jobs.remove(job)
            # Several settled jobs: one first pod each (the figure's samples).
            for k in range(later_jobs):
                job = Job(agent, JOB0 + 10 * rnd + 2 + k, pw, conf)
                jobs.append(job)
                time.sleep(settle)
                got.setdefault("second", []).append(
                    run_pod(kube, pods, job, f"store-second-{rnd}-{k}", image, 120))
                got.setdefault("cached", []).append(
                    run_pod(kube, pods, job, f"store-cached-{rnd}-{k}", image, 60))
                if not job.end():
                    errors += 1
                    B.log(f"job {job.job}: the shim did not exit after deregister")
                jobs.remove(job)
            n2 = blob_gets(reglog)
            second_gets.append(n2 - n1)
            if n2 != n1:
                errors += 1
                B.log(f"round {rnd}: the second job made {n2 - n1} blob requests to the registry")
            t_a, _ = logt.first(f"image store: pulling {image}")
            t_b, line = logt.first(f"image store: {image} pulled")
            pulls = sum("image store: pulling" in x for _, x in logt.seen)
            if pulls != 1:
                errors += 1
                B.log(f"round {rnd}: the store pulled {pulls} times (1 expected)")
            if t_a and t_b:
                pull_log_s.append(t_b - t_a)
            rr = {"plain_pull_s": round(plain_s[-1], 3),
                  "blob_requests_second_job": n2 - n1, "store_pulls": pulls,
                  "store_log_pull_s": round(t_b - t_a, 3) if t_a and t_b else None,
                  "store_line": line}
            for k in keys:
                samples = got[k] if isinstance(got[k], list) else [got[k]]
                rr[k] = [{"running_ms": None if r is None else round(1000 * r, 1),
                          "output_ms": None if o is None else round(1000 * o, 1)}
                         for r, o, _ in samples]
                for r, o, gone in samples:
                    if r is None or o is None or not gone:
                        errors += 1
                    else:
                        out[k]["running"].append(r)
                        out[k]["output"].append(o)
            logt.close()
            logt = None
            agent.stop()
            agent = None
            # what the store's user still runs once the agent stopped (its pulls' podman
            # pause process): recorded, then ended, so the next round starts from nothing
            left = store_processes(spw.pw_uid, store)
            rr["store_processes_after_agent_stop"] = [proc_comm(p) for p in left]
            for p in left:
                os.kill(p, signal.SIGKILL)
            shutil.rmtree(store, ignore_errors=True)
            per_round.append(rr)
            B.log(f"round {rnd}: " + json.dumps(rr))
        pods.close()
        pods = None
        res = {"image": IMAGE, "image_bytes": image_bytes, "image_blobs": len(blobs),
               "rounds": rounds, "registry_mb_s": round(reg_mb_s, 1),
               "registry_blob_requests_in_second_jobs": sum(second_gets),
               "per_round": per_round, "errors": errors}
        for k in keys:
            res[k] = {m: B.summary_ms(x) for m, x in out[k].items()}
        f_out, c_out = out["first"]["output"], out["cached_first_job"]["output"]
        pulls_s = [a - b for a, b in zip(f_out, c_out)] if len(f_out) == len(c_out) else []
        res["store_pull_mb_s"] = (round(image_bytes / 1e6 / median(pulls_s), 1)
                                  if pulls_s and median(pulls_s) > 0 else None)
        res["store_pull_log_mb_s"] = (round(image_bytes / 1e6 / median(pull_log_s), 1)
                                      if pull_log_s else None)
        res["plain_pull_mb_s"] = round(image_bytes / 1e6 / median(plain_s), 1)
        res["plain_pull"] = B.summary_ms(plain_s)
        s2, c2 = median(out["second"]["output"]), median(out["cached"]["output"])
        res["second_vs_cached_pct"] = round(100.0 * (s2 / c2 - 1), 1) if s2 and c2 else None
        sa = median(out["second_at_attach"]["output"])
        res["second_at_attach_vs_cached_pct"] = (round(100.0 * (sa / c2 - 1), 1)
                                                 if sa and c2 else None)
        res["settle_s"] = settle
        B.write_result("image_store", res)
        ok = errors == 0
    finally:
        if logt:
            logt.close()
        for job in jobs:
            try:
                job.end()
            except (OSError, ValueError) as e:
                B.log(f"job {job.job}: deregister: {e}")
                if job.shim.poll() is None:
                    os.killpg(job.shim.pid, signal.SIGKILL)
                    job.shim.wait()
        if pods:
            pods.close()
        if agent:
            agent.stop()
        for p in store_processes(spw.pw_uid, wd.path):
            os.kill(p, signal.SIGKILL)
        if kube:
            kube.stop()
        subprocess.run(["bash", REGISTRY_SH, "stop", regdir], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        # the big files go whatever the outcome; the logs stay when the run failed
        for d in os.listdir(wd.path):
            if re.match(r"(store-\d+|buildah.*|data|plain)$", d):
                shutil.rmtree(os.path.join(wd.path, d), ignore_errors=True)
        wd.done(ok)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
