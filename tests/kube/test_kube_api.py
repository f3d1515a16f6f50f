#!/usr/bin/python3
"""API behaviour tests for a Kubernetes API server (the test double or a real kube-apiserver 1.28).

Standard library only.  Environment:
  KUBE_STATE_DIR        state dir of kube_test_server.py (reads server.json: URL, tokens, CA, kubelet certs)
  KUBE_URL              API server URL (overrides the state dir)
  KUBE_TOKEN            admin bearer token
  KUBE_CA | KUBE_INSECURE=1
  KUBE_NORIGHTS_TOKEN   token of a user without any rights (auth tests skipped without it)
  KUBE_AGENT_TOKEN      token bound to the agent ClusterRole (RBAC tests skipped without it)
  KUBE_SLOW=1           run the slow node-lifecycle tests against a server without /_test controls
  KUBE_TEST_SUMMARY     file to write "passed failed skipped" counts to
Tests that need the double's /_test controls detect them and are skipped elsewhere.
"""
import http.client
import json
import os
import queue
import random
import re
import socket
import ssl
import string
import sys
import threading
import time
import unittest
import urllib.parse
import datetime
import base64
import shutil
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True
sys.path.insert(0, HERE)


def _cfg():
    c = {"url": os.environ.get("KUBE_URL"), "token": os.environ.get("KUBE_TOKEN"), "ca": os.environ.get("KUBE_CA"),
         "noright": os.environ.get("KUBE_NORIGHTS_TOKEN"), "agent": os.environ.get("KUBE_AGENT_TOKEN"),
         "insecure": os.environ.get("KUBE_INSECURE") == "1", "state": os.environ.get("KUBE_STATE_DIR")}
    sd = c["state"]
    if sd and os.path.exists(os.path.join(sd, "server.json")):
        sj = json.load(open(os.path.join(sd, "server.json")))
        rd = lambda p: open(p).read().strip() if p and os.path.exists(p) else None
        c["url"] = c["url"] or sj["url"]
        c["token"] = c["token"] or rd(sj.get("adminToken"))
        c["ca"] = c["ca"] or sj.get("ca")
        c["noright"] = c["noright"] or rd(sj.get("norightToken"))
        c["agent"] = c["agent"] or rd(sj.get("agentToken"))
        c["sj"] = sj
    return c


CFG = _cfg()


def rname(prefix="t"):
    return prefix + "-" + "".join(random.choice(string.ascii_lowercase + string.digits) for _ in range(6))


def now_s():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_us():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Resp(object):
    def __init__(self, status, headers, body):
        self.status, self.headers, self.raw = status, headers, body
        try:
            self.json = json.loads(body.decode()) if body else None
        except ValueError:
            self.json = None

    @property
    def text(self):
        return self.raw.decode("utf-8", "replace")


class Client(object):
    def __init__(self):
        u = urllib.parse.urlsplit(CFG["url"])
        self.https = u.scheme == "https"
        self.host, self.port = u.hostname, u.port or (443 if self.https else 80)
        if self.https:
            if CFG["insecure"] or not CFG["ca"]:
                self.ctx = ssl._create_unverified_context()
            else:
                self.ctx = ssl.create_default_context(cafile=CFG["ca"])
        self.local = threading.local()

    def conn(self, timeout=30):
        if self.https:
            return http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=timeout)
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def req(self, method, path, body=None, ctype="application/json", token="admin", headers=None, conn=None):
        h = dict(headers or {})
        tok = CFG["token"] if token == "admin" else token
        if tok:
            h["Authorization"] = "Bearer " + tok
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            h["Content-Type"] = ctype
        own = conn is None
        c = conn or self.conn()
        try:
            c.request(method, path, body=data, headers=h)
            r = c.getresponse()
            return Resp(r.status, r.headers, r.read())
        finally:
            if own:
                c.close()

    def get(self, path, **kw):
        return self.req("GET", path, **kw)

    def post(self, path, body, **kw):
        return self.req("POST", path, body, **kw)

    def put(self, path, body, **kw):
        return self.req("PUT", path, body, **kw)

    def patch(self, path, body, kind="strategic", **kw):
        ct = {"strategic": "application/strategic-merge-patch+json", "merge": "application/merge-patch+json",
              "json": "application/json-patch+json"}.get(kind, kind)
        return self.req("PATCH", path, body, ctype=ct, **kw)

    def delete(self, path, body=None, **kw):
        return self.req("DELETE", path, body, **kw)


API = Client() if CFG["url"] else None


class Watch(object):
    def __init__(self, path, token="admin", timeout=60):
        self.conn = API.conn(timeout=timeout)
        h = {"Authorization": "Bearer " + (CFG["token"] if token == "admin" else token)}
        self.conn.request("GET", path, headers=h)
        self.resp = self.conn.getresponse()
        self.status = self.resp.status
        self.q = queue.Queue()
        self.closed = False
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        try:
            while True:
                line = self.resp.readline()
                if not line:
                    break
                if line.strip():
                    self.q.put(json.loads(line))
        except Exception:
            pass
        self.q.put(None)

    def next(self, timeout=10):
        try:
            ev = self.q.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError("no watch event within %ss" % timeout)
        if ev is None:
            self.closed = True
        return ev

    def expect_none(self, secs):
        try:
            ev = self.q.get(timeout=secs)
        except queue.Empty:
            return
        raise AssertionError("unexpected watch event %s" % json.dumps(ev)[:300])

    def until(self, pred, timeout=10):
        end = time.time() + timeout
        while time.time() < end:
            ev = self.next(max(0.1, end - time.time()))
            if ev is None:
                raise AssertionError("watch closed")
            if pred(ev):
                return ev
        raise AssertionError("condition not met")

    def close(self):
        try:
            self.conn.sock.shutdown(socket.SHUT_RDWR)
        except Exception:
            pass
        self.conn.close()


_CONTROLS = None


def has_controls():
    global _CONTROLS
    if _CONTROLS is None:
        try:
            r = API.get("/_test/info")
            _CONTROLS = r.status == 200 and (r.json or {}).get("double") is True
        except Exception:
            _CONTROLS = False
    return _CONTROLS


def control(path, body=None, method="POST"):
    r = API.req(method, "/_test/" + path, body)
    assert r.status == 200, (path, r.status, r.text)
    return r.json


def wait_for(fn, timeout=15, interval=0.1, msg="condition"):
    end = time.time() + timeout
    last = None
    while time.time() < end:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError("timed out waiting for %s (last=%r)" % (msg, last))


def node_body(name, labels=None, capacity=None, ready=True, addresses=None, port=None):
    t = now_s()
    conds = [{"type": ty, "status": "False", "reason": r, "message": m, "lastHeartbeatTime": t, "lastTransitionTime": t}
             for ty, r, m in (("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                              ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                              ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"))]
    conds.append({"type": "Ready", "status": "True" if ready else "False",
                  "reason": "KubeletReady" if ready else "KubeletNotReady",
                  "message": "kubelet is posting ready status" if ready else "not yet",
                  "lastHeartbeatTime": t, "lastTransitionTime": t})
    st = {"capacity": capacity or {"cpu": "4", "memory": "8Gi", "pods": "110"}, "conditions": conds,
          "addresses": addresses or [{"type": "InternalIP", "address": "127.0.0.1"}],
          "nodeInfo": {"kubeletVersion": "v1.28.7", "osImage": "Test OS", "kernelVersion": "6.1", "containerRuntimeVersion": "fake://1",
                       "operatingSystem": "linux", "architecture": "amd64", "machineID": "", "systemUUID": "", "bootID": "",
                       "kubeProxyVersion": ""}}
    if port:
        st["daemonEndpoints"] = {"kubeletEndpoint": {"Port": port}}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels or {}}, "status": st}


def lease_body(name, node_uid=None, renew=None):
    b = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
         "metadata": {"name": name, "namespace": "kube-node-lease"},
         "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": renew or now_us()}}
    if node_uid:
        b["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": name, "uid": node_uid}]
    return b


def pod_body(name, node=None, limits=None, requests=None, selector=None, tolerations=None, image="busybox:1.35",
             containers=None, labels=None):
    c = {"name": "main", "image": image}
    if limits or requests:
        c["resources"] = {}
        if limits:
            c["resources"]["limits"] = limits
        if requests:
            c["resources"]["requests"] = requests
    b = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {}},
         "spec": {"containers": containers or [c]}}
    if node:
        b["spec"]["nodeName"] = node
    if selector:
        b["spec"]["nodeSelector"] = selector
    if tolerations:
        b["spec"]["tolerations"] = tolerations
    return b


class Base(unittest.TestCase):
    ns = None
    nodes = None

    @classmethod
    def setUpClass(cls):
        if API is None:
            raise unittest.SkipTest("KUBE_URL / KUBE_STATE_DIR not set")
        cls.nodes = []
        cls.ns = rname("kt")
        r = API.post("/api/v1/namespaces", {"metadata": {"name": cls.ns}})
        assert r.status == 201, r.text

    @classmethod
    def tearDownClass(cls):
        for n in cls.nodes or []:
            API.delete("/api/v1/nodes/" + n)
            API.delete("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/" + n)
        if cls.ns:
            r = API.get("/api/v1/namespaces/%s/pods" % cls.ns)
            for p in (r.json or {}).get("items", []):
                API.delete("/api/v1/namespaces/%s/pods/%s" % (cls.ns, p["metadata"]["name"]), {"gracePeriodSeconds": 0})
            API.delete("/api/v1/namespaces/" + cls.ns)

    def pods(self, name=""):
        return "/api/v1/namespaces/%s/pods" % self.ns + ("/" + name if name else "")

    def mknode(self, name=None, **kw):
        name = name or rname("n")
        r = API.post("/api/v1/nodes", node_body(name, **kw))
        self.assertEqual(r.status, 201, r.text)
        type(self).nodes.append(name)
        return r.json

    def mkready(self, name=None, **kw):
        """A Ready node with a fresh Lease, waiting for the controller to remove the not-ready taint."""
        n = self.mknode(name, **kw)
        name = n["metadata"]["name"]
        r = API.post("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", lease_body(name, n["metadata"]["uid"]))
        self.assertEqual(r.status, 201, r.text)
        wait_for(lambda: not any(t["key"] == "node.kubernetes.io/not-ready" for t in
                                 (API.get("/api/v1/nodes/" + name).json["spec"].get("taints") or [])),
                 timeout=20, msg="not-ready taint removal")
        return API.get("/api/v1/nodes/" + name).json

    def assertStatus(self, r, code, reason=None):
        self.assertEqual(r.status, code, r.text[:500])
        if reason:
            self.assertEqual(r.json.get("kind"), "Status", r.text[:300])
            self.assertEqual(r.json.get("reason"), reason, r.text[:300])


# ------------------------------------------------------------------------------------------------
class TestAuth(Base):
    def test_anonymous(self):
        for p in ("/version", "/readyz", "/livez"):
            self.assertEqual(API.get(p, token=None).status, 200, p)
        r = API.get("/api/v1/nodes", token=None)
        self.assertStatus(r, 403, "Forbidden")
        self.assertIn('User "system:anonymous"', r.json["message"])
        self.assertStatus(API.get("/api/v1/namespaces/default/pods", token=None), 403, "Forbidden")

    def test_wrong_token(self):
        for p in ("/version", "/readyz", "/api/v1/nodes", "/api"):
            r = API.get(p, token="definitely-wrong")
            self.assertEqual(r.status, 401, p)
            self.assertEqual(r.json["reason"], "Unauthorized")

    def test_no_rights(self):
        if not CFG["noright"]:
            self.skipTest("KUBE_NORIGHTS_TOKEN not set")
        r = API.get("/api/v1/nodes", token=CFG["noright"])
        self.assertStatus(r, 403, "Forbidden")
        self.assertRegex(r.json["message"], r'^nodes is forbidden: User "[^"]+" cannot list resource "nodes" in API group "" at the cluster scope$')
        r = API.get("/api/v1/namespaces/default/pods/x", token=CFG["noright"])
        self.assertRegex(r.json["message"], r'^pods "x" is forbidden: User "[^"]+" cannot get resource "pods" in API group "" in the namespace "default"$')
        self.assertEqual(API.get("/version", token=CFG["noright"]).status, 200)
        self.assertEqual(API.get("/api", token=CFG["noright"]).status, 200)

    def test_agent_role(self):
        if not CFG["agent"]:
            self.skipTest("KUBE_AGENT_TOKEN not set")
        a = CFG["agent"]
        name = rname("n")
        r = API.post("/api/v1/nodes", node_body(name), token=a)
        self.assertEqual(r.status, 201, r.text)
        type(self).nodes.append(name)
        self.assertEqual(API.patch("/api/v1/nodes/%s/status" % name, {"status": {}}, token=a).status, 200)
        r = API.post("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", lease_body(name), token=a)
        self.assertEqual(r.status, 201, r.text)
        r = API.post("/apis/coordination.k8s.io/v1/namespaces/default/leases", lease_body(name), token=a)
        self.assertStatus(r, 403, "Forbidden")
        # Listing the node Leases (gc_failed_nodes), and only in kube-node-lease.
        self.assertEqual(API.get("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", token=a).status, 200)
        self.assertStatus(API.get("/apis/coordination.k8s.io/v1/namespaces/default/leases", token=a), 403, "Forbidden")
        self.assertEqual(API.get("/api/v1/pods?fieldSelector=spec.nodeName%3D" + name, token=a).status, 200)
        self.assertStatus(API.post(self.pods(), pod_body("x"), token=a), 403, "Forbidden")
        r = API.get("/api/v1/namespaces/default/secrets", token=a)
        self.assertStatus(r, 403, "Forbidden")
        self.assertIn('cannot list resource "secrets"', r.json["message"])
        r = API.patch("/api/v1/nodes/%s/status" % name, {"status": {}}, token=CFG["noright"]) if CFG["noright"] else None
        if r:
            self.assertIn('cannot patch resource "nodes/status"', r.json["message"])
        API.delete("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/" + name, token=a)


class TestReviews(Base):
    """TokenReview and SubjectAccessReview as a kubelet in Webhook mode (the agent's kubelet endpoint)
    asks them, and the self reviews kubectl auth can-i / whoami use."""
    TR = "/apis/authentication.k8s.io/v1/tokenreviews"
    SAR = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
    AUD = "https://kubernetes.default.svc.cluster.local"

    def token_review(self, token, audiences=None, as_token="admin"):
        spec = {"token": token}
        if audiences is not None:
            spec["audiences"] = audiences
        r = API.post(self.TR, {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec},
                     token=as_token)
        self.assertEqual(r.status, 201, r.text[:500])
        self.assertEqual((r.json["kind"], r.json["apiVersion"]), ("TokenReview", "authentication.k8s.io/v1"))
        self.assertEqual(r.json["spec"]["token"], token)
        return r.json["status"]

    def sar(self, spec, as_token="admin"):
        return API.post(self.SAR, {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec},
                        token=as_token)

    def test_token_review_known(self):
        st = self.token_review(CFG["token"])
        self.assertIs(st.get("authenticated"), True, st)
        me = API.post("/apis/authentication.k8s.io/v1/selfsubjectreviews",
                      {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
        self.assertEqual(me.status, 201, me.text[:300])
        info = me.json["status"]["userInfo"]
        self.assertEqual(st["user"]["username"], info["username"])
        self.assertEqual(st["user"].get("groups"), info.get("groups"))
        self.assertIn("system:authenticated", st["user"]["groups"])
        self.assertNotIn("error", st)
        self.assertIs(self.token_review(CFG["token"], ["kubetest-not-an-audience"]).get("authenticated", False), False)
        if has_controls():
            self.assertEqual(st["user"], {"username": "admin", "uid": "admin",
                                          "groups": ["system:masters", "system:authenticated"]})
            self.assertEqual(st["audiences"], [self.AUD])
            self.assertIs(self.token_review(CFG["token"], [self.AUD, "other"]).get("authenticated"), True)

    def test_token_review_garbage(self):
        st = self.token_review("kubetest-garbage-" + rname("t"))
        self.assertNotIn("authenticated", st)     # false: left out by Go's omitempty
        self.assertEqual(st["user"], {})
        self.assertNotIn("audiences", st)
        self.assertIsInstance(st.get("error"), str)
        self.assertTrue(st["error"])
        r = API.post(self.TR, {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {}})
        self.assertStatus(r, 400, "BadRequest")
        self.assertEqual(r.json["message"], "token is required for TokenReview in authentication")

    def test_sar_masters_allowed(self):
        spec = {"user": rname("someone"), "groups": ["system:masters"],
                "resourceAttributes": {"verb": "get", "resource": "nodes", "subresource": "proxy", "name": "n1"}}
        r = self.sar(spec)
        self.assertEqual(r.status, 201, r.text[:500])
        self.assertEqual((r.json["kind"], r.json["apiVersion"]), ("SubjectAccessReview", "authorization.k8s.io/v1"))
        self.assertEqual(r.json["spec"], spec)
        self.assertIs(r.json["status"]["allowed"], True, r.text)
        self.assertNotIn("denied", r.json["status"])

    def test_sar_no_bindings_denied(self):
        for attrs in ({"resourceAttributes": {"verb": "get", "resource": "nodes", "subresource": "proxy", "name": "n1"}},
                      {"nonResourceAttributes": {"verb": "get", "path": "/metrics"}}):
            r = self.sar(dict(attrs, user=rname("nobody")))
            self.assertEqual(r.status, 201, r.text[:500])
            self.assertIs(r.json["status"]["allowed"], False, r.text)    # "allowed" has no omitempty
            self.assertNotIn("denied", r.json["status"])                 # RBAC has no opinion, it does not deny
            self.assertEqual(r.json["status"].get("reason", ""), "")

    def test_sar_rbac_rules(self):
        if not has_controls():
            self.skipTest("the double's agent group binding and reason texts")
        ra = {"verb": "get", "resource": "nodes", "subresource": "proxy"}
        st = self.sar({"user": "x", "groups": ["slurm-k8s:agent"], "resourceAttributes": ra}).json["status"]
        self.assertEqual(st, {"allowed": False})
        st = self.sar({"user": "x", "groups": ["slurm-k8s:agent"],
                       "resourceAttributes": {"verb": "patch", "resource": "nodes", "subresource": "status"}}).json["status"]
        self.assertEqual(st, {"allowed": True, "reason": 'RBAC: allowed by ClusterRoleBinding "slurm-k8s-agent" of '
                                                        'ClusterRole "slurm-k8s-agent" to Group "slurm-k8s:agent"'})
        lease = {"verb": "update", "group": "coordination.k8s.io", "resource": "leases", "namespace": "kube-node-lease"}
        st = self.sar({"user": "x", "groups": ["slurm-k8s:agent"], "resourceAttributes": lease}).json["status"]
        self.assertTrue(st["allowed"])
        self.assertIn('RoleBinding "slurm-k8s-agent/kube-node-lease" of Role "slurm-k8s-agent"', st["reason"])
        lease["namespace"] = "default"
        st = self.sar({"user": "x", "groups": ["slurm-k8s:agent"], "resourceAttributes": lease}).json["status"]
        self.assertFalse(st["allowed"])
        # the groups are taken as given: no system:authenticated added
        nra = {"verb": "get", "path": "/apis/coordination.k8s.io"}
        self.assertFalse(self.sar({"user": "x", "nonResourceAttributes": nra}).json["status"]["allowed"])
        st = self.sar({"user": "x", "groups": ["system:authenticated"], "nonResourceAttributes": nra}).json["status"]
        self.assertTrue(st["allowed"])

    def test_sar_invalid(self):
        r = self.sar({"resourceAttributes": {"verb": "get", "resource": "nodes"}})
        self.assertStatus(r, 422, "Invalid")
        self.assertEqual(r.json["message"], 'SubjectAccessReview.authorization.k8s.io "" is invalid: spec.user: '
                                            'Invalid value: "": at least one of user or group must be specified')
        msg = 'Invalid value: "": at least one of user or group must be specified'
        self.assertEqual(r.json["details"]["causes"], [{"reason": "FieldValueInvalid", "field": "spec.user", "message": msg}])
        r = self.sar({"user": "x"})
        self.assertStatus(r, 422, "Invalid")
        self.assertIn("spec.resourceAttributes: Invalid value: \"null\": exactly one of nonResourceAttributes or "
                      "resourceAttributes must be specified", r.json["message"])

    def test_callers_need_create(self):
        if not CFG["noright"]:
            self.skipTest("KUBE_NORIGHTS_TOKEN not set")
        r = self.sar({"user": "x", "resourceAttributes": {"verb": "get", "resource": "nodes"}}, as_token=CFG["noright"])
        self.assertStatus(r, 403, "Forbidden")
        self.assertRegex(r.json["message"], r'^subjectaccessreviews\.authorization\.k8s\.io is forbidden: User "[^"]+" '
                         r'cannot create resource "subjectaccessreviews" in API group "authorization\.k8s\.io" '
                         r'at the cluster scope$')
        r = API.post(self.TR, {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": "x"}},
                     token=CFG["noright"])
        self.assertStatus(r, 403, "Forbidden")
        self.assertIn('cannot create resource "tokenreviews" in API group "authentication.k8s.io"', r.json["message"])
        # every authenticated user may ask about itself (system:basic-user)
        r = API.post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                     {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                      "spec": {"resourceAttributes": {"verb": "list", "resource": "nodes"}}}, token=CFG["noright"])
        self.assertEqual(r.status, 201, r.text[:300])
        self.assertIs(r.json["status"]["allowed"], False)

    def test_agent_may_review(self):
        if not CFG["agent"]:
            self.skipTest("KUBE_AGENT_TOKEN not set")
        st = self.token_review(CFG["agent"], as_token=CFG["agent"])
        self.assertIs(st.get("authenticated"), True, st)
        r = self.sar({"user": rname("nobody"), "resourceAttributes": {"verb": "get", "resource": "nodes",
                                                                      "subresource": "proxy"}}, as_token=CFG["agent"])
        self.assertEqual(r.status, 201, r.text[:300])
        self.assertIs(r.json["status"]["allowed"], False)

    def test_discovery(self):
        groups = {g["name"]: g for g in API.get("/apis").json["groups"]}
        for g, kinds in (("authentication.k8s.io", {"tokenreviews": "TokenReview",
                                                    "selfsubjectreviews": "SelfSubjectReview"}),
                         ("authorization.k8s.io", {"subjectaccessreviews": "SubjectAccessReview",
                                                   "selfsubjectaccessreviews": "SelfSubjectAccessReview"})):
            self.assertEqual(groups[g]["preferredVersion"], {"groupVersion": g + "/v1", "version": "v1"})
            res = {x["name"]: x for x in API.get("/apis/%s/v1" % g).json["resources"]}
            for n, kind in kinds.items():
                self.assertEqual((res[n]["kind"], res[n]["namespaced"], res[n]["verbs"]), (kind, False, ["create"]), n)


def jwt_part(token, i):
    """Part i of a JWT (0 header, 1 payload) decoded: base64url without padding, JSON."""
    import base64
    seg = token.split(".")[i]
    return json.loads(base64.urlsafe_b64decode(seg + "=" * (-len(seg) % 4)).decode())


def epoch_of(t):
    return datetime.datetime.strptime(t, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc).timestamp()


UNAUTHORIZED = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": "Unauthorized",
                "reason": "Unauthorized", "code": 401}


class TestServiceAccountTokens(Base):
    """ServiceAccounts and the TokenRequest API (serviceaccounts/NAME/token, what `kubectl create token`
    posts), and the tokens it issues used as bearer tokens: what the agent's credential rotation meets.
    A real kube-apiserver caches a successful token authentication for 10 s, so a token whose
    ServiceAccount or Pod went away is polled until it gets 401."""
    WHOAMI = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
    TR = "/apis/authentication.k8s.io/v1/tokenreviews"
    AUD = "https://kubernetes.default.svc.cluster.local"
    ONE_YEAR = 365 * 24 * 3600

    def sas(self, name=""):
        return "/api/v1/namespaces/%s/serviceaccounts" % self.ns + ("/" + name if name else "")

    def mksa(self, name=None):
        r = API.post(self.sas(), {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name or rname("sa")}})
        self.assertEqual(r.status, 201, r.text[:300])
        return r.json

    def token_request(self, sa, spec):
        return API.post(self.sas(sa) + "/token", {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                                  "spec": spec})

    def issue(self, sa, spec):
        """(the TokenRequest answered, the token's claims)"""
        r = self.token_request(sa, spec)
        self.assertEqual(r.status, 201, r.text[:500])
        self.assertEqual((r.json["kind"], r.json["apiVersion"]), ("TokenRequest", "authentication.k8s.io/v1"))
        return r.json, jwt_part(r.json["status"]["token"], 1)

    def whoami(self, token):
        return API.post(self.WHOAMI, {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}, token=token)

    def token_review(self, token, audiences=None):
        spec = {"token": token}
        if audiences:
            spec["audiences"] = audiences
        r = API.post(self.TR, {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec})
        self.assertEqual(r.status, 201, r.text[:300])
        return r.json["status"]

    def user_of(self, sa):
        return "system:serviceaccount:%s:%s" % (self.ns, sa["metadata"]["name"])

    def groups(self):
        return ["system:serviceaccounts", "system:serviceaccounts:" + self.ns, "system:authenticated"]

    def assertUnauthorized(self, r):
        self.assertEqual(r.status, 401, r.text[:300])
        self.assertEqual(r.json, UNAUTHORIZED)

    def wait_unauthorized(self, token, what):
        def refused():
            r = self.whoami(token)
            return r if r.status != 201 else None
        self.assertUnauthorized(wait_for(refused, timeout=30, interval=0.2, msg="401 for the token after " + what))

    def test_serviceaccount_object(self):
        sa = self.mksa()
        name = sa["metadata"]["name"]
        self.assertEqual((sa["kind"], sa["apiVersion"], sa["metadata"]["namespace"]), ("ServiceAccount", "v1", self.ns))
        for f in ("uid", "resourceVersion", "creationTimestamp"):
            self.assertTrue(sa["metadata"].get(f), f)
        r = API.get(self.sas(name))
        self.assertEqual(r.status, 200, r.text[:300])
        self.assertEqual(r.json["metadata"]["uid"], sa["metadata"]["uid"])
        self.assertIn(name, [o["metadata"]["name"] for o in API.get(self.sas()).json["items"]])
        self.assertStatus(API.post(self.sas(), {"metadata": {"name": name}}), 409, "AlreadyExists")
        t = API.get(self.sas(name), headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}).json
        self.assertEqual([c["name"] for c in t["columnDefinitions"]], ["Name", "Secrets", "Age"])
        self.assertEqual(t["rows"][0]["cells"][0], name)
        res = {x["name"]: x for x in API.get("/api/v1").json["resources"]}
        self.assertEqual((res["serviceaccounts"]["kind"], res["serviceaccounts"]["namespaced"]), ("ServiceAccount", True))
        self.assertIn("sa", res["serviceaccounts"]["shortNames"])
        tr = res["serviceaccounts/token"]
        self.assertEqual((tr["kind"], tr["group"], tr["version"], tr["verbs"]),
                         ("TokenRequest", "authentication.k8s.io", "v1", ["create"]))
        self.assertEqual(API.delete(self.sas(name)).status, 200)
        self.assertStatus(API.get(self.sas(name)), 404, "NotFound")

    def test_default_token(self):
        sa = self.mksa()
        name, uid = sa["metadata"]["name"], sa["metadata"]["uid"]
        tr, c = self.issue(name, {})
        self.assertEqual((tr["metadata"]["name"], tr["metadata"]["namespace"]), (name, self.ns))
        auds = tr["spec"]["audiences"]
        self.assertEqual((tr["spec"]["expirationSeconds"], tr["spec"]["boundObjectRef"]), (3600, None))
        self.assertEqual(jwt_part(tr["status"]["token"], 0)["alg"], "RS256")
        self.assertTrue(jwt_part(tr["status"]["token"], 0)["kid"])
        self.assertEqual(c["exp"] - c["iat"], 3600)
        self.assertEqual(c["nbf"], c["iat"])
        self.assertLessEqual(abs(epoch_of(tr["status"]["expirationTimestamp"]) - (c["iat"] + 3600)), 1)
        self.assertEqual(c["aud"], auds)
        self.assertEqual(c["sub"], self.user_of(sa))
        self.assertEqual(c["kubernetes.io"], {"namespace": self.ns, "serviceaccount": {"name": name, "uid": uid}})
        self.assertIsInstance(c["iss"], str)
        if has_controls():
            self.assertEqual((auds, c["iss"]), ([self.AUD], self.AUD))
        # the token authenticates as the ServiceAccount
        tok = tr["status"]["token"]
        r = self.whoami(tok)
        self.assertEqual(r.status, 201, r.text[:300])
        self.assertEqual(r.json["status"]["userInfo"], {"username": self.user_of(sa), "uid": uid, "groups": self.groups()})
        self.assertEqual(API.get("/api", token=tok).status, 200)
        r = API.get(self.pods(), token=tok)
        self.assertStatus(r, 403, "Forbidden")
        self.assertEqual(r.json["message"], 'pods is forbidden: User "%s" cannot list resource "pods" in API group "" '
                                            'in the namespace "%s"' % (self.user_of(sa), self.ns))
        st = self.token_review(tok)
        self.assertIs(st.get("authenticated"), True, st)
        self.assertEqual(st["user"], {"username": self.user_of(sa), "uid": uid, "groups": self.groups()})
        self.assertEqual(st["audiences"], auds)

    def test_audiences(self):
        sa = self.mksa()
        aud = "kubetest-" + rname("aud")
        tr, c = self.issue(sa["metadata"]["name"], {"audiences": [aud]})
        self.assertEqual((tr["spec"]["audiences"], c["aud"]), ([aud], [aud]))
        tok = tr["status"]["token"]
        self.assertUnauthorized(self.whoami(tok))       # not for the API's audience
        st = self.token_review(tok, [aud, "kubetest-other"])
        self.assertIs(st.get("authenticated"), True, st)
        self.assertEqual((st["user"]["username"], st["audiences"]), (self.user_of(sa), [aud]))
        st = self.token_review(tok)
        self.assertNotIn("authenticated", st)
        self.assertEqual(st["user"], {})

    def test_expiration_too_short(self):
        if has_controls():      # the real minimum, also where the suite started the double with a lower one
            saved = control("controllers", method="GET")["minTokenExpiration"]
            control("controllers", {"minTokenExpiration": 600})
            self.addCleanup(control, "controllers", {"minTokenExpiration": saved})
        name = self.mksa()["metadata"]["name"]
        r = self.token_request(name, {"expirationSeconds": 599})
        self.assertStatus(r, 422, "Invalid")
        msg = "Invalid value: 599: may not specify a duration less than 10 minutes"
        self.assertEqual(r.json["message"], 'TokenRequest.authentication.k8s.io "" is invalid: spec.expirationSeconds: ' + msg)
        self.assertEqual(r.json["details"], {"group": "authentication.k8s.io", "kind": "TokenRequest", "causes": [
            {"reason": "FieldValueInvalid", "message": msg, "field": "spec.expirationSeconds"}]})
        tr, c = self.issue(name, {"expirationSeconds": 600})
        self.assertEqual(c["exp"] - c["iat"], 600)

    def test_missing_serviceaccount(self):
        name = rname("nosa")
        r = self.token_request(name, {})
        self.assertStatus(r, 404, "NotFound")
        self.assertEqual(r.json["message"], 'serviceaccounts "%s" not found' % name)
        self.assertEqual(r.json["details"], {"name": name, "kind": "serviceaccounts"})

    def test_pod_bound(self):
        sa, other = self.mksa(), self.mksa()
        name = sa["metadata"]["name"]
        pb = pod_body(rname("p"))
        pb["spec"]["serviceAccountName"] = name
        r = API.post(self.pods(), pb)
        self.assertEqual(r.status, 201, r.text[:300])
        pod = r.json["metadata"]
        ref = {"kind": "Pod", "apiVersion": "v1", "name": pod["name"], "uid": pod["uid"]}
        # the ServiceAccount admission plugin's projected token: 3607 s bound to a pod lasts a year
        tr, c = self.issue(name, {"expirationSeconds": 3607, "boundObjectRef": ref})
        self.assertEqual((tr["spec"]["expirationSeconds"], tr["spec"]["boundObjectRef"]), (3607, ref))
        self.assertEqual(c["exp"] - c["iat"], self.ONE_YEAR)
        self.assertEqual(c["kubernetes.io"], {"namespace": self.ns, "pod": {"name": pod["name"], "uid": pod["uid"]},
                                              "serviceaccount": {"name": name, "uid": sa["metadata"]["uid"]},
                                              "warnafter": c["iat"] + 3607})
        self.assertLessEqual(abs(epoch_of(tr["status"]["expirationTimestamp"]) - (c["iat"] + 3607)), 1)
        tok = tr["status"]["token"]
        r = self.whoami(tok)
        self.assertEqual(r.status, 201, r.text[:300])
        self.assertEqual(r.json["status"]["userInfo"], {
            "username": self.user_of(sa), "uid": sa["metadata"]["uid"], "groups": self.groups(),
            "extra": {"authentication.kubernetes.io/pod-name": [pod["name"]],
                      "authentication.kubernetes.io/pod-uid": [pod["uid"]]}})
        # no extension for another lifetime, or without the pod
        _, c = self.issue(name, {"expirationSeconds": 3600, "boundObjectRef": ref})
        self.assertEqual(c["exp"] - c["iat"], 3600)
        self.assertNotIn("warnafter", c["kubernetes.io"])
        _, c = self.issue(name, {"expirationSeconds": 3607})
        self.assertEqual(c["exp"] - c["iat"], 3607)
        self.assertNotIn("warnafter", c["kubernetes.io"])
        # a binding to a pod that is not the one (another uid), not there, or runs as another ServiceAccount
        r = self.token_request(name, {"boundObjectRef": dict(ref, uid="00000000-0000-0000-0000-000000000000")})
        self.assertStatus(r, 409, "Conflict")
        self.assertEqual(r.json["message"], 'Operation cannot be fulfilled on Pod "%s": the UID in the bound object '
                         'reference (00000000-0000-0000-0000-000000000000) does not match the UID in record. The object '
                         'might have been deleted and then recreated' % pod["name"])
        r = self.token_request(name, {"boundObjectRef": dict(ref, name="nopod", uid="")})
        self.assertStatus(r, 404, "NotFound")
        self.assertEqual(r.json["message"], 'pods "nopod" not found')
        r = self.token_request(other["metadata"]["name"], {"boundObjectRef": ref})
        self.assertStatus(r, 400, "BadRequest")
        self.assertEqual(r.json["message"], 'cannot bind token for serviceaccount "%s" to pod running with different '
                                            'serviceaccount name.' % other["metadata"]["name"])
        # the pod gone: the token with it
        r = API.delete(self.pods(pod["name"]), {"gracePeriodSeconds": 0})
        self.assertEqual(r.status, 200, r.text[:300])
        self.wait_unauthorized(tok, "its pod was deleted")

    def test_serviceaccount_deleted(self):
        sa = self.mksa()
        name = sa["metadata"]["name"]
        tok = self.issue(name, {})[0]["status"]["token"]
        self.assertEqual(self.whoami(tok).status, 201)
        self.assertEqual(API.delete(self.sas(name)).status, 200)
        self.wait_unauthorized(tok, "its ServiceAccount was deleted")
        self.mksa(name)                 # the same name again is another ServiceAccount (uid)
        self.assertUnauthorized(self.whoami(tok))
        self.assertNotIn("authenticated", self.token_review(tok))

    def test_expiry(self):
        """A token dies `exp` plus the server's leeway (real: 60 s) after it was issued. Only where the
        server issues tokens of a few seconds: the double started with --min-token-expiration 1 and
        --token-expiry-leeway 0 (run-tests.sh); a real one refuses them (422), and the test is skipped."""
        sa = self.mksa()
        r = self.token_request(sa["metadata"]["name"], {"expirationSeconds": 3})
        if r.status == 422:
            self.skipTest("the server does not issue tokens of 3 s (its minimum: %s)" % r.json["message"].split(": ")[-1])
        leeway = 60.0
        if has_controls():
            leeway = control("controllers", method="GET")["tokenExpiryLeeway"]
            if leeway > 5:
                self.skipTest("the double's --token-expiry-leeway is %ss" % leeway)
        self.assertEqual(r.status, 201, r.text[:300])
        tok = r.json["status"]["token"]
        c = jwt_part(tok, 1)
        self.assertEqual(c["exp"] - c["iat"], 3)
        self.assertEqual(self.whoami(tok).status, 201)
        self.assertIs(self.token_review(tok).get("authenticated"), True)
        end = c["exp"] + leeway + 15
        while True:
            r = self.whoami(tok)
            if r.status != 201 or time.time() > end:
                break
            time.sleep(0.1)
        self.assertUnauthorized(r)
        self.assertGreater(time.time(), c["exp"] + leeway)
        st = self.token_review(tok)
        self.assertNotIn("authenticated", st)
        self.assertEqual(st["user"], {})

    def test_rbac_by_user_name(self):
        """A binding of the user name (the double's --role user:system:serviceaccount:NS:NAME=agent)."""
        if not has_controls():
            self.skipTest("binds roles with the double's /_test/rbac")
        sa = self.mksa()
        tok = self.issue(sa["metadata"]["name"], {})[0]["status"]["token"]
        self.assertStatus(API.get("/api/v1/nodes", token=tok), 403, "Forbidden")
        subject = "user:" + self.user_of(sa)
        control("rbac", {"subject": subject, "role": "agent"})
        self.addCleanup(control, "rbac", {"subject": subject, "role": "none"})
        self.assertEqual(API.get("/api/v1/nodes", token=tok).status, 200)
        r = API.post("/apis/authorization.k8s.io/v1/subjectaccessreviews", {
            "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {"user": self.user_of(sa), "groups": self.groups(),
                     "resourceAttributes": {"verb": "list", "resource": "nodes"}}})
        self.assertEqual(r.json["status"], {"allowed": True, "reason": 'RBAC: allowed by ClusterRoleBinding "slurm-k8s-agent" '
                                            'of ClusterRole "slurm-k8s-agent" to User "%s"' % self.user_of(sa)})


