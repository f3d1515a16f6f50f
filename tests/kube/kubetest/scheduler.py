"""A small scheduler: binds pending pods with the default scheduler name to a Node that
fits (node selector and affinity, taints and tolerations, host ports, resource requests), or
marks them unschedulable with kube-scheduler's message."""

import collections
import threading
import time
from fractions import Fraction

from .errors import ApiError
from .objects import cond, pod_requests, pod_terminal, set_condition, tolerates
from .resources import RESOURCES
from .util import Backoff, log, parse_q, ts

ANY_IP = "0.0.0.0"


def host_ports(p):
    """The (hostIP, protocol, hostPort) a pod holds on its node, as kube-scheduler 1.28's
    NodePorts plugin and NodeInfo.UsedPorts take them: the regular containers' ports with a
    hostPort > 0, hostIP "" as 0.0.0.0, protocol "" as TCP."""
    out = []
    for c in (p.get("spec") or {}).get("containers") or []:
        for port in c.get("ports") or []:
            hp = port.get("hostPort") or 0
            if isinstance(hp, int) and hp > 0:
                out.append((port.get("hostIP") or ANY_IP, port.get("protocol") or "TCP", hp))
    return out


def port_conflict(want, used):
    """HostPortInfo.CheckConflict: 0.0.0.0 conflicts with the same (protocol, port) on any
    hostIP; another hostIP with the same one on that hostIP or on 0.0.0.0."""
    for ip, proto, port in want:
        if ip == ANY_IP:
            if any(u[1:] == (proto, port) for u in used):
                return True
        elif (ip, proto, port) in used or (ANY_IP, proto, port) in used:
            return True
    return False


