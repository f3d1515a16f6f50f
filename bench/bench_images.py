#!/usr/bin/python3
"""What a pod from an image costs at its start, next to a process pod.

One virtual node (the real agent and shim, the shim as the job's user with
the podman runtime for the images of a registry on loopback,
tests/images/registry.sh); pods bound by name, in turn (A B C A B C ...):
  process:  command `sh -c 'echo up; sleep 3600'` run as a process
  present:  the same command from the image e2e/busybox:1, already in the
            job's podman storage (imagePullPolicy IfNotPresent)
  pulled:   the same, the image removed from the job's storage before each
            pod (`podman rmi`), so every start pulls it from the registry
Each pod is timed from its POST to
  running: phase Running on a watch opened before (what `kubectl get` shows)
  output:  its "up" line in the container's CRI log (the command runs)
then deleted (and gone) before the next.

Needs root (the shim runs as the test user, k8suser, as a job's would),
podman and the registry's tools (scripts/install-deps.sh); skipped otherwise.

usage: bench_images.py [RESULTS.json]
env:   BENCH_IMAGES_N (10)  pods per variant
"""
import os
import pwd
import shutil
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sklib as B  # noqa: E402

USER = os.environ.get("TEST_USER", "k8suser")
REGISTRY_SH = os.path.join(B.SRCDIR, "tests", "images", "registry.sh")
JOB = 4242


def free_port_pair():
    """A port P with P and P+1 free (the registry and its login twin)."""
    for _ in range(50):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        p = s.getsockname()[1]
        s.close()
        t = socket.socket()
        try:
            t.bind(("127.0.0.1", p + 1))
            return p
        except OSError:
            continue
        finally:
            t.close()
    raise RuntimeError("no two free ports")


def as_user(pw):
    def drop():
        os.setgid(pw.pw_gid)
        os.initgroups(pw.pw_name, pw.pw_gid)
        os.setuid(pw.pw_uid)
    return drop


def log_has_up(path):
    try:
        with open(path, errors="replace") as f:
            return " up" in f.read()
    except OSError:
        return False


