#!/usr/bin/python3
"""What a container's own mount namespace costs at its start.

A container with volumeMounts starts through the shim's exec helper, which
enters a user and a mount namespace and binds the volumes at their
mountPaths (k8s-shim/mount_ns.h); one without starts through the same helper
with nothing to mount. Both variants run `true` through
`slurm-k8s-shim --exec-confined`, in turn (A B A B ...), and each start is
timed from spawn to exit:
  mounts:    three volumeMounts as a real pod has them: the ServiceAccount
             volume at /var/run/secrets/kubernetes.io/serviceaccount (read
             only: /run shadowed), a configMap at /etc/<x> (/etc shadowed) and
             an emptyDir at /<x> (the root shadowed, then pivot_root)
  no mounts: the helper with no_new_privs only
As root the helper runs as `nobody` (the shim runs as the job's user).

usage: bench_mounts.py [RESULTS.json]
env:   BENCH_MOUNTS_N (200)  starts per variant
"""
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sklib as B  # noqa: E402


def main():
    if not os.path.exists(B.SHIM_BIN):
        print("missing: " + B.SHIM_BIN + " (make bench builds it; set SK_TOP_BUILDDIR)")
        return 77
    n = B.env_int("BENCH_MOUNTS_N", 200)
    d = tempfile.mkdtemp(prefix="sk-bench-mounts-")
    os.chmod(d, 0o755)
    try:
        for sub in ("sa", "cfg", "data", "mnt"):
            os.mkdir(os.path.join(d, sub))
        as_user = []
        if os.getuid() == 0:
            pw = pwd.getpwnam("nobody")
            for root, dirs, _ in os.walk(d):
                for x in [root] + [os.path.join(root, y) for y in dirs]:
                    os.chown(x, pw.pw_uid, pw.pw_gid)
            as_user = ["setpriv", "--reuid=%d" % pw.pw_uid, "--regid=%d" % pw.pw_gid,
                       "--clear-groups", "--"]
        tag = "sk-bench-%d" % os.getpid()
        helper = as_user + [B.SHIM_BIN, "--exec-confined"]
        mounts = helper + [
            "--bind-ro", d + "/sa", "/var/run/secrets/kubernetes.io/serviceaccount",
            "--bind-ro", d + "/cfg", "/etc/" + tag,
            "--bind", d + "/data", "/" + tag,
            "--scratch", d + "/mnt", "--chdir", "/", "--no-new-privs", "--", "true"]
        plain = helper + ["--no-new-privs", "--", "true"]
        times = {"mounts": [], "no_mounts": []}
        for i in range(n + 5):  # 5 warm-up pairs, not counted
            for name, argv in (("mounts", mounts), ("no_mounts", plain)):
                t0 = time.perf_counter()
                r = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE)
                dt = time.perf_counter() - t0
                if r.returncode != 0:
                    print("%s: exit %d: %s" % (name, r.returncode, r.stderr.decode()[-300:]))
                    return 1
                if i >= 5:
                    times[name].append(dt)
        res = {k: B.summary_ms(v) for k, v in times.items()}
        res["p50_diff_ms"] = round(res["mounts"]["p50"] - res["no_mounts"]["p50"], 2)
        res["volume_mounts"] = 3
        B.write_result("mounts", res)
        return 0
    finally:
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
