#!/usr/bin/python3
"""Component test: node paths as pod volumes (docs/kubernetes-guide.md, "Volumes"): hostPath
volumes and persistentVolumeClaim volumes bound to hostPath PersistentVolumes, only under the
agent's volume_roots.

The real agent (runtime shim, each virtual node acting as itself by impersonation, the test API
server's Node authorizer a moment behind each binding) and the real shim of job 42; pods are
processes, each container in a mount namespace of its own. The test API server's
persistentvolume-binder binds the claims (tests/kube/kubetest/volumes.py).
- a claim bound to a volume under the roots: the pod reads the model directory at its mountPath,
  cannot write where the mount is readOnly, writes in a subPath the shim makes (as the job's
  user), and finds the node path in SLURM_K8S_VOLUME_<NAME>;
- a hostPath of type DirectoryOrCreate under the roots is made by the job's user;
- refused for good, the pod Failed saying why: a hostPath outside the roots, a claim bound to a
  volume outside them, a path under the roots that a symbolic link takes outside, a hostPath
  of type Directory that is a file;
- a claim not bound yet: the pod waits (an Event in the kubelet's words), and starts by itself
  once a volume binds to it;
- an emptyDir of medium Memory at /dev/shm (as root: the agent mounts it): a tmpfs of its
  sizeLimit that both containers of the pod share, unmounted when the pod is deleted, none left
  after the job.
Prints `N passed, N failed`.
"""
import json, os, subprocess, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
from sktest.env import ShimEnv, shim_suite_main, shim_reg  # noqa: E402
from sktest.suite import check, wait_for  # noqa: E402

from agent_impersonation_test import agent_rules  # noqa: E402  (the same RBAC)

NODE = "slurm-n1-0"  # slot 0 of n1: node_name_template slurm-{node}-{slot}


class VolumeEnv(ShimEnv):
    def kube_args(self):
        return super().kube_args() + ["--node-authorizer-lag", "0.5"]

    def conf_settings(self):
        s = super().conf_settings()
        s.update(node_identity="impersonate", node_name_template="slurm-{node}-{slot}",
                 volume_roots=f"{self.dir}/shared, {self.dir}/scratch")
        return s

    def stop(self):
        super().stop()
        # A failed run may leave the agent's tmpfs mounted: not in the test's directory's way.
        for m in tmpfs_of(""):
            if m.startswith(self.dir + "/"):
                subprocess.run(["umount", "-l", m], check=False)


def pod(name, script, volumes, mounts):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"nodeName": NODE, "terminationGracePeriodSeconds": 2, "volumes": volumes,
                     "tolerations": [{"key": "slurm-k8s/job", "operator": "Exists"}],
                     "containers": [{"name": "main", "image": "python:3", "volumeMounts": mounts,
                                     "command": ["python3", "-c", script]}]}}


def pv(name, path, klass, storage="10Gi"):
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
            "spec": {"capacity": {"storage": storage}, "accessModes": ["ReadWriteMany"],
                     "storageClassName": klass, "hostPath": {"path": path, "type": "Directory"}}}


def pvc(name, klass):
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
            "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": klass,
                     "resources": {"requests": {"storage": "1Gi"}}}}


def status(env, name):
    code, p = env.api("GET", "/api/v1/namespaces/default/pods/" + name)
    return p.get("status", {}) if code == 200 else {}


def failed_with(env, name, text):
    st = wait_for(lambda: (lambda s: s if s.get("phase") == "Failed" else None)(status(env, name)), 30) or {}
    return text in st.get("message", ""), st


