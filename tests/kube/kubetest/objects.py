"""Helpers on API objects: uids and generated names, conditions, tolerations, pod resource
requests, and the events.k8s.io/v1 view of a core v1 Event."""

import collections
import random
import uuid
from fractions import Fraction

from .util import parse_q


def new_uid():
    return str(uuid.uuid4())


def rand_suffix(n=5):
    return "".join(random.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(n))


def strip_for_compare(o):
    md = dict(o.get("metadata", {}))
    md.pop("resourceVersion", None)
    md.pop("managedFields", None)
    r = dict(o)
    r["metadata"] = md
    return r


def cond(obj, ctype):
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype:
            return c
    return None


def pod_terminal(p):
    return (p.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def tolerates(tols, taint):
    for t in tols or []:
        if t.get("effect") and t.get("effect") != taint.get("effect"):
            continue
        op = t.get("operator") or "Equal"
        if not t.get("key"):
            if op == "Exists":
                return t
            continue
        if t.get("key") != taint.get("key"):
            continue
        if op == "Exists" or (t.get("value") or "") == (taint.get("value") or ""):
            return t
    return None


def pod_requests(pod):
    spec = pod.get("spec") or {}

    def sum_c(cs):
        tot = collections.defaultdict(Fraction)
        for c in cs or []:
            req = ((c.get("resources") or {}).get("requests")) or {}
            for k, v in req.items():
                try:
                    tot[k] += parse_q(v)
                except ValueError:
                    pass
        return tot
    total = sum_c(spec.get("containers"))
    for ic in spec.get("initContainers") or []:
        for k, v in sum_c([ic]).items():
            if v > total[k]:
                total[k] = v
    for k, v in ((spec.get("overhead") or {}).items()):
        try:
            total[k] += parse_q(v)
        except ValueError:
            pass
    return total


def to_events_v1(ev):
    if ev is None:
        return None
    md = dict(ev.get("metadata", {}))
    out = {"kind": "Event", "apiVersion": "events.k8s.io/v1", "metadata": md,
           "eventTime": ev.get("eventTime"), "reportingController": ev.get("reportingComponent", ""),
           "reportingInstance": ev.get("reportingInstance", ""), "action": ev.get("action", ""),
           "reason": ev.get("reason", ""), "regarding": ev.get("involvedObject", {}),
           "note": ev.get("message", ""), "type": ev.get("type", "")}
    if ev.get("related"):
        out["related"] = ev["related"]
    if ev.get("series"):
        out["series"] = ev["series"]
    if ev.get("count") is not None:
        out["deprecatedCount"] = ev["count"]
    if ev.get("source"):
        out["deprecatedSource"] = ev["source"]
    for a, b in (("firstTimestamp", "deprecatedFirstTimestamp"), ("lastTimestamp", "deprecatedLastTimestamp")):
        if ev.get(a):
            out[b] = ev[a]
    return out


def set_condition(o, c):
    conds = o.setdefault("status", {}).setdefault("conditions", [])
    for i, x in enumerate(conds):
        if x.get("type") == c["type"]:
            if x.get("status") == c["status"]:
                c["lastTransitionTime"] = x.get("lastTransitionTime", c["lastTransitionTime"])
            conds[i] = c
            return
    conds.append(c)
