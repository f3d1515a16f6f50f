#!/usr/bin/env python3
"""The double's --audit-log (kube-apiserver's JSON-lines audit format) and the benchmarks' reading
of it and of kubeconfigs (bench/kubeapi.py, bench/sklib.py's cluster mode), against a private
double started with --audit-log:
  - the log's events: audit.k8s.io/v1 Event fields, stages (ResponseComplete per request,
    ResponseStarted too for a watch, a failed authentication's ResponseStarted alone, user {}),
    verbs and objectRefs as kube-apiserver names them, no /_test request;
  - bench/kubeapi.py: the YAML subset and kubeconfig forms (token, tokenFile, client certificate
    files and -data; exec, auth-provider, basic auth, insecure-skip-tls-verify refused), the
    client against the double (version, whoami, can_i, sktest.kube.Watch on it), the audit
    parser: one record per request, per-user counts equal to the double's own /_test/counters;
  - bench/sklib.py against the double as a cluster: the request window by marker requests, the
    counts absent (with a reason) without an audit log, and the cleanup of only this run's Nodes,
    Leases and pods.
  KUBE_TEST_SUMMARY     file to write "passed failed skipped" counts to
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(SRC, "bench"))
sys.path.insert(0, os.path.join(SRC, "tests", "pylib"))
import kubeapi  # noqa: E402
from sktest.kube import KubeServer, Watch  # noqa: E402

PASSED, FAILED = 0, 0


def check(name, ok, detail=""):
    global PASSED, FAILED
    if ok:
        PASSED += 1
        print(f"ok   {name}")
    else:
        FAILED += 1
        print(f"FAIL {name}: {detail}")


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def kubeconfig(path, server, user_lines, cluster_lines=("certificate-authority: kube/ca.crt",)):
    return write(path, "\n".join(
        ["apiVersion: v1", "kind: Config", "clusters:", "- name: d", "  cluster:",
         "    server: " + server] + ["    " + x for x in cluster_lines] +
        ["users:", "- name: u", "  user:"] + ["    " + x for x in user_lines] +
        ["contexts:", "- context:", "    cluster: d", "    user: u", "  name: c",
         "current-context: c", ""]))


def test_yaml():
    doc = """apiVersion: v1
# a comment
clusters:
- cluster:
    certificate-authority-data: QUJD   # trailing comment
    server: "https://10.0.0.1:6443"
  name: 'a b'
preferences: {}
users:
  - name: u
    user:
      exec:
        args: ["eks", "get-token"]
        command: aws
      token: |
        line1
        line2
list:
- - x
  - y
-
  k: v
folded: >-
  one
  two