class Scheduler(threading.Thread):
    def __init__(self, api, opts):
        threading.Thread.__init__(self, daemon=True, name="scheduler")
        self.api, self.opts = api, opts
        self.enabled = not opts.no_scheduler
        self.tried = {}     # pod uid -> (pod rv, cluster_gen, message)
        # pod uid -> its next try after a refused binding: kube-scheduler's
        # podInitialBackoffSeconds 1 doubling to podMaxBackoffSeconds 10.
        self.backoff = Backoff(1.0, 10.0)

    def run(self):
        while True:
            self.api.wake_sched.wait(timeout=1.0)
            self.api.wake_sched.clear()
            if not self.enabled:
                continue
            time.sleep(0.002)
            try:
                self.pass_once()
            except Exception as e:
                import traceback
                traceback.print_exc()
                log("scheduler: %r" % e)

    def pass_once(self):
        store = self.api.store
        # Read before the snapshots: a node or pod change after this point bumps cluster_gen
        # past it, so a pod found unschedulable on the older snapshot is tried again at the
        # next pass (read after them, a taint lifted in between left the pod pending for good).
        gen = self.api.cluster_gen
        pods = list(store.objs["pods"].items())
        pending = []
        used = collections.defaultdict(lambda: collections.defaultdict(Fraction))
        count = collections.Counter()
        ports = collections.defaultdict(set)    # node -> {(hostIP, protocol, hostPort)}
        for k, p in pods:
            sp = p.get("spec") or {}
            if sp.get("nodeName"):
                if not pod_terminal(p):
                    count[sp["nodeName"]] += 1
                    for r, v in pod_requests(p).items():
                        used[sp["nodeName"]][r] += v
                    ports[sp["nodeName"]].update(host_ports(p))
            elif sp.get("schedulerName", "default-scheduler") == "default-scheduler" and \
                    not p["metadata"].get("deletionTimestamp") and not pod_terminal(p):
                pending.append((k, p))
        live = set(p["metadata"]["uid"] for k, p in pods)
        for uid in list(self.tried):
            if uid not in live:
                del self.tried[uid]
        self.backoff.keep_only(live)
        if not pending:
            return
        pending.sort(key=lambda kp: (-int((kp[1].get("spec") or {}).get("priority") or 0),
                                     kp[1]["metadata"].get("creationTimestamp", ""), kp[0]))
        nodes = sorted(store.items("nodes"), key=lambda n: n["metadata"]["name"])
        for k, p in pending:
            uid = p["metadata"]["uid"]
            t = self.tried.get(uid)
            if t and t[0] == p["metadata"]["resourceVersion"] and t[1] == gen:
                continue
            if not self.backoff.due(uid):
                continue
            best, reasons = self.pick(p, nodes, used, count, ports)
            if best is not None:
                if self.bind(k, p, best):
                    count[best] += 1
                    for r, v in pod_requests(p).items():
                        used[best][r] += v
                    ports[best].update(host_ports(p))
                    self.tried.pop(uid, None)
                continue
            msg = self.message(len(nodes), reasons)
            prev = self.tried.get(uid)
            self.mark_unschedulable(k, p, msg, prev is None or prev[2] != msg)
            cur = store.get("pods", k)
            self.tried[uid] = ((cur or p)["metadata"]["resourceVersion"], gen, msg)

    def pick(self, p, nodes, used, count, ports):
        sp = p.get("spec") or {}
        req = pod_requests(p)
        want = host_ports(p)
        reasons = []        # per failing node: list of (reason, resolvable)
        feasible = []
        for n in nodes:
            name = n["metadata"]["name"]
            r = self.fit(p, sp, req, n, used[name], count[name], want, ports[name])
            if r:
                reasons.append(r)
            else:
                feasible.append(n)
        if not feasible:
            return None, reasons

        def score(n):
            alloc = (n.get("status") or {}).get("allocatable") or {}
            u = used[n["metadata"]["name"]]
            fr = []
            for res in ("cpu", "memory"):
                try:
                    a = parse_q(alloc.get(res, "0"))
                except ValueError:
                    a = 0
                if a > 0:
                    fr.append(float((u[res] + req.get(res, 0)) / a))
            return (sum(fr) / len(fr) if fr else 0.0, count[n["metadata"]["name"]], n["metadata"]["name"])
        return min(feasible, key=score)["metadata"]["name"], reasons

    def fit(self, p, sp, req, n, used, npods, want, ports):
        """The filter plugins in kube-scheduler's order; the first that fails decides (NodeUnschedulable,
        TaintToleration, NodeAffinity, NodePorts, then NodeResourcesFit with all its reasons)."""
        nsp = n.get("spec") or {}
        labels = n["metadata"].get("labels") or {}
        tols = sp.get("tolerations")
        if nsp.get("unschedulable") and not tolerates(tols, {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}):
            return [("node(s) were unschedulable", False)]
        for t in nsp.get("taints") or []:
            if t.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(tols, t):
                return [("node(s) had untolerated taint {%s: %s}" % (t.get("key"), t.get("value", "")), False)]
        for k, v in (sp.get("nodeSelector") or {}).items():
            if labels.get(k) != v:
                return [("node(s) didn't match Pod's node affinity/selector", False)]
        na = (((sp.get("affinity") or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or {})
        terms = na.get("nodeSelectorTerms")
        if terms and not any(self.term_ok(t, n, labels) for t in terms):
            return [("node(s) didn't match Pod's node affinity/selector", False)]
        if want and port_conflict(want, ports):
            return [("node(s) didn't have free ports for the requested pod ports", True)]
        alloc = (n.get("status") or {}).get("allocatable") or {}
        out = []
        try:
            maxpods = parse_q(alloc.get("pods", "110"))
        except ValueError:
            maxpods = 110
        if npods + 1 > maxpods:
            out.append(("Too many pods", True))
        for r, v in sorted(req.items()):
            if v <= 0 or r == "pods":
                continue
            try:
                a = parse_q(alloc.get(r, "0"))
            except ValueError:
                a = 0
            if used[r] + v > a:
                out.append(("Insufficient %s" % r, True))
        return out

    def term_ok(self, term, n, labels):
        for e in term.get("matchExpressions") or []:
            k, op, vals = e.get("key"), e.get("operator"), e.get("values") or []
            has = k in labels
            v = labels.get(k)
            if op == "In" and not (has and v in vals):
                return False
            if op == "NotIn" and has and v in vals:
                return False
            if op == "Exists" and not has:
                return False
            if op == "DoesNotExist" and has:
                return False
            if op in ("Gt", "Lt"):
                try:
                    a, b = int(v), int(vals[0])
                except (TypeError, ValueError, IndexError):
                    return False
                if (op == "Gt" and not a > b) or (op == "Lt" and not a < b):
                    return False
        for e in term.get("matchFields") or []:
            if e.get("key") == "metadata.name":
                inn = n["metadata"]["name"] in (e.get("values") or [])
                if (e.get("operator") == "In") != inn:
                    return False
        return bool(term.get("matchExpressions") or term.get("matchFields"))

    def message(self, total, reasons):
        if total == 0:
            return "no nodes available to schedule pods"
        c = collections.Counter()
        pre = collections.Counter()
        for rs in reasons:
            for r, resolvable in rs:
                c[r] += 1
            pre["No preemption victims found for incoming pod" if all(x[1] for x in rs)
                else "Preemption is not helpful for scheduling"] += 1
        a = ", ".join("%d %s" % (n, r) for r, n in sorted(c.items()))
        b = ", ".join("%d %s" % (n, r) for r, n in sorted(pre.items()))
        return "0/%d nodes are available: %s. preemption: 0/%d nodes are available: %s.." % (total, a, total, b)

    def bind(self, k, p, node):
        # The Binding goes through admission as kube-scheduler's own request does (a
        # ValidatingAdmissionPolicy on pods/binding may refuse it): refused, the pod stays
        # Pending, PodScheduled False SchedulerError, a FailedScheduling Event "binding
        # rejected: running Bind plugin "DefaultBinder": ..." (kube-scheduler's words), and it
        # is tried again after its back-off.
        binding = {"apiVersion": "v1", "kind": "Binding",
                   "metadata": {"name": k[1], "namespace": k[0], "uid": p["metadata"]["uid"]},
                   "target": {"kind": "Node", "name": node}}
        try:
            self.api.admit(("system:kube-scheduler", "", ["system:authenticated"], {}), "CREATE",
                           RESOURCES[("", "pods")], "binding", k[0], k[1], binding, None)
        except ApiError as e:
            uid = p["metadata"]["uid"]
            self.backoff.failed(uid)
            msg = 'binding rejected: running Bind plugin "DefaultBinder": %s' % e.message

            def refused(o):
                if (o.get("spec") or {}).get("nodeName"):
                    return False
                set_condition(o, {"type": "PodScheduled", "status": "False", "lastProbeTime": None,
                                  "lastTransitionTime": ts(), "reason": "SchedulerError", "message": msg})
                return True
            self.api.mutate("pods", k, refused)
            self.api.record_event(k[0], {"kind": "Pod", "namespace": k[0], "name": k[1], "uid": uid,
                                         "apiVersion": "v1", "resourceVersion": p["metadata"]["resourceVersion"]},
                                  "Warning", "FailedScheduling", msg, "default-scheduler", host="default-scheduler",
                                  action="Scheduling", series_style=True)
            return False
        self.backoff.clear(p["metadata"]["uid"])

        def fn(o):
            if (o.get("spec") or {}).get("nodeName") or o["metadata"].get("deletionTimestamp"):
                return False
            o["spec"]["nodeName"] = node
            set_condition(o, {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": ts()})
            return True
        res = self.api.mutate("pods", k, fn)
        if res is None or (res.get("spec") or {}).get("nodeName") != node:
            return False
        self.api.record_event(k[0], {"kind": "Pod", "namespace": k[0], "name": k[1], "uid": p["metadata"]["uid"],
                                     "apiVersion": "v1", "resourceVersion": res["metadata"]["resourceVersion"]},
                              "Normal", "Scheduled", "Successfully assigned %s/%s to %s" % (k[0], k[1], node),
                              "default-scheduler", host="default-scheduler", action="Binding", series_style=True)
        return True

    def mark_unschedulable(self, k, p, msg, new_msg):
        def fn(o):
            if (o.get("spec") or {}).get("nodeName"):
                return False
            c = cond(o, "PodScheduled")
            if c and c.get("status") == "False" and c.get("reason") == "Unschedulable" and c.get("message") == msg:
                return False
            set_condition(o, {"type": "PodScheduled", "status": "False", "lastProbeTime": None, "lastTransitionTime": ts(),
                              "reason": "Unschedulable", "message": msg})
            return True
        self.api.mutate("pods", k, fn)
        if new_msg:
            self.api.record_event(k[0], {"kind": "Pod", "namespace": k[0], "name": k[1], "uid": p["metadata"]["uid"],
                                         "apiVersion": "v1", "resourceVersion": p["metadata"]["resourceVersion"]},
                                  "Warning", "FailedScheduling", msg, "default-scheduler", host="default-scheduler",
                                  action="Scheduling", series_style=True)