class TestDiscovery(Base):
    def test_api(self):
        r = API.get("/api")
        self.assertEqual(r.json["kind"], "APIVersions")
        self.assertNotIn("apiVersion", r.json)
        self.assertIn("v1", r.json["versions"])
        r = API.get("/api/v1")
        self.assertEqual(r.json["kind"], "APIResourceList")
        self.assertNotIn("apiVersion", r.json)
        res = {x["name"]: x for x in r.json["resources"]}
        for n in ("nodes", "nodes/status", "pods", "pods/status", "pods/log", "pods/binding", "events", "namespaces",
                  "configmaps", "secrets"):
            self.assertIn(n, res)
        self.assertFalse(res["nodes"]["namespaced"])
        self.assertEqual(res["nodes"]["kind"], "Node")
        self.assertIn("watch", res["pods"]["verbs"])
        self.assertIn("po", res["pods"]["shortNames"])

    def test_apis(self):
        r = API.get("/apis")
        self.assertEqual(r.json["kind"], "APIGroupList")
        names = [g["name"] for g in r.json["groups"]]
        self.assertIn("coordination.k8s.io", names)
        self.assertIn("events.k8s.io", names)
        r = API.get("/apis/coordination.k8s.io/v1")
        self.assertEqual(r.json["groupVersion"], "coordination.k8s.io/v1")
        self.assertIn("leases", [x["name"] for x in r.json["resources"]])
        v = API.get("/version").json
        self.assertTrue(v["gitVersion"].startswith("v1."))

    def test_metrics_group(self):
        """metrics.k8s.io/v1beta1 as metrics-server registers it (skipped on a real server without it)."""
        groups = {g["name"]: g for g in API.get("/apis").json["groups"]}
        if "metrics.k8s.io" not in groups and not has_controls():
            self.skipTest("this server has no metrics API (no metrics-server)")
        self.assertEqual(groups["metrics.k8s.io"]["preferredVersion"],
                         {"groupVersion": "metrics.k8s.io/v1beta1", "version": "v1beta1"})
        self.assertEqual(API.get("/apis/metrics.k8s.io").json["versions"][0]["version"], "v1beta1")
        r = API.get("/apis/metrics.k8s.io/v1beta1").json
        self.assertEqual((r["kind"], r["groupVersion"]), ("APIResourceList", "metrics.k8s.io/v1beta1"))
        res = {x["name"]: x for x in r["resources"]}
        self.assertEqual(set(res), {"nodes", "pods"})
        self.assertEqual((res["nodes"]["kind"], res["nodes"]["namespaced"], sorted(res["nodes"]["verbs"])),
                         ("NodeMetrics", False, ["get", "list"]))
        self.assertEqual((res["pods"]["kind"], res["pods"]["namespaced"], sorted(res["pods"]["verbs"])),
                         ("PodMetrics", True, ["get", "list"]))
        # what kubectl 1.28 and 1.32 ask for first: aggregated discovery, or the legacy list it falls back to
        r = API.get("/apis", headers={"Accept": "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
                                                "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,"
                                                "application/json"})
        self.assertEqual(r.status, 200, r.text[:300])
        if r.json["kind"] == "APIGroupDiscoveryList":
            g = next(i for i in r.json["items"] if i["metadata"]["name"] == "metrics.k8s.io")
            v = next(v for v in g["versions"] if v["version"] == "v1beta1")
            self.assertEqual({x["resource"]: (x["responseKind"]["kind"], x["scope"]) for x in v["resources"]},
                             {"nodes": ("NodeMetrics", "Cluster"), "pods": ("PodMetrics", "Namespaced")})
        else:
            self.assertEqual(r.json["kind"], "APIGroupList")
            self.assertTrue(r.headers["Content-Type"].startswith("application/json"), r.headers["Content-Type"])
            self.assertNotIn("apidiscovery", r.headers["Content-Type"])
            self.assertIn("metrics.k8s.io", [g["name"] for g in r.json["groups"]])


def deployment_body(name, replicas=2, labels=None, env="1"):
    labels = labels or {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  # no node carries this label: the pods stay Pending on any server
                                  "spec": {"nodeSelector": {"kubetest/none": "none"},
                                           "containers": [{"name": "c", "image": "busybox:1.35",
                                                           "env": [{"name": "V", "value": env}],
                                                           "ports": [{"containerPort": 8080, "name": "http"}]}]}}}}


class TestWorkloads(Base):
    """Deployments, ReplicaSets, Services and Endpoints as kube-controller-manager's controllers
    keep them (the double's kubetest/workloads.py; a real server needs its controller-manager)."""

    def deploys(self, name=""):
        return "/apis/apps/v1/namespaces/%s/deployments" % self.ns + ("/" + name if name else "")

    def owned(self, kind_path, owner_uid):
        items = API.get("/%s" % kind_path).json.get("items", [])
        return [o for o in items if any(r.get("uid") == owner_uid and r.get("controller")
                                        for r in o["metadata"].get("ownerReferences") or [])]

    def rs_of(self, d):
        return self.owned("apis/apps/v1/namespaces/%s/replicasets" % self.ns, d["metadata"]["uid"])

    def pods_of(self, rs, live=True):
        ps = self.owned("api/v1/namespaces/%s/pods" % self.ns, rs["metadata"]["uid"])
        return [p for p in ps if not (live and p["metadata"].get("deletionTimestamp"))]

    def make_ready(self, pod, ip):
        st = {"status": {"podIP": ip, "podIPs": [{"ip": ip}],
                         "conditions": [{"type": "Ready", "status": "True"},
                                        {"type": "ContainersReady", "status": "True"},
                                        {"type": "PodScheduled", "status": "True"}]}}
        r = API.patch(self.pods(pod["metadata"]["name"]) + "/status", st, kind="merge")
        self.assertEqual(r.status, 200, r.text[:300])

    def test_deployment_makes_replicaset_and_pods(self):
        name = rname("d")
        r = API.post(self.deploys(), deployment_body(name))
        self.assertEqual(r.status, 201, r.text[:300])
        d = r.json
        self.assertEqual(d["metadata"].get("generation"), 1)
        rss = wait_for(lambda: self.rs_of(d), msg="the Deployment's ReplicaSet")
        self.assertEqual(len(rss), 1)
        rs = rss[0]
        h = rs["metadata"]["labels"].get("pod-template-hash")
        self.assertTrue(h, rs["metadata"])
        self.assertEqual(rs["metadata"]["name"], "%s-%s" % (name, h))
        self.assertEqual(rs["spec"]["selector"]["matchLabels"], {"app": name, "pod-template-hash": h})
        pods = wait_for(lambda: len(self.pods_of(rs)) == 2 and self.pods_of(rs), msg="2 pods of the ReplicaSet")
        for p in pods:
            self.assertTrue(p["metadata"]["name"].startswith(rs["metadata"]["name"] + "-"), p["metadata"]["name"])
            self.assertEqual(p["metadata"]["labels"], {"app": name, "pod-template-hash": h})
        st = wait_for(lambda: (lambda s: s.get("replicas") == 2 and s.get("updatedReplicas") == 2 and s)(
            API.get(self.deploys(name)).json.get("status") or {}), msg="Deployment status")
        self.assertEqual(st.get("observedGeneration"), 1)
        self.assertNotEqual(st.get("availableReplicas"), 2)

        # a deleted pod is replaced; scaling adds and removes pods
        gone = pods[0]["metadata"]["uid"]
        API.delete(self.pods(pods[0]["metadata"]["name"]), {"gracePeriodSeconds": 0})
        wait_for(lambda: len(self.pods_of(rs)) == 2 and gone not in [p["metadata"]["uid"] for p in self.pods_of(rs)],
                 msg="the deleted pod replaced")
        self.assertEqual(API.patch(self.deploys(name), {"spec": {"replicas": 3}}, kind="merge").status, 200)
        wait_for(lambda: len(self.pods_of(rs)) == 3, msg="scaled to 3")
        self.assertEqual(API.patch(self.deploys(name), {"spec": {"replicas": 1}}, kind="merge").status, 200)
        wait_for(lambda: len(self.pods_of(rs)) == 1, msg="scaled to 1")
        self.assertEqual(API.get(self.deploys(name)).json["metadata"].get("generation"), 3)

        # deleting the Deployment deletes its ReplicaSet and pods (background propagation)
        r = API.delete(self.deploys(name), {"propagationPolicy": "Background"})
        self.assertEqual(r.status, 200, r.text[:300])
        wait_for(lambda: not self.rs_of(d), msg="the ReplicaSet deleted with its Deployment")
        wait_for(lambda: not self.pods_of(rs), msg="the pods deleted with their ReplicaSet")

    def test_new_template_new_replicaset(self):
        name = rname("d")
        d = API.post(self.deploys(), deployment_body(name, env="1")).json
        old = wait_for(lambda: self.rs_of(d), msg="the first ReplicaSet")[0]
        for i, p in enumerate(wait_for(lambda: len(self.pods_of(old)) == 2 and self.pods_of(old), msg="pods")):
            self.make_ready(p, "10.9.0.%d" % (i + 1))
        wait_for(lambda: (API.get(self.deploys(name)).json.get("status") or {}).get("availableReplicas") == 2,
                 msg="2 available")
        r = API.patch(self.deploys(name), {"spec": {"template": {"spec": {"containers": [
            {"name": "c", "env": [{"name": "V", "value": "2"}]}]}}}})
        self.assertEqual(r.status, 200, r.text[:300])
        self.assertEqual(r.json["metadata"].get("generation"), 2)
        rss = wait_for(lambda: len(self.rs_of(d)) == 2 and self.rs_of(d), msg="a second ReplicaSet")
        new = next(x for x in rss if x["metadata"]["uid"] != old["metadata"]["uid"])
        self.assertNotEqual(new["metadata"]["labels"]["pod-template-hash"], old["metadata"]["labels"]["pod-template-hash"])
        # the old pods serve until the new ones are ready
        time.sleep(1)
        self.assertGreaterEqual(API.get("/apis/apps/v1/namespaces/%s/replicasets/%s" % (
            self.ns, old["metadata"]["name"])).json["spec"]["replicas"], 1)
        seen = set()

        def rolled():
            for p in self.pods_of(new):
                if p["metadata"]["uid"] not in seen:
                    seen.add(p["metadata"]["uid"])
                    self.make_ready(p, "10.9.1.%d" % len(seen))
            return API.get("/apis/apps/v1/namespaces/%s/replicasets/%s" % (
                self.ns, old["metadata"]["name"])).json["spec"]["replicas"] == 0
        wait_for(rolled, timeout=30, msg="the old ReplicaSet scaled to 0 once the new pods are ready")
        st = wait_for(lambda: (lambda s: s.get("updatedReplicas") == 2 and s.get("availableReplicas") == 2 and s)(
            API.get(self.deploys(name)).json.get("status") or {}), msg="rolled out")
        self.assertEqual(st.get("observedGeneration"), 2)
        conds = {c["type"]: c for c in st.get("conditions") or []}
        self.assertEqual(conds["Available"]["status"], "True", conds)
        API.delete(self.deploys(name), {"propagationPolicy": "Background"})

    def test_selector_must_match_template(self):
        b = deployment_body(rname("d"))
        b["spec"]["template"]["metadata"]["labels"] = {"app": "other"}
        r = API.post(self.deploys(), b)
        self.assertStatus(r, 422, "Invalid")
        self.assertIn("`selector` does not match template `labels`", r.json["message"])
        b = deployment_body(rname("d"))
        del b["spec"]["selector"]
        r = API.post(self.deploys(), b)
        self.assertStatus(r, 422, "Invalid")
        self.assertIn("spec.selector: Required value", r.json["message"])

    def test_service_endpoints(self):
        app = rname("app")
        svc = {"metadata": {"name": app}, "spec": {"selector": {"app": app},
                                                   "ports": [{"port": 80, "targetPort": "http"}]}}
        r = API.post("/api/v1/namespaces/%s/services" % self.ns, svc)
        self.assertEqual(r.status, 201, r.text[:300])
        self.assertTrue(r.json["spec"].get("clusterIP"), r.json["spec"])
        self.assertEqual(r.json["spec"]["ports"][0].get("protocol"), "TCP")
        pods = []
        for i in range(3):
            b = pod_body(rname("p"))
            b["metadata"]["labels"] = {"app": app}
            b["spec"]["containers"][0]["ports"] = [{"containerPort": 8080 + i, "name": "http"}]
            b["spec"]["nodeSelector"] = {"kubetest/none": "none"}
            rr = API.post(self.pods(), b)
            self.assertEqual(rr.status, 201, rr.text[:300])
            pods.append(rr.json)
        self.make_ready(pods[0], "10.8.0.1")
        r = API.patch(self.pods(pods[1]["metadata"]["name"]) + "/status",
                      {"status": {"podIP": "10.8.0.2", "podIPs": [{"ip": "10.8.0.2"}]}}, kind="merge")
        self.assertEqual(r.status, 200, r.text[:300])
        ep_path = "/api/v1/namespaces/%s/endpoints/%s" % (self.ns, app)

        def subsets():
            r = API.get(ep_path)
            return r.status == 200 and r.json.get("subsets")
        def by_ip(ss):
            out = {}
            for sub in ss or []:
                for which in ("addresses", "notReadyAddresses"):
                    for a in sub.get(which) or []:
                        out[a["ip"]] = (which, a["targetRef"]["name"], [(p["port"], p["protocol"]) for p in sub["ports"]])
            return out
        got = wait_for(lambda: (lambda m: len(m) == 2 and m)(by_ip(subsets())), msg="Endpoints of the Service")
        # the named targetPort resolved per pod: pods with different ports in subsets of their own;
        # the pod without an IP is not listed
        self.assertEqual(got, {"10.8.0.1": ("addresses", pods[0]["metadata"]["name"], [(8080, "TCP")]),
                               "10.8.0.2": ("notReadyAddresses", pods[1]["metadata"]["name"], [(8081, "TCP")])})
        API.delete(self.pods(pods[0]["metadata"]["name"]), {"gracePeriodSeconds": 0})
        wait_for(lambda: "10.8.0.1" not in by_ip(subsets()), msg="the deleted pod leaves the Endpoints")
        API.delete("/api/v1/namespaces/%s/services/%s" % (self.ns, app))
        wait_for(lambda: API.get(ep_path).status == 404, msg="the Endpoints deleted with the Service")

    def test_endpoints_refuse_loopback(self):
        """kubernetes-node-facts.md §2: a pod IP in the loopback range makes the whole Endpoints
        update invalid: none of the Service's addresses is published, a Warning
        FailedToUpdateEndpoint names the address; without that pod the others are published."""
        app = rname("app")
        svc = {"metadata": {"name": app}, "spec": {"selector": {"app": app}, "ports": [{"port": 80}]}}
        r = API.post("/api/v1/namespaces/%s/services" % self.ns, svc)
        self.assertEqual(r.status, 201, r.text[:300])
        pods = []
        for ip in ("127.0.0.1", "192.0.2.10"):
            b = pod_body(rname("p"))
            b["metadata"]["labels"] = {"app": app}
            b["spec"]["nodeSelector"] = {"kubetest/none": "none"}
            rr = API.post(self.pods(), b)
            self.assertEqual(rr.status, 201, rr.text[:300])
            pods.append(rr.json)
            self.make_ready(rr.json, ip)
        ep_path = "/api/v1/namespaces/%s/endpoints/%s" % (self.ns, app)
        want = ('Endpoints "%s" is invalid: subsets[0].addresses[0].ip: Invalid value: "127.0.0.1": may not be in '
                'the loopback range (127.0.0.0/8, ::1/128)' % app)

        def refused():
            for e in API.get("/api/v1/namespaces/%s/events" % self.ns).json["items"]:
                if e["involvedObject"].get("kind") == "Endpoints" and e["involvedObject"].get("name") == app \
                        and e["reason"] == "FailedToUpdateEndpoint" and want in e["message"]:
                    return e
            return None
        e = wait_for(refused, msg="the FailedToUpdateEndpoint event")
        self.assertEqual(e["type"], "Warning")
        self.assertEqual((e.get("source") or {}).get("component"), "endpoint-controller")
        self.assertTrue(e["message"].startswith("Failed to update endpoint %s/%s: " % (self.ns, app)), e["message"])
        r = API.get(ep_path)
        self.assertFalse(r.status == 200 and r.json.get("subsets"), r.text[:400])
        API.delete(self.pods(pods[0]["metadata"]["name"]), {"gracePeriodSeconds": 0})
        got = wait_for(lambda: (lambda r: r.status == 200 and r.json.get("subsets"))(API.get(ep_path)),
                       msg="the other pod's address published")
        self.assertEqual([a["ip"] for a in got[0].get("addresses") or []], ["192.0.2.10"])
        # The same rule for an Endpoints written directly.
        r = API.post("/api/v1/namespaces/%s/endpoints" % self.ns,
                     {"metadata": {"name": rname("ep")},
                      "subsets": [{"addresses": [{"ip": "127.0.0.5"}], "ports": [{"port": 80}]}]})
        self.assertStatus(r, 422, "Invalid")
        self.assertIn('subsets[0].addresses[0].ip: Invalid value: "127.0.0.5": may not be in the loopback range '
                      '(127.0.0.0/8, ::1/128)', r.json["message"])
        API.delete("/api/v1/namespaces/%s/services/%s" % (self.ns, app))