empty:
yes: true
"""
    want = {"apiVersion": "v1",
            "clusters": [{"cluster": {"certificate-authority-data": "QUJD",
                                      "server": "https://10.0.0.1:6443"}, "name": "a b"}],
            "preferences": {},
            "users": [{"name": "u", "user": {"exec": {"args": ["eks", "get-token"],
                                                      "command": "aws"},
                                             "token": "line1\nline2\n"}}],
            "list": [["x", "y"], {"k": "v"}], "folded": "one two", "empty": None, "yes": True}
    got = kubeapi.parse_yaml(doc)
    check("yaml: the kubeconfig subset", got == want, json.dumps(got))
    for bad in ("a: &anchor x\n", "a:\n\tb: c\n"):
        try:
            kubeapi.parse_yaml(bad)
            check("yaml: refuses %r" % bad, False, "parsed")
        except kubeapi.YamlError:
            check("yaml: refuses %r" % bad, True)


def test_kubeconfig_forms(tmp, url):
    ok = kubeconfig(os.path.join(tmp, "tf.kubeconfig"), url, ["tokenFile: kube/agent.token"])
    c = kubeapi.load_kubeconfig(ok)
    check("kubeconfig: relative tokenFile and CA resolve to the file's directory",
          c["token_file"] == os.path.join(tmp, "kube", "agent.token")
          and c["ca_file"] == os.path.join(tmp, "kube", "ca.crt"), str(c))
    refused = {
        "exec": ["exec:", "  apiVersion: client.authentication.k8s.io/v1", "  command: aws"],
        "auth-provider": ["auth-provider:", "  name: oidc"],
        "username": ["username: a", "password: b"],
        "as": ["token: x", "as: someone"],
        "no credential": ["{}"],
        "certificate without key": ["client-certificate: kube/ca.crt"],
    }
    for what, lines in refused.items():
        if lines == ["{}"]:
            p = write(os.path.join(tmp, "bad.kubeconfig"), open(ok).read().replace(
                "  user:\n    tokenFile: kube/agent.token", "  user: {}"))
        else:
            p = kubeconfig(os.path.join(tmp, "bad.kubeconfig"), url, lines)
        try:
            kubeapi.load_kubeconfig(p)
            check("kubeconfig: %s refused" % what, False, "accepted")
        except kubeapi.KubeconfigError as e:
            check("kubeconfig: %s refused, naming what is supported" % what,
                  what in ("certificate without key",) or "supported" in str(e)
                  or what == "as" and "as is not supported" in str(e), str(e))
    p = kubeconfig(os.path.join(tmp, "bad.kubeconfig"), url, ["token: x"],
                   ["insecure-skip-tls-verify: true"])
    try:
        kubeapi.load_kubeconfig(p)
        check("kubeconfig: insecure-skip-tls-verify refused", False, "accepted")
    except kubeapi.KubeconfigError as e:
        check("kubeconfig: insecure-skip-tls-verify refused", "insecure" in str(e), str(e))
    try:
        kubeapi.load_kubeconfig(ok, "nosuch")
        check("kubeconfig: an unknown context refused", False, "accepted")
    except kubeapi.KubeconfigError as e:
        check("kubeconfig: an unknown context refused", "nosuch" in str(e), str(e))


def client_cert(tmp):
    """A client certificate CN=bench-cert O=system:masters signed by the double's CA."""
    kd = os.path.join(tmp, "kube")
    key, csr, crt = (os.path.join(tmp, n) for n in ("c.key", "c.csr", "c.crt"))
    subprocess.run(["openssl", "req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
                    "-subj", "/CN=bench-cert/O=system:masters", "-out", csr],
                   check=True, capture_output=True)
    subprocess.run(["openssl", "x509", "-req", "-in", csr, "-CA", os.path.join(kd, "ca.crt"),
                    "-CAkey", os.path.join(kd, "ca.key"), "-CAcreateserial", "-days", "1",
                    "-out", crt], check=True, capture_output=True)
    return key, crt


def b64file(p):
    import base64
    return base64.b64encode(open(p, "rb").read()).decode()


