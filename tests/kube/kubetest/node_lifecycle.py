"""The node-lifecycle controller: marks a Node whose Lease is not renewed within the grace
period Unknown, adds and removes the not-ready/unreachable taints and evicts pods that do not tolerate
NoExecute (kube-controller-manager's behaviour, with its timings as options)."""

import threading
import time

from .errors import ApiError
from .objects import cond, pod_terminal, tolerates
from .resources import RESOURCES
from .util import log, now_utc, parse_ts, ts


class NodeLifecycle(threading.Thread):
    """Imitates kube-controller-manager's node-lifecycle controller (and taint-based eviction)."""

    def __init__(self, api, opts):
        threading.Thread.__init__(self, daemon=True, name="node-lifecycle")
        self.api, self.opts = api, opts
        self.enabled = not opts.no_node_lifecycle
        self.obs = {}            # node name -> [ready heartbeat, lease renewTime, node uid, monotonic time]
        self.ready_since = {}    # node name -> monotonic time Ready=True was first seen (taint removal delay)

    def run(self):
        while True:
            self.api.wake_nlc.wait(timeout=min(self.opts.monitor_period, 1.0))
            self.api.wake_nlc.clear()
            if not self.enabled:
                continue
            try:
                self.pass_once()
            except Exception as e:
                log("node-lifecycle: %r" % e)

    def pass_once(self):
        api, opts = self.api, self.opts
        now = time.monotonic()
        nodes = api.store.items("nodes")
        leases = api.store.objs["leases"]
        names = set()
        all_not_ready = bool(nodes)
        for n in nodes:
            rc = cond(n, "Ready")
            if rc and rc.get("status") == "True":
                all_not_ready = False
        for n in nodes:
            name = n["metadata"]["name"]
            names.add(name)
            rc = cond(n, "Ready")
            hb = (rc or {}).get("lastHeartbeatTime"), (rc or {}).get("status")
            lease = leases.get(("kube-node-lease", name))
            renew = (lease or {}).get("spec", {}).get("renewTime") if lease else None
            o = self.obs.get(name)
            if o is None or o[2] != n["metadata"]["uid"]:
                o = self.obs[name] = [hb, renew, n["metadata"]["uid"], now]
            if o[0] != hb or o[1] != renew:
                o[0], o[1], o[3] = hb, renew, now
            stale = now - o[3] > opts.lease_grace
            status = (rc or {}).get("status")
            if stale and status != "Unknown":
                self.mark_unknown(n)
                continue
            if status == "True":
                self.ready_since.setdefault(name, now)
            else:
                self.ready_since.pop(name, None)
            want_ns, want_ne = None, None
            if status == "False":
                want_ns = "node.kubernetes.io/not-ready"
            elif status == "Unknown":
                want_ns = "node.kubernetes.io/unreachable"
                if not (opts.full_disruption and all_not_ready):
                    want_ne = "node.kubernetes.io/unreachable"
            elif status == "True" and now - self.ready_since[name] < opts.taint_removal_delay:
                continue
            elif status is None:
                continue
            self.fix_taints(n, want_ns, want_ne)
        for name in list(self.obs):
            if name not in names:
                del self.obs[name]
                self.ready_since.pop(name, None)
        self.evictions(nodes)

    def fix_taints(self, n, want_ns, want_ne):
        managed = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
        taints = (n.get("spec") or {}).get("taints") or []

        def desired(ts_list):
            out = []
            for t in ts_list:
                if t.get("key") in managed and t.get("effect") == "NoSchedule" and t.get("key") != want_ns:
                    continue
                if t.get("key") in managed and t.get("effect") == "NoExecute" and t.get("key") != want_ne:
                    continue
                out.append(t)
            for key, eff in ((want_ns, "NoSchedule"), (want_ne, "NoExecute")):
                if key and not any(t.get("key") == key and t.get("effect") == eff for t in out):
                    out.append({"key": key, "effect": eff, "timeAdded": ts()})
            return out
        if desired(taints) == taints:
            return

        def fn(o):
            cur = (o.get("spec") or {}).get("taints") or []
            d = desired(cur)
            if d == cur:
                return False
            if d:
                o.setdefault("spec", {})["taints"] = d
            else:
                o.setdefault("spec", {}).pop("taints", None)
            return True
        self.api.mutate("nodes", ("", n["metadata"]["name"]), fn)

    def mark_unknown(self, n):
        name = n["metadata"]["name"]
        now = ts()

        def fn(o):
            st = o.setdefault("status", {})
            conds = st.setdefault("conditions", [])
            for t in ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready"):
                c = next((c for c in conds if c.get("type") == t), None)
                if c is None:
                    conds.append({"type": t, "status": "Unknown", "lastHeartbeatTime": o["metadata"]["creationTimestamp"],
                                  "lastTransitionTime": now, "reason": "NodeStatusNeverUpdated",
                                  "message": "Kubelet never posted node status."})
                elif c.get("status") != "Unknown":
                    c.update({"status": "Unknown", "lastTransitionTime": now, "reason": "NodeStatusUnknown",
                              "message": "Kubelet stopped posting node status."})
            return True
        if self.api.mutate("nodes", ("", name), fn) is None:
            return
        log("node-lifecycle: node %s -> Unknown (no lease renewal / status for %.1fs)" % (name, self.opts.lease_grace))
        self.api.record_event("default", {"kind": "Node", "name": name, "uid": n["metadata"]["uid"], "apiVersion": "v1"},
                              "Normal", "NodeNotReady", "Node %s status is now: NodeNotReady" % name, "node-controller")
        for (pns, pname), p in list(self.api.store.objs["pods"].items()):
            if (p.get("spec") or {}).get("nodeName") != name or pod_terminal(p):
                continue

            def pfn(o):
                c = cond(o, "Ready")
                if c is None or c.get("status") == "False":
                    return False
                c["status"] = "False"
                c["lastTransitionTime"] = ts()
                c.pop("reason", None)
                c.pop("message", None)
                return True
            if self.api.mutate("pods", (pns, pname), pfn) is not None:
                self.api.record_event(pns, {"kind": "Pod", "namespace": pns, "name": pname, "uid": p["metadata"]["uid"],
                                            "apiVersion": "v1"}, "Warning", "NodeNotReady", "Node is not ready", "node-controller")

    def evictions(self, nodes):
        noexec = {}
        for n in nodes:
            t = [t for t in (n.get("spec") or {}).get("taints") or [] if t.get("effect") == "NoExecute"]
            if t:
                noexec[n["metadata"]["name"]] = t
        if not noexec:
            return
        nowdt = now_utc()
        for (pns, pname), p in list(self.api.store.objs["pods"].items()):
            node = (p.get("spec") or {}).get("nodeName")
            if node not in noexec or p["metadata"].get("deletionTimestamp"):
                continue
            evict = False
            for t in noexec[node]:
                tol = tolerates((p.get("spec") or {}).get("tolerations"), t)
                if tol is None:
                    evict = True
                elif tol.get("tolerationSeconds") is not None:
                    added = parse_ts(t.get("timeAdded") or "") or nowdt
                    if (nowdt - added).total_seconds() >= max(0, int(tol["tolerationSeconds"])):
                        evict = True
            if not evict:
                continue

            def dfn(o):
                conds = o.setdefault("status", {}).setdefault("conditions", [])
                if any(c.get("type") == "DisruptionTarget" for c in conds):
                    return False
                conds.append({"type": "DisruptionTarget", "status": "True", "lastProbeTime": None,
                              "lastTransitionTime": ts(), "reason": "DeletionByTaintManager",
                              "message": "Taint manager: deleting due to NoExecute taint"})
                return True
            self.api.mutate("pods", (pns, pname), dfn)
            self.api.record_event(pns, {"kind": "Pod", "namespace": pns, "name": pname, "uid": p["metadata"]["uid"],
                                        "apiVersion": "v1"}, "Normal", "TaintManagerEviction",
                                  "Marking for deletion Pod %s/%s" % (pns, pname), "taint-controller")
            try:
                self.api.delete(RESOURCES[("", "pods")], pns, pname, {})
            except ApiError:
                pass