class TestNodes(Base):
    def test_create_defaults(self):
        n = self.mknode(capacity={"cpu": "8", "memory": "16Gi", "pods": "110", "nvidia.com/gpu": "4"}, ready=False)
        self.assertIn({"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}, n["spec"]["taints"])
        self.assertEqual(n["status"]["allocatable"]["nvidia.com/gpu"], "4")
        self.assertEqual(n["status"]["conditions"][-1]["type"], "Ready")
        self.assertTrue(n["metadata"]["uid"])
        self.assertTrue(n["metadata"]["resourceVersion"])
        self.assertTrue(n["metadata"]["creationTimestamp"])
        r = API.post("/api/v1/nodes", node_body(n["metadata"]["name"]))
        self.assertStatus(r, 409, "AlreadyExists")

    def test_invalid(self):
        r = API.post("/api/v1/nodes", node_body("Bad_Name"))
        self.assertStatus(r, 422, "Invalid")
        self.assertIn("RFC 1123", r.json["message"])
        r = API.post("/api/v1/nodes", node_body(rname("n"), capacity={"cpu": "1", "nvidia.com/gpu": "500m"}))
        self.assertStatus(r, 422, "Invalid")
        self.assertIn("nvidia.com/gpu", r.json["message"])
        self.assertIn("must be an integer", r.json["message"])
        n = self.mknode()
        r = API.patch("/api/v1/nodes/%s/status" % n["metadata"]["name"], {"status": {"capacity": {"nvidia.com/gpu": "1500m"}}})
        self.assertStatus(r, 422, "Invalid")

    def test_not_found_and_list(self):
        self.assertStatus(API.get("/api/v1/nodes/" + rname("nope")), 404, "NotFound")
        n = self.mknode(labels={"kt-list": "a"})
        self.mknode(labels={"kt-list": "b"})
        r = API.get("/api/v1/nodes")
        self.assertEqual(r.json["kind"], "NodeList")
        self.assertEqual(r.json["apiVersion"], "v1")
        self.assertTrue(r.json["metadata"]["resourceVersion"])
        self.assertGreaterEqual(int(r.json["metadata"]["resourceVersion"]), int(n["metadata"]["resourceVersion"]))
        names = lambda q: sorted(x["metadata"]["labels"]["kt-list"] for x in API.get("/api/v1/nodes?labelSelector=" + urllib.parse.quote(q)).json["items"])
        self.assertEqual(names("kt-list=a"), ["a"])
        self.assertEqual(names("kt-list==b"), ["b"])
        self.assertEqual(names("kt-list in (a,b)"), ["a", "b"])
        self.assertEqual(names("kt-list,kt-list notin (a)"), ["b"])
        self.assertEqual(names("kt-list,kt-list!=a"), ["b"])
        self.assertEqual(len(API.get("/api/v1/nodes?labelSelector=" + urllib.parse.quote("!kt-list,kt-list")).json["items"]), 0)
        r = API.get("/api/v1/nodes?fieldSelector=metadata.name%3D" + n["metadata"]["name"])
        self.assertEqual([x["metadata"]["name"] for x in r.json["items"]], [n["metadata"]["name"]])
        r = API.get("/api/v1/nodes?fieldSelector=spec.foo%3Dbar")
        self.assertStatus(r, 400, "BadRequest")
        self.assertIn("field label not supported", r.json["message"])

    def test_update_conflict_and_status_separation(self):
        n = self.mknode(ready=False)
        name = n["metadata"]["name"]
        n2 = dict(n)
        n2["metadata"] = dict(n["metadata"], labels={"x": "1"})
        n2["status"] = {"capacity": {"cpu": "99"}}
        r = API.put("/api/v1/nodes/" + name, n2)
        self.assertEqual(r.status, 200, r.text)
        self.assertEqual(r.json["metadata"]["labels"], {"x": "1"})
        self.assertEqual(r.json["status"]["capacity"]["cpu"], "4")     # .status ignored on the main resource
        self.assertNotEqual(r.json["metadata"]["resourceVersion"], n["metadata"]["resourceVersion"])
        r = API.put("/api/v1/nodes/" + name, n2)                      # stale resourceVersion
        self.assertStatus(r, 409, "Conflict")
        r = API.patch("/api/v1/nodes/" + name, {"status": {"capacity": {"cpu": "77"}}, "spec": {"podCIDR": "10.0.0.0/24"}})
        self.assertEqual(r.json["status"]["capacity"]["cpu"], "4")
        self.assertEqual(r.json["spec"]["podCIDR"], "10.0.0.0/24")
        r = API.patch("/api/v1/nodes/%s/status" % name, {"status": {"capacity": {"cpu": "77"}}, "spec": {"unschedulable": True}})
        self.assertEqual(r.status, 200, r.text)
        self.assertEqual(r.json["status"]["capacity"]["cpu"], "77")
        self.assertNotIn("unschedulable", r.json["spec"])             # .spec ignored on /status

    def test_merge_vs_strategic(self):
        n = self.mknode(ready=False)
        name = n["metadata"]["name"]
        t = now_s()
        r = API.patch("/api/v1/nodes/%s/status" % name, {"status": {"conditions": [
            {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ok", "lastHeartbeatTime": t, "lastTransitionTime": t}]}})
        conds = {c["type"]: c for c in r.json["status"]["conditions"]}
        self.assertEqual(len(conds), 4)                                # strategic: merged by type
        self.assertEqual(conds["Ready"]["status"], "True")
        r = API.patch("/api/v1/nodes/%s/status" % name, {"status": {
            "$setElementOrder/conditions": [{"type": "MemoryPressure"}, {"type": "DiskPressure"}, {"type": "PIDPressure"}, {"type": "Ready"}],
            "conditions": [{"type": "DiskPressure", "message": "changed"}]}})
        self.assertEqual([c["type"] for c in r.json["status"]["conditions"]], ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"])
        self.assertEqual(r.json["status"]["conditions"][1]["message"], "changed")
        self.assertEqual(r.json["status"]["conditions"][1]["reason"], "KubeletHasNoDiskPressure")
        r = API.patch("/api/v1/nodes/%s/status" % name, {"status": {"conditions": [
            {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ok", "lastHeartbeatTime": t, "lastTransitionTime": t}]}}, kind="merge")
        self.assertEqual([c["type"] for c in r.json["status"]["conditions"]], ["Ready"])   # merge: list replaced
        r = API.patch("/api/v1/nodes/" + name, [{"op": "add", "path": "/metadata/labels/jp", "value": "yes"}], kind="json")
        self.assertEqual(r.status, 200, r.text)
        self.assertEqual(r.json["metadata"]["labels"]["jp"], "yes")
        r = API.patch("/api/v1/nodes/" + name, {"metadata": {"labels": {"a": "b"}}}, kind="application/json")
        self.assertStatus(r, 415, "UnsupportedMediaType")

    def test_json_patch_ops(self):
        # RFC 6902 as kube-apiserver applies it (evanphx/json-patch): test, copy, move,
        # replace and remove on an object's members, add/replace/remove by index and "-" in a
        # list; the ops apply in order, on the result of the one before
        n = self.mknode(labels={"k": "v"})
        name = n["metadata"]["name"]
        taint = lambda k: {"key": k, "effect": "NoSchedule"}
        r = API.patch("/api/v1/nodes/" + name, [
            {"op": "test", "path": "/metadata/labels/k", "value": "v"},
            {"op": "copy", "from": "/metadata/labels/k", "path": "/metadata/labels/k2"},
            {"op": "move", "from": "/metadata/labels/k", "path": "/metadata/labels/k3"},
            {"op": "replace", "path": "/metadata/labels/k2", "value": "w"},
            {"op": "add", "path": "/spec/taints", "value": [taint("t1"), taint("t3")]},
            {"op": "add", "path": "/spec/taints/1", "value": taint("t2")},
            {"op": "add", "path": "/spec/taints/-", "value": taint("t4")},
            {"op": "replace", "path": "/spec/taints/3", "value": taint("t5")},
            {"op": "remove", "path": "/spec/taints/0"}], kind="json")
        self.assertEqual(r.status, 200, r.text[:300])
        labels = r.json["metadata"]["labels"]
        self.assertEqual((labels.get("k"), labels.get("k2"), labels.get("k3")), (None, "w", "v"))
        self.assertEqual([t["key"] for t in r.json["spec"]["taints"]], ["t2", "t3", "t5"])
        r = API.patch("/api/v1/nodes/" + name, [{"op": "remove", "path": "/metadata/labels/k3"}], kind="json")
        self.assertEqual(r.status, 200, r.text[:300])
        self.assertNotIn("k3", r.json["metadata"]["labels"])
        # a failed test op changes nothing
        r = API.patch("/api/v1/nodes/" + name, [
            {"op": "add", "path": "/metadata/labels/k9", "value": "x"},
            {"op": "test", "path": "/metadata/labels/k2", "value": "not-w"}], kind="json")
        self.assertGreaterEqual(r.status, 400, r.text[:300])
        self.assertNotIn("k9", API.get("/api/v1/nodes/" + name).json["metadata"]["labels"])

    def test_noop_patch(self):
        n = self.mknode(labels={"k": "v"})
        name = n["metadata"]["name"]
        r1 = API.patch("/api/v1/nodes/" + name, {"metadata": {"labels": {"k": "v"}}})
        self.assertEqual(r1.status, 200)
        self.assertEqual(r1.json["metadata"]["resourceVersion"], API.get("/api/v1/nodes/" + name).json["metadata"]["resourceVersion"])
        rv = r1.json["metadata"]["resourceVersion"]
        w = Watch("/api/v1/nodes?watch=1&fieldSelector=metadata.name%%3D%s&resourceVersion=%s" % (name, rv))
        try:
            r2 = API.patch("/api/v1/nodes/" + name, {"metadata": {"labels": {"k": "v"}}})
            self.assertEqual(r2.json["metadata"]["resourceVersion"], rv)
            r3 = API.patch("/api/v1/nodes/" + name, {"metadata": {"labels": {"k": "w"}}})
            ev = w.next()
            self.assertEqual(ev["type"], "MODIFIED")
            self.assertEqual(ev["object"]["metadata"]["resourceVersion"], r3.json["metadata"]["resourceVersion"])
        finally:
            w.close()

    def test_delete_gc_lease(self):
        n = self.mknode()
        name = n["metadata"]["name"]
        r = API.post("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", lease_body(name, n["metadata"]["uid"]))
        self.assertEqual(r.status, 201, r.text)
        r = API.delete("/api/v1/nodes/" + name)
        self.assertEqual(r.status, 200)
        self.assertEqual(r.json["kind"], "Status")
        self.assertEqual(r.json["status"], "Success")
        self.assertEqual(r.json["details"]["name"], name)
        self.assertEqual(r.json["details"]["uid"], n["metadata"]["uid"])
        wait_for(lambda: API.get("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/" + name).status == 404,
                 timeout=30, msg="lease garbage collection")
        self.assertStatus(API.delete("/api/v1/nodes/" + name), 404, "NotFound")


class TestLeases(Base):
    base = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"

    def test_microtime(self):
        name = rname("l")
        for bad in ("2026-01-01T00:00:00Z", "2026-01-01T00:00:00.000Z", "2026-01-01T00:00:00.000000000Z"):
            r = API.post(self.base, lease_body(name, renew=bad))
            self.assertStatus(r, 400, "BadRequest")
            self.assertIn("cannot be handled as a Lease", r.json["message"])
            self.assertIn("parsing time", r.json["message"])
        r = API.post(self.base, lease_body(name, renew="2026-01-01T01:00:00.123456+01:00"))
        self.assertEqual(r.status, 201, r.text)
        self.assertEqual(r.json["spec"]["renewTime"], "2026-01-01T00:00:00.123456Z")
        l = r.json
        l["spec"]["renewTime"] = "2026-01-01T00:00:01Z"
        self.assertStatus(API.put(self.base + "/" + name, l), 400, "BadRequest")
        r = API.patch(self.base + "/" + name, {"spec": {"renewTime": "2026-01-01T00:00:01.000Z"}})
        self.assertStatus(r, 422, "Invalid")
        r = API.patch(self.base + "/" + name, {"spec": {"renewTime": now_us()}}, kind="merge")
        self.assertEqual(r.status, 200, r.text)
        API.delete(self.base + "/" + name)

    def test_put_conflict(self):
        name = rname("l")
        l = API.post(self.base, lease_body(name)).json
        l["spec"]["renewTime"] = now_us()
        r = API.put(self.base + "/" + name, l)
        self.assertEqual(r.status, 200, r.text)
        self.assertNotEqual(r.json["metadata"]["resourceVersion"], l["metadata"]["resourceVersion"])
        l["spec"]["renewTime"] = now_us()
        self.assertStatus(API.put(self.base + "/" + name, l), 409, "Conflict")
        self.assertEqual(API.delete(self.base + "/" + name).status, 200)
        ns = rname("nsx")
        b = lease_body(name)
        b["metadata"]["namespace"] = ns
        self.assertStatus(API.post("/apis/coordination.k8s.io/v1/namespaces/%s/leases" % ns, b), 404, "NotFound")

    def test_put_after_delete(self):
        """A PUT of a Lease that was deleted (the garbage collector takes it with its Node):
        with the old uid the storage's uid precondition fails, a 409 and not a 404; without a
        uid the PUT creates it (201), a new uid, the stale resourceVersion ignored."""
        name = rname("l")
        l = API.post(self.base, lease_body(name)).json
        self.assertEqual(API.delete(self.base + "/" + name).status, 200)
        self.assertStatus(API.get(self.base + "/" + name), 404, "NotFound")
        l["spec"]["renewTime"] = now_us()
        r = API.put(self.base + "/" + name, l)
        self.assertStatus(r, 409, "Conflict")
        self.assertIn("Precondition failed: UID in precondition: %s, UID in object meta: " % l["metadata"]["uid"],
                      r.json["message"])
        self.assertEqual(r.json["details"]["name"], name)
        self.assertStatus(API.get(self.base + "/" + name), 404, "NotFound")  # nothing created
        old_uid = l["metadata"].pop("uid")
        r = API.put(self.base + "/" + name, l)
        self.assertEqual(r.status, 201, r.text)
        self.assertNotEqual(r.json["metadata"]["uid"], old_uid)
        self.assertEqual(r.json["spec"]["holderIdentity"], name)
        self.assertEqual(API.get(self.base + "/" + name).json["metadata"]["uid"], r.json["metadata"]["uid"])
        self.assertEqual(API.delete(self.base + "/" + name).status, 200)


HN_MSG = "must match `containerPort` when `hostNetwork` is true"   # kube-apiserver's validatePodHostNetworkDeps


class TestPods(Base):
    def test_status_patch_replaces_container_statuses(self):
        """containerStatuses has no patch strategy in core/v1 PodStatus: a strategic merge patch
        replaces the whole list, so a container that went running -> terminated keeps no
        'running' (the kubelet's own patches send the list without a null for it:
        kubelet-objects/11-kubelet-write-requests.jsonl)."""
        name = rname("p")
        self.assertEqual(API.post(self.pods(), pod_body(name, node="nowhere")).status, 201)
        cs = {"name": "main", "image": "busybox:1.35", "imageID": "", "ready": True, "restartCount": 0}
        run = dict(cs, state={"running": {"startedAt": "2026-01-01T00:00:00Z"}})
        r = API.patch(self.pods(name) + "/status", {"status": {"phase": "Running", "containerStatuses": [run]}})
        self.assertEqual(r.status, 200, r.text[:300])
        done = dict(cs, ready=False, state={"terminated": {"exitCode": 0, "reason": "Completed",
                                                           "startedAt": "2026-01-01T00:00:00Z",
                                                           "finishedAt": "2026-01-01T00:01:00Z"}})
        r = API.patch(self.pods(name) + "/status", {"status": {"phase": "Succeeded", "containerStatuses": [done]}})
        self.assertEqual(r.status, 200, r.text[:300])
        self.assertEqual(list(r.json["status"]["containerStatuses"][0]["state"]), ["terminated"])

    def test_status_patch_null_states_dropped(self):
        """A null in a container's state (a pointer member) or a null lastState in a status patch
        is what decoding into core/v1 drops: never stored, never served, and the table
        `kubectl get pods` reads is built from the rest."""
        name = rname("p")
        self.assertEqual(API.post(self.pods(), pod_body(name, node="nowhere")).status, 201)
        cs = {"name": "main", "image": "busybox:1.35", "imageID": "", "ready": True, "restartCount": 0,
              "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}, "terminated": None, "waiting": None},
              "lastState": None}
        r = API.patch(self.pods(name) + "/status", {"status": {"phase": "Running", "containerStatuses": [cs]}})
        self.assertEqual(r.status, 200, r.text[:300])
        got = API.get(self.pods(name)).json["status"]["containerStatuses"][0]
        self.assertEqual(list(got["state"]), ["running"])
        self.assertEqual(got.get("lastState"), {})
        r = API.get(self.pods(), headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"})
        self.assertEqual(r.status, 200, r.text[:300])
        row = [x for x in r.json["rows"] if x["object"]["metadata"]["name"] == name]
        self.assertEqual(row[0]["cells"][2], "Running")

    def test_defaults(self):
        r = API.post(self.pods(), pod_body("p1", node="nowhere", limits={"nvidia.com/gpu": "1", "memory": "1Gi"}, image="busybox"))
        self.assertEqual(r.status, 201, r.text)
        p = r.json
        sp = p["spec"]
        self.assertEqual(sp["restartPolicy"], "Always")
        self.assertEqual(sp["terminationGracePeriodSeconds"], 30)
        self.assertEqual(sp["dnsPolicy"], "ClusterFirst")
        self.assertEqual(sp["schedulerName"], "default-scheduler")
        self.assertIs(sp["enableServiceLinks"], True)
        self.assertEqual(sp["priority"], 0)
        self.assertEqual(sp["containers"][0]["imagePullPolicy"], "Always")
        self.assertEqual(sp["containers"][0]["resources"]["requests"]["nvidia.com/gpu"], "1")
        tol = {(t["key"], t["effect"], t.get("tolerationSeconds")) for t in sp["tolerations"]}
        self.assertIn(("node.kubernetes.io/not-ready", "NoExecute", 300), tol)
        self.assertIn(("node.kubernetes.io/unreachable", "NoExecute", 300), tol)
        self.assertEqual(p["status"]["phase"], "Pending")
        self.assertEqual(p["status"]["qosClass"], "Burstable")
        self.assertEqual(sp["nodeName"], "nowhere")                     # accepted although the node does not exist
        r = API.post(self.pods(), pod_body("p2", image="busybox:1.35"))
        self.assertEqual(r.json["spec"]["containers"][0]["imagePullPolicy"], "IfNotPresent")
        self.assertEqual(r.json["status"]["qosClass"], "BestEffort")

    def test_errors(self):
        r = API.post("/api/v1/namespaces/%s/pods" % rname("missing"), pod_body("x"))
        self.assertStatus(r, 404, "NotFound")
        self.assertRegex(r.json["message"], r'namespaces "missing-.*" not found')
        r = API.post(self.pods(), pod_body("gpu-frac", limits={"nvidia.com/gpu": "500m"}))
        self.assertStatus(r, 422, "Invalid")
        self.assertIn("nvidia.com/gpu", r.json["message"])
        self.assertStatus(API.post(self.pods(), pod_body("UPPER")), 422, "Invalid")
        self.assertStatus(API.get(self.pods("nope")), 404, "NotFound")
        self.assertStatus(API.get(self.pods() + "?fieldSelector=spec.bogus%3D1"), 400, "BadRequest")

    def test_host_network_ports(self):
        """SetDefaults_Pod's defaultHostNetworkPorts: with hostNetwork every port of the containers
        and init containers without a hostPort gets its containerPort; validatePodHostNetworkDeps
        refuses any other hostPort (regular containers; a pod template may leave it 0, and 1.28
        does not default it there: the DefaultHostNetworkHostPortsInPodTemplates gate is off)."""
        b = pod_body("hn1", node="nowhere", containers=[
            {"name": "a", "image": "busybox:1.35", "ports": [{"containerPort": 8080}, {"containerPort": 9090, "hostPort": 0},
                                                            {"containerPort": 5353, "protocol": "UDP", "name": "dns"}]},
            {"name": "b", "image": "busybox:1.35", "ports": [{"containerPort": 7070, "hostPort": 7070}]}])
        b["spec"]["hostNetwork"] = True
        b["spec"]["initContainers"] = [{"name": "i", "image": "busybox:1.35", "ports": [{"containerPort": 6060}]}]
        r = API.post(self.pods(), b)
        self.assertEqual(r.status, 201, r.text[:500])
        sp = r.json["spec"]
        self.assertEqual(sp["containers"][0]["ports"], [
            {"containerPort": 8080, "hostPort": 8080, "protocol": "TCP"},
            {"containerPort": 9090, "hostPort": 9090, "protocol": "TCP"},
            {"name": "dns", "containerPort": 5353, "hostPort": 5353, "protocol": "UDP"}])
        self.assertEqual(sp["containers"][1]["ports"], [{"containerPort": 7070, "hostPort": 7070, "protocol": "TCP"}])
        self.assertEqual(sp["initContainers"][0]["ports"], [{"containerPort": 6060, "hostPort": 6060, "protocol": "TCP"}])
        # without hostNetwork nothing is defaulted, and any hostPort is allowed
        b = pod_body("hn2", node="nowhere", containers=[
            {"name": "a", "image": "busybox:1.35", "ports": [{"containerPort": 8080}, {"containerPort": 8081, "hostPort": 18081}]}])
        r = API.post(self.pods(), b)
        self.assertEqual(r.status, 201, r.text[:500])
        self.assertNotIn("hostPort", r.json["spec"]["containers"][0]["ports"][0])
        self.assertEqual(r.json["spec"]["containers"][0]["ports"][1]["hostPort"], 18081)
        # a hostPort other than the containerPort is refused
        b = pod_body("hn3", node="nowhere", containers=[
            {"name": "a", "image": "busybox:1.35", "ports": [{"containerPort": 8080, "hostPort": 8081}]}])
        b["spec"]["hostNetwork"] = True
        r = API.post(self.pods(), b)
        self.assertStatus(r, 422, "Invalid")
        msg = "Invalid value: 8081: %s" % HN_MSG
        self.assertEqual(r.json["message"], 'Pod "hn3" is invalid: spec.containers[0].ports[0].hostPort: ' + msg)
        self.assertEqual(r.json["details"]["causes"], [
            {"reason": "FieldValueInvalid", "message": msg, "field": "spec.containers[0].ports[0].hostPort"}])
        self.assertStatus(API.get(self.pods("hn3")), 404, "NotFound")
        # a Deployment's template: hostPort 0 is kept as it is, another one refused
        deps = "/apis/apps/v1/namespaces/%s/deployments" % self.ns
        tpl = lambda port: {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": rname("hn")},
                            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "hn"}},
                                     "template": {"metadata": {"labels": {"app": "hn"}},
                                                  "spec": {"hostNetwork": True, "containers": [
                                                      {"name": "c", "image": "busybox:1.35", "ports": [port]}]}}}}
        d = tpl({"containerPort": 8080})
        r = API.post(deps, d)
        self.assertEqual(r.status, 201, r.text[:500])
        self.assertNotIn("hostPort", r.json["spec"]["template"]["spec"]["containers"][0]["ports"][0])
        API.delete(deps + "/" + d["metadata"]["name"])
        d = tpl({"containerPort": 8080, "hostPort": 8081})
        r = API.post(deps, d)
        self.assertStatus(r, 422, "Invalid")
        self.assertEqual(r.json["message"], 'Deployment.apps "%s" is invalid: spec.template.spec.containers[0].ports[0].hostPort: %s'
                         % (d["metadata"]["name"], msg))

    def test_status_subresource(self):
        p = API.post(self.pods(), pod_body("st", node="nowhere")).json
        r = API.patch(self.pods("st") + "/status", {"metadata": {"uid": p["metadata"]["uid"]}, "status": {"phase": "Running", "podIP": "10.1.2.3"},
                                                    "spec": {"activeDeadlineSeconds": 5}})
        self.assertEqual(r.status, 200, r.text)
        self.assertEqual(r.json["status"]["phase"], "Running")
        self.assertNotIn("activeDeadlineSeconds", r.json["spec"])
        r = API.patch(self.pods("st"), {"status": {"phase": "Failed"}, "metadata": {"labels": {"a": "b"}}})
        self.assertEqual(r.json["status"]["phase"], "Running")
        self.assertEqual(r.json["metadata"]["labels"]["a"], "b")
        r = API.patch(self.pods("st") + "/status", {"metadata": {"uid": "00000000-0000-0000-0000-000000000000"}, "status": {"phase": "Failed"}})
        self.assertStatus(r, 409, "Conflict")
        # containerStatuses replaced whole (no patch strategy in core/v1), not merged by name
        API.patch(self.pods("st") + "/status", {"status": {"containerStatuses": [{"name": "main", "ready": False, "restartCount": 0, "image": "busybox:1.35", "imageID": "", "started": False, "state": {"waiting": {"reason": "ContainerCreating"}}}]}})
        r = API.patch(self.pods("st") + "/status", {"status": {"containerStatuses": [{"name": "main", "ready": True, "state": {"running": {"startedAt": now_s()}}}]}})
        cs = r.json["status"]["containerStatuses"]
        self.assertEqual(len(cs), 1)
        self.assertTrue(cs[0]["ready"])
        self.assertNotIn("image", cs[0])
        self.assertEqual(list(cs[0]["state"]), ["running"])

    def test_graceful_delete(self):
        p = API.post(self.pods(), pod_body("gd", node="nowhere")).json
        w = Watch(self.pods() + "?watch=1&fieldSelector=metadata.name%%3Dgd&resourceVersion=%s" % p["metadata"]["resourceVersion"])
        try:
            r = API.delete(self.pods("gd"))
            self.assertEqual(r.status, 200, r.text)
            self.assertEqual(r.json["kind"], "Pod")
            self.assertTrue(r.json["metadata"]["deletionTimestamp"])
            self.assertEqual(r.json["metadata"]["deletionGracePeriodSeconds"], 30)
            self.assertEqual(API.get(self.pods("gd")).status, 200)        # still there (Terminating)
            r = API.delete(self.pods("gd"), {"gracePeriodSeconds": 0, "preconditions": {"uid": "11111111-2222-3333-4444-555555555555"}})
            self.assertStatus(r, 409, "Conflict")
            # rest.BeforeDelete's wording (the facts' "DELETE ... with a wrong uid")
            self.assertEqual(r.json["message"], 'Operation cannot be fulfilled on Pod "gd": the UID in the precondition '
                             '(11111111-2222-3333-4444-555555555555) does not match the UID in record (%s). The object '
                             'might have been deleted and then recreated' % p["metadata"]["uid"])
            self.assertEqual(r.json["details"], {"name": "gd", "kind": "Pod"})
            r = API.delete(self.pods("gd"), {"gracePeriodSeconds": 0, "preconditions": {"uid": p["metadata"]["uid"]}})
            self.assertEqual(r.status, 200, r.text)
            self.assertStatus(API.get(self.pods("gd")), 404, "NotFound")
            types = [w.next()["type"] for _ in range(3)]
            self.assertEqual(types, ["MODIFIED", "MODIFIED", "DELETED"])
        finally:
            w.close()

    def test_unbound_and_terminal_removed_at_once(self):
        API.patch(self.pods(), {}, kind="merge")  # no-op on a collection path is not important
        r = API.post(self.pods(), pod_body("unbound", selector={"no-such-label": rname("x")}))
        self.assertEqual(r.status, 201)
        r = API.delete(self.pods("unbound"))
        self.assertEqual(r.status, 200)
        self.assertStatus(API.get(self.pods("unbound")), 404, "NotFound")
        API.post(self.pods(), pod_body("term", node="nowhere"))
        API.patch(self.pods("term") + "/status", {"status": {"phase": "Succeeded"}})
        self.assertEqual(API.delete(self.pods("term")).status, 200)
        self.assertStatus(API.get(self.pods("term")), 404, "NotFound")


class TestEvents(Base):
    def test_events(self):
        ev = {"metadata": {"name": "p.%x" % int(time.time() * 1e9), "namespace": self.ns},
              "involvedObject": {"kind": "Pod", "namespace": self.ns, "name": "p", "uid": "u1", "apiVersion": "v1"},
              "reason": "Started", "message": "Started container main", "type": "Normal",
              "source": {"component": "kubelet", "host": "n1"}, "firstTimestamp": now_s(), "lastTimestamp": now_s(),
              "count": 1, "reportingComponent": "kubelet", "reportingInstance": "n1"}
        r = API.post("/api/v1/namespaces/%s/events" % self.ns, ev)
        self.assertEqual(r.status, 201, r.text)
        name = r.json["metadata"]["name"]
        r = API.patch("/api/v1/namespaces/%s/events/%s" % (self.ns, name), {"count": 2, "lastTimestamp": now_s(), "message": "again"})
        self.assertEqual(r.json["count"], 2)
        self.assertEqual(r.json["message"], "again")
        r = API.get("/api/v1/namespaces/%s/events?fieldSelector=involvedObject.name%%3Dp,involvedObject.kind%%3DPod" % self.ns)
        self.assertEqual([e["metadata"]["name"] for e in r.json["items"]], [name])
        self.assertEqual(r.json["kind"], "EventList")
        bad = dict(ev, metadata={"name": "q.1", "namespace": self.ns}, involvedObject=dict(ev["involvedObject"], namespace="other"))
        r = API.post("/api/v1/namespaces/%s/events" % self.ns, bad)
        self.assertStatus(r, 422, "Invalid")
        self.assertIn("involvedObject.namespace", r.json["message"])
        r = API.get("/apis/events.k8s.io/v1/namespaces/%s/events/%s" % (self.ns, name))
        self.assertEqual(r.status, 200, r.text)
        self.assertEqual(r.json["note"], "again")
        self.assertEqual(r.json["deprecatedCount"], 2)


class TestWatch(Base):
    def test_pod_sequence(self):
        node = rname("nowhere")
        w = Watch("/api/v1/pods?watch=1&fieldSelector=spec.nodeName%3D" + node)
        try:
            p = API.post(self.pods(), pod_body("ws", node=node)).json
            API.patch(self.pods("ws") + "/status", {"status": {"phase": "Running"}})
            API.delete(self.pods("ws"))
            API.delete(self.pods("ws"), {"gracePeriodSeconds": 0, "preconditions": {"uid": p["metadata"]["uid"]}})
            evs = [w.next() for _ in range(5)]
            self.assertEqual([e["type"] for e in evs], ["ADDED", "MODIFIED", "MODIFIED", "MODIFIED", "DELETED"])
            rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in evs]
            self.assertEqual(rvs, sorted(rvs))
            self.assertEqual(len(set(rvs)), 5)
            self.assertEqual(evs[3]["object"]["metadata"]["deletionGracePeriodSeconds"], 0)
        finally:
            w.close()
        # resume from the first event: the 4 later ones come again
        w = Watch("/api/v1/pods?watch=1&fieldSelector=spec.nodeName%%3D%s&resourceVersion=%d" % (node, rvs[0]))
        try:
            self.assertEqual([w.next()["type"] for _ in range(4)], ["MODIFIED", "MODIFIED", "MODIFIED", "DELETED"])
        finally:
            w.close()

    def test_initial_added_and_rv0(self):
        names = sorted(["a", "b"])
        for n in names:
            API.post("/api/v1/namespaces/%s/configmaps" % self.ns, {"metadata": {"name": n}, "data": {"k": n}})
        for q in ("", "&resourceVersion=0"):
            w = Watch("/api/v1/namespaces/%s/configmaps?watch=true%s" % (self.ns, q))
            try:
                evs = [w.next() for _ in range(2)]
                self.assertEqual(sorted(e["object"]["metadata"]["name"] for e in evs), names)
                self.assertTrue(all(e["type"] == "ADDED" for e in evs))
            finally:
                w.close()

    def test_selector_transitions(self):
        base = "/api/v1/namespaces/%s/configmaps" % self.ns
        lst = API.get(base)
        rv = lst.json["metadata"]["resourceVersion"]
        w = Watch(base + "?watch=1&labelSelector=sel%%3Dyes&resourceVersion=%s" % rv)
        try:
            API.post(base, {"metadata": {"name": "tr", "labels": {"sel": "no"}}})
            API.patch(base + "/tr", {"metadata": {"labels": {"sel": "yes"}}})
            e = w.next()
            self.assertEqual((e["type"], e["object"]["metadata"]["labels"]["sel"]), ("ADDED", "yes"))
            API.patch(base + "/tr", {"data": {"x": "1"}})
            self.assertEqual(w.next()["type"], "MODIFIED")
            API.patch(base + "/tr", {"metadata": {"labels": {"sel": "no"}}})
            e = w.next()
            self.assertEqual(e["type"], "DELETED")
            API.delete(base + "/tr")
            w.expect_none(0.5)
        finally:
            w.close()

    def test_timeout_seconds(self):
        t0 = time.time()
        w = Watch("/api/v1/namespaces/%s/configmaps?watch=1&timeoutSeconds=1&resourceVersion=0" % self.ns)
        try:
            while w.next(10) is not None:
                pass
            self.assertLess(time.time() - t0, 8)
        finally:
            w.close()

    def test_too_old(self):
        if not has_controls():
            self.skipTest("needs the test double's /_test/history control")
        base = "/api/v1/namespaces/%s/configmaps" % self.ns
        rv = API.get(base).json["metadata"]["resourceVersion"]
        control("history", {"size": 3})
        try:
            for i in range(6):
                API.post(base, {"metadata": {"name": "old-%d" % i}})
            w = Watch(base + "?watch=1&resourceVersion=" + rv)
            self.assertEqual(w.status, 200)
            e = w.next()
            self.assertEqual(e["type"], "ERROR")
            self.assertEqual(e["object"]["code"], 410)
            self.assertEqual(e["object"]["reason"], "Expired")
            self.assertRegex(e["object"]["message"], r"^too old resource version: %s \(\d+\)$" % rv)
            self.assertIsNone(w.next())
            w.close()
        finally:
            control("history", {"size": 1000})

    def test_bookmarks(self):
        if not has_controls():
            self.skipTest("needs the test double's bookmarkInterval control (real server: ~60 s)")
        control("controllers", {"bookmarkInterval": 0.5})
        base = "/api/v1/namespaces/%s/secrets" % self.ns
        try:
            rv = API.get(base).json["metadata"]["resourceVersion"]
            w = Watch(base + "?watch=1&allowWatchBookmarks=true&resourceVersion=" + rv)
            w2 = Watch(base + "?watch=1&allowWatchBookmarks=true")
            try:
                API.post("/api/v1/namespaces/%s/secrets" % rname("none"), {"metadata": {"name": "s"}})  # 404, no change
                w.expect_none(1.2)            # no bookmark before a change of this resource type
                API.post(base, {"metadata": {"name": "bm"}, "stringData": {"a": "b"}})
                self.assertEqual(w.next()["type"], "ADDED")
                e = w.until(lambda e: e["type"] == "BOOKMARK", timeout=5)
                self.assertEqual(e["object"]["kind"], "Secret")
                self.assertTrue(int(e["object"]["metadata"]["resourceVersion"]) >= int(rv))
                self.assertEqual(w2.next()["type"], "ADDED")
                w2.expect_none(1.5)           # no bookmarks for a watch started without resourceVersion
            finally:
                w.close()
                w2.close()
        finally:
            control("controllers", {"bookmarkInterval": 60})


PORTS_REASON = "node(s) didn't have free ports for the requested pod ports"   # kube-scheduler's NodePorts


def host_network_pod(name, port, selector):
    b = pod_body(name, selector=selector, containers=[{"name": "main", "image": "busybox:1.35",
                                                        "ports": [{"containerPort": port}]}])
    b["spec"]["hostNetwork"] = True
    return b


class TestScheduler(Base):
    def scheduled(self, name):
        c = [c for c in (API.get(self.pods(name)).json.get("status") or {}).get("conditions", []) if c["type"] == "PodScheduled"]
        return c[0] if c else None

    def two_nodes(self):
        """Two Ready nodes only these pods may use; deleted again when the test ends."""
        lab = rname("pool")
        names = [self.mkready(labels={"kt-pool": lab})["metadata"]["name"] for _ in range(2)]
        for n in names:
            self.addCleanup(API.delete, "/api/v1/nodes/" + n)
        return lab, names

    def test_host_ports_conflict(self):
        """NodePorts: a node where a bound pod holds the (protocol, hostPort) on a conflicting hostIP
        is not feasible, a reason preemption might resolve; two pods taken in one pass land on
        different nodes."""
        lab, nodes = self.two_nodes()
        names = ["hp1", "hp2", "hp3"]
        for n in names:
            self.addCleanup(API.delete, self.pods(n), {"gracePeriodSeconds": 0})
        if has_controls():      # all three pending in one scheduling pass
            control("controllers", {"scheduler": False})
        try:
            for n in names:
                r = API.post(self.pods(), host_network_pod(n, 18080, {"kt-pool": lab}))
                self.assertEqual(r.status, 201, r.text[:300])
                self.assertEqual(r.json["spec"]["containers"][0]["ports"][0].get("hostPort"), 18080)
        finally:
            if has_controls():
                control("controllers", {"scheduler": True})

        def settled():
            on = {n: API.get(self.pods(n)).json["spec"].get("nodeName") for n in names}
            bound = [n for n in names if on[n]]
            waiting = [n for n in names if not on[n] and (self.scheduled(n) or {}).get("status") == "False"]
            return len(bound) == 2 and len(waiting) == 1 and (on, waiting[0])
        on, pending = wait_for(settled, timeout=30, msg="2 pods bound, 1 unschedulable")
        self.assertEqual(sorted(v for v in on.values() if v), sorted(nodes))
        c = self.scheduled(pending)
        self.assertEqual(c["reason"], "Unschedulable")
        others = [n["metadata"]["name"] for n in API.get("/api/v1/nodes").json["items"] if n["metadata"]["name"] not in nodes]
        if not others:
            self.assertEqual(c["message"], "0/2 nodes are available: 2 %s. preemption: 0/2 nodes are available: "
                                           "2 No preemption victims found for incoming pod.." % PORTS_REASON)
        else:   # a cluster with nodes of its own: they fail for reasons of theirs
            self.assertTrue(c["message"].startswith("0/%d nodes are available: " % (len(others) + 2)), c["message"])
            self.assertIn("2 %s" % PORTS_REASON, c["message"])
            self.assertIn("2 No preemption victims found for incoming pod", c["message"])
        wait_for(lambda: any(e["reason"] == "FailedScheduling" and PORTS_REASON in e["message"] for e in API.get(
            "/api/v1/namespaces/%s/events?fieldSelector=involvedObject.name%%3D%s" % (self.ns, pending)).json["items"]),
            msg="FailedScheduling event")
        # the port freed on one node: the pending pod goes there
        gone = next(n for n in names if on[n])
        self.assertEqual(API.delete(self.pods(gone), {"gracePeriodSeconds": 0}).status, 200)
        self.assertEqual(wait_for(lambda: API.get(self.pods(pending)).json["spec"].get("nodeName"), timeout=30,
                                  msg="binding of " + pending), on[gone])

    def test_host_ports_deployment(self):
        """A Deployment of hostNetwork pods: its replicas (hostPort defaulted in each pod, not in the
        template) spread one per node; a replica more than nodes stays Pending."""
        lab, nodes = self.two_nodes()
        deps = "/apis/apps/v1/namespaces/%s/deployments" % self.ns
        name = rname("hpd")
        tpl = host_network_pod(name, 18081, {"kt-pool": lab})
        d = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
             "spec": {"replicas": 2, "selector": {"matchLabels": {"app": name}},
                      "template": {"metadata": {"labels": {"app": name}}, "spec": tpl["spec"]}}}
        r = API.post(deps, d)
        self.assertEqual(r.status, 201, r.text[:300])
        self.addCleanup(API.delete, deps + "/" + name, {"propagationPolicy": "Background"})
        self.assertNotIn("hostPort", r.json["spec"]["template"]["spec"]["containers"][0]["ports"][0])
        mine = lambda: [p for p in API.get(self.pods() + "?labelSelector=app%%3D%s" % name).json["items"]
                        if not p["metadata"].get("deletionTimestamp")]
        pods = wait_for(lambda: (lambda ps: len(ps) == 2 and all(p["spec"].get("nodeName") for p in ps) and ps)(mine()),
                        timeout=30, msg="2 replicas bound")
        self.assertEqual(sorted(p["spec"]["nodeName"] for p in pods), sorted(nodes))
        for p in pods:
            self.assertEqual(p["spec"]["containers"][0]["ports"][0].get("hostPort"), 18081)
        self.assertEqual(API.patch(deps + "/" + name, {"spec": {"replicas": 3}}, kind="merge").status, 200)

        def third():
            ps = [p for p in mine() if not p["spec"].get("nodeName")]
            c = ps and self.scheduled(ps[0]["metadata"]["name"])
            return c and c["status"] == "False" and c
        c = wait_for(third, timeout=30, msg="the third replica unschedulable")
        self.assertIn("2 %s" % PORTS_REASON, c["message"])

    def test_selector_tolerations_gpu(self):
        lab = rname("pool")
        gpu = self.mkready(labels={"kt-pool": lab, "kind": "gpu"},
                           capacity={"cpu": "8", "memory": "16Gi", "pods": "110", "nvidia.com/gpu": "1"})["metadata"]["name"]
        cpu = self.mkready(labels={"kt-pool": lab, "kind": "cpu"})["metadata"]["name"]
        # a tainted node only reachable with a toleration
        tn = self.mkready(labels={"kt-pool": lab, "kind": "tainted"})["metadata"]["name"]
        API.patch("/api/v1/nodes/" + tn, {"spec": {"taints": [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]}})
        API.post(self.pods(), pod_body("sel", selector={"kt-pool": lab, "kind": "cpu"}))
        API.post(self.pods(), pod_body("g1", selector={"kt-pool": lab}, limits={"nvidia.com/gpu": "1"}))
        bound = lambda n: wait_for(lambda: API.get(self.pods(n)).json["spec"].get("nodeName"), msg="binding of " + n)
        self.assertEqual(bound("sel"), cpu)
        self.assertEqual(bound("g1"), gpu)
        p = API.get(self.pods("g1")).json
        c = [c for c in p["status"]["conditions"] if c["type"] == "PodScheduled"][0]
        self.assertEqual(c["status"], "True")
        API.post(self.pods(), pod_body("g2", selector={"kt-pool": lab}, limits={"nvidia.com/gpu": "1"}))

        def unsched():
            c = [c for c in API.get(self.pods("g2")).json["status"].get("conditions", []) if c["type"] == "PodScheduled"]
            return c and c[0]["status"] == "False" and c[0]
        c = wait_for(unsched, msg="PodScheduled=False")
        self.assertEqual(c["reason"], "Unschedulable")
        self.assertRegex(c["message"], r"^0/\d+ nodes are available: .*Insufficient nvidia.com/gpu")
        self.assertIn("untolerated taint {dedicated: x}", c["message"])
        wait_for(lambda: any(e["reason"] == "FailedScheduling" for e in API.get(
            "/api/v1/namespaces/%s/events?fieldSelector=involvedObject.name%%3Dg2" % self.ns).json["items"]), msg="FailedScheduling event")
        API.post(self.pods(), pod_body("tol", selector={"kt-pool": lab, "kind": "tainted"},
                                       tolerations=[{"key": "dedicated", "operator": "Equal", "value": "x", "effect": "NoSchedule"}]))
        self.assertEqual(bound("tol"), tn)
        API.post(self.pods(), pod_body("notol", selector={"kt-pool": lab, "kind": "tainted"}))
        time.sleep(1)
        self.assertFalse(API.get(self.pods("notol")).json["spec"].get("nodeName"))
        # freeing the GPU lets g2 schedule
        g1 = API.get(self.pods("g1")).json
        API.patch(self.pods("g1") + "/status", {"status": {"phase": "Succeeded"}})
        self.assertEqual(bound("g2"), gpu)
        API.delete(self.pods("g1"), {"gracePeriodSeconds": 0, "preconditions": {"uid": g1["metadata"]["uid"]}})

    def test_not_ready_node_unused(self):
        lab = rname("pool")
        self.mknode(labels={"kt-pool": lab}, ready=False)
        API.post(self.pods(), pod_body("nr", selector={"kt-pool": lab}))

        def unsched():
            c = [c for c in API.get(self.pods("nr")).json["status"].get("conditions", []) if c["type"] == "PodScheduled"]
            return c and c[0]["status"] == "False" and c[0]["message"]
        msg = wait_for(unsched, msg="PodScheduled=False")
        self.assertIn("untolerated taint {node.kubernetes.io/not-ready: }", msg)


class TestNodeLifecycle(Base):
    @classmethod
    def setUpClass(cls):
        Base.setUpClass.__func__(cls)
        cls.ctl = has_controls()
        if not cls.ctl and os.environ.get("KUBE_SLOW") != "1":
            raise unittest.SkipTest("needs /_test controls for a short lease grace (or KUBE_SLOW=1)")
        if cls.ctl:
            cls.saved = control("controllers", method="GET")
            control("controllers", {"leaseGrace": 2, "monitorPeriod": 0.2, "fullDisruption": False})

    @classmethod
    def tearDownClass(cls):
        if getattr(cls, "ctl", False):
            control("controllers", cls.saved)
        Base.tearDownClass.__func__(cls)

    def test_lifecycle(self):
        n = self.mkready()
        name = n["metadata"]["name"]
        lease_url = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/" + name
        # two running, Ready pods on it: one tolerates the unreachable NoExecute
        # taint for 0 s (evicted once it comes), one for ever (stays)
        unreach = {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"}
        for pname, tol in (("lc-gone", dict(unreach, tolerationSeconds=0)), ("lc-stays", unreach)):
            self.assertEqual(API.post(self.pods(), pod_body(pname, node=name, tolerations=[tol])).status, 201)
            t = now_s()
            r = API.patch(self.pods(pname) + "/status", {"status": {"phase": "Running", "conditions": [
                {"type": "Ready", "status": "True", "lastProbeTime": None, "lastTransitionTime": t}]}})
            self.assertEqual(r.status, 200, r.text[:300])
        # lease renewals alone keep the node Ready
        end = time.time() + 3
        while time.time() < end:
            l = API.get(lease_url).json
            l["spec"]["renewTime"] = now_us()
            self.assertEqual(API.put(lease_url, l).status, 200)
            time.sleep(0.5)
        self.assertEqual([c for c in API.get("/api/v1/nodes/" + name).json["status"]["conditions"] if c["type"] == "Ready"][0]["status"], "True")
        # stop renewing -> Unknown + unreachable taints
        def unknown():
            o = API.get("/api/v1/nodes/" + name).json
            c = {c["type"]: c for c in o["status"]["conditions"]}
            ks = {(t["key"], t["effect"]) for t in o["spec"].get("taints") or []}
            return c["Ready"]["status"] == "Unknown" and ("node.kubernetes.io/unreachable", "NoExecute") in ks and (c, ks)
        c, ks = wait_for(unknown, timeout=15 if self.ctl else 120, interval=0.2, msg="Ready=Unknown")
        self.assertEqual(c["Ready"]["reason"], "NodeStatusUnknown")
        self.assertEqual(c["Ready"]["message"], "Kubelet stopped posting node status.")
        for t in ("MemoryPressure", "DiskPressure", "PIDPressure"):
            self.assertEqual(c[t]["status"], "Unknown")
        self.assertIn(("node.kubernetes.io/unreachable", "NoSchedule"), ks)
        # its pods become Ready=False (the node controller's MarkPodsNotReady); the one
        # whose toleration ran out gets DisruptionTarget (DeletionByTaintManager) and a
        # graceful delete, the other stays
        def ready(pname):
            o = API.get(self.pods(pname)).json
            return {c["type"]: c for c in (o.get("status") or {}).get("conditions") or []}.get("Ready", {}).get("status")
        wait_for(lambda: ready("lc-stays") == "False", timeout=15, msg="pod Ready=False on the unreachable node")

        def evicted():
            r = API.get(self.pods("lc-gone"))
            if r.status == 404:
                return "gone"
            conds = {c["type"]: c for c in (r.json.get("status") or {}).get("conditions") or []}
            dt = conds.get("DisruptionTarget")
            return r.json["metadata"].get("deletionTimestamp") and dt and dt["reason"]
        self.assertIn(wait_for(evicted, timeout=15, msg="pod evicted by the taint manager"), ("DeletionByTaintManager", "gone"))
        stays = API.get(self.pods("lc-stays")).json
        self.assertFalse(stays["metadata"].get("deletionTimestamp"), "a pod tolerating the taint for ever is not evicted")
        # resuming renewals alone does not bring it back; posting Ready=True does
        l = API.get(lease_url).json
        l["spec"]["renewTime"] = now_us()
        API.put(lease_url, l)
        time.sleep(1)
        self.assertEqual({c["type"]: c for c in API.get("/api/v1/nodes/" + name).json["status"]["conditions"]}["Ready"]["status"], "Unknown")
        t = now_s()
        API.patch("/api/v1/nodes/%s/status" % name, {"status": {"conditions": [
            {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status",
             "lastHeartbeatTime": t, "lastTransitionTime": t}]}})
        wait_for(lambda: not (API.get("/api/v1/nodes/" + name).json["spec"].get("taints")), timeout=15, msg="unreachable taints removed")


class WithFakeKubelet(Base):
    """A test class with a fake kubelet (tests/kube/fake_kubelet.py) as cls.fk, serving with
    the certificate the test API server trusts; skipped against a server without one."""

    @classmethod
    def setUpClass(cls):
        sj = CFG.get("sj")
        if not sj or not os.path.exists(sj.get("kubeletServingCert", "")):
            raise unittest.SkipTest("needs KUBE_STATE_DIR with kubelet-serving.crt trusted by the API server")
        Base.setUpClass.__func__(cls)
        import fake_kubelet
        cls.fk = fake_kubelet.FakeKubelet(sj["kubeletServingCert"], sj["kubeletServingKey"], sj["ca"] or os.path.join(CFG["state"], "ca.crt"))

    @classmethod
    def tearDownClass(cls):
        if getattr(cls, "fk", None):
            cls.fk.stop()
        Base.tearDownClass.__func__(cls)


class TestLogProxy(WithFakeKubelet):

    def test_logs(self):
        node = self.mknode(port=self.fk.port)["metadata"]["name"]
        API.post(self.pods(), pod_body("lp", node=node))
        r = API.get(self.pods("lp") + "/log")
        self.assertEqual(r.status, 200, r.text)
        self.assertEqual(r.text, "".join("log line %d (main)\n" % i for i in range(1, 6)))
        self.assertEqual(self.fk.requests[-1]["clientCN"], "kube-apiserver-kubelet-client")
        self.assertEqual(self.fk.requests[-1]["path"], "/containerLogs/%s/lp/main" % self.ns)
        r = API.get(self.pods("lp") + "/log?tailLines=2&timestamps=true&container=main")
        lines = r.text.splitlines()
        self.assertEqual(len(lines), 2)
        self.assertRegex(lines[0], r"^\d{4}-\d\d-\d\dT\S+Z log line 4 \(main\)$")
        self.assertEqual(API.get(self.pods("lp") + "/log?previous=true").text.splitlines()[0], "previous log line 1 (main)")
        self.assertStatus(API.get(self.pods("lp") + "/log?container=nope"), 400, "BadRequest")
        # follow: lines keep coming until we close
        c = API.conn(timeout=10)
        c.request("GET", self.pods("lp") + "/log?follow=true", headers={"Authorization": "Bearer " + CFG["token"]})
        resp = c.getresponse()
        got = [resp.readline().decode().strip() for _ in range(7)]
        self.assertEqual(got[5:], ["follow line 1", "follow line 2"])
        c.close()
        # multi-container pod needs a container name
        API.post(self.pods(), pod_body("lp2", node=node, containers=[{"name": "a", "image": "x:1"}, {"name": "b", "image": "x:1"}]))
        r = API.get(self.pods("lp2") + "/log")
        self.assertStatus(r, 400, "BadRequest")
        self.assertIn("a container name must be specified", r.json["message"])
        self.assertEqual(API.get(self.pods("lp2") + "/log?container=b").text.splitlines()[0], "log line 1 (b)")
        # kubelet errors come back with their code
        API.post(self.pods(), pod_body("missing-x", node=node))
        self.assertEqual(API.get(self.pods("missing-x") + "/log").status, 404)
        # pod bound to an unknown node
        API.post(self.pods(), pod_body("lp3", node=rname("ghost")))
        self.assertEqual(API.get(self.pods("lp3") + "/log").status, 404)

    def test_address_preference(self):
        """kube-apiserver's default --kubelet-preferred-address-types puts Hostname before
        InternalIP whatever the list's order: a Hostname that does not resolve breaks the log
        proxy although the InternalIP would answer (what a virtual node must not advertise)."""
        bad = rname("nores") + ".invalid"
        node = self.mknode(port=self.fk.port, addresses=[{"type": "InternalIP", "address": "127.0.0.1"},
                                                         {"type": "Hostname", "address": bad}])["metadata"]["name"]
        API.post(self.pods(), pod_body("ap1", node=node))
        r = API.get(self.pods("ap1") + "/log")
        self.assertEqual(r.status, 500, r.text)
        self.assertRegex(r.json["message"], r'^Get "https://%s:%d/containerLogs/%s/ap1/main": dial tcp: lookup %s'
                         % (re.escape(bad), self.fk.port, self.ns, re.escape(bad)))
        self.assertIn("no such host", r.json["message"])
        node2 = self.mknode(port=self.fk.port, addresses=[{"type": "ExternalIP", "address": "192.0.2.1"},
                                                          {"type": "InternalIP", "address": "127.0.0.1"}])["metadata"]["name"]
        API.post(self.pods(), pod_body("ap2", node=node2))
        r = API.get(self.pods("ap2") + "/log")
        self.assertEqual(r.status, 200, r.text)
        node3 = self.mknode(port=self.fk.port, addresses=[{"type": "ExternalIP", "address": "127.0.0.1"}])["metadata"]["name"]
        API.post(self.pods(), pod_body("ap3", node=node3))
        self.assertEqual(API.get(self.pods("ap3") + "/log").status, 200)


    def test_loopback_node_addresses(self):
        """A node whose InternalIP is a loopback address of its own (127.0.1.N, as the e2e harness
        gives its virtual nodes): the API server verifies the kubelet's certificate against that
        address, which the state dir's kubelet-serving certificate names for N = 1..16."""
        import fake_kubelet
        sj = CFG["sj"]
        for addr in ("127.0.1.1", "127.0.1.16"):
            fk = fake_kubelet.FakeKubelet(sj["kubeletServingCert"], sj["kubeletServingKey"],
                                          sj["ca"] or os.path.join(CFG["state"], "ca.crt"), host=addr)
            try:
                node = self.mknode(port=fk.port, addresses=[{"type": "InternalIP", "address": addr}])["metadata"]["name"]
                pod = rname("lo")
                API.post(self.pods(), pod_body(pod, node=node))
                r = API.get(self.pods(pod) + "/log?tailLines=1")
                self.assertEqual(r.status, 200, r.text[:500])
                self.assertEqual(r.text, "log line 5 (main)\n")
                self.assertEqual(fk.requests[-1]["path"], "/containerLogs/%s/%s/main" % (self.ns, pod))
            finally:
                fk.stop()


class TestStreamProxy(WithFakeKubelet):
    """pods/exec, attach, portforward and nodes/proxy through the API server to a fake kubelet
    (tests/kube/fake_kubelet.py), byte for byte: what reaches the kubelet, the checks before the
    dial, the kubelet's answers passed through, the relay after the 101."""


    def setUp(self):
        if not getattr(type(self), "node", None):
            type(self).node = self.mknode(port=self.fk.port)["metadata"]["name"]
            for name in ("sp", "missing-sp", "notrunning-sp"):
                self.assertEqual(API.post(self.pods(), pod_body(name, node=self.node)).status, 201)

    def upgrade(self, method, path, headers, token="admin"):
        """Sends an upgrade request by hand: (socket, status, headers dict, bytes after the head)."""
        c = API.conn()
        c.connect()
        s = c.sock
        lines = ["%s %s HTTP/1.1" % (method, path), "Host: %s:%d" % (API.host, API.port)]
        tok = CFG["token"] if token == "admin" else token
        if tok:
            lines.append("Authorization: Bearer " + tok)
        lines += ["%s: %s" % kv for kv in headers]
        s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        buf = b""
        s.settimeout(30)
        while b"\r\n\r\n" not in buf:
            d = s.recv(65536)
            if not d:
                break
            buf += d
        head, _, rest = buf.partition(b"\r\n\r\n")
        hl = head.decode("latin-1").split("\r\n")
        hd = {}
        for l in hl[1:]:
            k, _, v = l.partition(":")
            hd[k.strip().lower()] = v.strip()
        return s, int(hl[0].split()[1]), hd, rest

    @staticmethod
    def ws_headers(protocol="v5.channel.k8s.io"):
        import base64
        return [("Connection", "Upgrade"), ("Upgrade", "websocket"), ("sec-websocket-version", "13"),
                ("sec-websocket-key", base64.b64encode(os.urandom(16)).decode()), ("sec-websocket-protocol", protocol)]

    @staticmethod
    def ws_send(s, payload, opcode=2):
        import struct
        mask = os.urandom(4)
        n = len(payload)
        head = struct.pack(">BB", 0x80 | opcode, 0x80 | n) if n < 126 else struct.pack(">BBH", 0x80 | opcode, 0x80 | 126, n)
        s.sendall(head + mask + bytes(c ^ mask[i % 4] for i, c in enumerate(payload)))

    @staticmethod
    def ws_frames(s, buf):
        """Yields (opcode, payload) of the server's (unmasked) frames."""
        import struct
        while True:
            while len(buf) < 2 or len(buf) < 2 + ((buf[1] & 0x7F) if (buf[1] & 0x7F) < 126 else 0) or \
                    ((buf[1] & 0x7F) == 126 and len(buf) < 4 + struct.unpack(">H", buf[2:4])[0]):
                d = s.recv(65536)
                if not d:
                    return
                buf += d
            n, i = buf[1] & 0x7F, 2
            if n == 126:
                n, i = struct.unpack(">H", buf[2:4])[0], 4
            yield buf[0] & 0x0F, buf[i:i + n]
            buf = buf[i + n:]

    def last(self, prefix):
        return [r for r in self.fk.requests if r.get("path", "").startswith(prefix)][-1]

    def test_exec_websocket_relay_and_request(self):
        path = self.pods("sp") + "/exec?command=cat&stdin=true&stdout=true&stderr=true"
        s, code, hd, rest = self.upgrade("GET", path, self.ws_headers() + [
            ("User-Agent", "stream-test/1"), ("X-Forwarded-For", "192.0.2.7"), ("kubectl-command", "kubectl exec")])
        try:
            self.assertEqual(code, 101, rest)
            self.assertEqual(hd.get("sec-websocket-protocol"), "v5.channel.k8s.io")
            self.ws_send(s, b"\x00ping through\n")
            frames = self.ws_frames(s, rest)
            self.assertEqual(next(frames), (2, b"\x01ping through\n"))
            self.ws_send(s, b"\xff\x00")                 # v5: stdin closed
            op, st = next(frames)
            self.assertEqual((op, st[:1]), (2, b"\x03"))
            self.assertEqual(json.loads(st[1:].decode()), {"metadata": {}, "status": "Success"})
            self.assertEqual(next(frames)[0], 8)        # Close
            self.assertEqual(list(frames), [])          # the kubelet closed: so did the API server
        finally:
            s.close()
        r = self.last("/exec/")
        self.assertEqual(r["requestLine"], "GET /exec/%s/sp/main?command=cat&error=1&input=1&output=1 HTTP/1.1" % self.ns)
        self.assertEqual(r["clientCN"], "kube-apiserver-kubelet-client")
        # As Go's http.Request.Write writes them: Host, User-Agent, then the rest sorted, under
        # canonical names; no credentials; X-Forwarded-For appended.
        self.assertEqual([k for k, v in r["headers"]],
                         ["Host", "User-Agent", "Connection", "Kubectl-Command", "Sec-Websocket-Key",
                          "Sec-Websocket-Protocol", "Sec-Websocket-Version", "Upgrade", "X-Forwarded-For"])
        h = dict(r["headers"])
        self.assertEqual(h["Host"], "%s:%d" % (API.host, API.port))
        self.assertEqual(h["User-Agent"], "stream-test/1")
        self.assertEqual(h["X-Forwarded-For"], "192.0.2.7, 127.0.0.1")

    def test_exec_exit_code_on_the_error_channel(self):
        s, code, hd, rest = self.upgrade("GET", self.pods("sp") + "/exec?command=exit&command=7&stdout=1",
                                         self.ws_headers("v4.channel.k8s.io"))
        try:
            self.assertEqual(code, 101)
            op, st = next(self.ws_frames(s, rest))
            self.assertEqual(st[:1], b"\x03")
            st = json.loads(st[1:].decode())
            self.assertEqual((st["status"], st["reason"]), ("Failure", "NonZeroExitCode"))
            self.assertEqual(st["details"]["causes"], [{"reason": "ExitCode", "message": "7"}])
        finally:
            s.close()

    def test_checks_before_the_dial(self):
        n = len(self.fk.requests)
        r = API.get(self.pods("sp") + "/exec?command=echo&stdout=1")
        self.assertStatus(r, 400, "BadRequest")
        self.assertEqual(r.json["message"], "Upgrade request required")
        r = API.post(self.pods("sp") + "/attach?stdout=1", b"")
        self.assertEqual(r.json["message"], "Upgrade request required")
        r = API.get(self.pods("sp") + "/exec?command=echo&container=zz")
        self.assertStatus(r, 400, "BadRequest")
        self.assertEqual(r.json["message"], "container zz is not valid for pod sp")
        API.post(self.pods(), pod_body("sp2", node=self.node, containers=[{"name": "a", "image": "x:1"}, {"name": "b", "image": "x:1"}]))
        s, code, hd, rest = self.upgrade("GET", self.pods("sp2") + "/exec?command=echo", self.ws_headers())
        s.close()
        self.assertEqual(code, 400)
        self.assertEqual(json.loads(rest.decode())["message"], "a container name must be specified for pod sp2, choose one of: [a b]")
        API.post(self.pods(), pod_body("sp3", selector={"no-such-label": "x"}))
        s, code, hd, rest = self.upgrade("GET", self.pods("sp3") + "/exec?command=echo", self.ws_headers())
        s.close()
        self.assertEqual(code, 400)
        self.assertEqual(json.loads(rest.decode())["message"], "pod sp3 does not have a host assigned")
        self.assertStatus(API.get(self.pods("nosuchpod") + "/exec?command=echo"), 404, "NotFound")
        self.assertEqual(len(self.fk.requests), n, "a refused request reached the kubelet")

    def test_dial_failure(self):
        dead = self.mknode(port=1)["metadata"]["name"]
        API.post(self.pods(), pod_body("spd", node=dead))
        s, code, hd, rest = self.upgrade("POST", self.pods("spd") + "/exec?command=echo&stdout=1",
                                         [("Connection", "Upgrade"), ("Upgrade", "SPDY/3.1"),
                                          ("X-Stream-Protocol-Version", "v4.channel.k8s.io"), ("Content-Length", "0")])
        s.close()
        self.assertEqual(code, 500)
        st = json.loads(rest.decode())
        self.assertEqual(st["message"], "error dialing backend: dial tcp 127.0.0.1:1: connect: connection refused")
        self.assertNotIn("reason", st)
        r = API.get(self.pods("spd") + "/log")
        self.assertEqual(r.status, 500)
        self.assertEqual(r.json["message"], 'Get "https://127.0.0.1:1/containerLogs/%s/spd/main": '
                                            'dial tcp 127.0.0.1:1: connect: connection refused' % self.ns)
        self.assertNotIn("reason", r.json)

    def cat_session(self):
        s, code, hd, rest = self.upgrade("GET", self.pods("sp") + "/exec?command=cat&stdin=1&stdout=1", self.ws_headers())
        self.assertEqual(code, 101, rest)
        return s, self.ws_frames(s, rest)

    def test_client_close_ends_the_kubelet_session(self):
        s, frames = self.cat_session()
        self.ws_send(s, b"\x00up\n")
        self.assertEqual(next(frames), (2, b"\x01up\n"))
        self.assertGreaterEqual(self.fk.active, 1)
        s.close()           # without closing stdin: only the relay's close can end the kubelet's cat
        wait_for(lambda: self.fk.active == 0, timeout=30, msg="the kubelet's session to end")

    def test_concurrent_sessions(self):
        sessions = [self.cat_session() for _ in range(10)]
        try:
            for i, (s, frames) in enumerate(sessions):
                self.ws_send(s, b"\x00session %d\n" % i)
            for i, (s, frames) in enumerate(reversed(sessions)):
                self.assertEqual(next(frames), (2, b"\x01session %d\n" % (9 - i)))
        finally:
            for s, frames in sessions:
                s.close()

    def test_kubelet_answers_passed_through(self):
        s, code, hd, rest = self.upgrade("GET", self.pods("missing-sp") + "/exec?command=echo&stdout=1", self.ws_headers())
        s.close()
        self.assertEqual((code, hd.get("content-type")), (404, "text/plain"))
        self.assertEqual(rest, ("pod %s/missing-sp not found\n" % self.ns).encode())
        s, code, hd, rest = self.upgrade("GET", self.pods("notrunning-sp") + "/portforward?ports=8080&ports=8081",
                                         [("Connection", "Upgrade"), ("Upgrade", "SPDY/3.1"),
                                          ("X-Stream-Protocol-Version", "portforward.k8s.io")])
        s.close()
        self.assertEqual(code, 400)
        self.assertEqual(json.loads(rest.decode())["message"], "container main is not running")
        self.assertEqual(self.last("/portForward/")["requestLine"],
                         "GET /portForward/%s/notrunning-sp?port=8080%%2C8081 HTTP/1.1" % self.ns)

    def test_rbac(self):
        if not CFG["noright"]:
            self.skipTest("KUBE_NORIGHTS_TOKEN not set")
        for method, verb in (("POST", "create"), ("GET", "get")):
            s, code, hd, rest = self.upgrade(method, self.pods("sp") + "/exec?command=echo&stdout=1", self.ws_headers(),
                                             token=CFG["noright"])
            s.close()
            self.assertEqual(code, 403)
            self.assertIn('cannot %s resource "pods/exec" in API group "" in the namespace "%s"' % (verb, self.ns),
                          json.loads(rest.decode())["message"])

    def test_discovery(self):
        subs = {r["name"]: r for r in API.get("/api/v1").json["resources"]}
        for sub, kind in (("exec", "PodExecOptions"), ("attach", "PodAttachOptions"), ("portforward", "PodPortForwardOptions")):
            self.assertEqual(sorted(subs["pods/" + sub]["verbs"]), ["create", "get"])
            self.assertEqual(subs["pods/" + sub]["kind"], kind)
        self.assertEqual(subs["nodes/proxy"]["kind"], "NodeProxyOptions")

    def test_node_proxy(self):
        if not has_controls():
            self.skipTest("a real API server refuses nodes/proxy to a loopback node address (400 address not allowed)")
        r = API.get("/api/v1/nodes/%s/proxy/metrics/resource" % self.node)
        self.assertEqual(r.status, 200, r.text)
        self.assertIn("\nnode_cpu_usage_seconds_total ", r.text)
        req = self.last("/metrics/")
        self.assertEqual(req["clientCN"], "kube-apiserver-kubelet-client")
        self.assertNotIn("Authorization", dict(req["headers"]))
        r = API.post("/api/v1/nodes/%s/proxy/fakeproxy/x?y=1" % self.node, b"body")
        self.assertEqual(r.text, "POST /fakeproxy/x?y=1 HTTP/1.1\n")
        self.assertEqual(API.get("/api/v1/nodes/%s/proxy/no/such" % self.node).status, 404)
        self.assertStatus(API.get("/api/v1/nodes/%s/proxy/metrics" % rname("ghost")), 404, "NotFound")
        dead = self.mknode(port=1)["metadata"]["name"]
        r = API.get("/api/v1/nodes/%s/proxy/metrics/resource" % dead)
        self.assertStatus(r, 503, "ServiceUnavailable")
        self.assertEqual(r.json["message"], "error trying to reach service: dial tcp 127.0.0.1:1: connect: connection refused")
        if CFG["noright"]:
            r = API.get("/api/v1/nodes/%s/proxy/metrics/resource" % self.node, token=CFG["noright"])
            self.assertStatus(r, 403, "Forbidden")
            self.assertIn('cannot get resource "nodes/proxy"', r.json["message"])
        control("controllers", {"nodeProxyGlobalOnly": True})
        try:
            r = API.get("/api/v1/nodes/%s/proxy/metrics/resource" % self.node)
            self.assertStatus(r, 400, "BadRequest")
            self.assertEqual(r.json["message"], "address not allowed")
        finally:
            control("controllers", {"nodeProxyGlobalOnly": False})


class TestMetricsApi(WithFakeKubelet):
    """metrics.k8s.io/v1beta1 as metrics-server serves it, computed by the double from two scrapes
    of each Ready node's kubelet /metrics/resource (tests/kube/fake_kubelet.py here). The figures
    need the double (a real API server's metrics-server cannot reach the fake kubelet); the
    discovery test (TestDiscovery.test_metrics_group) runs against any server that has the group."""

    M = "/apis/metrics.k8s.io/v1beta1"

    @classmethod
    def setUpClass(cls):
        WithFakeKubelet.setUpClass.__func__(cls)
        cls.extra = []                # more fake kubelets, stopped at the end

    @classmethod
    def tearDownClass(cls):
        for k in getattr(cls, "extra", []):
            k.stop()
        WithFakeKubelet.tearDownClass.__func__(cls)

    def setUp(self):
        if not has_controls():
            self.skipTest("the figures come from a fake kubelet on a loopback address, which only the double scrapes")
        self.sel = rname("top")       # label on this test's nodes: its lists scrape only these

    def kubelet(self, usage=None, text=None):
        import fake_kubelet
        sj = CFG["sj"]
        k = fake_kubelet.FakeKubelet(sj["kubeletServingCert"], sj["kubeletServingKey"], sj["ca"])
        type(self).extra.append(k)
        if usage is not None:
            k.usage = usage
        k.metrics_text = text
        return k

    def node(self, port, ready=True, labels=None):
        return self.mknode(port=port, ready=ready, labels=dict(labels or {}, top=self.sel))["metadata"]["name"]

    def node_metrics(self, extra_sel=""):
        r = API.get(self.M + "/nodes?labelSelector=" + urllib.parse.quote("top=" + self.sel + extra_sel))
        self.assertEqual(r.status, 200, r.text)
        self.assertEqual((r.json["kind"], r.json["apiVersion"]), ("NodeMetricsList", "metrics.k8s.io/v1beta1"))
        return {m["metadata"]["name"]: m for m in r.json["items"]}

    def wait_node(self, name, extra_sel=""):
        return wait_for(lambda: self.node_metrics(extra_sel).get(name), msg="metrics of node " + name)

    def scrapes(self, k):
        return [r for r in k.requests if r["path"] == "/metrics/resource"]

    def after_next_scrape(self, k):
        """The node metrics of the first list answered after kubelet k's next scrape."""
        n = len(self.scrapes(k))
        return wait_for(lambda: (lambda got: [got] if len(self.scrapes(k)) > n else None)(self.node_metrics()),
                        msg="a scrape")[0]

    def test_node_figures(self):
        """A node's usage from its kubelet: the first scrape alone gives nothing (no rate yet),
        then CPU in nanocores as a rate, memory in bytes (Ki/Mi canonical form), labels, window,
        get by name, the table, label selectors."""
        k = self.kubelet({"node": {"cpu": 0.5, "memory": 256 << 20}})
        name = self.node(k.port, labels={"role": "a"})
        self.assertEqual(self.node_metrics(), {})
        self.assertEqual(len(self.scrapes(k)), 1)
        m = self.wait_node(name)
        self.assertGreaterEqual(len(self.scrapes(k)), 2)
        self.assertEqual(self.scrapes(k)[-1]["clientCN"], "kube-apiserver-kubelet-client")
        self.assertEqual(m["usage"], {"cpu": "500m", "memory": "256Mi"})
        self.assertEqual((m["kind"], m["apiVersion"]), ("NodeMetrics", "metrics.k8s.io/v1beta1"))
        self.assertEqual(m["metadata"]["name"], name)
        self.assertEqual(m["metadata"]["labels"], {"role": "a", "top": self.sel})
        self.assertRegex(m["timestamp"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        self.assertRegex(m["window"], r"^(\d+(\.\d+)?s|\d+ms|\d+m\d+(\.\d+)?s)$")
        g = API.get(self.M + "/nodes/" + name)
        self.assertEqual(g.status, 200, g.text)
        self.assertEqual((g.json["kind"], g.json["usage"]), ("NodeMetrics", {"cpu": "500m", "memory": "256Mi"}))
        t = API.get(self.M + "/nodes/" + name, headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}).json
        self.assertEqual([c["name"] for c in t["columnDefinitions"]], ["Name", "CPU", "Memory", "Window"])
        self.assertEqual(t["rows"][0]["cells"][:3], [name, "500m", "256Mi"])
        # label selectors pick the nodes (and only those are scraped)
        other = self.node(self.kubelet({"node": {"cpu": 2, "memory": 1 << 30}}).port, labels={"role": "b"})
        self.wait_node(other)
        self.assertEqual(set(self.node_metrics(",role=a")), {name})
        self.assertEqual(set(self.node_metrics(",role!=a")), {other})
        self.assertEqual(self.node_metrics()[other]["usage"], {"cpu": "2", "memory": "1Gi"})
        r = API.get(self.M + "/nodes/" + rname("ghost"))
        self.assertStatus(r, 404, "NotFound")
        self.assertRegex(r.json["message"], r'^nodemetrics\.metrics\.k8s\.io "ghost-\w+" not found$')

    def test_rate_from_two_scrapes(self):
        """usage = delta of the cumulative CPU seconds over delta of the kubelet's timestamps,
        window = that delta, timestamp = the later sample's; a counter that goes down (a reset)
        gives no figure until the next pair."""
        t0 = 1700000000000
        body = ("# TYPE node_cpu_usage_seconds_total counter\nnode_cpu_usage_seconds_total %s %d\n"
                "node_memory_working_set_bytes %s %d\n")
        k = self.kubelet(text=(body % ("10", t0, "1536", t0)).encode())
        name = self.node(k.port)
        self.assertEqual(self.node_metrics(), {})
        k.metrics_text = (body % ("13.5", t0 + 4000, "1.048576e+06", t0 + 4000)).encode()
        m = self.wait_node(name)
        self.assertEqual(m["usage"], {"cpu": "875m", "memory": "1Mi"})
        self.assertEqual(m["window"], "4s")
        self.assertEqual(m["timestamp"], "2023-11-14T22:13:24Z")
        k.metrics_text = (body % ("1", t0 + 5000, "1536", t0 + 5000)).encode()
        self.assertNotIn(name, self.after_next_scrape(k))
        k.metrics_text = (body % ("1.25", t0 + 5500, "1536", t0 + 5500)).encode()
        m = self.wait_node(name)
        self.assertEqual((m["usage"], m["window"]), ({"cpu": "500m", "memory": "1536"}, "500ms"))

    def test_pod_figures(self):
        """PodMetrics per container (names sorted), namespaced; label and field selectors; get by
        name; a pod the kubelet reports that the API does not know is left out, and so is a pod
        with no figures (404 on a get) and one with a container that just restarted."""
        ns = self.ns
        k = self.kubelet({"node": {"cpu": 1, "memory": 1 << 30}, "containers": [
            {"namespace": ns, "pod": "tp1", "container": "main", "cpu": 0.25, "memory": 64 << 20},
            {"namespace": ns, "pod": "tp1", "container": "aside", "cpu": 0.001, "memory": 1000},
            {"namespace": ns, "pod": "tp2", "container": "main", "cpu": 1.5, "memory": 3 << 10},
            {"namespace": ns, "pod": "unknown", "container": "main", "cpu": 1, "memory": 1}]})
        node = self.node(k.port)
        two = [{"name": "main", "image": "x:1"}, {"name": "aside", "image": "x:1"}]
        for name, labels, cs in (("tp1", {"app": "top"}, two), ("tp2", {"app": "other"}, None), ("tp3", {}, None)):
            self.assertEqual(API.post(self.pods(), pod_body(name, node=node, labels=labels, containers=cs)).status, 201)

        def pods(q=""):
            r = API.get(self.M + "/namespaces/%s/pods%s" % (ns, q))
            self.assertEqual(r.status, 200, r.text)
            self.assertEqual(r.json["kind"], "PodMetricsList")
            return {m["metadata"]["name"]: m for m in r.json["items"]}
        got = wait_for(lambda: pods().get("tp2") and pods(), msg="pod metrics")
        self.assertEqual(set(got), {"tp1", "tp2"})
        p1 = got["tp1"]
        self.assertEqual((p1["kind"], p1["apiVersion"]), ("PodMetrics", "metrics.k8s.io/v1beta1"))
        self.assertEqual((p1["metadata"]["namespace"], p1["metadata"]["labels"]), (ns, {"app": "top"}))
        self.assertEqual(p1["containers"], [{"name": "aside", "usage": {"cpu": "1m", "memory": "1000"}},
                                            {"name": "main", "usage": {"cpu": "250m", "memory": "64Mi"}}])
        self.assertEqual(got["tp2"]["containers"], [{"name": "main", "usage": {"cpu": "1500m", "memory": "3Ki"}}])
        self.assertRegex(p1["window"], r"^(\d+(\.\d+)?s|\d+ms)$")
        self.assertEqual(set(pods("?labelSelector=app%3Dtop")), {"tp1"})
        self.assertEqual(set(pods("?fieldSelector=metadata.name%3Dtp2")), {"tp2"})
        r = API.get(self.M + "/namespaces/%s/pods/tp1" % ns)
        self.assertEqual((r.status, r.json["containers"]), (200, p1["containers"]))
        r = API.get(self.M + "/namespaces/%s/pods/tp3" % ns)
        self.assertStatus(r, 404, "NotFound")
        self.assertEqual(r.json["message"], 'podmetrics.metrics.k8s.io "%s/tp3" not found' % ns)
        t = API.get(self.M + "/namespaces/%s/pods?labelSelector=app%%3Dtop" % ns,
                    headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}).json
        self.assertEqual(t["rows"][0]["cells"][:3], ["tp1", "251m", "67109864"])
        self.assertEqual(set(m["metadata"]["name"] for m in API.get(self.M + "/pods").json["items"]) & {"tp1", "unknown"},
                         {"tp1"})
        # a container that restarted (its start time changed) has no rate across the restart, and a
        # pod is shown whole or not at all: tp1 is left out until the next pair of scrapes
        usage = json.loads(json.dumps(k.usage))
        next(c for c in usage["containers"] if c["container"] == "aside")["start"] = time.time()
        n = len(self.scrapes(k))
        k.usage = usage
        got = wait_for(lambda: (lambda g: [g] if len(self.scrapes(k)) > n else None)(pods()), msg="a scrape")[0]
        self.assertEqual(set(got), {"tp2"})
        self.assertEqual(len(wait_for(lambda: pods().get("tp1"), msg="tp1 back")["containers"]), 2)

    def test_unreachable_and_not_ready_left_out(self):
        """A node whose kubelet cannot be reached, or that is not Ready, has no metrics (it is
        left out of the list and a get is 404); the others are served as before."""
        good = self.node(self.fk.port)
        dead = self.node(1)
        idle = self.kubelet()
        notready = self.node(idle.port, ready=False)
        self.wait_node(good)
        got = self.node_metrics()
        self.assertNotIn(dead, got)
        self.assertNotIn(notready, got)
        self.assertStatus(API.get(self.M + "/nodes/" + dead), 404, "NotFound")
        self.assertEqual(self.scrapes(idle), [])

    def test_silent_kubelet(self):
        """A kubelet that accepts the connection and never answers the TLS handshake is given up
        on after the scrape timeout: that node is left out, the others are in the same answer."""
        good = self.node(self.fk.port)
        self.wait_node(good)
        silent = socket.socket()
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        self.addCleanup(silent.close)
        hung = self.node(silent.getsockname()[1])
        t0 = time.time()
        got = self.node_metrics()
        self.assertIn(good, got)
        self.assertNotIn(hung, got)
        self.assertLess(time.time() - t0, 30)
        self.assertEqual(API.get("/healthz").status, 200)

    def test_bad_kubelet_answers(self):
        """Malformed Prometheus text (a bad sample, value, label set, a label value that is not
        UTF-8, a line that is no sample) and a kubelet answering 500 leave
        that node out; the server and the other nodes are unaffected, and the node is back once
        its kubelet answers well again."""
        good = self.node(self.fk.port)
        bad = self.kubelet()
        name = self.node(bad.port)
        self.wait_node(name)
        for line in (b"node_cpu_usage_seconds_total{{{ 1 2 3", b"node_cpu_usage_seconds_total one",
                     b'container_cpu_usage_seconds_total{pod="x} 1',
                     b'container_cpu_usage_seconds_total{container="\xff",namespace="a",pod="b"} 1', b"not a sample at all"):
            bad.metrics_text = None
            self.wait_node(name)            # two good samples before each bad answer
            t = int(time.time() * 1000) + 1000
            # good samples, later and higher than those, and the one bad line
            text = ("node_cpu_usage_seconds_total 1e6 %d\nnode_memory_working_set_bytes 1 %d\n" % (t, t)).encode() + line + b"\n"
            bad.metrics_text = text
            got = self.after_next_scrape(bad)
            self.assertNotIn(name, got, text)
            self.assertIn(good, got)
            self.assertEqual(API.get("/healthz").status, 200)
        bad.metrics_text = None
        self.wait_node(name)
        bad.metrics_status = 500
        self.assertNotIn(name, self.after_next_scrape(bad))
        bad.metrics_status = 200
        self.wait_node(name)

    def test_verbs(self):
        """get and list only: no watch, no writes."""
        self.assertStatus(API.get(self.M + "/nodes?watch=true"), 405, "MethodNotAllowed")
        self.assertStatus(API.post(self.M + "/namespaces/%s/pods" % self.ns, {"metadata": {"name": "x"}}), 405,
                          "MethodNotAllowed")
        self.assertStatus(API.delete(self.M + "/nodes/x"), 405, "MethodNotAllowed")
        if CFG["noright"]:
            r = API.get(self.M + "/nodes", token=CFG["noright"])
            self.assertStatus(r, 403, "Forbidden")
            self.assertIn('cannot list resource "nodes" in API group "metrics.k8s.io"', r.json["message"])


# ------------------------------------------------------------------------------------------------
# CertificateSigningRequests (certificates.k8s.io/v1), kubelet TLS bootstrap, node identities.
# Keys and requests are made with the openssl CLI (EC P-256). A node identity for the node tests
# is itself obtained through a CSR (the admin's is auto-approved, on any server).
CSR_PATH = "/apis/certificates.k8s.io/v1/certificatesigningrequests"
KUBELET_CLIENT = "kubernetes.io/kube-apiserver-client-kubelet"
KUBELET_SERVING = "kubernetes.io/kubelet-serving"
APISERVER_CLIENT = "kubernetes.io/kube-apiserver-client"
CLIENT_USAGES = ["digital signature", "key encipherment", "client auth"]
SELF_MSG = "Auto approving self kubelet client certificate after SubjectAccessReview."
NODE_MSG = "Auto approving kubelet client certificate after SubjectAccessReview."
ONE_YEAR = 365 * 24 * 3600
_TMP = []


def tmpdir():
    if not _TMP:
        _TMP.append(tempfile.mkdtemp(prefix="kube-csr-tests."))
    return _TMP[0]


def openssl_csr(cn=None, orgs=("system:nodes",), sans=(), key=None):
    """(key path, PEM CSR bytes): a new EC P-256 key (or `key`) and a request for it."""
    d = tmpdir()
    base = os.path.join(d, rname("k"))
    subj = "".join("/O=" + o for o in orgs) + ("/CN=" + cn if cn else "")
    args = ["openssl", "req", "-new", "-nodes", "-out", base + ".csr", "-subj", subj or "/CN="]
    if key:
        args += ["-key", key]
    else:
        key = base + ".key"
        args += ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-keyout", key]
    if sans:
        args += ["-addext", "subjectAltName=" + ",".join(sans)]
    r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert r.returncode == 0, r.stderr.decode()
    return key, open(base + ".csr", "rb").read()


def csr_body(pem, signer=KUBELET_CLIENT, usages=None, expiration=None, name=None, gen="kt-csr-"):
    spec = {"request": base64.b64encode(pem).decode() if isinstance(pem, bytes) else pem, "signerName": signer,
            "usages": CLIENT_USAGES if usages is None else usages}
    if signer is None:
        del spec["signerName"]
    if expiration is not None:
        spec["expirationSeconds"] = expiration
    md = {"name": name} if name else {"generateName": gen}
    return {"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest", "metadata": md, "spec": spec}


def cert_info(pem):
    """The fields of a PEM certificate, from `openssl x509 -text`."""
    p = os.path.join(tmpdir(), rname("c") + ".crt")
    with open(p, "wb") as f:
        f.write(pem)
    run = lambda *a: subprocess.run(["openssl", "x509", "-in", p, "-noout"] + list(a), stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE).stdout.decode()
    text = run("-text")
    dates = dict(l.split("=", 1) for l in run("-startdate", "-enddate").splitlines() if "=" in l)

    def ext(title):
        m = re.search(r"\n\s+X509v3 %s:( critical)?[ \t]*\n\s+(.*)\n" % re.escape(title), text)
        return (m.group(2).strip(), bool(m.group(1))) if m else (None, False)
    return {"text": text, "notBefore": ssl.cert_time_to_seconds(dates["notBefore"]),
            "notAfter": ssl.cert_time_to_seconds(dates["notAfter"]),
            "subject": run("-subject", "-nameopt", "RFC2253").strip().split("=", 1)[1],
            "issuer": run("-issuer", "-nameopt", "RFC2253").strip().split("=", 1)[1],
            "basic": ext("Basic Constraints"), "ku": ext("Key Usage"), "eku": ext("Extended Key Usage"),
            "san": ext("Subject Alternative Name"), "aki": ext("Authority Key Identifier"),
            "ski": ext("Subject Key Identifier"), "pem_blocks": pem.count(b"-----BEGIN CERTIFICATE-----")}


def csr_conditions(o):
    return [c["type"] for c in (o.get("status") or {}).get("conditions") or []]


def wait_csr(name, pred, timeout=20, msg="CSR state"):
    def f():
        o = API.get(CSR_PATH + "/" + name).json
        return o if pred(o) else None
    return wait_for(f, timeout=timeout, msg=msg)


def issued(o):
    return bool((o.get("status") or {}).get("certificate"))


def cert_client(crt, key):
    """A Client that authenticates with a client certificate (no token)."""
    c = Client()
    if not c.https:
        raise unittest.SkipTest("client certificates need an https server")
    ctx = ssl.create_default_context(cafile=CFG["ca"]) if CFG["ca"] and not CFG["insecure"] else \
        ssl._create_unverified_context()
    ctx.load_cert_chain(crt, key)
    c.ctx = ctx
    plain = c.req

    def req(method, path, body=None, ctype="application/json", token=None, headers=None, conn=None):
        return plain(method, path, body, ctype=ctype, token=token or "", headers=headers, conn=conn)
    c.req = req
    return c


def issue_node_cert(node, expiration=None):
    """(crt path, key path) of a kubelet client certificate for system:node:NODE, through an admin CSR
    (auto-approved: system:masters may create certificatesigningrequests/nodeclient)."""
    key, pem = openssl_csr("system:node:" + node)
    r = API.post(CSR_PATH, csr_body(pem, expiration=expiration))
    assert r.status == 201, r.text
    o = wait_csr(r.json["metadata"]["name"], issued, msg="node certificate issued")
    crt = key[:-4] + ".crt"
    with open(crt, "wb") as f:
        f.write(base64.b64decode(o["status"]["certificate"]))
    API.delete(CSR_PATH + "/" + o["metadata"]["name"])
    return crt, key


def approve(name, approved=True, token="admin", reason=None, message=None):
    """What kubectl certificate approve|deny sends: GET, append the condition, PUT .../approval."""
    o = API.get(CSR_PATH + "/" + name).json
    t = "Approved" if approved else "Denied"
    c = {"type": t, "status": "True", "reason": reason or ("KubectlApprove" if approved else "KubectlDeny"),
         "message": message or "This CSR was %s by kubectl certificate %s." % (
             "approved" if approved else "denied", "approve" if approved else "deny"), "lastUpdateTime": now_s()}
    o.setdefault("status", {}).setdefault("conditions", []).append(c)
    return API.put(CSR_PATH + "/" + name + "/approval", o, token=token)


class CSRBase(Base):
    @classmethod
    def tearDownClass(cls):
        r = API.get(CSR_PATH)
        for o in (r.json or {}).get("items", []):
            if o["metadata"]["name"].startswith(("kt-csr-", "ktc-")):
                API.delete(CSR_PATH + "/" + o["metadata"]["name"])
        Base.tearDownClass.__func__(cls)

    def create(self, body, token="admin", code=201):
        r = API.post(CSR_PATH, body, token=token)
        self.assertEqual(r.status, code, r.text[:500])
        return r.json

    def stays_pending(self, name, secs=2.5):
        """No condition and no certificate for secs (more than the double's retry period)."""
        end = time.time() + secs
        while time.time() < end:
            o = API.get(CSR_PATH + "/" + name).json
            self.assertEqual(csr_conditions(o), [], json.dumps(o.get("status")))
            self.assertFalse(issued(o))
            time.sleep(0.2)
        return o


class TestCSRApi(CSRBase):
    """The CSR API itself: what the server sets on create, validation (422), reads, discovery, table."""

    def test_create_sets_requester(self):
        key, pem = openssl_csr("system:node:" + rname("kn"))
        body = csr_body(pem, expiration=3600)
        body["spec"].update({"username": "mallory", "uid": "x", "groups": ["system:masters"]})
        body["status"] = {"conditions": [{"type": "Approved", "status": "True", "reason": "Forged"}]}
        o = self.create(body)
        self.assertTrue(o["metadata"]["name"].startswith("kt-csr-"))
        me = API.post("/apis/authentication.k8s.io/v1/selfsubjectreviews",
                      {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}).json["status"]["userInfo"]
        self.assertEqual(o["spec"]["username"], me["username"])
        self.assertEqual(o["spec"]["groups"], me["groups"])
        self.assertEqual(o["spec"].get("uid", ""), me.get("uid", ""))
        self.assertEqual((o["spec"]["signerName"], o["spec"]["expirationSeconds"], o["spec"]["usages"]),
                         (KUBELET_CLIENT, 3600, CLIENT_USAGES))
        self.assertEqual(base64.b64decode(o["spec"]["request"]), pem)
        self.assertNotIn("Forged", json.dumps(o.get("status")))     # not pre-approved by the requester

    def test_read_watch_delete(self):
        key, pem = openssl_csr("system:node:" + rname("kn"))
        o = self.create(csr_body(pem, signer="example.com/kt-noop"))    # no controller acts on this signer
        name = o["metadata"]["name"]
        self.assertEqual(API.get(CSR_PATH + "/" + name).json["metadata"]["uid"], o["metadata"]["uid"])
        items = API.get(CSR_PATH + "?fieldSelector=metadata.name%3D" + name).json["items"]
        self.assertEqual([i["metadata"]["name"] for i in items], [name])
        items = API.get(CSR_PATH + "?fieldSelector=spec.signerName%3Dexample.com%2Fkt-noop").json["items"]
        self.assertIn(name, [i["metadata"]["name"] for i in items])
        w = Watch(CSR_PATH + "?watch=1&fieldSelector=metadata.name%%3D%s&resourceVersion=%s" % (
            name, o["metadata"]["resourceVersion"]))
        try:
            self.assertEqual(w.status, 200)
            self.assertEqual(approve(name).status, 200)
            ev = w.next()
            self.assertEqual((ev["type"], csr_conditions(ev["object"])), ("MODIFIED", ["Approved"]))
            self.assertStatus(API.delete(CSR_PATH + "/" + name), 200)
            self.assertEqual(w.next()["type"], "DELETED")
        finally:
            w.close()
        self.assertStatus(API.get(CSR_PATH + "/" + name), 404, "NotFound")

    def test_validation(self):
        key, pem = openssl_csr("system:node:" + rname("kn"))
        name = rname("ktc")
        r = API.post(CSR_PATH, csr_body(pem, expiration=599, name=name))
        self.assertStatus(r, 422, "Invalid")
        self.assertEqual(r.json["message"], 'CertificateSigningRequest.certificates.k8s.io "%s" is invalid: '
                         'spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 600 '
                         'seconds (10 minutes)' % name)
        self.assertEqual(r.json["details"]["causes"], [{"reason": "FieldValueInvalid", "field": "spec.expirationSeconds",
                                                        "message": "Invalid value: 599: may not specify a duration less "
                                                                   "than 600 seconds (10 minutes)"}])
        r = API.post(CSR_PATH, csr_body(pem, signer="kubernetes.io/legacy-unknown", name=name))
        self.assertStatus(r, 422, "Invalid")
        self.assertEqual(r.json["message"], 'CertificateSigningRequest.certificates.k8s.io "%s" is invalid: '
                         'spec.signerName: Invalid value: "kubernetes.io/legacy-unknown": the legacy signerName is '
                         'not allowed via this API version' % name)
        r = API.post(CSR_PATH, csr_body(pem, signer=None, name=name))
        self.assertStatus(r, 422, "Invalid")
        self.assertEqual(r.json["message"], 'CertificateSigningRequest.certificates.k8s.io "%s" is invalid: '
                         'spec.signerName: Required value: signerName must be provided' % name)
        # a request that is no PEM CERTIFICATE REQUEST: the bytes printed as Go's %#v of a []byte
        r = API.post(CSR_PATH, csr_body(b"hi\n", name=name))
        self.assertStatus(r, 422, "Invalid")
        self.assertEqual(r.json["message"], 'CertificateSigningRequest.certificates.k8s.io "%s" is invalid: '
                         'spec.request: Invalid value: []byte{0x68, 0x69, 0xa}: PEM block type must be CERTIFICATE '
                         'REQUEST' % name)
        crt, _ = issue_node_cert(rname("kn"))       # a PEM CERTIFICATE is not a request either
        r = API.post(CSR_PATH, csr_body(open(crt, "rb").read(), name=name))
        self.assertStatus(r, 422, "Invalid")
        self.assertTrue(r.json["message"].endswith(": PEM block type must be CERTIFICATE REQUEST"), r.json["message"])
        r = API.post(CSR_PATH, csr_body(pem, usages=[], name=name))
        self.assertStatus(r, 422, "Invalid")
        self.assertEqual(r.json["message"], 'CertificateSigningRequest.certificates.k8s.io "%s" is invalid: '
                         'spec.usages: Required value: usages must be provided' % name)
        self.assertStatus(API.get(CSR_PATH + "/" + name), 404, "NotFound")     # nothing created

    def test_rbac(self):
        if not CFG["noright"]:
            self.skipTest("KUBE_NORIGHTS_TOKEN not set")
        key, pem = openssl_csr("system:node:" + rname("kn"))
        r = API.post(CSR_PATH, csr_body(pem), token=CFG["noright"])
        self.assertStatus(r, 403, "Forbidden")
        self.assertRegex(r.json["message"], r'^certificatesigningrequests\.certificates\.k8s\.io is forbidden: User '
                         r'"[^"]+" cannot create resource "certificatesigningrequests" in API group '
                         r'"certificates\.k8s\.io" at the cluster scope$')
        o = self.create(csr_body(pem, signer="example.com/kt-noop"))
        r = approve(o["metadata"]["name"], token=CFG["noright"])
        self.assertStatus(r, 403, "Forbidden")
        self.assertRegex(r.json["message"], r'cannot update resource "certificatesigningrequests/approval" in API group '
                         r'"certificates\.k8s\.io" at the cluster scope$')

    def test_approve_needs_signer_right(self):
        """update on certificatesigningrequests/approval is not enough: CertificateApproval wants
        approve on signers named after the signerName (or its domain/*)."""
        if not has_controls():
            self.skipTest("binds roles with the double's /_test/rbac")
        tok = control("tokens", {"user": rname("approver"), "groups": []})["token"]
        user = API.post("/apis/authentication.k8s.io/v1/selfsubjectreviews", {"apiVersion": "authentication.k8s.io/v1",
                        "kind": "SelfSubjectReview"}, token=tok).json["status"]["userInfo"]["username"]
        rules = [{"apiGroups": ["certificates.k8s.io"], "resources": ["certificatesigningrequests",
                                                                      "certificatesigningrequests/approval"],
                  "verbs": ["get", "update"]}]
        control("rbac", {"subject": "user:" + user, "role": rules})
        key, pem = openssl_csr("system:node:" + rname("kn"))
        name = self.create(csr_body(pem, signer="example.com/kt-noop"))["metadata"]["name"]
        r = approve(name, token=tok)
        self.assertStatus(r, 403, "Forbidden")
        self.assertEqual(r.json["message"], 'certificatesigningrequests.certificates.k8s.io "%s" is forbidden: user not '
                         'permitted to approve requests with signerName "example.com/kt-noop"' % name)
        control("rbac", {"subject": "user:" + user, "role": rules + [
            {"apiGroups": ["certificates.k8s.io"], "resources": ["signers"], "verbs": ["approve"],
             "resourceNames": ["example.com/*"]}]})
        self.assertEqual(approve(name, token=tok).status, 200)
        control("rbac", {"subject": "user:" + user, "role": "none"})

    def test_discovery_and_table(self):
        g = {x["name"]: x for x in API.get("/apis").json["groups"]}["certificates.k8s.io"]
        self.assertEqual(g["preferredVersion"]["groupVersion"], "certificates.k8s.io/v1")
        res = {x["name"]: x for x in API.get("/apis/certificates.k8s.io/v1").json["resources"]}
        c = res["certificatesigningrequests"]
        self.assertEqual((c["kind"], c["namespaced"], c["shortNames"]), ("CertificateSigningRequest", False, ["csr"]))
        self.assertEqual(sorted(c["verbs"]), ["create", "delete", "deletecollection", "get", "list", "patch", "update",
                                              "watch"])
        for s in ("approval", "status"):
            self.assertEqual(sorted(res["certificatesigningrequests/" + s]["verbs"]), ["get", "patch", "update"])
        key, pem = openssl_csr("system:node:" + rname("kn"))
        name = self.create(csr_body(pem, signer="example.com/kt-noop", expiration=3600))["metadata"]["name"]
        t = API.get(CSR_PATH + "/" + name, headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}).json
        self.assertEqual([c["name"] for c in t["columnDefinitions"]],
                         ["Name", "Age", "SignerName", "Requestor", "RequestedDuration", "Condition"])
        cells = t["rows"][0]["cells"]
        self.assertEqual((cells[0], cells[2], cells[4], cells[5]), (name, "example.com/kt-noop", "60m", "Pending"))
        approve(name)
        self.assertEqual(API.get(CSR_PATH + "/" + name, headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}
                                 ).json["rows"][0]["cells"][5], "Approved")


class TestCSRApproval(CSRBase):
    """csrapproving: kubelet client CSRs approved after a SubjectAccessReview of the requester."""

    def test_admin_auto_approved(self):
        key, pem = openssl_csr("system:node:" + rname("kn"))
        t0 = time.time()
        o = self.create(csr_body(pem))
        o = wait_csr(o["metadata"]["name"], issued, msg="auto-approved and issued")
        self.assertLess(time.time() - t0, 15)
        conds = o["status"]["conditions"]
        self.assertEqual([(c["type"], c["status"], c["reason"], c["message"]) for c in conds],
                         [("Approved", "True", "AutoApproved", NODE_MSG)])      # no Issued condition
        self.assertTrue(conds[0]["lastUpdateTime"] and conds[0]["lastTransitionTime"])

    def test_agent_contract(self):
        """What the node agent sends: generateName node-csr-, [digital signature, client auth], and a
        watch on the name until status.certificate is set."""
        if not CFG["agent"]:
            self.skipTest("KUBE_AGENT_TOKEN not set")
        node = rname("kn")
        key, pem = openssl_csr("system:node:" + node)
        o = self.create(csr_body(pem, usages=["digital signature", "client auth"], gen="node-csr-", expiration=3600),
                        token=CFG["agent"])
        name = o["metadata"]["name"]
        try:
            self.assertTrue(name.startswith("node-csr-"))
            w = Watch(CSR_PATH + "?fieldSelector=metadata.name%%3D%s&watch=1&resourceVersion=%s" % (
                name, o["metadata"]["resourceVersion"]), token=CFG["agent"])
            try:
                ev = w.until(lambda e: issued(e["object"]), timeout=15)
            finally:
                w.close()
            self.assertEqual([c["message"] for c in ev["object"]["status"]["conditions"]], [NODE_MSG])
            crt = os.path.join(tmpdir(), node + ".crt")
            with open(crt, "wb") as f:
                f.write(base64.b64decode(ev["object"]["status"]["certificate"]))
            info = cert_info(open(crt, "rb").read())
            self.assertEqual(info["ku"], ("Digital Signature", True))
            me = cert_client(crt, key).post("/apis/authentication.k8s.io/v1/selfsubjectreviews",
                                            {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
            self.assertEqual(me.json["status"]["userInfo"]["username"], "system:node:" + node)
        finally:
            API.delete(CSR_PATH + "/" + name)

    def test_malformed_never_auto_approved(self):
        cases = [(openssl_csr("system:node:" + rname("kn"))[1], ["client auth"]),
                 (openssl_csr(rname("notnode"))[1], CLIENT_USAGES),
                 (openssl_csr("system:node:" + rname("kn"), orgs=("kt-org",))[1], CLIENT_USAGES),
                 (openssl_csr("system:node:" + rname("kn"), sans=("DNS:kt.example",))[1], CLIENT_USAGES)]
        names = [self.create(csr_body(pem, usages=u))["metadata"]["name"] for pem, u in cases]
        # and a kubelet serving request, even the node's own
        node = rname("kn")
        crt, key = issue_node_cert(node)
        k2, pem = openssl_csr("system:node:" + node, sans=("DNS:" + node, "IP:192.0.2.10"))
        o = cert_client(crt, key).post(CSR_PATH, csr_body(pem, signer=KUBELET_SERVING,
                                                          usages=["digital signature", "key encipherment", "server auth"]))
        self.assertEqual(o.status, 201, o.text[:300])
        self.assertEqual(o.json["spec"]["username"], "system:node:" + node)
        self.assertEqual(o.json["spec"]["groups"], ["system:nodes", "system:authenticated"])
        for n in names + [o.json["metadata"]["name"]]:
            self.stays_pending(n, 1.2)

    def test_node_renewal_needs_selfnodeclient(self):
        """A node's CSR for its own CN stays pending until it may create certificatesigningrequests/
        selfnodeclient; then it is approved (the approver retries) with the self message."""
        node = rname("kn")
        crt, key = issue_node_cert(node)
        nc = cert_client(crt, key)
        k2, pem = openssl_csr("system:node:" + node)
        r = nc.post(CSR_PATH, csr_body(pem))
        self.assertEqual(r.status, 201, r.text[:300])
        name = r.json["metadata"]["name"]
        self.assertEqual(nc.get(CSR_PATH + "/" + name).status, 200)
        self.stays_pending(name)
        if not has_controls():
            self.skipTest("binds system:...:selfnodeclient with the double's /_test/rbac")
        control("rbac", {"subject": "user:system:node:" + node, "role": "selfnodeclient"})
        try:
            o = wait_csr(name, issued, timeout=15, msg="approved after the binding")
        finally:
            control("rbac", {"subject": "user:system:node:" + node, "role": "none"})
        self.assertEqual([(c["reason"], c["message"]) for c in o["status"]["conditions"]], [("AutoApproved", SELF_MSG)])

    def test_bootstrapper(self):
        """A bootstrap identity: without a binding no CSR; with system:node-bootstrapper only its CSR
        stays pending (and it may read any CSR); once ...:nodeclient is bound too, a new CSR is
        issued at once and the pending one is approved by the approver's retry."""
        if not has_controls():
            self.skipTest("binds the bootstrap ClusterRoles with the double's /_test/rbac")
        user = "system:bootstrap:" + rname("kt")
        tok = control("tokens", {"user": user, "groups": ["system:bootstrappers"]})["token"]
        key, pem = openssl_csr("system:node:" + rname("kn"))
        r = API.post(CSR_PATH, csr_body(pem), token=tok)
        self.assertStatus(r, 403, "Forbidden")
        self.assertEqual(r.json["message"], 'certificatesigningrequests.certificates.k8s.io is forbidden: User "%s" '
                         'cannot create resource "certificatesigningrequests" in API group "certificates.k8s.io" at the '
                         'cluster scope' % user)
        control("rbac", {"subject": "user:" + user, "role": "node-bootstrapper"})
        try:
            first = self.create(csr_body(pem), token=tok)["metadata"]["name"]
            self.assertEqual(API.get(CSR_PATH + "/" + first, token=tok).status, 200)
            other = self.create(csr_body(openssl_csr("system:node:" + rname("kn"))[1], signer="example.com/kt-noop"))
            self.assertEqual(API.get(CSR_PATH + "/" + other["metadata"]["name"], token=tok).status, 200)
            self.stays_pending(first)
            control("rbac", {"subject": "user:" + user, "roles": ["node-bootstrapper", "nodeclient"]})
            t0 = time.time()
            second = self.create(csr_body(openssl_csr("system:node:" + rname("kn"))[1]), token=tok)["metadata"]["name"]
            wait_csr(second, issued, timeout=10, msg="second CSR issued")
            self.assertLess(time.time() - t0, 5)
            o = wait_csr(first, issued, timeout=15, msg="pending CSR approved by the retry")
            self.assertEqual([c["message"] for c in o["status"]["conditions"]], [NODE_MSG])
            st = API.post("/apis/authorization.k8s.io/v1/subjectaccessreviews", {
                "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                "spec": {"user": user, "groups": ["system:bootstrappers"], "resourceAttributes": {
                    "group": "certificates.k8s.io", "resource": "certificatesigningrequests", "verb": "create",
                    "subresource": "nodeclient"}}}).json["status"]
            self.assertEqual(st, {"allowed": True, "reason": 'RBAC: allowed by ClusterRoleBinding "system:certificates.'
                                  'k8s.io:certificatesigningrequests:nodeclient" of ClusterRole "system:certificates.'
                                  'k8s.io:certificatesigningrequests:nodeclient" to User "%s"' % user})
        finally:
            control("rbac", {"subject": "user:" + user, "role": "none"})


class TestCSRManualApproval(CSRBase):
    """What kubectl certificate approve|deny send (PUT .../approval) and what it leads to."""

    def test_approve_and_deny(self):
        key, pem = openssl_csr("system:node:" + rname("kn"))
        a = self.create(csr_body(pem, signer="example.com/kt-noop"))["metadata"]["name"]
        d = self.create(csr_body(pem, signer="example.com/kt-noop"))["metadata"]["name"]
        r = approve(a)
        self.assertEqual(r.status, 200, r.text[:300])
        c = r.json["status"]["conditions"][0]
        self.assertEqual((c["type"], c["status"], c["reason"], c["message"]),
                         ("Approved", "True", "KubectlApprove", "This CSR was approved by kubectl certificate approve."))
        self.assertTrue(c["lastTransitionTime"])
        r = approve(d, approved=False)
        self.assertEqual(r.status, 200, r.text[:300])
        c = r.json["status"]["conditions"][0]
        self.assertEqual((c["type"], c["status"], c["reason"], c["message"]),
                         ("Denied", "True", "KubectlDeny", "This CSR was denied by kubectl certificate deny."))
        r = approve(a, approved=False)       # both: Approved and Denied
        self.assertStatus(r, 422, "Invalid")
        self.assertEqual(r.json["message"], 'CertificateSigningRequest.certificates.k8s.io "%s" is invalid: '
                         'status.conditions[1].type: Invalid value: "Denied": Approved and Denied conditions are '
                         'mutually exclusive' % a)
        # /approval changes nothing else, /status cannot approve
        o = API.get(CSR_PATH + "/" + d).json
        o["spec"]["signerName"] = "example.com/other"
        o["status"]["conditions"].append({"type": "Approved", "status": "True", "reason": "X"})
        r = API.put(CSR_PATH + "/" + d + "/status", o)
        self.assertStatus(r, 422, "Invalid")
        self.assertIn('status.conditions: Forbidden: updates may not add a condition of type "Approved"', r.json["message"])

    def test_denied_never_signed(self):
        """A well-formed kubelet serving request (never auto-approved), denied: never issued."""
        node = rname("kn")
        key, pem = openssl_csr("system:node:" + node, sans=("DNS:" + node,))
        name = self.create(csr_body(pem, signer=KUBELET_SERVING, usages=["digital signature", "server auth"]))
        name = name["metadata"]["name"]
        self.assertEqual(approve(name, approved=False).status, 200)
        o = self.stays_pending_conditions(name, ["Denied"])
        self.assertEqual(o["status"]["conditions"][0]["reason"], "KubectlDeny")

    def stays_pending_conditions(self, name, want, secs=2.0):
        end = time.time() + secs
        while time.time() < end:
            o = API.get(CSR_PATH + "/" + name).json
            self.assertEqual(csr_conditions(o), want)
            self.assertFalse(issued(o))
            time.sleep(0.2)
        return o


class TestCSRSigner(CSRBase):
    """csrsigning: what it issues and when it refuses."""
    CA_SUBJECT = None

    def issue(self, pem, approve_manually=False, **kw):
        t0 = time.time()
        name = self.create(csr_body(pem, **kw))["metadata"]["name"]
        if approve_manually:
            self.assertEqual(approve(name).status, 200)
        o = wait_csr(name, issued, msg="issued")
        t1 = time.time()
        cert = base64.b64decode(o["status"]["certificate"])
        return o, cert_info(cert), t0, t1

    def ca_subject(self):
        if CFG["ca"]:
            return subprocess.run(["openssl", "x509", "-in", CFG["ca"], "-noout", "-subject", "-nameopt", "RFC2253"],
                                  stdout=subprocess.PIPE).stdout.decode().strip().split("=", 1)[1]
        return None

    def test_kubelet_client_cert(self):
        node = rname("kn")
        key, pem = openssl_csr("system:node:" + node)
        o, c, t0, t1 = self.issue(pem, expiration=3600)
        self.assertEqual(c["pem_blocks"], 1)                        # the leaf only
        self.assertEqual(c["subject"], "CN=system:node:%s,O=system:nodes" % node)
        if self.ca_subject():
            self.assertEqual(c["issuer"], self.ca_subject())
        self.assertEqual(c["basic"], ("CA:FALSE", True))
        self.assertIsNotNone(c["aki"][0])
        self.assertIsNone(c["san"][0])
        self.assertEqual(c["ku"], ("Digital Signature, Key Encipherment", True))
        self.assertEqual(c["eku"], ("TLS Web Client Authentication", False))
        self.assertTrue(t0 - 300 - 2 <= c["notBefore"] <= t1 - 300 + 1, (t0, t1, c["notBefore"]))   # backdated 5 min
        self.assertTrue(t0 + 3600 - 2 <= c["notAfter"] <= t1 + 3600 + 1, (t0, t1, c["notAfter"]))
        self.assertNotIn("Issued", csr_conditions(o))
        o, c, t0, t1 = self.issue(openssl_csr("system:node:" + node)[1], expiration=600,
                                  usages=["digital signature", "client auth"])
        self.assertEqual(c["ku"], ("Digital Signature", True))
        self.assertTrue(t0 + 600 - 2 <= c["notAfter"] <= t1 + 600 + 1)

    def test_default_duration(self):
        if has_controls() and control("controllers", method="GET")["clusterSigningDuration"] != ONE_YEAR:
            self.skipTest("the double runs with another --cluster-signing-duration")
        o, c, t0, t1 = self.issue(openssl_csr("system:node:" + rname("kn"))[1])
        self.assertEqual(c["notAfter"] - c["notBefore"], ONE_YEAR)
        self.assertTrue(t0 - 300 - 2 <= c["notBefore"] <= t1 - 300 + 1)

    def test_kubelet_serving_cert(self):
        node = rname("kn")
        key, pem = openssl_csr("system:node:" + node, sans=("DNS:" + node, "IP:192.0.2.10"))
        name = self.create(csr_body(pem, signer=KUBELET_SERVING, usages=["digital signature", "key encipherment",
                                                                         "server auth"]))["metadata"]["name"]
        self.stays_pending(name, 1.2)             # never auto-approved
        self.assertEqual(approve(name).status, 200)
        o = wait_csr(name, issued, msg="serving cert issued")
        c = cert_info(base64.b64decode(o["status"]["certificate"]))
        self.assertEqual(c["ku"], ("Digital Signature, Key Encipherment", True))
        self.assertEqual(c["eku"], ("TLS Web Server Authentication", False))
        self.assertEqual(c["san"][0], "DNS:%s, IP Address:192.0.2.10" % node)
        self.assertEqual(c["basic"], ("CA:FALSE", True))
        o, c, t0, t1 = self.issue(openssl_csr("system:node:" + node, sans=("IP:192.0.2.11",))[1], approve_manually=True,
                                  signer=KUBELET_SERVING, usages=["digital signature", "server auth"])
        self.assertEqual((c["ku"], c["san"][0]), (("Digital Signature", True), "IP Address:192.0.2.11"))

    def test_apiserver_client(self):
        key, pem = openssl_csr("kt-" + rname("user"), orgs=("kt-team",))
        o, c, t0, t1 = self.issue(pem, approve_manually=True, signer=APISERVER_CLIENT, usages=["client auth"])
        self.assertEqual(c["eku"], ("TLS Web Client Authentication", False))
        self.assertIsNone(c["ku"][0])
        name = rname("ktc")
        r = API.post(CSR_PATH, csr_body(openssl_csr("kt-x", orgs=("system:masters",))[1], signer=APISERVER_CLIENT,
                                        usages=["client auth"], name=name))
        self.assertStatus(r, 403, "Forbidden")
        self.assertEqual(r.json["message"], 'certificatesigningrequests.certificates.k8s.io "%s" is forbidden: use of '
                         'kubernetes.io/kube-apiserver-client signer with system:masters group is not allowed' % name)

    def test_validation_failures(self):
        kn = lambda: "system:node:" + rname("kn")
        cases = [
            (openssl_csr(kn())[1], KUBELET_CLIENT, ["client auth"],
             "usages did not match [client auth digital signature key encipherment]"),
            (openssl_csr(kn())[1], KUBELET_CLIENT, CLIENT_USAGES + ["server auth"],
             "usages did not match [client auth digital signature key encipherment]"),
            (openssl_csr(rname("kt-notnode"))[1], KUBELET_CLIENT, CLIENT_USAGES,
             "subject common name does not begin with system:node:"),
            (openssl_csr(kn(), orgs=("kt-org",))[1], KUBELET_CLIENT, CLIENT_USAGES,
             "subject organization is not system:nodes"),
            (openssl_csr(kn(), sans=("DNS:kt.example",))[1], KUBELET_CLIENT, CLIENT_USAGES,
             "DNS subjectAltNames are not allowed"),
            (openssl_csr(kn())[1], KUBELET_SERVING, ["digital signature", "key encipherment", "server auth"],
             "DNS or IP subjectAltName is required"),
            (openssl_csr(kn(), sans=("DNS:kt.example",))[1], KUBELET_SERVING,
             ["digital signature", "key encipherment", "server auth", "client auth"],
             "usages did not match [digital signature key encipherment server auth]"),
            (openssl_csr(rname("kt-notnode"), sans=("DNS:kt.example",))[1], KUBELET_SERVING,
             ["digital signature", "key encipherment", "server auth"],
             "subject common name does not begin with system:node:"),
            (openssl_csr(kn(), sans=("DNS:kt.example", "URI:spiffe://kt/x"))[1], KUBELET_SERVING,
             ["digital signature", "key encipherment", "server auth"], "URI subjectAltNames are not allowed"),
        ]
        names = []
        for pem, signer, usages, _ in cases:
            names.append(self.create(csr_body(pem, signer=signer, usages=usages))["metadata"]["name"])
        for n in names:
            self.assertEqual(approve(n).status, 200)
        for n, (_, _, _, want) in zip(names, cases):
            o = wait_csr(n, lambda o: "Failed" in csr_conditions(o), msg="Failed condition")
            f = [c for c in o["status"]["conditions"] if c["type"] == "Failed"][0]
            self.assertEqual((f["status"], f["reason"], f["message"]), ("True", "SignerValidationFailure", want))
            self.assertFalse(issued(o))
        t = API.get(CSR_PATH + "/" + names[0], headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}).json
        self.assertEqual(t["rows"][0]["cells"][5], "Approved,Failed")


class TestIssuedCertificates(CSRBase):
    """A certificate the signer issued authenticates as its subject; an expired one is refused."""

    def test_authenticates_as_node(self):
        node = rname("kn")
        crt, key = issue_node_cert(node)
        r = cert_client(crt, key).post("/apis/authentication.k8s.io/v1/selfsubjectreviews",
                                       {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
        self.assertEqual(r.status, 201, r.text[:300])
        self.assertEqual(r.json["status"]["userInfo"], {"username": "system:node:" + node,
                                                        "groups": ["system:nodes", "system:authenticated"]})

    def test_short_signing_duration_and_expiry(self):
        if not has_controls():
            self.skipTest("needs the double's clusterSigningDuration control (kube-controller-manager's "
                          "--cluster-signing-duration)")
        before = control("controllers", method="GET")["clusterSigningDuration"]
        control("controllers", {"clusterSigningDuration": "3s"})
        try:
            node = rname("kn")
            key, pem = openssl_csr("system:node:" + node)
            t0 = time.time()
            o = wait_csr(self.create(csr_body(pem, expiration=3600))["metadata"]["name"], issued)
            c = cert_info(base64.b64decode(o["status"]["certificate"]))
            self.assertTrue(t0 + 3 - 2 <= c["notAfter"] <= time.time() + 3 + 1, c["notAfter"] - t0)   # capped
        finally:
            control("controllers", {"clusterSigningDuration": before})
        crt = os.path.join(tmpdir(), node + "-short.crt")
        with open(crt, "wb") as f:
            f.write(base64.b64decode(o["status"]["certificate"]))
        nc = cert_client(crt, key)
        self.assertEqual(nc.get("/api/v1/nodes").status, 200)
        time.sleep(max(0, c["notAfter"] - time.time()) + 1.2)
        r = nc.get("/api/v1/nodes")
        self.assertEqual((r.status, r.json), (401, UNAUTHORIZED))
        self.assertEqual(nc.get("/version").status, 401)


class TestNodeIdentity(CSRBase):
    """Facts section 3: what a node identity (CN=system:node:N1, O=system:nodes, from a CSR) may do
    under the Node authorizer and NodeRestriction, row by row."""

    @classmethod
    def setUpClass(cls):
        CSRBase.setUpClass.__func__(cls)
        cls.n1, cls.n2 = rname("kn"), rname("kn")
        crt, key = issue_node_cert(cls.n1)
        cls.node = cert_client(crt, key)
        ns = cls.ns
        for kind, body in (("secrets", {"metadata": {"name": "s1"}, "stringData": {"k": "v"}}),
                           ("secrets", {"metadata": {"name": "s2"}, "stringData": {"k": "v"}}),
                           ("configmaps", {"metadata": {"name": "cm1"}, "data": {"k": "v"}}),
                           ("configmaps", {"metadata": {"name": "cm2"}, "data": {"k": "v"}}),
                           ("serviceaccounts", {"metadata": {"name": "sa1"}}),
                           ("serviceaccounts", {"metadata": {"name": "sa2"}})):
            r = API.post("/api/v1/namespaces/%s/%s" % (ns, kind), body)
            assert r.status == 201, r.text
        r = API.post("/api/v1/nodes", node_body(cls.n2))
        assert r.status == 201, r.text
        cls.nodes.append(cls.n2)
        cls.nodes.append(cls.n1)
        cls.pod = {}
        for p, node, s, cm, sa in (("p1", cls.n1, "s1", "cm1", "sa1"), ("p2", cls.n2, "s2", "cm2", "sa2"),
                                   ("p3", cls.n1, "s1", "cm1", "sa1")):
            b = pod_body(p, node=node)
            b["spec"]["serviceAccountName"] = sa
            b["spec"]["containers"][0]["env"] = [{"name": "S", "valueFrom": {"secretKeyRef": {"name": s, "key": "k"}}}]
            b["spec"]["volumes"] = [{"name": "c", "configMap": {"name": cm}}]
            r = API.post("/api/v1/namespaces/%s/pods" % ns, b)
            assert r.status == 201, r.text
            cls.pod[p] = r.json

    def msg(self, r, code=403):
        self.assertStatus(r, code, {403: "Forbidden", 409: "Conflict"}.get(code))
        return r.json["message"]

    def u(self):
        return 'User "system:node:%s"' % self.n1

    def node_create(self, labels):
        return self.node.post("/api/v1/nodes", node_body(self.n1, labels=labels))

    def test_1_self_subject_review(self):
        r = self.node.post("/apis/authentication.k8s.io/v1/selfsubjectreviews",
                           {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
        self.assertEqual(r.json["status"]["userInfo"]["groups"], ["system:nodes", "system:authenticated"])

    def test_2_nodes(self):
        n1, n2 = self.n1, self.n2
        self.assertEqual(self.msg(self.node.post("/api/v1/nodes", node_body(n2))),
                         'nodes "%s" is forbidden: node "%s" is not allowed to modify node "%s"' % (n2, n1, n2))
        pre = 'nodes "%s" is forbidden: node "%s" is not allowed to set the following labels: ' % (n1, n1)
        self.assertEqual(self.msg(self.node_create({"node-restriction.kubernetes.io/foo": "x"})),
                         pre + "node-restriction.kubernetes.io/foo")
        self.assertEqual(self.msg(self.node_create({"node-role.kubernetes.io/worker": ""})),
                         pre + "node-role.kubernetes.io/worker")
        self.assertEqual(self.msg(self.node_create({"kubernetes.io/foo": "a", "k8s.io/foo": "b", "foo.kubernetes.io/x": "c",
                                                    "foo.k8s.io/z": "d"})),
                         pre + "foo.k8s.io/z, foo.kubernetes.io/x, k8s.io/foo, kubernetes.io/foo")
        allowed = {k: "v" for k in ("kubernetes.io/hostname", "kubernetes.io/arch", "kubernetes.io/os",
                                    "beta.kubernetes.io/arch", "beta.kubernetes.io/os", "beta.kubernetes.io/instance-type",
                                    "node.kubernetes.io/instance-type", "topology.kubernetes.io/zone",
                                    "topology.kubernetes.io/region", "failure-domain.beta.kubernetes.io/zone",
                                    "failure-domain.beta.kubernetes.io/region", "kubelet.kubernetes.io/any",
                                    "node.kubernetes.io/any", "example.com/bar")}
        body = node_body(n1, labels=allowed)
        body["spec"] = {"taints": [{"key": "example.com/kt", "effect": "NoSchedule"}]}
        r = self.node.post("/api/v1/nodes", body)
        self.assertEqual(r.status, 201, r.text[:400])
        taints = [(t["key"], t["effect"]) for t in r.json["spec"]["taints"]]
        self.assertIn(("example.com/kt", "NoSchedule"), taints)
        self.assertIn(("node.kubernetes.io/not-ready", "NoSchedule"), taints)
        path = "/api/v1/nodes/" + n1
        for labels in ({"example.com/new": "1"}, {"topology.kubernetes.io/zone": "z2"}):
            self.assertEqual(self.node.patch(path, {"metadata": {"labels": labels}}).status, 200)
        for k in ("node-restriction.kubernetes.io/x", "kubernetes.io/foo"):
            self.assertEqual(self.msg(self.node.patch(path, {"metadata": {"labels": {k: "1"}}})),
                             'nodes "%s" is forbidden: is not allowed to modify labels: %s' % (n1, k))
        cur = self.node.get(path).json["spec"].get("taints") or []
        r = self.node.patch(path, {"spec": {"taints": cur + [{"key": "example.com/more", "effect": "NoSchedule"}]}},
                            kind="merge")
        self.assertEqual(self.msg(r), 'nodes "%s" is forbidden: node "%s" is not allowed to modify taints' % (n1, n1))
        n2uid = API.get("/api/v1/nodes/" + n2).json["metadata"]["uid"]
        for p in ({"spec": {"unschedulable": True}}, {"spec": {"podCIDR": "10.244.7.0/24", "podCIDRs": ["10.244.7.0/24"]}},
                  {"spec": {"providerID": "kt://" + n1}},
                  {"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": n2, "uid": n2uid}]}}):
            r = self.node.patch(path, p)
            self.assertEqual(r.status, 200, (p, r.text[:300]))
        self.assertEqual(self.node.patch(path + "/status", {"status": {"conditions": [{"type": "Ready", "status": "True",
                         "reason": "KubeletReady", "message": "ok", "lastHeartbeatTime": now_s(),
                         "lastTransitionTime": now_s()}]}}).status, 200)
        cur = self.node.get(path).json
        self.assertEqual(self.node.put(path + "/status", cur).status, 200)
        other = 'nodes "%s" is forbidden: node "%s" is not allowed to modify node "%s"' % (n2, n1, n2)
        self.assertEqual(self.msg(self.node.patch("/api/v1/nodes/%s/status" % n2, {"status": {}})), other)
        self.assertEqual(self.msg(self.node.patch("/api/v1/nodes/" + n2, {"metadata": {"labels": {"a": "b"}}})), other)
        self.assertEqual(self.node.get("/api/v1/nodes/" + n2).status, 200)
        self.assertEqual(self.node.get("/api/v1/nodes").status, 200)
        for n in (n1, n2):
            self.assertEqual(self.msg(self.node.delete("/api/v1/nodes/" + n)),
                             'nodes "%s" is forbidden: %s cannot delete resource "nodes" in API group "" at the cluster '
                             'scope' % (n, self.u()))

    def test_3_leases(self):
        n1, n2 = self.n1, self.n2
        base = "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"
        r = self.node.post(base, lease_body(n1))
        self.assertEqual(r.status, 201, r.text[:300])
        r = self.node.put(base + "/" + n1, dict(r.json, spec=dict(r.json["spec"], renewTime=now_us())))
        self.assertEqual(r.status, 200, r.text[:300])
        self.assertEqual(self.node.get(base + "/" + n1).status, 200)
        self.assertEqual(self.node.delete(base + "/" + n1).status, 200)
        self.assertEqual(self.msg(self.node.post(base, lease_body(n2))),
                         'leases.coordination.k8s.io "%s" is forbidden: can only access node lease with the same name as '
                         'the requesting node' % n2)
        for verb, r in (("get", self.node.get(base + "/" + n2)), ("update", self.node.put(base + "/" + n2, lease_body(n2)))):
            self.assertEqual(self.msg(r), 'leases.coordination.k8s.io "%s" is forbidden: %s cannot %s resource "leases" in '
                             'API group "coordination.k8s.io" in the namespace "kube-node-lease": can only access node '
                             'lease with the same name as the requesting node' % (n2, self.u(), verb))
        self.assertEqual(self.msg(self.node.get(base)),
                         'leases.coordination.k8s.io is forbidden: %s cannot list resource "leases" in API group '
                         '"coordination.k8s.io" in the namespace "kube-node-lease": can only get, create, update, patch, '
                         'or delete a node lease' % self.u())
        b = lease_body(n1)
        b["metadata"]["namespace"] = "default"
        self.assertEqual(self.msg(self.node.post("/apis/coordination.k8s.io/v1/namespaces/default/leases", b)),
                         'leases.coordination.k8s.io is forbidden: %s cannot create resource "leases" in API group '
                         '"coordination.k8s.io" in the namespace "default": can only access leases in the '
                         '"kube-node-lease" system namespace' % self.u())

    def test_4_pods(self):
        n1, ns = self.n1, self.ns
        pods = "/api/v1/namespaces/%s/pods" % ns
        for path in (pods + "/p1", pods + "/p2", pods, "/api/v1/pods"):
            self.assertEqual(self.node.get(path).status, 200, path)
        for q in ("?watch=1&fieldSelector=spec.nodeName%3D" + n1, "?watch=1&fieldSelector=spec.nodeName%3D" + self.n2,
                  "?watch=1"):
            self.assertEqual(self.node.get("/api/v1/pods" + q.replace("watch=1", "watch=1&timeoutSeconds=1")).status, 200)
        self.assertEqual(self.node.get("/api/v1/pods?fieldSelector=spec.nodeName%3D" + n1).status, 200)
        self.assertEqual(self.node.patch(pods + "/p1/status", {"status": {"message": "kt"}}).status, 200)
        self.assertEqual(self.msg(self.node.patch(pods + "/p2/status", {"status": {"message": "kt"}})),
                         'pods "p2" is forbidden: node "%s" can only update pod status for pods with spec.nodeName set '
                         'to itself' % n1)
        for verb, r in (("patch", self.node.patch(pods + "/p1", {"metadata": {"labels": {"a": "b"}}})),
                        ("update", self.node.put(pods + "/p1", self.pod["p1"]))):
            self.assertEqual(self.msg(r), 'pods "p1" is forbidden: %s cannot %s resource "pods" in API group "" in the '
                             'namespace "%s"' % (self.u(), verb, ns))
        self.assertEqual(self.msg(self.node.delete(pods + "/p2")),
                         'pods "p2" is forbidden: node "%s" can only delete pods with spec.nodeName set to itself' % n1)
        ev = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p2", "namespace": ns}}
        self.assertEqual(self.msg(self.node.post(pods + "/p2/eviction", ev)),
                         'pods "p2" is forbidden: node %s can only evict pods with spec.nodeName set to itself' % n1)
        zero = "00000000-0000-0000-0000-000000000000"
        uid3 = self.pod["p3"]["metadata"]["uid"]
        r = self.node.delete(pods + "/p3", {"gracePeriodSeconds": 0, "preconditions": {"uid": zero}})
        self.assertEqual(self.msg(r, 409), 'Operation cannot be fulfilled on Pod "p3": the UID in the precondition (%s) '
                         'does not match the UID in record (%s). The object might have been deleted and then recreated'
                         % (zero, uid3))
        r = self.node.delete(pods + "/p3", {"gracePeriodSeconds": 0, "preconditions": {"uid": uid3}})
        self.assertEqual((r.status, r.json.get("kind")), (200, "Pod"), r.text[:300])
        self.assertStatus(API.get(pods + "/p3"), 404, "NotFound")
        self.assertEqual(self.node.get("/api/v1/services").status, 200)
        self.assertEqual(self.msg(self.node.get("/api/v1/namespaces/%s/endpoints" % ns)),
                         'endpoints is forbidden: %s cannot list resource "endpoints" in API group "" in the namespace '
                         '"%s"' % (self.u(), ns))

    def test_5_mirror_pods(self):
        n1, ns = self.n1, self.ns
        pods = "/api/v1/namespaces/%s/pods" % ns
        if self.node.get("/api/v1/nodes/" + n1).status != 200:
            self.assertEqual(self.node.post("/api/v1/nodes", node_body(n1)).status, 201)
        uid = API.get("/api/v1/nodes/" + n1).json["metadata"]["uid"]
        zero = "00000000-0000-0000-0000-000000000000"

        def mirror(name, annotate=True, owner=True, controller=True, owner_uid=None, node=None, secret=False):
            b = pod_body(name, node=node or n1)
            if annotate:
                b["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "hash"}
            if owner:
                b["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": n1,
                                                     "uid": owner_uid or uid, "controller": controller}]
            if secret:
                b["spec"]["containers"][0]["env"] = [{"name": "S", "valueFrom": {"secretKeyRef": {"name": "s1",
                                                                                                  "key": "k"}}}]
            return self.node.post(pods, b)
        self.assertEqual(self.msg(mirror("m0", annotate=False)),
                         'pods "m0" is forbidden: pod does not have "kubernetes.io/config.mirror" annotation, node "%s" '
                         'can only create mirror pods' % n1)
        self.assertEqual(self.msg(mirror("m1", owner=False)),
                         'pods "m1" is forbidden: node "%s" can only create pods with an owner reference set to itself' % n1)
        self.assertEqual(self.msg(mirror("m2", controller=False)),
                         'pods "m2" is forbidden: node "%s" can only create pods with a controller owner reference set '
                         'to itself' % n1)
        self.assertEqual(self.msg(mirror("m6", owner_uid=zero)),
                         'pods "m6" is forbidden: node %s UID mismatch: expected %s got %s' % (n1, zero, uid))
        self.assertEqual(self.msg(mirror("m4", node=self.n2)),
                         'pods "m4" is forbidden: node "%s" can only create pods with spec.nodeName set to itself' % n1)
        self.assertEqual(self.msg(mirror("m3", secret=True)), 'pods "m3" is forbidden: a mirror pod may not reference secrets')
        r = mirror("m5")
        self.assertEqual(r.status, 201, r.text[:400])
        self.assertNotIn("serviceAccountName", r.json["spec"])
        self.assertFalse(any("projected" in v for v in r.json["spec"].get("volumes") or []))
        tols = {(t["key"], t.get("effect"), t.get("tolerationSeconds")) for t in r.json["spec"]["tolerations"]}
        self.assertEqual(tols, {("node.kubernetes.io/not-ready", "NoExecute", 300),
                                ("node.kubernetes.io/unreachable", "NoExecute", 300)})
        self.assertEqual(self.node.delete(pods + "/m5", {"gracePeriodSeconds": 0}).status, 200)

    def test_6_secrets_configmaps(self):
        n1, ns = self.n1, self.ns
        base = "/api/v1/namespaces/%s/" % ns
        self.assertEqual(self.node.get(base + "secrets/s1").status, 200)
        self.assertEqual(self.node.get(base + "configmaps/cm1").status, 200)
        for kind, name in (("secrets", "s2"), ("configmaps", "cm2")):
            self.assertEqual(self.msg(self.node.get(base + kind + "/" + name)),
                             '%s "%s" is forbidden: %s cannot get resource "%s" in API group "" in the namespace "%s": no '
                             "relationship found between node '%s' and this object" % (kind, name, self.u(), kind, ns, n1))
        self.assertEqual(self.msg(self.node.get(base + "secrets")),
                         'secrets is forbidden: %s cannot list resource "secrets" in API group "" in the namespace "%s": '
                         'No Object name found' % (self.u(), ns))
        for verb, q in (("list", ""), ("watch", "&watch=1&timeoutSeconds=1")):
            self.assertEqual(self.node.get(base + "secrets?fieldSelector=metadata.name%3Ds1" + q).status, 200)
            self.assertEqual(self.msg(self.node.get(base + "secrets?fieldSelector=metadata.name%3Ds2" + q)),
                             'secrets "s2" is forbidden: %s cannot %s resource "secrets" in API group "" in the namespace '
                             "\"%s\": no relationship found between node '%s' and this object" % (self.u(), verb, ns, n1))
        self.assertEqual(self.msg(self.node.get(base + "serviceaccounts/sa1")),
                         'serviceaccounts "sa1" is forbidden: %s cannot get resource "serviceaccounts" in API group "" in '
                         'the namespace "%s": can only create tokens for individual service accounts' % (self.u(), ns))
        # a SubjectAccessReview for the node answers as the Node authorizer decides
        sar = lambda name: API.post("/apis/authorization.k8s.io/v1/subjectaccessreviews", {
            "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {"user": "system:node:" + n1, "groups": ["system:nodes", "system:authenticated"],
                     "resourceAttributes": {"namespace": ns, "verb": "get", "resource": "secrets", "name": name}}}
        ).json["status"]
        self.assertEqual(sar("s1"), {"allowed": True})
        self.assertEqual(sar("s2"), {"allowed": False,
                                     "reason": "no relationship found between node '%s' and this object" % n1})

    def test_7_token_requests(self):
        ns = self.ns
        tr = lambda sa, ref: self.node.post("/api/v1/namespaces/%s/serviceaccounts/%s/token" % (ns, sa), {
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": dict({"audiences": ["https://kubernetes.default.svc.cluster.local"], "expirationSeconds": 3607},
                         **({"boundObjectRef": ref} if ref is not None else {}))})
        p1 = {"kind": "Pod", "apiVersion": "v1", "name": "p1", "uid": self.pod["p1"]["metadata"]["uid"]}
        r = tr("sa1", p1)
        self.assertEqual(r.status, 201, r.text[:300])
        pre = 'serviceaccounts "sa1" is forbidden: '
        self.assertEqual(self.msg(tr("sa1", None)), pre + "node requested token not bound to a pod")
        self.assertEqual(self.msg(tr("sa1", {"kind": "Secret", "apiVersion": "v1", "name": "s1"})),
                         pre + "node requested token not bound to a pod")
        self.assertEqual(self.msg(tr("sa1", dict(p1, uid=""))), pre + "node requested token with a pod binding without a uid")
        zero = "00000000-0000-0000-0000-000000000000"
        self.assertEqual(self.msg(tr("sa1", dict(p1, uid=zero))),
                         pre + "the UID in the bound object reference (%s) does not match the UID in record. The object "
                         "might have been deleted and then recreated" % zero)
        p2 = {"kind": "Pod", "apiVersion": "v1", "name": "p2", "uid": self.pod["p2"]["metadata"]["uid"]}
        for ref in (p2, p1):
            self.assertEqual(self.msg(tr("sa2", ref)),
                             'serviceaccounts "sa2" is forbidden: %s cannot create resource "serviceaccounts/token" in API '
                             "group \"\" in the namespace \"%s\": no relationship found between node '%s' and this object"
                             % (self.u(), ns, self.n1))

    def test_7b_binding_lag(self):
        """Facts section 7: the Node authorizer and NodeRestriction learn of a binding from the API
        server's informers, a moment after it is written. Right after a pod is bound to the node, the
        node's read of its ConfigMap and its TokenRequest may be refused (403, with these messages);
        the same requests succeed when retried. On the double the lag is set (nodeAuthorizerLag), so
        the refusal is certain; on a real server it may or may not be seen, the retry must succeed."""
        ns, n1 = self.ns, self.n1
        lag = 1.5
        if has_controls():
            control("controllers", {"nodeAuthorizerLag": lag})
            self.addCleanup(control, "controllers", {"nodeAuthorizerLag": 0})
        cm = rname("cml")
        r = API.post("/api/v1/namespaces/%s/configmaps" % ns, {"metadata": {"name": cm}, "data": {"k": "v"}})
        self.assertEqual(r.status, 201, r.text[:300])
        # sa1's token: the authorizer finds sa1 through p1, already bound, so the refusal is
        # NodeRestriction's (its pod lister has not seen the new pod's binding yet)
        b = pod_body(rname("lag"), node=n1)
        b["spec"]["serviceAccountName"] = "sa1"
        b["spec"]["volumes"] = [{"name": "c", "configMap": {"name": cm}}]
        r = API.post("/api/v1/namespaces/%s/pods" % ns, b)
        self.assertEqual(r.status, 201, r.text[:300])
        pod = r.json
        ref = {"kind": "Pod", "apiVersion": "v1", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}
        token = lambda: self.node.post("/api/v1/namespaces/%s/serviceaccounts/sa1/token" % ns, {
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"audiences": ["https://kubernetes.default.svc.cluster.local"], "expirationSeconds": 3607,
                     "boundObjectRef": ref}})
        read = lambda: self.node.get("/api/v1/namespaces/%s/configmaps/%s" % (ns, cm))
        t0 = time.monotonic()
        r1, r2 = read(), token()
        early = time.monotonic() - t0 < lag
        if has_controls() and early:
            self.assertEqual(self.msg(r1), 'configmaps "%s" is forbidden: %s cannot get resource "configmaps" in API '
                             "group \"\" in the namespace \"%s\": no relationship found between node '%s' and this "
                             "object" % (cm, self.u(), ns, n1))
            self.assertEqual(self.msg(r2), 'serviceaccounts "sa1" is forbidden: node requested token bound to a pod '
                             "scheduled on a different node")
        else:
            self.assertIn(r1.status, (200, 403), r1.text[:300])
            self.assertIn(r2.status, (201, 403), r2.text[:300])
        wait_for(lambda: read().status == 200, timeout=lag + 10, msg="the ConfigMap read allowed after the binding")
        wait_for(lambda: token().status == 201, timeout=lag + 10, msg="the TokenRequest allowed after the binding")
        self.assertEqual(API.delete("/api/v1/namespaces/%s/pods/%s?gracePeriodSeconds=0" % (ns, ref["name"])).status,
                         200)

    def test_8_events(self):
        ns = self.ns
        ev = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": rname("ev"), "namespace": ns},
              "involvedObject": {"kind": "Pod", "namespace": ns, "name": "p2", "uid": self.pod["p2"]["metadata"]["uid"]},
              "reason": "KtTest", "message": "from the node", "type": "Normal", "source": {"component": "kubelet"},
              "firstTimestamp": now_s(), "lastTimestamp": now_s(), "count": 1}
        path = "/api/v1/namespaces/%s/events" % ns
        r = self.node.post(path, ev)
        self.assertEqual(r.status, 201, r.text[:300])
        name = r.json["metadata"]["name"]
        self.assertEqual(self.node.patch(path + "/" + name, {"count": 2}).status, 200)
        self.assertEqual(self.msg(self.node.delete(path + "/" + name)),
                         'events "%s" is forbidden: %s cannot delete resource "events" in API group "" in the namespace '
                         '"%s"' % (name, self.u(), ns))
        r = self.node.post("/apis/events.k8s.io/v1/namespaces/%s/events" % ns, {
            "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": rname("ev")},
            "eventTime": now_us(), "reportingController": "kubelet", "reportingInstance": self.n1, "action": "Test",
            "reason": "KtTest", "type": "Normal", "regarding": ev["involvedObject"]})
        self.assertEqual(self.msg(r), 'events.events.k8s.io is forbidden: %s cannot create resource "events" in API group '
                         '"events.k8s.io" in the namespace "%s"' % (self.u(), ns))


class TestImpersonation(Base):
    """Impersonation (Impersonate-User / -Group headers), what node_identity = impersonate sends: the
    request is served as the named user once the requester may `impersonate` it, and the Node
    authorizer and NodeRestriction confine an impersonated system:node:NAME as they confine that node's
    own certificate. The admin (system:masters) may impersonate anyone, on any server; the limited
    identity's rules are the double's /_test/rbac there, ClusterRole objects on a real server."""
    WHOAMI = "/apis/authentication.k8s.io/v1/selfsubjectreviews"

    def as_(self, user, group=None):
        h = {"Impersonate-User": user}
        if group:
            h["Impersonate-Group"] = group
        return h

    def whoami(self, headers, token="admin"):
        return API.post(self.WHOAMI, {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
                        token=token, headers=headers)

    def test_admin_acts_as_a_node(self):
        node = rname("kn")
        r = self.whoami(self.as_("system:node:" + node, "system:nodes"))
        self.assertEqual(r.status, 201, r.text[:300])
        info = r.json["status"]["userInfo"]
        self.assertEqual((info["username"], info["groups"]), ("system:node:" + node, ["system:nodes", "system:authenticated"]))
        # No Impersonate-Group: the user alone, in system:authenticated.
        r = self.whoami(self.as_("kt-someone"))
        self.assertEqual(r.json["status"]["userInfo"]["groups"], ["system:authenticated"])

    def test_an_impersonated_node_is_confined_as_a_node(self):
        n1, n2 = rname("kn"), rname("kn")
        self.mknode(n2)
        h = self.as_("system:node:" + n1, "system:nodes")
        r = API.post("/api/v1/nodes", node_body(n1), headers=h)
        self.assertEqual(r.status, 201, r.text[:300])
        type(self).nodes.append(n1)
        r = API.patch("/api/v1/nodes/%s/status" % n2, {"status": {}}, headers=h)
        self.assertStatus(r, 403, "Forbidden")
        self.assertEqual(r.json["message"], 'nodes "%s" is forbidden: node "%s" is not allowed to modify node "%s"'
                         % (n2, n1, n2))
        r = API.get("/api/v1/namespaces/%s/secrets/kt-none" % self.ns, headers=h)
        self.assertStatus(r, 403, "Forbidden")
        self.assertIn("no relationship found between node '%s' and this object" % n1, r.json["message"])

    def test_group_without_user(self):
        r = API.get("/api/v1/nodes", headers={"Impersonate-Group": "system:nodes"})
        self.assertEqual(r.status, 500, r.text[:300])
        self.assertIn("without impersonating a user", r.json["message"])

    def test_rbac_names_whom_one_may_act_as(self):
        sa = rname("sa")
        r = API.post("/api/v1/namespaces/%s/serviceaccounts" % self.ns, {"metadata": {"name": sa}})
        self.assertEqual(r.status, 201, r.text[:300])
        r = API.post("/api/v1/namespaces/%s/serviceaccounts/%s/token" % (self.ns, sa),
                     {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}})
        self.assertEqual(r.status, 201, r.text[:300])
        tok, user = r.json["status"]["token"], "system:serviceaccount:%s:%s" % (self.ns, sa)
        mine, other = "system:node:" + rname("kn"), "system:node:" + rname("kn")
        rules = [{"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"], "resourceNames": [mine]},
                 {"apiGroups": [""], "resources": ["groups"], "verbs": ["impersonate"], "resourceNames": ["system:nodes"]}]
        if has_controls():
            control("rbac", {"subject": "user:" + user, "role": rules})
            self.addCleanup(control, "rbac", {"subject": "user:" + user, "role": "none"})
        else:
            rbac = "/apis/rbac.authorization.k8s.io/v1/"
            r = API.post(rbac + "clusterroles", {"metadata": {"name": sa}, "rules": rules})
            self.assertEqual(r.status, 201, r.text[:300])
            self.addCleanup(API.delete, rbac + "clusterroles/" + sa)
            r = API.post(rbac + "clusterrolebindings", {
                "metadata": {"name": sa}, "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": self.ns}],
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": sa}})
            self.assertEqual(r.status, 201, r.text[:300])
            self.addCleanup(API.delete, rbac + "clusterrolebindings/" + sa)
        r = wait_for(lambda: (lambda x: x if x.status == 201 else None)(
            self.whoami(self.as_(mine, "system:nodes"), token=tok)), msg="the impersonation rules in force")
        self.assertEqual(r.json["status"]["userInfo"]["username"], mine)
        r = self.whoami(self.as_(other, "system:nodes"), token=tok)
        self.assertStatus(r, 403, "Forbidden")
        self.assertEqual(r.json["message"], 'users "%s" is forbidden: User "%s" cannot impersonate resource "users" in '
                         'API group "" at the cluster scope' % (other, user))
        r = self.whoami(self.as_(mine, "system:masters"), token=tok)
        self.assertStatus(r, 403, "Forbidden")
        self.assertEqual(r.json["message"], 'groups "system:masters" is forbidden: User "%s" cannot impersonate resource '
                         '"groups" in API group "" at the cluster scope' % user)


def pv_body(name, storage, klass, path="/shared/x", modes=("ReadWriteOnce",), claim=None):
    b = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
         "spec": {"capacity": {"storage": storage}, "accessModes": list(modes), "storageClassName": klass,
                  "persistentVolumeReclaimPolicy": "Retain", "hostPath": {"path": path}}}
    if claim:
        b["spec"]["claimRef"] = claim
    return b


def pvc_body(name, storage, klass, modes=("ReadWriteOnce",), volume=None):
    b = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
         "spec": {"accessModes": list(modes), "storageClassName": klass,
                  "resources": {"requests": {"storage": storage}}}}
    if volume:
        b["spec"]["volumeName"] = volume
    return b


