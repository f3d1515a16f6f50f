"""The workload controllers of kube-controller-manager that the online-RL example's
services need, with their observable behaviour:

- deployment: one ReplicaSet per pod template, named <deployment>-<pod-template-hash>, the
  hash also a label of the ReplicaSet, its selector and its pods; a new template gets a new
  ReplicaSet at full size and the old ones are scaled to 0 once it is ready (maxSurge 100%,
  not the stepwise 25% of the real RollingUpdate); status replicas, updatedReplicas,
  readyReplicas, availableReplicas, unavailableReplicas, observedGeneration and the
  Available and Progressing conditions, which `kubectl rollout status` reads;
- replicaset: keeps spec.replicas active pods (not terminal, not deleting) that it controls
  (ownerReferences with controller: true), created from its template with generateName
  <replicaset>-; surplus pods are deleted unscheduled first, then not ready, then newest;
- endpoints: for a Service with a selector, an Endpoints object of the same name listing the
  matching pods that have an IP, ready ones in addresses and the others in
  notReadyAddresses, with the Service's ports (a named targetPort resolved against the
  pod's container ports; pods whose ports resolve differently in subsets of their own);
  deleted with its Service;
- garbage collector (background propagation): a ReplicaSet whose controlling Deployment is
  gone, and a pod whose controlling ReplicaSet is gone, are deleted;
- persistentvolume-binder: claims bound to statically provisioned volumes (kubetest/volumes.py).
minReadySeconds is 0: a ready pod is available at once.
"""

import hashlib
import json
import threading

from .errors import ApiError
from .objects import cond, pod_terminal
from .resources import RESOURCES
from .selectors import match_label_selector
from .util import Backoff, log
from .validation import validate
from .volumes import VolumeBinder

DEPLOY = RESOURCES[("apps", "deployments")]
RS = RESOURCES[("apps", "replicasets")]
PODS = RESOURCES[("", "pods")]
ENDPOINTS = RESOURCES[("", "endpoints")]


def template_hash(template):
    h = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()
    # The digits and letters kube-controller-manager uses (no vowels): a valid label value.
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    n = int(h[:15], 16)
    out = ""
    for _ in range(10):
        out += alphabet[n % len(alphabet)]
        n //= len(alphabet)
    return out


def controller_of(o):
    for r in o["metadata"].get("ownerReferences") or []:
        if r.get("controller"):
            return r
    return None