def run(env):
    d = env.dir
    shared, outside = f"{d}/shared", f"{d}/outside"
    os.makedirs(f"{shared}/models/m1")
    os.makedirs(outside)
    open(f"{shared}/models/m1/weights", "w").write("w=42\n")
    open(f"{outside}/private", "w").write("not for pods\n")
    open(f"{shared}/a-file", "w").write("x")
    os.symlink(outside, f"{shared}/escape")
    code, _ = env.api("POST", "/_test/rbac", {"subject": "group:slurm-k8s:agent", "role": agent_rules()})
    check("the agent bound as in the impersonation guide", code == 200, code)
    open(os.path.join(d, "alive_42"), "w").close()
    r = env.call("register", shim_reg())
    check("register", r and r.get("ok"), r)
    env.start_shim()
    check("the job's node is up", wait_for(lambda: env.api("GET", "/api/v1/nodes/" + NODE)[0] == 200, 10))

    for obj in (pv("models", f"{shared}/models", "site"), pv("far", outside, "far")):
        code, _ = env.api("POST", "/api/v1/persistentvolumes", obj)
        check("PersistentVolume %s made" % obj["metadata"]["name"], code == 201, code)
    for name, klass in (("models", "site"), ("far", "far")):
        env.api("POST", "/api/v1/namespaces/default/persistentvolumeclaims", pvc(name, klass))

    # 1. the model directory from a claim
    reader = (f"import json,os\n"
              f"r={{'weights':open('/models/m1/weights').read(),"
              f"'env':os.environ.get('SLURM_K8S_VOLUME_MODELS')}}\n"
              f"try:\n open('/models/new','w')\n r['ro']='written'\n"
              f"except OSError as e:\n r['ro']=e.strerror\n"
              f"open('/work/out.txt','w').write('from the pod\\n')\n"
              f"open('{d}/reader.json.tmp','w').write(json.dumps(r))\n"
              f"os.rename('{d}/reader.json.tmp','{d}/reader.json')\n"
              f"import time; time.sleep(600)\n")
    env.api("POST", "/api/v1/namespaces/default/pods", pod(
        "reader", reader, [{"name": "models", "persistentVolumeClaim": {"claimName": "models"}}],
        [{"name": "models", "mountPath": "/models", "readOnly": True},
         {"name": "models", "mountPath": "/work", "subPath": "runs/r1"}]))
    got = wait_for(lambda: os.path.exists(f"{d}/reader.json") and json.load(open(f"{d}/reader.json")), 40)
    check("a pod reads the model directory of its claim at its mountPath", (got or {}).get("weights") == "w=42\n",
          (got, status(env, "reader")))
    check("  a readOnly mount cannot be written", (got or {}).get("ro") == "Read-only file system", got)
    out = f"{shared}/models/runs/r1/out.txt"
    check("  it writes in a subPath the shim made, as the job's user",
          os.path.exists(out) and os.stat(out).st_uid == os.getuid(), out)
    check("  SLURM_K8S_VOLUME_MODELS names the node path", (got or {}).get("env") == f"{shared}/models", got)

    # 2. hostPath DirectoryOrCreate
    made = f"{d}/scratch/job42/data"
    env.api("POST", "/api/v1/namespaces/default/pods", pod(
        "maker", "open('/data/hello','w').write('hi')\n",
        [{"name": "data", "hostPath": {"path": made, "type": "DirectoryOrCreate"}}],
        [{"name": "data", "mountPath": "/data"}]))
    check("a hostPath DirectoryOrCreate is made by the job's user and written by the pod",
          wait_for(lambda: os.path.exists(f"{made}/hello"), 30) and os.stat(made).st_uid == os.getuid(),
          status(env, "maker"))

    # 3. refused, saying why
    def refused(name, volumes, text, what):
        env.api("POST", "/api/v1/namespaces/default/pods",
                pod(name, f"open('{d}/ran-{name}','w')", volumes, [{"name": volumes[0]["name"], "mountPath": "/v"}]))
        ok, st = failed_with(env, name, text)
        check(what, ok, st)
    refused("etc", [{"name": "v", "hostPath": {"path": "/etc"}}],
            "outside the paths this node lets pods mount", "a hostPath outside volume_roots: Failed, saying which roots")
    refused("far", [{"name": "v", "persistentVolumeClaim": {"claimName": "far"}}],
            "(PersistentVolume far) is the node path " + outside,
            "a claim bound to a volume outside them: Failed, naming the volume")
    refused("escape", [{"name": "v", "hostPath": {"path": f"{shared}/escape"}}],
            "leads to " + outside, "a path under the roots that a symbolic link takes outside: Failed")
    refused("notdir", [{"name": "v", "hostPath": {"path": f"{shared}/a-file", "type": "Directory"}}],
            "is not a directory", "a hostPath of type Directory that is a file: Failed (the kubelet's type check)")
    ran = [f for f in os.listdir(d) if f.startswith("ran-")]
    check("  none of them ran", not ran, ran)

    # 4. a claim not bound yet
    env.api("POST", "/api/v1/namespaces/default/persistentvolumeclaims", pvc("later", "later"))
    env.api("POST", "/api/v1/namespaces/default/pods", pod(
        "waiter", f"open('{d}/waiter.ok','w').write('x')\nimport time; time.sleep(600)\n",
        [{"name": "v", "persistentVolumeClaim": {"claimName": "later"}}], [{"name": "v", "mountPath": "/v"}]))

    def waiting_event():
        _, evs = env.api("GET", "/api/v1/namespaces/default/events")
        return [e["message"] for e in evs.get("items", []) if e["involvedObject"].get("name") == "waiter"
                and e["reason"] == "FailedMount" and "non-bound phase" in e["message"]]
    ev = wait_for(waiting_event, 30)
    check("a pod whose claim is not bound waits: FailedMount in the kubelet's words", bool(ev),
          (ev, status(env, "waiter")))
    check("  it stays Pending", status(env, "waiter").get("phase") == "Pending", status(env, "waiter"))
    os.makedirs(f"{shared}/later")
    env.api("POST", "/api/v1/persistentvolumes", pv("later", f"{shared}/later", "later"))
    check("  once a volume binds to the claim the pod starts by itself",
          wait_for(lambda: os.path.exists(f"{d}/waiter.ok"), 40), status(env, "waiter"))

    memory_volume(env)

    r, rc = env.end_job(42, 5)
    check("the job deregisters, its shim exits 0", r and r.get("ok") and rc == 0, (r, rc))
    check("the node paths stay (the site's data), the pods' files in them",
          os.path.exists(out) and os.path.exists(f"{shared}/models/m1/weights"), out)
    if os.geteuid() == 0:
        check("no memory volume of the job stays mounted", not tmpfs_of(""), tmpfs_of(""))