class TestPersistentVolumes(Base):
    """Statically provisioned storage as a site's admins make it (hostPath, local or nfs volumes of
    its shared file systems): kube-controller-manager's binder binds a claim to the smallest volume
    that fits it, or to the one it names; a node reads a claim that a pod bound to it uses, and the
    volume bound to that claim, and nothing else (the Node authorizer's pvc and pv edges). Each test
    uses a storage class of its own, so that on a real cluster no other volume is bound."""
    PV = "/api/v1/persistentvolumes"

    def claims(self, name=""):
        return "/api/v1/namespaces/%s/persistentvolumeclaims" % self.ns + ("/" + name if name else "")

    def mkpv(self, name, *a, **kw):
        r = API.post(self.PV, pv_body(name, *a, **kw))
        self.assertEqual(r.status, 201, r.text[:300])
        self.addCleanup(API.delete, self.PV + "/" + name)
        return r.json

    def phase(self, path):
        return ((API.get(path).json or {}).get("status") or {}).get("phase")

    def test_claim_binds_to_the_smallest_volume_that_fits(self):
        klass, small, fit, big = rname("sc"), rname("pv"), rname("pv"), rname("pv")
        self.mkpv(big, "5Gi", klass)
        self.mkpv(fit, "2Gi", klass)
        self.mkpv(small, "500Mi", klass)
        self.mkpv(rname("pv"), "3Gi", klass, modes=("ReadOnlyMany",))  # the wrong mode
        wait_for(lambda: self.phase(self.PV + "/" + fit) == "Available", msg="volume Available")
        c = API.post(self.claims(), pvc_body("models", "1Gi", klass)).json
        got = wait_for(lambda: (lambda o: o if (o.get("status") or {}).get("phase") == "Bound" else None)(
            API.get(self.claims("models")).json), msg="claim Bound")
        self.assertEqual(got["spec"]["volumeName"], fit)
        self.assertEqual(got["status"]["capacity"], {"storage": "2Gi"})
        self.assertEqual(got["status"]["accessModes"], ["ReadWriteOnce"])
        pv = wait_for(lambda: (lambda o: o if (o.get("status") or {}).get("phase") == "Bound" else None)(
            API.get(self.PV + "/" + fit).json), msg="volume Bound")
        ref = pv["spec"]["claimRef"]
        self.assertEqual((ref["namespace"], ref["name"], ref["uid"]), (self.ns, "models", c["metadata"]["uid"]))
        self.assertEqual(self.phase(self.PV + "/" + big), "Available")
        # Its claim deleted, a Retain volume is Released, not bound again.
        API.delete(self.claims("models"))
        wait_for(lambda: self.phase(self.PV + "/" + fit) == "Released", msg="volume Released")

    def test_claim_waits_for_a_volume_and_takes_the_one_it_names(self):
        klass, named, other = rname("sc"), rname("pv"), rname("pv")
        r = API.post(self.claims(), pvc_body("later", "1Gi", klass))
        self.assertEqual(r.status, 201, r.text[:300])
        wait_for(lambda: self.phase(self.claims("later")) == "Pending", msg="claim Pending")
        self.mkpv(other, "1Gi", klass)
        wait_for(lambda: self.phase(self.claims("later")) == "Bound", msg="claim Bound once a volume fits")
        self.mkpv(named, "10Gi", klass)
        r = API.post(self.claims(), pvc_body("named", "1Gi", klass, volume=named))
        self.assertEqual(r.status, 201, r.text[:300])
        wait_for(lambda: self.phase(self.claims("named")) == "Bound", msg="named claim Bound")
        self.assertEqual(API.get(self.claims("named")).json["spec"]["volumeName"], named)

    def test_invalid_volumes_and_claims(self):
        b = pv_body(rname("pv"), "1Gi", "x")
        del b["spec"]["capacity"]
        del b["spec"]["hostPath"]
        r = API.post(self.PV, b)
        self.assertStatus(r, 422, "Invalid")
        fields = sorted(c["field"] for c in r.json["details"]["causes"])
        self.assertEqual(fields, ["spec", "spec.capacity"], r.text[:500])
        b = pvc_body("bad", "1Gi", "x")
        del b["spec"]["accessModes"]
        r = API.post(self.claims(), b)
        self.assertStatus(r, 422, "Invalid")
        self.assertIn("spec.accessModes", [c["field"] for c in r.json["details"]["causes"]])

    def test_secret_string_data(self):
        """stringData (vLLM's manifests give their token so) is stored base64-encoded in data."""
        r = API.post("/api/v1/namespaces/%s/secrets" % self.ns, {
            "metadata": {"name": "hf"}, "type": "Opaque", "data": {"a": "eA=="},
            "stringData": {"token": "s3cret", "a": "y"}})
        self.assertEqual(r.status, 201, r.text[:300])
        self.assertNotIn("stringData", r.json)
        self.assertEqual(r.json["data"], {"token": "czNjcmV0", "a": "eQ=="})

    def test_node_reads_its_pods_claims_and_their_volumes_only(self):
        klass, pv, lone = rname("sc"), rname("pv"), rname("pv")
        n1, n2 = rname("kn"), rname("kn")
        self.mknode(n1)
        self.mknode(n2)
        self.mkpv(pv, "1Gi", klass)
        self.mkpv(lone, "1Gi", klass + "-other")
        API.post(self.claims(), pvc_body("data", "1Gi", klass))
        wait_for(lambda: self.phase(self.claims("data")) == "Bound", msg="claim Bound")
        body = pod_body("uses-claim", node=n1)
        body["spec"]["volumes"] = [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]
        r = API.post(self.pods(), body)
        self.assertEqual(r.status, 201, r.text[:300])
        node1 = {"Impersonate-User": "system:node:" + n1, "Impersonate-Group": "system:nodes"}
        node2 = {"Impersonate-User": "system:node:" + n2, "Impersonate-Group": "system:nodes"}
        # The graph learns of the binding a moment later (node facts §7): retried.
        wait_for(lambda: API.get(self.claims("data"), headers=node1).status == 200, msg="node reads the claim")
        wait_for(lambda: API.get(self.PV + "/" + pv, headers=node1).status == 200, msg="node reads the volume")
        for path, h in ((self.claims("data"), node2), (self.PV + "/" + pv, node2), (self.PV + "/" + lone, node1)):
            r = API.get(path, headers=h)
            self.assertStatus(r, 403, "Forbidden")
            self.assertIn("no relationship found between node", r.json["message"])
        r = API.get(self.PV, headers=node1)  # no list
        self.assertStatus(r, 403, "Forbidden")