def test_client(tmp, kube):
    url = kube.url
    admin = kubeapi.ClusterApi(kubeapi.load_kubeconfig(kube.path("kubeconfig")))
    check("client: /version", (admin.version() or "").startswith("v1."), str(admin.version()))
    check("client: token -> admin", admin.whoami() == "admin", str(admin.whoami()))
    agent = kubeapi.ClusterApi(kubeapi.load_kubeconfig(
        kubeconfig(os.path.join(tmp, "agent.kubeconfig"), url, ["tokenFile: kube/agent.token"])))
    check("client: tokenFile -> slurm-k8s-agent", agent.whoami() == "slurm-k8s-agent",
          str(agent.whoami()))
    key, crt = client_cert(tmp)
    files = kubeapi.ClusterApi(kubeapi.load_kubeconfig(kubeconfig(
        os.path.join(tmp, "certfile.kubeconfig"), url,
        ["client-certificate: " + crt, "client-key: " + key])))
    check("client: client-certificate/-key files -> bench-cert", files.whoami() == "bench-cert",
          str(files.whoami()))
    data = kubeapi.ClusterApi(kubeapi.load_kubeconfig(kubeconfig(
        os.path.join(tmp, "certdata.kubeconfig"), url,
        ["client-certificate-data: " + b64file(crt), "client-key-data: " + b64file(key)],
        ["certificate-authority-data: " + b64file(kube.path("ca.crt"))])), tmpdir=tmp)
    check("client: -data (cert, key, CA) -> bench-cert", data.whoami() == "bench-cert",
          str(data.whoami()))
    tmpd = data._tmp
    data.close()
    check("client: the -data files are removed at close", not os.path.exists(tmpd), tmpd)
    noright = kubeapi.ClusterApi(kubeapi.load_kubeconfig(kubeconfig(
        os.path.join(tmp, "noright.kubeconfig"), url, ["tokenFile: kube/noright.token"])))
    check("client: can_i as admin / as a user without rights",
          admin.can_i("create", "pods", namespace="default") is True
          and noright.can_i("create", "pods", namespace="default") is False)
    w = Watch(admin, "/api/v1/namespaces/default/configmaps")
    admin.api("POST", "/api/v1/namespaces/default/configmaps",
              {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "aud-w"}})
    t = w.wait(lambda ev: ev["type"] == "ADDED" and ev["object"]["metadata"]["name"] == "aud-w", 10)
    w.close()
    check("client: sktest.kube.Watch streams through it", t is not None)
    return admin, agent, noright