def owner_ref(o):
    return {"apiVersion": o["apiVersion"], "kind": o["kind"], "name": o["metadata"]["name"],
            "uid": o["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}


def pod_ready(p):
    c = cond(p, "Ready")
    return bool(c) and c.get("status") == "True"


def active(p):
    return not pod_terminal(p) and not p["metadata"].get("deletionTimestamp")


class Workloads(threading.Thread):
    def __init__(self, api, opts):
        threading.Thread.__init__(self, daemon=True, name="workloads")
        self.api, self.opts = api, opts
        # (ns, name) -> the next try of a failed Endpoints write: 0.5 s doubling to 30 s.
        self._ep_backoff = Backoff(0.5, 30.0)
        self.volumes = VolumeBinder(api)

    def run(self):
        while True:
            self.api.wake_workloads.wait(timeout=1.0)
            self.api.wake_workloads.clear()
            try:
                self.pass_once()
            except Exception as e:
                import traceback
                traceback.print_exc()
                log("workloads: %r" % e)

    def pass_once(self):
        store = self.api.store
        deploys = store.items("deployments")
        for d in deploys:
            self.sync_deployment(d)
        live = set(d["metadata"]["uid"] for d in store.items("deployments"))
        for rs in store.items("replicasets"):
            ref = controller_of(rs)
            if ref and ref.get("kind") == "Deployment" and ref.get("uid") not in live:
                self._delete(RS, rs)
                continue
            self.sync_replicaset(rs)
        live = set(r["metadata"]["uid"] for r in store.items("replicasets"))
        for p in store.items("pods"):
            ref = controller_of(p)
            if ref and ref.get("kind") == "ReplicaSet" and ref.get("uid") not in live \
                    and not p["metadata"].get("deletionTimestamp"):
                self._delete(PODS, p)
        self.sync_endpoints()
        self.volumes.sync()

    def _delete(self, res, o, opts=None):
        try:
            self.api.delete(res, o["metadata"].get("namespace"), o["metadata"]["name"],
                            dict(opts or {}, preconditions={"uid": o["metadata"]["uid"]}))
        except ApiError:
            pass

    def _create(self, res, ns, obj):
        try:
            return self.api.create(res, ns, obj, internal=True)
        except ApiError as e:
            log("workloads: create %s in %s: %s" % (res.plural, ns, e))
            return None

    def _status(self, key, o, status):
        k = (o["metadata"].get("namespace") or "", o["metadata"]["name"])

        def fn(new):
            if new["metadata"]["uid"] != o["metadata"]["uid"]:
                return False
            st = dict(new.get("status") or {})
            merged = dict(st, **status)
            if merged == st:
                return False
            new["status"] = merged
            return True
        self.api.mutate(key, k, fn)

    # -- deployments
    def sync_deployment(self, d):
        md, sp = d["metadata"], d.get("spec") or {}
        ns = md["namespace"]
        replicas = int(sp.get("replicas", 1))
        tpl = sp.get("template") or {}
        h = template_hash(tpl)
        owned = [r for r in self.api.store.items("replicasets")
                 if r["metadata"]["namespace"] == ns and (controller_of(r) or {}).get("uid") == md["uid"]]
        new = next((r for r in owned if (r["metadata"].get("labels") or {}).get("pod-template-hash") == h), None)
        if new is None:
            labels = dict((tpl.get("metadata") or {}).get("labels") or {}, **{"pod-template-hash": h})
            sel = json.loads(json.dumps(sp.get("selector") or {}))
            sel.setdefault("matchLabels", {})["pod-template-hash"] = h
            t = json.loads(json.dumps(tpl))
            t.setdefault("metadata", {})["labels"] = labels
            new = self._create(RS, ns, {
                "metadata": {"name": "%s-%s" % (md["name"], h), "namespace": ns, "labels": labels,
                             "ownerReferences": [owner_ref(d)],
                             "annotations": {"deployment.kubernetes.io/revision": str(len(owned) + 1)}},
                "spec": {"replicas": replicas, "selector": sel, "template": t}})
            if new is None:
                return
            owned.append(new)
        elif int((new.get("spec") or {}).get("replicas", 1)) != replicas:
            self._scale(new, replicas)
        nst = new.get("status") or {}
        new_ready = int(nst.get("readyReplicas", 0)) >= replicas and int(nst.get("replicas", 0)) == replicas
        for r in owned:
            if r is not new and new_ready and int((r.get("spec") or {}).get("replicas", 1)) != 0:
                self._scale(r, 0)
        tot = sum(int((r.get("status") or {}).get("replicas", 0)) for r in owned)
        ready = sum(int((r.get("status") or {}).get("readyReplicas", 0)) for r in owned)
        updated = int(nst.get("replicas", 0))
        max_unavailable = replicas // 4
        available = ready >= replicas - max_unavailable
        done = updated == replicas and tot == replicas and ready == replicas
        prev = {c.get("type"): c for c in (d.get("status") or {}).get("conditions") or []}

        def condition(ctype, ok, reason, message):
            c = prev.get(ctype) or {}
            status = "True" if ok else "False"
            if c.get("status") == status and c.get("reason") == reason:
                return c
            from .util import ts
            return {"type": ctype, "status": status, "reason": reason, "message": message,
                    "lastUpdateTime": ts(), "lastTransitionTime": ts()}
        st = {"observedGeneration": md.get("generation", 1), "replicas": tot, "updatedReplicas": updated,
              "readyReplicas": ready, "availableReplicas": ready, "unavailableReplicas": max(0, replicas - ready),
              "conditions": [
                  condition("Available", available, "MinimumReplicasAvailable" if available
                            else "MinimumReplicasUnavailable",
                            "Deployment has minimum availability." if available
                            else "Deployment does not have minimum availability."),
                  condition("Progressing", True, "NewReplicaSetAvailable" if done else "ReplicaSetUpdated",
                            'ReplicaSet "%s" has %s.' % (new["metadata"]["name"], "successfully progressed"
                                                         if done else "is progressing"))]}
        if not ready:
            st.pop("readyReplicas")
            st.pop("availableReplicas")
        self._status("deployments", d, st)

    def _scale(self, rs, n):
        k = (rs["metadata"]["namespace"], rs["metadata"]["name"])

        def fn(new):
            if new["spec"].get("replicas") == n:
                return False
            new["spec"]["replicas"] = n
            new["metadata"]["generation"] = int(new["metadata"].get("generation", 1)) + 1
            return True
        self.api.mutate("replicasets", k, fn)

    # -- replicasets
    def sync_replicaset(self, rs):
        md, sp = rs["metadata"], rs.get("spec") or {}
        ns = md["namespace"]
        want = int(sp.get("replicas", 1))
        mine = [p for p in self.api.store.items("pods")
                if p["metadata"]["namespace"] == ns and (controller_of(p) or {}).get("uid") == md["uid"]]
        act = [p for p in mine if active(p)]
        tpl = sp.get("template") or {}
        for _ in range(want - len(act)):
            t = json.loads(json.dumps(tpl))
            pmd = t.get("metadata") or {}
            pod = {"metadata": {"generateName": md["name"] + "-", "namespace": ns,
                                "labels": pmd.get("labels") or {}, "ownerReferences": [owner_ref(rs)]},
                   "spec": t.get("spec") or {}}
            if pmd.get("annotations"):
                pod["metadata"]["annotations"] = pmd["annotations"]
            p = self._create(PODS, ns, pod)
            if p is None:
                break
            act.append(p)
        if len(act) > want:
            # unscheduled first, then not ready, then the newest
            surplus = sorted(act, key=lambda p: (bool((p.get("spec") or {}).get("nodeName")), pod_ready(p),
                                                 _neg(p["metadata"].get("creationTimestamp", ""))))
            for p in surplus[:len(act) - want]:
                self._delete(PODS, p)
            act = surplus[len(act) - want:]
        ready = sum(1 for p in act if pod_ready(p))
        sel = (sp.get("selector") or {})
        st = {"replicas": len(act), "fullyLabeledReplicas": sum(
            1 for p in act if match_label_selector(sel, p["metadata"].get("labels") or {})),
            "readyReplicas": ready, "availableReplicas": ready, "observedGeneration": md.get("generation", 1)}
        self._status("replicasets", rs, st)

    # -- endpoints
    def sync_endpoints(self):
        store = self.api.store
        svcs = {(s["metadata"]["namespace"], s["metadata"]["name"]): s for s in store.items("services")}
        for ep in store.items("endpoints"):
            k = (ep["metadata"]["namespace"], ep["metadata"]["name"])
            if (ep["metadata"].get("labels") or {}).get("endpoints.kubernetes.io/managed-by") == \
                    "endpoint-controller" and k not in svcs:
                self._delete(ENDPOINTS, ep)
        pods = store.items("pods")
        for (ns, name), s in svcs.items():
            sel = (s.get("spec") or {}).get("selector")
            if not sel:
                continue
            groups = {}     # the pods' resolved ports -> (ready, not ready): one subset each
            for p in pods:
                pm = p["metadata"]
                if pm["namespace"] != ns or not active(p) or \
                        any((pm.get("labels") or {}).get(k) != v for k, v in sel.items()):
                    continue
                ip = (p.get("status") or {}).get("podIP")
                if not ip:
                    continue
                pp = self._ports(s, p)
                if pp is None:
                    continue
                a = {"ip": ip, "targetRef": {"kind": "Pod", "namespace": ns, "name": pm["name"], "uid": pm["uid"]}}
                if (p.get("spec") or {}).get("nodeName"):
                    a["nodeName"] = p["spec"]["nodeName"]
                g = groups.setdefault(json.dumps(pp, sort_keys=True), ([], []))
                g[0 if pod_ready(p) else 1].append(a)
            subsets = []
            for key in sorted(groups):
                ready, not_ready = groups[key]
                subset = {}
                if ready:
                    subset["addresses"] = sorted(ready, key=lambda a: (a["ip"], a["targetRef"]["name"]))
                if not_ready:
                    subset["notReadyAddresses"] = sorted(not_ready, key=lambda a: (a["ip"], a["targetRef"]["name"]))
                subset["ports"] = json.loads(key)
                subsets.append(subset)
            labels = dict(s["metadata"].get("labels") or {}, **{"endpoints.kubernetes.io/managed-by":
                                                                "endpoint-controller"})
            cur = store.get("endpoints", (ns, name))
            if cur is not None and cur.get("subsets", []) == subsets and cur["metadata"].get("labels") == labels:
                self._ep_backoff.clear((ns, name))
                continue
            if not self._ep_backoff.due((ns, name)):
                continue
            try:
                if cur is None:
                    self.api.create(ENDPOINTS, ns, {"metadata": {"name": name, "namespace": ns, "labels": labels},
                                                    "subsets": subsets}, internal=True)
                else:
                    # Validated as an update is (an address in the loopback range fails the whole
                    # object: no address of the Service published).
                    validate(ENDPOINTS, dict(cur, subsets=subsets, metadata=dict(cur["metadata"], labels=labels)),
                             cur)

                    def fn(new, subsets=subsets, labels=labels):
                        new["subsets"] = subsets
                        new["metadata"]["labels"] = labels
                        return True
                    self.api.mutate("endpoints", (ns, name), fn)
                self._ep_backoff.clear((ns, name))
            except ApiError as e:
                self._ep_failed(ns, name, cur, e)

    def _ep_failed(self, ns, name, cur, e):
        """A failed write of a Service's Endpoints: retried with a back-off (0.5 s doubling to 30 s,
        as the controller's rate-limited queue), each failure a Warning Event on the Endpoints
        (reason FailedToUpdateEndpoint, source endpoint-controller), as kube-controller-manager
        records it."""
        self._ep_backoff.failed((ns, name))
        involved = {"kind": "Endpoints", "namespace": ns, "name": name, "apiVersion": "v1"}
        if cur is not None:
            involved.update(uid=cur["metadata"]["uid"], resourceVersion=cur["metadata"]["resourceVersion"])
        self.api.record_event(ns, involved, "Warning", "FailedToUpdateEndpoint",
                              "Failed to update endpoint %s/%s: %s" % (ns, name, e.message), "endpoint-controller")

    @staticmethod
    def _ports(svc, pod):
        out = []
        cports = [cp for c in (pod.get("spec") or {}).get("containers") or [] for cp in c.get("ports") or []]
        for sp in (svc.get("spec") or {}).get("ports") or []:
            tp = sp.get("targetPort", sp.get("port"))
            if isinstance(tp, str) and not tp.isdigit():
                m = next((cp for cp in cports if cp.get("name") == tp), None)
                if m is None:
                    return None
                tp = m.get("containerPort")
            e = {"port": int(tp), "protocol": sp.get("protocol", "TCP")}
            if sp.get("name"):
                e["name"] = sp["name"]
            out.append(e)
        return out


def _neg(s):
    """A key that sorts timestamps newest first."""
    return [-ord(c) for c in s]