class PolicyFileBase(Base):
    """A test class over one of etc/'s ValidatingAdmissionPolicy files, applied as given but
    named for the run (cls.name, its validation's message in cls.message), deleted at the end."""
    VAP = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies"
    VAPB = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings"

    @classmethod
    def apply_policy_file(cls, filename, prefix, edit_policy=None):
        import yaml
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "etc", filename)
        cls.name = rname(prefix)
        for d in [d for d in yaml.safe_load_all(open(path)) if d]:
            d["metadata"]["name"] = cls.name
            if d["kind"] == "ValidatingAdmissionPolicy":
                if edit_policy:
                    edit_policy(d)
                cls.message = d["spec"]["validations"][0]["message"]
                url = cls.VAP
            else:
                d["spec"]["policyName"] = cls.name
                url = cls.VAPB
            r = API.post(url, d)
            assert r.status == 201, r.text[:500]
            cls.made.append(url + "/" + cls.name)

    @classmethod
    def tearDownClass(cls):
        for path in reversed(getattr(cls, "made", [])):
            API.delete(path)
        super().tearDownClass()


class TestPodNamespacesPolicy(PolicyFileBase):
    """etc/vap-pod-namespaces.yaml as the API server applies it: a Binding (or a pod created
    bound) to a Node labelled slurm-k8s/cluster is refused unless the Node's annotation
    slurm-k8s/namespaces allows the pod's namespace ("*" or a list); other Nodes are not
    concerned. Skipped where admissionregistration.k8s.io/v1 is not served (1.28/1.29: the
    file's apiVersions as v1beta1, ValidatingAdmissionPolicy feature gate). On a real server the
    policy's params are every project Node there, the test's own among them."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.made = []
        if API.get(cls.VAP).status == 404:
            raise unittest.SkipTest("admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy not served")
        cls.apply_policy_file("vap-pod-namespaces.yaml", "kt-vap-ns")

    def node(self, allows):
        n = node_body(rname("n"), labels={"slurm-k8s/cluster": "kt"})
        if allows is not None:
            n["metadata"]["annotations"] = {"slurm-k8s/namespaces": allows}
        r = API.post("/api/v1/nodes", n)
        self.assertEqual(r.status, 201, r.text[:300])
        type(self).nodes.append(n["metadata"]["name"])
        return n["metadata"]["name"]

    def mkpod(self, node=None):
        """A pod no scheduler takes (its schedulerName is none's): only the test binds it."""
        body = pod_body(rname("p"), node=node)
        body["spec"]["schedulerName"] = "kt-no-scheduler"
        return API.post(self.pods(), body), body["metadata"]["name"]

    def bind(self, pod, node):
        return API.post(self.pods(pod) + "/binding", {"apiVersion": "v1", "kind": "Binding",
                                                        "metadata": {"name": pod},
                                                        "target": {"apiVersion": "v1", "kind": "Node", "name": node}})

    def until_denied(self, node):
        """A real API server loads a new policy and its params asynchronously."""
        deadline = time.time() + 30
        while True:
            r, p = self.mkpod()
            self.assertEqual(r.status, 201, r.text[:300])
            r = self.bind(p, node)
            if r.status != 201 or time.time() > deadline:
                return p, r
            time.sleep(0.5)

    def test_binding_refused_for_a_namespace_the_node_does_not_allow(self):
        other = self.node("kt-some-other-namespace,kt-another")
        p, r = self.until_denied(other)
        self.assertStatus(r, 403, "Forbidden")
        self.assertEqual(r.json["message"],
                         'pods "%s" is forbidden: ValidatingAdmissionPolicy \'%s\' with binding \'%s\' '
                         "denied request: %s" % (p, self.name, self.name, self.message))
        self.assertFalse(API.get(self.pods(p)).json["spec"].get("nodeName"))
        # created bound: the same refusal
        self.assertStatus(self.mkpod(node=other)[0], 403, "Forbidden")
        # a Node that names none, or has no annotation: refused too
        for allows in ("none: the job named no namespace", None):
            n = self.node(allows)
            _, r = self.until_denied(n)
            self.assertStatus(r, 403, "Forbidden")

    def test_scheduler_says_why_it_could_not_bind(self):
        """The default scheduler's Binding refused: the pod stays Pending, and
        PodScheduled=False (SchedulerError) says why, as kube-scheduler's DefaultBinder
        words it."""
        pin = rname("pin")
        n = node_body(rname("n"), labels={"slurm-k8s/cluster": "kt", "kt-pin": pin})
        n["metadata"]["annotations"] = {"slurm-k8s/namespaces": "kt-some-other-namespace"}
        r = API.post("/api/v1/nodes", n)
        self.assertEqual(r.status, 201, r.text[:300])
        name = n["metadata"]["name"]
        type(self).nodes.append(name)
        self.until_denied(name)  # the policy in force
        body = pod_body(rname("s"), selector={"kt-pin": pin}, tolerations=[{"operator": "Exists"}])
        self.assertEqual(API.post(self.pods(), body).status, 201)
        pod = body["metadata"]["name"]

        def told():
            o = API.get(self.pods(pod)).json
            c = [c for c in (o.get("status") or {}).get("conditions") or [] if c["type"] == "PodScheduled"]
            return c and c[0]["status"] == "False" and c[0].get("reason") == "SchedulerError" and c[0]["message"]
        msg = wait_for(told, timeout=30, msg="PodScheduled=False (SchedulerError)")
        self.assertTrue(msg.startswith('binding rejected: running Bind plugin "DefaultBinder": '), msg)
        self.assertIn(self.message, msg)
        self.assertFalse(API.get(self.pods(pod)).json["spec"].get("nodeName"))

    def test_allowed_namespaces_and_other_nodes_bind(self):
        self.until_denied(self.node("kt-nothing-here"))  # the policy in force
        for allows in ("*", "kt-x," + self.ns):
            n = self.node(allows)
            r, p = self.mkpod()
            self.assertEqual(r.status, 201, r.text[:300])
            r = self.bind(p, n)
            self.assertEqual(r.status, 201, r.text[:300])
        plain = self.mknode()["metadata"]["name"]  # not a slurm-k8s Node: no concern of the policy
        r, p = self.mkpod()
        self.assertEqual(r.status, 201, r.text[:300])
        self.assertEqual(self.bind(p, plain).status, 201)


class TestValidatingAdmissionPolicy(PolicyFileBase):
    """etc/vap-agent-nodes.yaml as the API server applies it: the agent's identity may create,
    change and delete only Nodes labelled slurm-k8s/cluster. Skipped without KUBE_AGENT_TOKEN
    or where admissionregistration.k8s.io/v1 is not served (1.28/1.29 serve v1beta1 behind the
    ValidatingAdmissionPolicy feature gate: run it with the file's apiVersions changed)."""
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.made = []
        if not CFG["agent"]:
            raise unittest.SkipTest("KUBE_AGENT_TOKEN not set")
        if API.get(cls.VAP).status == 404:
            raise unittest.SkipTest("admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy not served")
        me = API.post("/apis/authentication.k8s.io/v1/selfsubjectreviews",
                      {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}, token=CFG["agent"])
        assert me.status == 201, me.text[:300]
        cls.agent_user = me.json["status"]["userInfo"]["username"]

        def match_agent(policy):  # its match condition names the agent's user here
            policy["spec"]["matchConditions"][0]["expression"] = \
                "request.userInfo.username == '%s'" % cls.agent_user
        cls.apply_policy_file("vap-agent-nodes.yaml", "kt-vap", match_agent)
        # a real API server loads a new policy asynchronously: wait until it denies
        probe = rname("n")
        deadline = time.time() + 30
        while time.time() < deadline:
            r = API.post("/api/v1/nodes", node_body(probe), token=CFG["agent"])
            if r.status == 201:
                API.delete("/api/v1/nodes/" + probe)
                time.sleep(0.5)
                continue
            break
        assert r.status == 403, "the policy never took effect: %d %s" % (r.status, r.text[:300])

    def denied(self, r, name):
        self.assertStatus(r, 403, "Forbidden")
        self.assertEqual(r.json["message"],
                         'nodes "%s" is forbidden: ValidatingAdmissionPolicy \'%s\' with binding \'%s\' '
                         "denied request: %s" % (name, self.name, self.name, self.message))

    def test_create_only_labelled(self):
        bare = rname("n")
        self.denied(API.post("/api/v1/nodes", node_body(bare), token=CFG["agent"]), bare)
        ours = rname("n")
        r = API.post("/api/v1/nodes", node_body(ours, labels={"slurm-k8s/cluster": "kt"}), token=CFG["agent"])
        self.assertEqual(r.status, 201, r.text[:300])
        type(self).nodes.append(ours)

    def test_change_and_delete_only_labelled(self):
        foreign = self.mknode()["metadata"]["name"]
        ours = self.mknode(labels={"slurm-k8s/cluster": "kt"})["metadata"]["name"]
        taint = {"spec": {"taints": [{"key": "kt/x", "effect": "NoSchedule"}]}}
        self.denied(API.patch("/api/v1/nodes/" + foreign, taint, token=CFG["agent"]), foreign)
        self.denied(API.patch("/api/v1/nodes/%s/status" % foreign, {"status": {"capacity": {"cpu": "2"}}},
                              token=CFG["agent"]), foreign)
        # labelling a foreign Node does not make it the agent's
        self.denied(API.patch("/api/v1/nodes/" + foreign, {"metadata": {"labels": {"slurm-k8s/cluster": "kt"}}},
                              token=CFG["agent"]), foreign)
        self.denied(API.delete("/api/v1/nodes/" + foreign, token=CFG["agent"]), foreign)
        self.assertEqual(API.get("/api/v1/nodes/" + foreign).status, 200)
        r = API.patch("/api/v1/nodes/" + ours, taint, token=CFG["agent"])
        self.assertEqual(r.status, 200, r.text[:300])
        r = API.patch("/api/v1/nodes/%s/status" % ours, {"status": {"capacity": {"cpu": "2"}}}, token=CFG["agent"])
        self.assertEqual(r.status, 200, r.text[:300])
        # taking the label away is refused too (the Node would leave the policy's reach)
        self.denied(API.patch("/api/v1/nodes/" + ours, {"metadata": {"labels": {"slurm-k8s/cluster": None}}},
                              token=CFG["agent"]), ours)
        r = API.delete("/api/v1/nodes/" + ours, token=CFG["agent"])
        self.assertEqual(r.status, 200, r.text[:300])

    def test_other_users_not_matched(self):
        foreign = self.mknode()["metadata"]["name"]
        r = API.patch("/api/v1/nodes/" + foreign, {"metadata": {"labels": {"kt-admin": "x"}}})
        self.assertEqual(r.status, 200, r.text[:300])

    def test_expression_compiled_at_create(self):
        bad = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
               "metadata": {"name": rname("kt-vap-bad")},
               "spec": {"matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                                "operations": ["CREATE"], "resources": ["nodes"]}]},
                        "validations": [{"expression": "object.metadata.name ==="}]}}
        r = API.post(self.VAP, bad)
        if r.status == 201:
            API.delete(self.VAP + "/" + bad["metadata"]["name"])
        self.assertStatus(r, 422, "Invalid")
        self.assertIn("spec.validations[0].expression", r.json["message"])
        self.assertIn("compilation failed", r.json["message"])