def test_audit(tmp, kube, audit, admin, agent, noright):
    kube.reset_counters()
    pos = kubeapi.audit_position(audit)
    # what is counted: requests of three users, a 401, a watch that ends and one left open
    admin.api("GET", "/api/v1/nodes")
    admin.api("POST", "/api/v1/namespaces/default/configmaps",
              {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "aud-1"}})
    admin.api("PATCH", "/api/v1/namespaces/default/configmaps/aud-1", {"data": {"a": "b"}},
              ctype="application/merge-patch+json")
    admin.api("DELETE", "/api/v1/namespaces/default/configmaps/aud-1")
    agent.api("GET", "/api/v1/nodes/nosuch")
    noright.api("GET", "/api/v1/namespaces/default/pods")
    bad = kubeapi.ClusterApi(dict(admin.creds, token="wrong", token_file=None))
    bad.api("GET", "/api/v1/nodes")
    agent.api("GET", "/api/v1/nodes?watch=1&timeoutSeconds=1&fieldSelector=metadata.name%3Dx")
    open_watch = Watch(admin, "/api/v1/namespaces/default/pods")
    admin.api("GET", "/version")
    time.sleep(0.3)
    _, counters = kube.api("GET", "/_test/counters")
    events, notes = kubeapi.read_audit(audit, pos)
    lines = [json.loads(x) for x in open(audit).read().splitlines()]
    check("audit: every line an audit.k8s.io/v1 Event at level Metadata",
          all(e.get("kind") == "Event" and e.get("apiVersion") == "audit.k8s.io/v1"
              and e.get("level") == "Metadata" and e.get("auditID") and e.get("requestURI")
              and e.get("verb") and isinstance(e.get("user"), dict)
              and isinstance(e.get("responseStatus", {}).get("code"), int)
              and e.get("stage") in ("ResponseStarted", "ResponseComplete")
              and kubeapi.parse_time(e["stageTimestamp"]) >=
              kubeapi.parse_time(e["requestReceivedTimestamp"]) for e in lines), lines[:1])
    check("audit: no /_test request", not any("/_test" in e["requestURI"] for e in lines))
    check("audit: read from a position, no notes", not notes and events, str(notes))
    by_id = {}
    for e in events:
        by_id.setdefault(e["auditID"], []).append(e)

    def find(verb, uri_part, user=None):
        return [evs for evs in by_id.values() if evs[0]["verb"] == verb and uri_part in evs[0]["requestURI"]
                and (user is None or evs[0]["user"].get("username") == user)]
    w = find("watch", "/api/v1/nodes?watch")
    check("audit: an ended watch: ResponseStarted then ResponseComplete, one auditID",
          len(w) == 1 and [e["stage"] for e in w[0]] == ["ResponseStarted", "ResponseComplete"]
          and w[0][0]["objectRef"] == {"resource": "nodes", "name": "x", "apiVersion": "v1"},
          json.dumps(w))
    w = find("watch", "/api/v1/namespaces/default/pods?watch")
    check("audit: an open watch: its ResponseStarted", len(w) == 1 and
          [e["stage"] for e in w[0]] == ["ResponseStarted"], json.dumps(w))
    u = [evs for evs in by_id.values() if evs[0]["responseStatus"]["code"] == 401]
    check("audit: a failed authentication: ResponseStarted alone, user {}",
          len(u) == 1 and len(u[0]) == 1 and u[0][0]["stage"] == "ResponseStarted"
          and u[0][0]["user"] == {}, json.dumps(u))
    p = find("patch", "configmaps/aud-1")
    check("audit: a patch: ResponseComplete with objectRef and code",
          len(p) == 1 and [e["stage"] for e in p[0]] == ["ResponseComplete"]
          and p[0][0]["objectRef"] == {"namespace": "default", "resource": "configmaps",
                                       "name": "aud-1", "apiVersion": "v1"}
          and p[0][0]["responseStatus"]["code"] == 200
          and p[0][0]["user"]["groups"][:1] == ["system:masters"], json.dumps(p))
    reqs = kubeapi.audit_requests(events)
    win = kubeapi.audit_window(reqs, 0, time.time() + 60)
    bu = win["by_user"]
    check("audit: keys VERB resource CODE",
          bu.get("admin", {}).get("create configmaps 201") == 1
          and bu.get("admin", {}).get("delete configmaps 200") == 1
          and bu.get("slurm-k8s-agent", {}).get("get nodes 404") == 1
          and bu.get("slurm-k8s-agent", {}).get("watch nodes 200") == 1
          and bu.get("noright", {}).get("list pods 403") == 1
          and bu.get("admin", {}).get("get /version 200") == 1
          and bu.get("", {}).get("list nodes 401") == 1, json.dumps(bu))
    # the double counts a request when it finished: all but the open watch
    double = {u: sum(c.values()) for u, c in counters["byUser"].items()}
    audited = {u: sum(c.values()) for u, c in bu.items()}
    audited["admin"] -= 1
    audited["<invalid token>"] = audited.pop("")
    check("audit: per-user counts equal the double's /_test/counters", audited == double,
          "audit %s, counters %s" % (audited, double))
    lat = kubeapi.window_latencies(reqs, 0, time.time() + 60, "admin")
    check("audit: latencies of the finished, not long-running requests",
          len(lat) == audited["admin"] and all(0 <= x < 5 for x in lat), str(lat))
    check("audit: a marker's receipt time", kubeapi.find_marker(reqs, "aud-1") is not None)
    open_watch.close()
    _, notes = kubeapi.read_audit(audit, (pos[0] + 1, pos[1]))
    check("audit: a rotated log is read whole, with a note", notes and "rotated" in notes[0],
          str(notes))
    check("audit: parse_time with an offset",
          kubeapi.parse_time("2024-05-01T12:00:00.5+02:00") ==
          kubeapi.parse_time("2024-05-01T10:00:00.500000Z"))