def tmpfs_of(pod_uid):
    """The job's tmpfs mounts on the node (their sources name the job and the pod)."""
    want = "slurm-k8s:job_42_n1:" + pod_uid
    out = []
    for line in open("/proc/self/mountinfo"):
        f = line.split(" - ")[-1].split()
        if f[0] == "tmpfs" and (f[1] == want if pod_uid else f[1].startswith(want)):
            out.append(line.split()[4])
    return out


def memory_volume(env):
    """emptyDir {medium: Memory, sizeLimit} at /dev/shm: a tmpfs of that size the agent (root)
    mounts at the pod's volume directory, shared by its containers, gone with the pod."""
    d = env.dir
    if os.geteuid() != 0:
        print("memory volumes: the agent mounts their tmpfs as root; not checked as uid %d" % os.geteuid())
        return
    writer = (f"import json,os\n"
              f"m=[l.split() for l in open('/proc/self/mountinfo')]\n"
              f"shm=[l[l.index('-')+1:l.index('-')+3] for l in m if l[4]=='/dev/shm']\n"
              f"st=os.statvfs('/dev/shm')\n"
              f"r={{'fs':shm[-1] if shm else None,'size':st.f_frsize*st.f_blocks}}\n"
              f"open('/dev/shm/hello','w').write('from a')\n"
              f"try:\n open('/dev/shm/big','wb').write(b'x'*(9<<20))\n r['big']='written'\n"
              f"except OSError as e:\n r['big']=e.strerror\n"
              f"os.unlink('/dev/shm/big')\n"
              f"open('{d}/shm.json.tmp','w').write(json.dumps(r))\n"
              f"os.rename('{d}/shm.json.tmp','{d}/shm.json')\n"
              f"import time; time.sleep(600)\n")
    reader = (f"import os,time\n"
              f"while not os.path.exists('/shared-shm/hello'): time.sleep(0.1)\n"
              f"open('{d}/shm-b.txt','w').write(open('/shared-shm/hello').read())\n"
              f"time.sleep(600)\n")
    p = pod("shm", writer, [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Mi"}}],
            [{"name": "dshm", "mountPath": "/dev/shm"}])
    p["spec"]["containers"].append({"name": "b", "image": "python:3", "command": ["python3", "-c", reader],
                                    "volumeMounts": [{"name": "dshm", "mountPath": "/shared-shm"}]})
    code, made = env.api("POST", "/api/v1/namespaces/default/pods", p)
    uid = made.get("metadata", {}).get("uid", "")
    got = wait_for(lambda: os.path.exists(f"{d}/shm.json") and json.load(open(f"{d}/shm.json")), 40)
    check("emptyDir medium Memory: /dev/shm is a tmpfs in the container", (got or {}).get("fs", [""])[0] == "tmpfs",
          (got, status(env, "shm")))
    check("  of its sizeLimit (8Mi)", (got or {}).get("size") == 8 << 20, got)
    check("  a write past it fails (ENOSPC)", (got or {}).get("big") == "No space left on device", got)
    check("  the pod's other container sees the same files",
          wait_for(lambda: os.path.exists(f"{d}/shm-b.txt") and open(f"{d}/shm-b.txt").read() == "from a", 20),
          status(env, "shm"))
    check("  on the node: one tmpfs naming the job and the pod, at the pod's volume directory",
          [m.endswith("/pods/%s/volumes/dshm" % uid) for m in tmpfs_of(uid)] == [True], tmpfs_of(uid))
    env.api("DELETE", "/api/v1/namespaces/default/pods/shm")
    check("  deleted, the pod's tmpfs is unmounted", wait_for(lambda: not tmpfs_of(uid), 30), tmpfs_of(uid))


def main():
    return shim_suite_main(VolumeEnv, run)


if __name__ == "__main__":
    sys.exit(main())