class TestControls(Base):
    @classmethod
    def setUpClass(cls):
        if API is None or not has_controls():
            raise unittest.SkipTest("needs the test double's /_test controls")
        Base.setUpClass.__func__(cls)

    def test_request_log(self):
        control("reset")
        API.get("/api/v1/nodes")
        API.get("/api/v1/nodes/" + rname("x"))
        c = control("counters", method="GET")
        self.assertEqual(c["byUser"]["admin"]["GET /api/v1/nodes 200"], 1)
        self.assertEqual(c["byUser"]["admin"]["GET /api/v1/nodes/{name} 404"], 1)
        items = control("requests", method="GET")["items"]
        self.assertEqual([(i["method"], i["status"]) for i in items], [("GET", 200), ("GET", 404)])
        self.assertEqual(items[0]["user"], "admin")
        if CFG["noright"]:
            self.assertStatus(API.get("/_test/info", token=CFG["noright"]), 403)

    def test_fault_status_and_delay(self):
        control("fault", {"mode": "status", "code": 503})
        try:
            r = API.get("/api/v1/nodes")
            self.assertEqual(r.status, 503)
            self.assertEqual(r.json["reason"], "ServiceUnavailable")
            self.assertEqual(API.get("/_test/info").status, 200)
        finally:
            control("fault", {"mode": "none"})
        self.assertEqual(API.get("/api/v1/nodes").status, 200)
        control("fault", {"mode": "delay", "ms": 400})
        try:
            t0 = time.time()
            API.get("/api/v1/nodes")
            self.assertGreaterEqual(time.time() - t0, 0.38)
        finally:
            control("fault", {"mode": "none"})

    def test_fault_refuse(self):
        keep = API.conn()
        self.assertEqual(API.req("GET", "/version", conn=keep).status, 200)
        control("fault", {"mode": "refuse", "seconds": 3})
        # The server starts refusing after its reply, on its own thread: wait for that.
        wait_for(lambda: not self._ok(), timeout=2.5, interval=0.05, msg="connections refused")
        with self.assertRaises((ConnectionError, OSError, http.client.HTTPException)):
            API.req("GET", "/version", conn=keep)
        with self.assertRaises((ConnectionRefusedError, ConnectionError, OSError)):
            API.get("/version")
        wait_for(lambda: self._ok(), timeout=10, msg="server back")

    def _ok(self):
        try:
            return API.get("/version").status == 200
        except OSError:
            return False

    def test_watches_close(self):
        w = Watch("/api/v1/namespaces/%s/configmaps?watch=1" % self.ns)
        time.sleep(0.2)
        self.assertGreaterEqual(control("watches/close")["closed"], 1)
        end = time.time() + 5
        while w.next(5) is not None:          # initial ADDED events, then the end of the stream
            self.assertLess(time.time(), end)
        w.close()

    def test_keepalive_many_clients(self):
        errs = []

        def worker(i):
            c = API.conn()
            try:
                for j in range(5):
                    r = API.req("POST", "/api/v1/namespaces/%s/configmaps" % self.ns, {"metadata": {"name": "c%d-%d" % (i, j)}}, conn=c)
                    if r.status != 201:
                        errs.append(r.status)
            except Exception as e:
                errs.append(repr(e))
            finally:
                c.close()
        ts = [threading.Thread(target=worker, args=(i,)) for i in range(50)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        self.assertEqual(errs, [])
        self.assertEqual(len(API.get("/api/v1/namespaces/%s/configmaps?labelSelector=" % self.ns).json["items"]), 250)


class _Result(unittest.TextTestResult):
    pass


def main():
    runner = unittest.TextTestRunner(verbosity=2, resultclass=_Result)
    prog = unittest.main(module="__main__", testRunner=runner, exit=False, argv=sys.argv)
    r = prog.result
    for d in _TMP:
        shutil.rmtree(d, ignore_errors=True)
    failed = len(r.failures) + len(r.errors) + len(r.unexpectedSuccesses)
    skipped = len(r.skipped)
    passed = r.testsRun - failed - skipped
    out = os.environ.get("KUBE_TEST_SUMMARY")
    if out:
        with open(out, "w") as f:
            f.write("%d %d %d\n" % (passed, failed, skipped))
    print("api: %d passed, %d failed, %d skipped" % (passed, failed, skipped))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