def main():
    missing = [t for t in ("podman", "buildah", "docker-registry", "htpasswd") if not shutil.which(t)]
    if os.getuid() != 0 or missing:
        print("skipped: needs root and " + (", ".join(missing) or "nothing more") +
              " (scripts/install-deps.sh)")
        return 77
    try:
        pw = pwd.getpwnam(USER)
    except KeyError:
        print(f"skipped: no user {USER} (tests/slurm/cluster.sh install)")
        return 77
    B.preflight(need_shim=True)
    n = B.env_int("BENCH_IMAGES_N", 10)
    wd = B.Workdir("sk-bench-images-")
    os.chmod(wd.path, 0o755)
    regdir = os.path.join(wd.path, "registry")
    port = free_port_pair()
    reg = f"127.0.0.1:{port}"
    ok = False
    kube = agent = shim = None
    try:
        subprocess.run(["bash", REGISTRY_SH, "start", regdir, str(port)], check=True,
                       stdout=subprocess.DEVNULL)
        conf = os.path.join(wd.path, "runtime.conf")
        with open(conf, "w") as f:
            f.write(f"podman = {reg}/*\ninsecure_registry = {reg}\n")
        os.chmod(conf, 0o644)
        kube = B.Kube(os.path.join(wd.path, "kube"))
        agent = B.Agent(wd.path, kube, runtime="shim", extra={"max_pods": "250"})
        os.chmod(agent.dir, 0o755)
        node = B.node_name(JOB)
        body = B.reg_body(JOB, uid=pw.pw_uid)
        body["gid"] = pw.pw_gid  # the state directory's group: the job's, as a prolog's
        r = agent.call("register", body)
        if not (r and r.get("ok")):
            raise RuntimeError(f"register failed: {r}")
        log_path = os.path.join(agent.dir, f"shim-{JOB}.log")
        shim = subprocess.Popen(
            B.shim_argv(B.SHIM_BIN, JOB, agent.sock, "n1", log_level="info") +
            ["--runtime-config", conf],
            stdout=open(log_path, "a"), stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=as_user(pw), cwd="/", env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
        if not B.wait_attached(agent, JOB):
            raise RuntimeError("shim did not attach; see " + log_path)
        state = os.path.join(agent.dir, "shim", f"job_{JOB}_n1")
        pdir = os.path.join(state, "podman")
        run_dir = f"/tmp/sk-podman-{pw.pw_uid}/{JOB}_n1"  # common/daemons/log_paths.h
        podman = ["podman", "--root", pdir + "/storage", "--runroot", run_dir,
                  "--tmpdir", pdir + "/tmp", "--storage-driver", "overlay", "--runtime", "runc",
                  "--cgroup-manager", "cgroupfs", "--events-backend", "file"]
        penv = {"PATH": "/usr/bin:/bin", "HOME": pdir + "/home", "XDG_RUNTIME_DIR": pdir + "/xdg",
                "XDG_CONFIG_HOME": pdir + "/home/.config", "TMPDIR": pdir + "/tmp"}
        image = f"{reg}/e2e/busybox:1"
        pods = B.Watch(kube, "/api/v1/namespaces/default/pods")
        variants = {"process": ("busybox:1.35", "IfNotPresent"),
                    "present": (image, "IfNotPresent"), "pulled": (image, "Always")}
        out = {v: {"running": [], "output": []} for v in variants}
        errors = 0
        seq = 0
        for rep in range(n + 1):  # the first round warms up (the image's first pull)
            for v, (img, policy) in variants.items():
                if v == "pulled":
                    subprocess.run(podman + ["rmi", "--force", image], preexec_fn=as_user(pw),
                                   env=penv, cwd="/", stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
                    # The options above copy the shim's (k8s-shim/podman.cc
                    # podman_command): should they drift, the image would stay
                    # and "pulled" would measure "present". Checked, not assumed.
                    gone = subprocess.run(podman + ["image", "exists", image],
                                          preexec_fn=as_user(pw), env=penv, cwd="/",
                                          stderr=subprocess.DEVNULL).returncode == 1
                    if rep > 0 and not gone:
                        raise RuntimeError("the image is still in the job's storage after rmi")
                seq += 1
                pn = f"img-{v}-{seq}"
                m = B.pod_manifest(pn, node, command=("sh", "-c", "echo up; exec sleep 3600"))
                m["spec"]["containers"][0].update({"image": img, "imagePullPolicy": policy})
                t0 = time.time()
                code, body = kube.api("POST", "/api/v1/namespaces/default/pods", m)
                if code != 201:
                    raise RuntimeError(f"pod {pn}: create answered {code}")
                uid = body["metadata"]["uid"]
                t_run = pods.wait(B.is_phase(pn, "Running"), 60)
                cri = os.path.join(state, "pods", uid, "main", "0.log")
                t_out = None
                end = time.time() + 60
                while time.time() < end:
                    if log_has_up(cri):
                        t_out = time.time()
                        break
                    time.sleep(0.005)
                if t_run is None or t_out is None:
                    B.log(f"pod {pn}: Running {t_run}, output {t_out}")
                    errors += 1
                elif rep > 0:
                    out[v]["running"].append(t_run - t0)
                    out[v]["output"].append(t_out - t0)
                kube.api("DELETE", f"/api/v1/namespaces/default/pods/{pn}",
                         {"gracePeriodSeconds": 0})
                if pods.wait(B.is_deleted(pn), 30) is None:
                    errors += 1
        pods.close()
        res = {"pods_per_variant": n, "errors": errors}
        for v in variants:
            res[v] = {k: B.summary_ms(x) for k, x in out[v].items()}
        B.write_result("images", res)
        ok = errors == 0
    finally:
        if agent:
            agent.call("deregister", {"job_id": JOB, "slurm_node": "n1", "grace_s": 0,
                                      "reason": "JobEnded"}, timeout=40)
        if shim:
            try:
                shim.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(shim.pid, 9)
                shim.wait()
        if agent:
            agent.stop()
        if kube:
            kube.stop()
        subprocess.run(["bash", REGISTRY_SH, "stop", regdir], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        wd.done(ok)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