def test_sklib(tmp, kube, audit):
    """sklib's cluster mode against the double: windows, absence, cleanup."""
    os.environ.update(BENCH_KUBECONFIG=kube.path("kubeconfig"),
                      BENCH_AGENT_KUBECONFIG=os.path.join(tmp, "agent.kubeconfig"))
    import sklib as B
    check("sklib: cluster mode only when asked", B.node_name(1) == "slurm-n1-1" and B.cluster_mode()
          and B.node_name(1) == "skb-%s-n1-1" % B.RUN_ID)
    try:
        t = B.ClusterTarget(os.path.join(tmp, "cl"))
    except SystemExit:
        check("sklib: cluster target opens", False, "exit")
        return
    check("sklib: info", t.info()["kind"] == "cluster" and t.info()["agent_user"] == "slurm-k8s-agent"
          and t.info()["user"] == "admin", str(t.info()))
    check("sklib: agent settings: kubeconfig and a node name template of the run",
          t.agent_settings() == {"kubeconfig": os.path.join(tmp, "agent.kubeconfig"),
                                 "node_name_template": "skb-%s-{node}-{job}" % B.RUN_ID})
    got = t.window_end(t.window_start(latency=True), latency=True)
    check("sklib: no audit log: counts absent with a reason, not zero",
          got["agent"] is None and got["latency_s"] is None and "audit log" in got["absent"],
          str(got))
    t.audit = audit
    agent = kubeapi.ClusterApi(kubeapi.load_kubeconfig(os.path.join(tmp, "agent.kubeconfig")))
    agent.api("GET", "/api/v1/nodes/before")
    w = t.window_start(latency=True)
    for i in range(3):
        agent.api("GET", "/api/v1/nodes/in-%d" % i)
    got = t.window_end(w, latency=True)
    agent.api("GET", "/api/v1/nodes/after")
    check("sklib: the window by its markers: the agent's requests in it, markers left out",
          got["agent"] == {"get nodes 404": 3} and got["window"]["by"].startswith("markers")
          and len(got["latency_s"]) == 3 and "admin" not in got["by_user"], json.dumps(got))
    # cleanup: this run's node, lease and pods go; a node of another cluster_name stays
    ours, other = B.node_name(1), "slurm-n1-1"
    for name, cl in ((ours, B.CLUSTER_NAME), (other, "bench")):
        kube.api("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": name, "labels": {"slurm-k8s/cluster": cl}}})
        kube.api("POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
                 {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                  "metadata": {"name": name}, "spec": {"holderIdentity": name}})
        kube.api("POST", "/api/v1/namespaces/kube-system/pods",
                 {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p-" + name},
                  "spec": {"nodeName": name, "containers": [{"name": "c", "image": "x"}]}})
    t.stop()
    names = [n["metadata"]["name"] for n in kube.api("GET", "/api/v1/nodes")[1]["items"]]
    leases = [x["metadata"]["name"] for x in kube.api(
        "GET", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases")[1]["items"]]
    pods = [p["metadata"]["name"] for p in kube.api("GET", "/api/v1/pods")[1]["items"]]
    check("sklib: cleanup deletes this run's Node, Lease and pods only",
          names == [other] and leases == [other] and pods == ["p-" + other],
          "nodes %s leases %s pods %s" % (names, leases, pods))
    sel = urllib.parse.quote("slurm-k8s/cluster=bench")
    check("sklib: the other node keeps its label", len(kube.api(
        "GET", "/api/v1/nodes?labelSelector=" + sel)[1]["items"]) == 1)


def main():
    if not shutil.which("openssl"):
        print("openssl missing: SKIP")
        return 77
    tmp = tempfile.mkdtemp(prefix="kube-audit-")
    audit = os.path.join(tmp, "audit.log")
    kube = None
    try:
        test_yaml()
        kube = KubeServer(tmp, ["--audit-log", audit])
        test_kubeconfig_forms(tmp, kube.url)
        admin, agent, noright = test_client(tmp, kube)
        test_audit(tmp, kube, audit, admin, agent, noright)
        test_sklib(tmp, kube, audit)
    except Exception as e:  # noqa: BLE001 - a crash is one failure, with its traceback
        import traceback
        traceback.print_exc()
        check("no exception", False, repr(e))
    finally:
        if kube:
            kube.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{PASSED} passed, {FAILED} failed")
    out = os.environ.get("KUBE_TEST_SUMMARY")
    if out:
        with open(out, "w") as f:
            f.write(f"{PASSED} {FAILED} 0\n")
    return 0 if FAILED == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
