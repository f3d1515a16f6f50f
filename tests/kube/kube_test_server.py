#!/usr/bin/python3
"""kube_test_server.py - a Kubernetes API *test double* (NOT a Kubernetes API server).

Python 3 standard library only.  It imitates the parts of a kube-apiserver v1.28
(plus the node-lifecycle controller, the pod garbage collector for Leases and a
tiny scheduler) that slurm-k8s' node agent and SPANK plugin talk to.  Behaviours
follow facts read off a real kube-apiserver 1.28 cluster; see tests/kube/README.md for usage and known differences.

Usage:
  kube_test_server.py --listen 127.0.0.1:0 --state-dir DIR [options]
  (writes DIR/ready containing the URL once it listens; SIGTERM stops it)

Test controls (NOT part of the Kubernetes API; admin identity required):
  GET  /_test/info                      {"double":true, options...}; tests detect the double with it
  GET  /_test/requests[?since=SEQ]      request log: seq, time, method, path, query, status, user,
                                        contentType, accept, client, template
  GET  /_test/counters                  {"byUser":{user:{"METHOD template STATUS":n}},
                                         "byClient":{ip:{...}}, "total":n}
  POST /_test/reset                     clear request log and counters
  POST /_test/fault  {"mode":"refuse","seconds":S}   close the listening socket (connections are
                                        refused) and drop every open connection, for S seconds
                                        (default 5; SIGUSR1 or the timer clears it)
                     {"mode":"status","code":503}   every API request (not /_test) answers CODE
                     {"mode":"delay","ms":500}       every API request is delayed
                     {"mode":"none"}                 clear (also DELETE /_test/fault)
  GET  /_test/fault                     current fault
  POST /_test/history {"size":N}        watch history size per resource type (trims now)
  POST /_test/watches/close [{"abrupt":true}]  end every open watch (abrupt: drop the TCP connection)
  GET/POST /_test/controllers {"scheduler":bool,"nodeLifecycle":bool,"leaseGrace":s,
                                "monitorPeriod":s,"taintRemovalDelay":s,"fullDisruption":bool,
                                "bookmarkInterval":s}
  POST /_test/rbac {"subject":"user:NAME"|"group:NAME","role":"admin"|"agent"|"none"|[rules]}
"""

import argparse
import base64
import collections
import copy
import datetime
import http.client
import http.server
import json
import os
import queue
import random
import re
import select
import signal
import socket
import ssl
import string
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid
from fractions import Fraction

K8S_VERSION = {
    "major": "1", "minor": "28", "gitVersion": "v1.28.15",
    "gitCommit": "841856557ef0f6a399096c42635d114d6f2cf7f4", "gitTreeState": "clean",
    "buildDate": "2024-10-22T20:26:27Z", "goVersion": "go1.22.8", "compiler": "gc",
    "platform": "linux/amd64",
}

LOG = None


def log(msg):
    sys.stderr.write("%s kube-test-server: %s\n" % (time.strftime("%H:%M:%S"), msg))
    sys.stderr.flush()


# ---------------------------------------------------------------------------------------------
# time helpers
def now_utc():
    return datetime.datetime.now(datetime.timezone.utc)


def ts(dt=None):
    return (dt or now_utc()).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_ts(dt=None):
    return (dt or now_utc()).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_ts(s):
    try:
        s = s.replace("Z", "+00:00")
        return datetime.datetime.fromisoformat(s)
    except Exception:
        return None


MICRO_RE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d{6})(Z|[+-]\d\d:\d\d)$")
MICRO_LAYOUT = "2006-01-02T15:04:05.000000Z07:00"


def check_microtime(v):
    """Returns (normalized, None) or (None, error message) like Go's time.Parse."""
    if not isinstance(v, str):
        return None, "parsing time %s as \"%s\": cannot parse %s as \"2006\"" % (json.dumps(v), MICRO_LAYOUT, json.dumps(v))
    m = MICRO_RE.match(v)
    if not m:
        m2 = re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", v)
        if not m2:
            return None, 'parsing time "%s" as "%s": cannot parse "%s" as "2006"' % (v, MICRO_LAYOUT, v)
        rest = v[m2.end():]
        m3 = re.match(r"^\.\d{6}", rest)
        if not m3:
            return None, 'parsing time "%s" as "%s": cannot parse "%s" as ".000000"' % (v, MICRO_LAYOUT, rest)
        return None, 'parsing time "%s" as "%s": cannot parse "%s" as "Z07:00"' % (v, MICRO_LAYOUT, rest[7:])
    if m.group(3) == "Z":
        return v, None
    dt = datetime.datetime.fromisoformat(v)
    return micro_ts(dt.astimezone(datetime.timezone.utc)), None


def human_duration(secs):
    if secs < -1:
        return "<invalid>"
    if secs < 0:
        return "0s"
    s = int(secs)
    if s < 120:
        return "%ds" % s
    m = s // 60
    if m < 10:
        return "%dm%ds" % (m, s % 60) if s % 60 else "%dm" % m
    if m < 180:
        return "%dm" % m
    h = s // 3600
    if h < 8:
        return "%dh%dm" % (h, m % 60) if m % 60 else "%dh" % h
    if h < 48:
        return "%dh" % h
    if h < 24 * 8:
        return "%dd%dh" % (h // 24, h % 24) if h % 24 else "%dd" % (h // 24)
    if h < 24 * 365 * 2:
        return "%dd" % (h // 24)
    y = h // (24 * 365)
    if y < 8:
        return "%dy%dd" % (y, (h // 24) % 365)
    return "%dy" % y


def age_of(t):
    d = parse_ts(t) if t else None
    if not d:
        return "<unknown>"
    return human_duration((now_utc() - d).total_seconds())


# ---------------------------------------------------------------------------------------------
# quantities
_SUFFIX = {"": Fraction(1), "n": Fraction(1, 10 ** 9), "u": Fraction(1, 10 ** 6), "m": Fraction(1, 1000),
           "k": Fraction(10 ** 3), "M": Fraction(10 ** 6), "G": Fraction(10 ** 9), "T": Fraction(10 ** 12),
           "P": Fraction(10 ** 15), "E": Fraction(10 ** 18), "Ki": Fraction(2 ** 10), "Mi": Fraction(2 ** 20),
           "Gi": Fraction(2 ** 30), "Ti": Fraction(2 ** 40), "Pi": Fraction(2 ** 50), "Ei": Fraction(2 ** 60)}
_QRE = re.compile(r"^([+-]?(?:\d+(?:\.\d*)?|\.\d+))(?:(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])|[eE]([+-]?\d+))?$")
QUANTITY_ERR = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"


def parse_q(v):
    if isinstance(v, bool):
        raise ValueError(QUANTITY_ERR)
    if isinstance(v, (int, float)):
        return Fraction(v)
    if not isinstance(v, str):
        raise ValueError(QUANTITY_ERR)
    m = _QRE.match(v.strip())
    if not m:
        raise ValueError(QUANTITY_ERR)
    n = Fraction(m.group(1))
    if m.group(3):
        n *= Fraction(10) ** int(m.group(3))
    else:
        n *= _SUFFIX[m.group(2) or ""]
    return n


def is_extended(name):
    return "/" in name and not name.startswith("kubernetes.io/") and not name.startswith("requests.")


def q_str(v):
    return v if isinstance(v, str) else json.dumps(v)


# ---------------------------------------------------------------------------------------------
# errors
class ApiError(Exception):
    def __init__(self, code, reason, message, details=None):
        Exception.__init__(self, message)
        self.code, self.reason, self.message, self.details = code, reason, message, details

    def status(self):
        st = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
              "message": self.message, "reason": self.reason, "code": self.code}
        if self.details is not None:
            st["details"] = self.details
        return st


class Retry(Exception):
    pass


def not_found(res, name):
    d = {"name": name, "kind": res.plural}
    if res.group:
        d["group"] = res.group
    return ApiError(404, "NotFound", '%s "%s" not found' % (res.qual, name), d)


def conflict(res, name, msg="the object has been modified; please apply your changes to the latest version and try again"):
    d = {"name": name, "kind": res.plural}
    if res.group:
        d["group"] = res.group
    return ApiError(409, "Conflict", 'Operation cannot be fulfilled on %s "%s": %s' % (res.qual, name, msg), d)


def invalid(res, name, errs):
    """errs: list of (field, value, detail) or (field, None, 'Required value')"""
    causes, msgs = [], []
    for field, value, detail in errs:
        if value is None and detail.startswith("Required value"):
            m = detail
            causes.append({"reason": "FieldValueRequired", "message": m, "field": field})
        else:
            m = "Invalid value: %s: %s" % (json.dumps(value), detail)
            causes.append({"reason": "FieldValueInvalid", "message": m, "field": field})
        msgs.append("%s: %s" % (field, m))
    body = msgs[0] if len(msgs) == 1 else "[" + ", ".join(msgs) + "]"
    gk = res.kind + ("." + res.group if res.group else "")
    d = {"name": name, "kind": res.kind, "causes": causes}
    if res.group:
        d["group"] = res.group
    return ApiError(422, "Invalid", '%s "%s" is invalid: %s' % (gk, name, body), d)


def bad_request(msg):
    return ApiError(400, "BadRequest", msg)


# ---------------------------------------------------------------------------------------------
# resources
class Res(object):
    def __init__(self, plural, kind, group="", version="v1", namespaced=True, short=(), subs=(),
                 verbs=("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"),
                 fields=(), has_status=False, singular=None, view_of=None):
        self.plural, self.kind, self.group, self.version = plural, kind, group, version
        self.namespaced, self.short, self.subs, self.verbs = namespaced, list(short), list(subs), list(verbs)
        self.fields = set(["metadata.name", "metadata.namespace"]) | set(fields)
        self.has_status = has_status
        self.singular = singular or kind.lower()
        self.view_of = view_of              # events.k8s.io view: store key of the backing resource
        self.key = view_of or plural        # store key
        self.api_version = (group + "/" + version) if group else version
        self.qual = plural + ("." + group if group else "")


POD_FIELDS = ["spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
              "spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName"]
EVENT_FIELDS = ["involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
                "involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath",
                "reason", "reportingComponent", "source", "type"]
RESOURCES = {}
for _r in [
    Res("nodes", "Node", namespaced=False, short=["no"], subs=["status", "proxy"], fields=["spec.unschedulable"],
        has_status=True),
    Res("pods", "Pod", short=["po"], subs=["status", "log", "binding", "eviction"], fields=POD_FIELDS,
        has_status=True),
    Res("namespaces", "Namespace", namespaced=False, short=["ns"], subs=["status", "finalize"],
        fields=["status.phase"], has_status=True),
    Res("events", "Event", short=["ev"], fields=EVENT_FIELDS),
    Res("configmaps", "ConfigMap", short=["cm"]),
    Res("secrets", "Secret", fields=["type"]),
    Res("leases", "Lease", group="coordination.k8s.io"),
    Res("events", "Event", group="events.k8s.io", short=["ev"], verbs=("get", "list", "watch"),
        view_of="events", fields=["regarding.kind", "regarding.namespace", "regarding.name", "regarding.uid",
                                  "reason", "type", "reportingController"]),
]:
    RESOURCES[(_r.group, _r.plural)] = _r
STORE_RES = {r.key: r for r in RESOURCES.values() if not r.view_of}
GROUPS = collections.OrderedDict([("", ["v1"]), ("coordination.k8s.io", ["v1"]), ("events.k8s.io", ["v1"])])

SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                 "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
                 "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
             "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
             "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")


# ---------------------------------------------------------------------------------------------
# selectors
def get_path(obj, path):
    cur = obj
    for p in path.split("."):
        if not isinstance(cur, dict):
            return None
        cur = cur.get(p)
    return cur


def field_value(obj, field):
    v = get_path(obj, field)
    if v is None:
        if field == "spec.unschedulable" or field == "spec.hostNetwork":
            return "false"
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if field == "source" and isinstance(v, dict):
        return v.get("component", "")
    return str(v)


def parse_field_selector(s, res):
    out = []
    if not s:
        return out
    for part in s.split(","):
        part = part.strip()
        if not part:
            continue
        m = re.match(r"^([^!=]+)(!=|==|=)(.*)$", part)
        if not m:
            raise bad_request('invalid selector: \'%s\'; can\'t understand \'%s\'' % (s, part))
        k, op, v = m.group(1).strip(), m.group(2), m.group(3).strip()
        if k not in res.fields:
            raise bad_request('field label not supported: %s' % k)
        out.append((k, op != "!=", v))
    return out


def match_fields(obj, sel):
    for k, eq, v in sel:
        if (field_value(obj, k) == v) != eq:
            return False
    return True


def parse_label_selector(s):
    reqs = []
    if not s:
        return reqs
    i, n = 0, len(s)
    toks = []
    buf = ""
    depth = 0
    for ch in s:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            toks.append(buf)
            buf = ""
        else:
            buf += ch
    toks.append(buf)
    for t in toks:
        t = t.strip()
        if not t:
            raise bad_request("unable to parse requirement: found '', expected: identifier")
        m = re.match(r"^([A-Za-z0-9_./-]+)\s+(in|notin)\s*\((.*)\)$", t)
        if m:
            vals = set(x.strip() for x in m.group(3).split(",") if x.strip() != "")
            reqs.append((m.group(1), m.group(2), vals))
            continue
        m = re.match(r"^!\s*([A-Za-z0-9_./-]+)$", t)
        if m:
            reqs.append((m.group(1), "!", None))
            continue
        m = re.match(r"^([A-Za-z0-9_./-]+)\s*(==|!=|=)\s*([A-Za-z0-9_.-]*)$", t)
        if m:
            reqs.append((m.group(1), "!=" if m.group(2) == "!=" else "=", m.group(3)))
            continue
        m = re.match(r"^([A-Za-z0-9_./-]+)$", t)
        if m:
            reqs.append((m.group(1), "exists", None))
            continue
        raise bad_request("unable to parse requirement: <nil>: Invalid value: \"%s\"" % t)
    return reqs


def match_labels(labels, reqs):
    labels = labels or {}
    for k, op, v in reqs:
        has = k in labels
        if op == "=" and labels.get(k) != v:
            return False
        if op == "!=" and has and labels[k] == v:
            return False
        if op == "in" and (not has or labels[k] not in v):
            return False
        if op == "notin" and has and labels[k] in v:
            return False
        if op == "exists" and not has:
            return False
        if op == "!" and has:
            return False
    return True


class Filter(object):
    def __init__(self, res, ns, lsel, fsel):
        self.res, self.ns, self.lsel, self.fsel = res, ns, lsel, fsel

    def __call__(self, obj):
        if obj is None:
            return False
        md = obj.get("metadata", {})
        if self.ns is not None and md.get("namespace") != self.ns:
            return False
        if self.lsel and not match_labels(md.get("labels"), self.lsel):
            return False
        if self.fsel:
            o = to_events_v1(obj) if self.res.view_of else obj
            if not match_fields(o, self.fsel):
                return False
        return True


# ---------------------------------------------------------------------------------------------
# patches
MERGE_KEYS = {"conditions": "type", "containerStatuses": "name", "initContainerStatuses": "name",
              "ephemeralContainerStatuses": "name", "containers": "name", "initContainers": "name",
              "ephemeralContainers": "name", "addresses": "type", "volumes": "name", "env": "name",
              "ports": "containerPort", "volumeMounts": "mountPath", "volumeDevices": "devicePath",
              "ownerReferences": "uid", "imagePullSecrets": "name", "podIPs": "ip", "hostIPs": "ip",
              "hostAliases": "ip", "resourceClaims": "name", "topologySpreadConstraints": "topologyKey"}
PRIMITIVE_MERGE = {"finalizers"}


def strip_directives(v):
    if isinstance(v, dict):
        return {k: strip_directives(x) for k, x in v.items() if not k.startswith("$")}
    if isinstance(v, list):
        return [strip_directives(x) for x in v if not (isinstance(x, dict) and x.get("$patch") == "delete")]
    return v


def merge_patch(target, patch):
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            result.pop(k, None)
        else:
            result[k] = merge_patch(result.get(k), v)
    return result


def smp(orig, patch):
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return strip_directives(patch)
    if patch.get("$patch") == "delete":
        return None
    result = dict(orig) if isinstance(orig, dict) else {}
    orders = {}
    for k, v in patch.items():
        if k.startswith("$setElementOrder/"):
            orders[k.split("/", 1)[1]] = v
            continue
        if k.startswith("$deleteFromPrimitiveList/"):
            f = k.split("/", 1)[1]
            if isinstance(result.get(f), list):
                result[f] = [x for x in result[f] if x not in (v or [])]
            continue
        if k.startswith("$"):
            continue
        if v is None:
            result.pop(k, None)
        elif isinstance(v, dict):
            r = smp(result.get(k), v)
            if r is None:
                result.pop(k, None)
            else:
                result[k] = r
        elif isinstance(v, list) and k in MERGE_KEYS and all(isinstance(x, dict) for x in v):
            result[k] = merge_list(result.get(k) or [], v, MERGE_KEYS[k])
        elif isinstance(v, list) and k in PRIMITIVE_MERGE:
            cur = list(result.get(k) or [])
            for x in v:
                if x not in cur:
                    cur.append(x)
            result[k] = cur
        else:
            result[k] = strip_directives(v)
    for k, order in orders.items():
        mk = MERGE_KEYS.get(k)
        lst = result.get(k)
        if not isinstance(lst, list) or not isinstance(order, list):
            continue
        if mk:
            keys = [o.get(mk) for o in order if isinstance(o, dict)]
            pos = {key: i for i, key in enumerate(keys)}
            inorder = sorted([x for x in lst if isinstance(x, dict) and x.get(mk) in pos], key=lambda x: pos[x.get(mk)])
            rest = [x for x in lst if not (isinstance(x, dict) and x.get(mk) in pos)]
            result[k] = inorder + rest
        else:
            pos = {json.dumps(x): i for i, x in enumerate(order)}
            result[k] = sorted([x for x in lst if json.dumps(x) in pos], key=lambda x: pos[json.dumps(x)]) + \
                [x for x in lst if json.dumps(x) not in pos]
    return result


def merge_list(orig, patch, mk):
    if any(x.get("$patch") == "replace" for x in patch):
        return [strip_directives(x) for x in patch if x.get("$patch") != "replace"]
    result = list(orig)
    for item in patch:
        key = item.get(mk)
        idx = next((i for i, x in enumerate(result) if isinstance(x, dict) and x.get(mk) == key), None)
        if item.get("$patch") == "delete":
            if idx is not None:
                del result[idx]
            continue
        if idx is None:
            result.append(strip_directives(item))
        else:
            result[idx] = smp(result[idx], item)
    return result


def _ptr(path):
    if path == "":
        return []
    if not path.startswith("/"):
        raise ValueError("invalid JSON pointer %r" % path)
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _walk(doc, parts):
    cur = doc
    for p in parts:
        if isinstance(cur, list):
            cur = cur[int(p)]
        elif isinstance(cur, dict):
            cur = cur[p]
        else:
            raise KeyError(p)
    return cur


def json_patch(doc, ops):
    doc = copy.deepcopy(doc)
    if not isinstance(ops, list):
        raise ValueError("json patch must be a list")
    for op in ops:
        o, path = op.get("op"), op.get("path")
        parts = _ptr(path)
        if o == "test":
            if _walk(doc, parts) != op.get("value"):
                raise ValueError("testing value %s failed" % path)
            continue
        if o in ("move", "copy"):
            src = _ptr(op.get("from"))
            val = copy.deepcopy(_walk(doc, src))
            if o == "move":
                par = _walk(doc, src[:-1])
                if isinstance(par, list):
                    del par[int(src[-1])]
                else:
                    del par[src[-1]]
            o, value = "add", val
        else:
            value = copy.deepcopy(op.get("value"))
        if not parts:
            if o in ("add", "replace"):
                doc = value
                continue
            raise ValueError("cannot remove root")
        par = _walk(doc, parts[:-1])
        last = parts[-1]
        if isinstance(par, list):
            if o == "add":
                if last == "-":
                    par.append(value)
                else:
                    par.insert(int(last), value)
            elif o == "remove":
                del par[int(last)]
            elif o == "replace":
                par[int(last)] = value
            else:
                raise ValueError("unknown op %r" % o)
        elif isinstance(par, dict):
            if o == "add":
                par[last] = value
            elif o == "remove":
                if last not in par:
                    raise ValueError("remove: missing key %s" % path)
                del par[last]
            elif o == "replace":
                if last not in par:
                    raise ValueError("replace operation does not apply: doc is missing key: %s" % path)
                par[last] = value
            else:
                raise ValueError("unknown op %r" % o)
        else:
            raise ValueError("path %s not found" % path)
    return doc


PATCH_TYPES = ["application/json-patch+json", "application/merge-patch+json",
               "application/strategic-merge-patch+json", "application/apply-patch+yaml"]


# ---------------------------------------------------------------------------------------------
# the store
class Event(object):
    __slots__ = ("type", "rv", "obj", "prev", "res", "cache")

    def __init__(self, etype, rv, obj, prev, res):
        self.type, self.rv, self.obj, self.prev, self.res, self.cache = etype, rv, obj, prev, res, {}


class Watcher(object):
    def __init__(self, res_key):
        self.res_key = res_key
        self.q = queue.SimpleQueue()


CLOSE = object()
ABORT = object()


class Store(object):
    def __init__(self, history):
        self.lock = threading.RLock()
        self.rv = 1
        self.history_size = history
        self.objs = {k: {} for k in STORE_RES}
        self.hist = {k: collections.deque() for k in STORE_RES}
        self.evicted = {k: 0 for k in STORE_RES}
        self.latest = {k: 0 for k in STORE_RES}
        self.watchers = {k: set() for k in STORE_RES}
        self.listeners = []       # callables(res_key, event) run under the lock (must be cheap)

    def get(self, key, k):
        return self.objs[key].get(k)

    def write(self, key, k, old, new, etype=None):
        """Commit new (None = delete) if the stored object is still `old` (identity)."""
        with self.lock:
            cur = self.objs[key].get(k)
            if cur is not old:
                raise Retry()
            self.rv += 1
            rv = self.rv
            if new is None:
                del self.objs[key][k]
                new_obj = copy.copy(old)
                new_obj["metadata"] = dict(old["metadata"], resourceVersion=str(rv))
                ev = Event("DELETED", rv, new_obj, old, key)
                stored = new_obj
            else:
                new["metadata"]["resourceVersion"] = str(rv)
                self.objs[key][k] = new
                ev = Event(etype or ("ADDED" if old is None else "MODIFIED"), rv, new, old, key)
                stored = new
            self._emit(key, ev)
            return stored

    def _emit(self, key, ev):
        self.latest[key] = ev.rv
        h = self.hist[key]
        h.append(ev)
        while len(h) > self.history_size:
            self.evicted[key] = h.popleft().rv
        for w in self.watchers[key]:
            w.q.put(ev)
        for l in self.listeners:
            l(key, ev)

    def set_history(self, n):
        with self.lock:
            self.history_size = max(0, n)
            for key, h in self.hist.items():
                while len(h) > self.history_size:
                    self.evicted[key] = h.popleft().rv

    def items(self, key):
        return list(self.objs[key].values())


# ---------------------------------------------------------------------------------------------
# object helpers
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


# ---------------------------------------------------------------------------------------------
# validation and defaults
def validate_name(res, name, errs):
    if res.plural == "namespaces":
        if not LABEL_RE.match(name) or len(name) > 63:
            errs.append(("metadata.name", name, LABEL_MSG))
    elif not SUBDOMAIN_RE.match(name) or len(name) > 253:
        errs.append(("metadata.name", name, SUBDOMAIN_MSG))


def validate_resource_list(rl, path, errs, lim=None):
    for k, v in (rl or {}).items():
        q = parse_q(v)     # ValueError -> 400 by caller
        p = "%s[%s]" % (path, k) if lim is not None else "%s.%s" % (path, k)
        if q < 0:
            errs.append((p, q_str(v), "must be greater than or equal to 0"))
        elif is_extended(k) and q.denominator != 1:
            errs.append((p, q_str(v), "must be an integer"))


def check_quantities(res, obj):
    """Quantities that cannot be parsed are a decoding error (400) like the real server."""
    def chk(rl):
        for v in (rl or {}).values():
            parse_q(v)
    try:
        if res.plural == "nodes":
            chk((obj.get("status") or {}).get("capacity"))
            chk((obj.get("status") or {}).get("allocatable"))
        elif res.plural == "pods":
            sp = obj.get("spec") or {}
            for c in (sp.get("containers") or []) + (sp.get("initContainers") or []):
                chk((c.get("resources") or {}).get("limits"))
                chk((c.get("resources") or {}).get("requests"))
    except ValueError as e:
        raise bad_request('%s in version "v1" cannot be handled as a %s: %s' % (res.kind, res.kind, e))


def validate(res, obj, old=None):
    errs = []
    md = obj.get("metadata") or {}
    name = md.get("name") or ""
    if old is None:
        if not name:
            errs.append(("metadata.name", None, "Required value: name or generateName is required"))
        else:
            validate_name(res, name, errs)
    for lk, lv in (md.get("labels") or {}).items():
        if not isinstance(lv, str) or len(lv) > 63 or (lv and not re.match(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$", lv)):
            errs.append(("metadata.labels", lv, "a valid label must be an empty string or consist of alphanumeric "
                         "characters, '-', '_' or '.', and must start and end with an alphanumeric character"))
    if res.plural == "nodes":
        st = obj.get("status") or {}
        validate_resource_list(st.get("capacity"), "status.capacity", errs)
        validate_resource_list(st.get("allocatable"), "status.allocatable", errs)
        for i, t in enumerate((obj.get("spec") or {}).get("taints") or []):
            if t.get("effect") not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
                errs.append(("spec.taints[%d].effect" % i, t.get("effect"),
                             'supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"'))
    elif res.plural == "pods":
        sp = obj.get("spec") or {}
        cs = sp.get("containers") or []
        if not cs:
            errs.append(("spec.containers", None, "Required value"))
        for kind in ("containers", "initContainers"):
            for i, c in enumerate(sp.get(kind) or []):
                p = "spec.%s[%d]" % (kind, i)
                if not c.get("name"):
                    errs.append((p + ".name", None, "Required value"))
                if not c.get("image") and old is None:
                    errs.append((p + ".image", None, "Required value"))
                r = c.get("resources") or {}
                lim, req = r.get("limits") or {}, r.get("requests") or {}
                validate_resource_list(lim, p + ".resources.limits", errs, lim=True)
                validate_resource_list(req, p + ".resources.requests", errs, lim=True)
                for k, v in req.items():
                    if is_extended(k):
                        if k not in lim:
                            errs.append((p + ".resources.limits", None, "Required value: Limit must be set for non overcommitable resources"))
                        elif parse_q(lim[k]) != parse_q(v):
                            errs.append(("%s.resources.requests[%s]" % (p, k), q_str(v), "must be equal to %s limit of %s" % (k, q_str(lim[k]))))
                    elif k in lim and parse_q(v) > parse_q(lim[k]):
                        errs.append(("%s.resources.requests" % p, q_str(v), "must be less than or equal to %s limit of %s" % (k, q_str(lim[k]))))
    elif res.plural == "events":
        io = obj.get("involvedObject") or {}
        if io.get("namespace") and io.get("namespace") != md.get("namespace"):
            errs.append(("involvedObject.namespace", io.get("namespace"), "does not match event.namespace"))
    if errs:
        raise invalid(res, name, errs)


def lease_times(res, obj, patch_mode):
    if res.plural != "leases":
        return
    spec = obj.get("spec") or {}
    for f in ("renewTime", "acquireTime"):
        if f in spec and spec[f] is not None:
            norm, err = check_microtime(spec[f])
            if err:
                name = (obj.get("metadata") or {}).get("name", "")
                if patch_mode:
                    raise invalid(res, name, [("patch", spec[f], err)])
                raise bad_request('Lease in version "v1" cannot be handled as a Lease: %s' % err)
            spec[f] = norm


def default_pod(pod):
    sp = pod.setdefault("spec", {})
    sp.setdefault("restartPolicy", "Always")
    sp.setdefault("terminationGracePeriodSeconds", 30)
    sp.setdefault("dnsPolicy", "ClusterFirst")
    sp.setdefault("serviceAccountName", "default")
    sp.setdefault("serviceAccount", sp["serviceAccountName"])
    sp.setdefault("securityContext", {})
    sp.setdefault("schedulerName", "default-scheduler")
    sp.setdefault("enableServiceLinks", True)
    sp.setdefault("priority", 0)
    sp.setdefault("preemptionPolicy", "PreemptLowerPriority")
    for kind in ("initContainers", "containers"):
        for c in sp.get(kind) or []:
            img = c.get("image") or ""
            if "imagePullPolicy" not in c:
                tail = img.split("/")[-1]
                tag = tail.split(":", 1)[1] if ":" in tail and "@" not in tail else ("" if "@" not in tail else "digest")
                c["imagePullPolicy"] = "Always" if tag in ("", "latest") else "IfNotPresent"
            c.setdefault("terminationMessagePath", "/dev/termination-log")
            c.setdefault("terminationMessagePolicy", "File")
            r = c.setdefault("resources", {})
            if r.get("limits"):
                req = r.setdefault("requests", {})
                for k, v in r["limits"].items():
                    req.setdefault(k, v)
            for p in c.get("ports") or []:
                p.setdefault("protocol", "TCP")
    tols = sp.setdefault("tolerations", [])
    for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
        if not any(t.get("key") == key and t.get("effect") in ("NoExecute", None, "") for t in tols):
            tols.append({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300})
    if not tols:
        del sp["tolerations"]


def qos_class(pod):
    cs = (pod.get("spec") or {}).get("containers") or []
    reqs, lims = set(), set()
    guaranteed = True
    for c in cs:
        r = c.get("resources") or {}
        lim, req = r.get("limits") or {}, r.get("requests") or {}
        for k in ("cpu", "memory"):
            if k in req and parse_q(req[k]) != 0:
                reqs.add(k)
            if k in lim and parse_q(lim[k]) != 0:
                lims.add(k)
            if k not in lim or (k in req and parse_q(req[k]) != parse_q(lim[k])):
                guaranteed = False
    if not reqs and not lims:
        return "BestEffort"
    if guaranteed and cs:
        return "Guaranteed"
    return "Burstable"


# ---------------------------------------------------------------------------------------------
# RBAC
AGENT_RULES = [
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["create", "get", "list", "watch", "patch", "update", "delete"]},
    {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch", "update"]},
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create", "get", "update", "delete"],
     "namespaces": ["kube-node-lease"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "delete"]},
    {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch", "update"]},
    {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
    {"apiGroups": [""], "resources": ["configmaps", "secrets"], "verbs": ["get"]},
]
ROLES = {"admin": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"], "nonResourceURLs": ["*"]}],
         "agent": AGENT_RULES, "none": []}


class Auth(object):
    def __init__(self):
        self.tokens = {}      # token -> (user, uid, groups)
        self.bindings = {"group:system:masters": "admin", "group:slurm-k8s:agent": "agent"}
        self.lock = threading.Lock()

    def load_csv(self, path):
        import csv
        with open(path) as f:
            for row in csv.reader(f):
                if not row or row[0].startswith("#"):
                    continue
                groups = [g for g in (row[3].split(",") if len(row) > 3 else []) if g]
                self.tokens[row[0].strip()] = (row[1].strip(), row[2].strip() if len(row) > 2 else row[1], groups)

    def rules(self, user, groups):
        out = []
        with self.lock:
            for s in ["user:" + user] + ["group:" + g for g in groups]:
                role = self.bindings.get(s)
                if role is None:
                    continue
                out.extend(ROLES.get(role, []) if isinstance(role, str) else role)
        return out

    def allowed(self, user, groups, verb, group, resource, sub, ns):
        res = resource + ("/" + sub if sub else "")
        for r in self.rules(user, groups):
            if not any(g in ("*", group) for g in r.get("apiGroups", [])):
                continue
            if not any(x in ("*", res) for x in r.get("resources", [])):
                continue
            if not any(v in ("*", verb) for v in r.get("verbs", [])):
                continue
            if r.get("namespaces") and ns not in r["namespaces"]:
                continue
            return True
        return False

    def is_admin(self, user, groups):
        return any(r.get("nonResourceURLs") for r in self.rules(user, groups))


def forbidden(user, verb, res, sub, name, ns):
    qual = res.qual
    pre = '%s "%s" is forbidden' % (qual, name) if name else "%s is forbidden" % qual
    scope = 'in the namespace "%s"' % ns if ns else "at the cluster scope"
    msg = '%s: User "%s" cannot %s resource "%s" in API group "%s" %s' % (
        pre, user, verb, res.plural + ("/" + sub if sub else ""), res.group, scope)
    d = {"kind": res.plural}
    if name:
        d["name"] = name
    if res.group:
        d["group"] = res.group
    return ApiError(403, "Forbidden", msg, d)


# ---------------------------------------------------------------------------------------------
# Tables (server-side printing for kubectl get)
def col(name, typ="string", desc="", prio=0, fmt=""):
    return {"name": name, "type": typ, "format": fmt, "description": desc, "priority": prio}


def node_row(n):
    st = n.get("status") or {}
    rc = cond(n, "Ready")
    s = "Unknown" if not rc else {"True": "Ready", "False": "NotReady"}.get(rc.get("status"), "Unknown")
    if (n.get("spec") or {}).get("unschedulable"):
        s += ",SchedulingDisabled"
    roles = []
    for k, v in ((n.get("metadata") or {}).get("labels") or {}).items():
        if k.startswith("node-role.kubernetes.io/"):
            roles.append(k.split("/", 1)[1])
        elif k == "kubernetes.io/role" and v:
            roles.append(v)
    addrs = st.get("addresses") or []
    ip = lambda t: next((a.get("address") for a in addrs if a.get("type") == t), "<none>")
    ni = st.get("nodeInfo") or {}
    return [n["metadata"]["name"], s, ",".join(sorted(roles)) or "<none>",
            age_of(n["metadata"].get("creationTimestamp")), ni.get("kubeletVersion", ""),
            ip("InternalIP"), ip("ExternalIP"), ni.get("osImage", "<unknown>"), ni.get("kernelVersion", "<unknown>"),
            ni.get("containerRuntimeVersion", "<unknown>")]


NODE_COLS = [col("Name", fmt="name"), col("Status"), col("Roles"), col("Age"), col("Version"),
             col("Internal-IP", prio=1), col("External-IP", prio=1), col("OS-Image", prio=1),
             col("Kernel-Version", prio=1), col("Container-Runtime", prio=1)]


def pod_row(p):
    md, sp, st = p["metadata"], p.get("spec") or {}, p.get("status") or {}
    cs = st.get("containerStatuses") or []
    total = len(sp.get("containers") or [])
    ready = sum(1 for c in cs if c.get("ready"))
    restarts = sum(int(c.get("restartCount") or 0) for c in cs)
    reason = st.get("reason") or st.get("phase") or "Pending"
    init = False
    ics = st.get("initContainerStatuses") or []
    for i, c in enumerate(ics):
        s = c.get("state") or {}
        if "terminated" in s and s["terminated"].get("exitCode") == 0:
            continue
        init = True
        if "terminated" in s:
            t = s["terminated"]
            reason = "Init:" + (t.get("reason") or ("Signal:%s" % t.get("signal") if t.get("signal") else "ExitCode:%s" % t.get("exitCode")))
        elif "waiting" in s and s["waiting"].get("reason") and s["waiting"]["reason"] != "PodInitializing":
            reason = "Init:" + s["waiting"]["reason"]
        else:
            reason = "Init:%d/%d" % (i, len(sp.get("initContainers") or []))
        break
    if not init:
        has_running = False
        for c in reversed(cs):
            s = c.get("state") or {}
            if s.get("waiting", {}).get("reason"):
                reason = s["waiting"]["reason"]
            elif s.get("terminated", {}).get("reason"):
                reason = s["terminated"]["reason"]
            elif "terminated" in s:
                t = s["terminated"]
                reason = "Signal:%s" % t.get("signal") if t.get("signal") else "ExitCode:%s" % t.get("exitCode")
            elif "running" in s and c.get("ready"):
                has_running = True
        if reason == "Completed" and has_running:
            c = cond(p, "Ready")
            reason = "Running" if c and c.get("status") == "True" else "NotReady"
    if md.get("deletionTimestamp"):
        reason = "Unknown" if st.get("reason") == "NodeLost" else "Terminating"
    rg = sp.get("readinessGates") or []
    rgs = "<none>"
    if rg:
        okc = sum(1 for g in rg if (cond(p, g.get("conditionType")) or {}).get("status") == "True")
        rgs = "%d/%d" % (okc, len(rg))
    return [md["name"], "%d/%d" % (ready, total), reason, restarts, age_of(md.get("creationTimestamp")),
            st.get("podIP") or "<none>", sp.get("nodeName") or "<none>", st.get("nominatedNodeName") or "<none>", rgs]


POD_COLS = [col("Name", fmt="name"), col("Ready"), col("Status"), col("Restarts", "string"), col("Age"),
            col("IP", prio=1), col("Node", prio=1), col("Nominated Node", prio=1), col("Readiness Gates", prio=1)]


def event_row(e):
    io = e.get("involvedObject") or {}
    last = e.get("lastTimestamp") or e.get("eventTime") or (e.get("series") or {}).get("lastObservedTime") or \
        e["metadata"].get("creationTimestamp")
    first = e.get("firstTimestamp") or e.get("eventTime") or e["metadata"].get("creationTimestamp")
    src = e.get("source") or {}
    s = src.get("component") or e.get("reportingComponent") or ""
    if src.get("host"):
        s += ", " + src["host"]
    count = e.get("count") or ((e.get("series") or {}).get("count")) or 1
    return [age_of(last), e.get("type", ""), e.get("reason", ""),
            "%s/%s" % ((io.get("kind") or "").lower(), io.get("name", "")), io.get("fieldPath", ""), s,
            e.get("message", ""), age_of(first), count, e["metadata"]["name"]]


EVENT_COLS = [col("Last Seen"), col("Type"), col("Reason"), col("Object"), col("Subobject", prio=1),
              col("Source", prio=1), col("Message"), col("First Seen", prio=1), col("Count", "integer", prio=1),
              col("Name", prio=1)]


def table_for(res, objs, rv):
    if res.plural == "nodes":
        cols, f = NODE_COLS, node_row
    elif res.plural == "pods":
        cols, f = POD_COLS, pod_row
    elif res.plural == "events":
        cols, f = EVENT_COLS, event_row
    elif res.plural == "namespaces":
        cols = [col("Name", fmt="name"), col("Status"), col("Age")]
        f = lambda o: [o["metadata"]["name"], (o.get("status") or {}).get("phase", ""), age_of(o["metadata"].get("creationTimestamp"))]
    elif res.plural == "leases":
        cols = [col("Name", fmt="name"), col("Holder"), col("Age")]
        f = lambda o: [o["metadata"]["name"], (o.get("spec") or {}).get("holderIdentity", ""), age_of(o["metadata"].get("creationTimestamp"))]
    elif res.plural == "configmaps":
        cols = [col("Name", fmt="name"), col("Data", "integer"), col("Age")]
        f = lambda o: [o["metadata"]["name"], len(o.get("data") or {}) + len(o.get("binaryData") or {}), age_of(o["metadata"].get("creationTimestamp"))]
    elif res.plural == "secrets":
        cols = [col("Name", fmt="name"), col("Type"), col("Data", "integer"), col("Age")]
        f = lambda o: [o["metadata"]["name"], o.get("type", "Opaque"), len(o.get("data") or {}), age_of(o["metadata"].get("creationTimestamp"))]
    else:
        cols = [col("Name", fmt="name"), col("Created At", "date")]
        f = lambda o: [o["metadata"]["name"], o["metadata"].get("creationTimestamp")]
    rows = []
    for o in objs:
        md = {k: v for k, v in o.get("metadata", {}).items() if k != "managedFields"}
        rows.append({"cells": f(o), "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": md}})
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": rv},
            "columnDefinitions": cols, "rows": rows}


# ---------------------------------------------------------------------------------------------
# the API logic
class Api(object):
    def __init__(self, opts):
        self.opts = opts
        self.store = Store(opts.history)
        self.auth = Auth()
        self.wake_sched = threading.Event()
        self.wake_nlc = threading.Event()
        self.cluster_gen = 0
        self.store.listeners.append(self._on_event)
        for ns in ("default", "kube-system", "kube-public", "kube-node-lease"):
            self.create(RESOURCES[("", "namespaces")], None, {"metadata": {"name": ns}}, internal=True)

    def _on_event(self, key, ev):
        if key in ("nodes", "pods"):
            self.cluster_gen += 1
            self.wake_sched.set()
        if key in ("nodes", "leases"):
            self.wake_nlc.set()

    # -- read
    def get(self, res, ns, name):
        o = self.store.get(res.key, (ns or "", name))
        if o is None:
            raise not_found(res, name)
        return o

    def list(self, res, ns, filt):
        with self.store.lock:
            items = list(self.store.objs[res.key].items())
            rv = str(self.store.rv)
        items.sort(key=lambda kv: kv[0])
        return [o for k, o in items if filt(o)], rv

    # -- create
    def create(self, res, ns, obj, internal=False, dry=False):
        if not isinstance(obj, dict):
            raise bad_request("the object provided is unrecognized")
        if res.view_of:
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        obj = copy.deepcopy(obj)
        kind, av = obj.get("kind"), obj.get("apiVersion")
        if kind and kind != res.kind:
            raise bad_request('%s in version "%s" cannot be handled as a %s: no kind "%s" is registered for version "%s" in scheme' % (
                res.kind, res.version, res.kind, kind, av or res.api_version))
        obj["kind"], obj["apiVersion"] = res.kind, res.api_version
        md = obj.get("metadata")
        if not isinstance(md, dict):
            md = obj["metadata"] = {}
        if res.namespaced:
            if md.get("namespace") and md["namespace"] != ns:
                raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
            md["namespace"] = ns
        else:
            md.pop("namespace", None)
        if not md.get("name") and md.get("generateName"):
            md["name"] = md["generateName"] + rand_suffix()
        check_quantities(res, obj)
        lease_times(res, obj, False)
        for k in ("uid", "resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields"):
            md.pop(k, None)
        md["uid"] = new_uid()
        md["creationTimestamp"] = ts()
        if res.plural == "pods":
            default_pod(obj)
            obj["status"] = {"phase": "Pending"}
        elif res.plural == "nodes":
            spec = obj.setdefault("spec", {})
            taints = spec.setdefault("taints", [])
            if not any(t.get("key") == "node.kubernetes.io/not-ready" and t.get("effect") == "NoSchedule" for t in taints):
                taints.append({"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"})
            st = obj.setdefault("status", {})
            if st.get("capacity") and not st.get("allocatable"):
                st["allocatable"] = dict(st["capacity"])
            st.setdefault("daemonEndpoints", {"kubeletEndpoint": {"Port": 0}})
            st.setdefault("nodeInfo", {"machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": "",
                                       "osImage": "", "containerRuntimeVersion": "", "kubeletVersion": "",
                                       "kubeProxyVersion": "", "operatingSystem": "", "architecture": ""})
        elif res.plural == "namespaces":
            obj["spec"] = {"finalizers": ["kubernetes"]}
            obj["status"] = {"phase": "Active"}
            md.setdefault("labels", {})["kubernetes.io/metadata.name"] = md.get("name", "")
        elif res.plural == "secrets":
            obj.setdefault("type", "Opaque")
        validate(res, obj)
        if res.plural == "pods":
            obj["status"]["qosClass"] = qos_class(obj)
        if res.namespaced and not internal and self.store.get("namespaces", ("", ns)) is None:
            raise not_found(RESOURCES[("", "namespaces")], ns)
        name = md["name"]
        k = (ns or "", name)
        if self.store.get(res.key, k) is not None:
            d = {"name": name, "kind": res.plural}
            if res.group:
                d["group"] = res.group
            raise ApiError(409, "AlreadyExists", '%s "%s" already exists' % (res.qual, name), d)
        if dry:
            obj["metadata"]["resourceVersion"] = ""
            return obj
        try:
            return self.store.write(res.key, k, None, obj)
        except Retry:
            d = {"name": name, "kind": res.plural}
            raise ApiError(409, "AlreadyExists", '%s "%s" already exists' % (res.qual, name), d)

    # -- update / patch
    def _finish_update(self, res, sub, old, new, patch_mode):
        """Shape `new` (a full object from the client or a patch result) into the object to store."""
        name = old["metadata"]["name"]
        if not isinstance(new, dict):
            raise bad_request("the object provided is unrecognized")
        nmd = new.get("metadata") if isinstance(new.get("metadata"), dict) else {}
        if nmd.get("name") and nmd["name"] != name:
            if patch_mode:
                raise invalid(res, name, [("metadata.name", nmd["name"], "field is immutable")])
            raise bad_request("the name of the object (%s) does not match the name on the URL (%s)" % (nmd["name"], name))
        if nmd.get("uid") and nmd["uid"] != old["metadata"]["uid"]:
            raise conflict(res, name, "Precondition failed: UID in precondition: %s, UID in object meta: %s" % (
                nmd["uid"], old["metadata"]["uid"]))
        rv = nmd.get("resourceVersion")
        if rv and rv != old["metadata"]["resourceVersion"]:
            raise conflict(res, name)
        check_quantities(res, new)
        lease_times(res, new, patch_mode)
        if sub == "status":
            out = copy.deepcopy(old)
            if "status" in new:
                out["status"] = copy.deepcopy(new.get("status"))
            # labels/annotations may change through /status too
            for f in ("labels", "annotations"):
                if f in nmd:
                    out["metadata"][f] = copy.deepcopy(nmd[f])
        else:
            out = copy.deepcopy(new)
            out["kind"], out["apiVersion"] = res.kind, res.api_version
            md = out.setdefault("metadata", {}) if isinstance(out.get("metadata"), dict) else out.setdefault("metadata", {})
            if not isinstance(md, dict):
                md = out["metadata"] = {}
            for f in ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp",
                      "deletionGracePeriodSeconds", "generateName"):
                if f in old["metadata"]:
                    md[f] = old["metadata"][f]
                else:
                    md.pop(f, None)
            if res.has_status:
                if "status" in old:
                    out["status"] = copy.deepcopy(old["status"])
                else:
                    out.pop("status", None)
            if res.plural == "pods":
                # most of a pod's spec is immutable; keep the stored one except for mutable bits
                nsp = out.get("spec") or {}
                osp = copy.deepcopy(old.get("spec") or {})
                for i, c in enumerate(nsp.get("containers") or []):
                    if i < len(osp.get("containers") or []) and c.get("image"):
                        osp["containers"][i]["image"] = c["image"]
                if "activeDeadlineSeconds" in nsp:
                    osp["activeDeadlineSeconds"] = nsp["activeDeadlineSeconds"]
                if "tolerations" in nsp:
                    osp["tolerations"] = nsp["tolerations"]
                out["spec"] = osp
        if res.plural == "nodes" and sub == "status":
            st = out.setdefault("status", {})
            if st.get("capacity") and not st.get("allocatable"):
                st["allocatable"] = dict(st["capacity"])
        validate(res, out, old)
        md = out["metadata"]
        md["resourceVersion"] = old["metadata"]["resourceVersion"]
        md.pop("managedFields", None)
        return out

    def update(self, res, ns, name, body, sub=None, dry=False):
        if res.view_of:
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        k = (ns or "", name)
        for _ in range(100):
            old = self.store.get(res.key, k)
            if old is None:
                raise not_found(res, name)
            if not isinstance(body, dict):
                raise bad_request("the object provided is unrecognized")
            if body.get("kind") and body["kind"] != res.kind:
                raise bad_request('%s in version "%s" cannot be handled as a %s: no kind "%s" is registered' % (
                    res.kind, res.version, res.kind, body["kind"]))
            md = body.get("metadata") or {}
            if res.namespaced and md.get("namespace") and md["namespace"] != ns:
                raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
            new = self._finish_update(res, sub, old, body, False)
            if strip_for_compare(new) == strip_for_compare(old) or dry:
                return old if not dry else new
            try:
                return self.store.write(res.key, k, old, new)
            except Retry:
                continue
        raise ApiError(500, "InternalError", "too many retries")

    def patch(self, res, ns, name, ctype, raw, sub=None, dry=False, force_create=False):
        if res.view_of:
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        ctype = (ctype or "").split(";")[0].strip().lower()
        if ctype not in PATCH_TYPES:
            raise ApiError(415, "UnsupportedMediaType", "the body of the request was in an unknown format - accepted media types include: " + ", ".join(PATCH_TYPES))
        try:
            p = json.loads(raw.decode("utf-8") or "null")
        except Exception as e:
            if ctype == "application/apply-patch+yaml":
                raise bad_request("this test double accepts server-side apply only as JSON: %s" % e)
            raise bad_request("error decoding patch: %s" % e)
        if ctype != "application/json-patch+json" and not isinstance(p, dict):
            raise bad_request("error decoding patch: patch must be a JSON object")
        k = (ns or "", name)
        for _ in range(100):
            old = self.store.get(res.key, k)
            if old is None:
                if ctype == "application/apply-patch+yaml" and sub is None:
                    body = copy.deepcopy(p)
                    body.setdefault("metadata", {})["name"] = name
                    return self.create(res, ns, body, dry=dry), 201
                raise not_found(res, name)
            base = copy.deepcopy(old)
            try:
                if ctype == "application/json-patch+json":
                    new = json_patch(base, p)
                elif ctype == "application/merge-patch+json":
                    new = merge_patch(base, p)
                elif ctype == "application/apply-patch+yaml":
                    new = merge_patch(base, {k2: v for k2, v in p.items() if k2 not in ("kind", "apiVersion")})
                else:
                    new = smp(base, p)
            except ApiError:
                raise
            except Exception as e:
                raise ApiError(422, "Invalid", "the server rejected our request due to an error in our request: %s" % e)
            new = self._finish_update(res, sub, old, new, True)
            if strip_for_compare(new) == strip_for_compare(old):
                return old, 200
            if dry:
                return new, 200
            try:
                return self.store.write(res.key, k, old, new), 200
            except Retry:
                continue
        raise ApiError(500, "InternalError", "too many retries")

    # -- delete
    def delete(self, res, ns, name, opts, dry=False):
        """Returns (http code, body)."""
        if res.view_of:
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        k = (ns or "", name)
        for _ in range(100):
            old = self.store.get(res.key, k)
            if old is None:
                raise not_found(res, name)
            pre = opts.get("preconditions") or {}
            if pre.get("uid") and pre["uid"] != old["metadata"]["uid"]:
                raise conflict(res, name, "Precondition failed: UID in precondition: %s, UID in object meta: %s" % (
                    pre["uid"], old["metadata"]["uid"]))
            if pre.get("resourceVersion") and pre["resourceVersion"] != old["metadata"]["resourceVersion"]:
                raise conflict(res, name, "Precondition failed: ResourceVersion in precondition: %s, ResourceVersion in object meta: %s" % (
                    pre["resourceVersion"], old["metadata"]["resourceVersion"]))
            try:
                if res.plural == "pods":
                    return self._delete_pod(res, k, old, opts, dry)
                if dry:
                    return 200, self._delete_status(res, old)
                gone = self.store.write(res.key, k, old, None)
            except Retry:
                continue
            if res.plural == "nodes":
                self._gc_owned(old["metadata"]["uid"])
            if res.plural == "namespaces":
                for key in STORE_RES:
                    if STORE_RES[key].namespaced:
                        for kk, o in list(self.store.objs[key].items()):
                            if kk[0] == name:
                                try:
                                    self.store.write(key, kk, o, None)
                                except Retry:
                                    pass
                g = copy.deepcopy(gone)
                g.setdefault("status", {})["phase"] = "Terminating"
                return 200, g
            return 200, self._delete_status(res, gone)
        raise ApiError(500, "InternalError", "too many retries")

    def _delete_status(self, res, obj):
        d = {"name": obj["metadata"]["name"], "kind": res.plural, "uid": obj["metadata"]["uid"]}
        if res.group:
            d["group"] = res.group
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": d}

    def _delete_pod(self, res, k, old, opts, dry):
        grace = opts.get("gracePeriodSeconds")
        if grace is not None:
            grace = int(grace)
            if grace < 0:
                grace = 1
        md = old["metadata"]
        if md.get("deletionTimestamp"):
            cur = md.get("deletionGracePeriodSeconds")
            if cur is None or cur == 0:
                final = True
                new = None
            elif grace is None or grace >= cur:
                return 200, old          # graceful deletion pending; nothing changes
            else:
                dt = parse_ts(md["deletionTimestamp"]) - datetime.timedelta(seconds=cur) + datetime.timedelta(seconds=grace)
                new = copy.deepcopy(old)
                new["metadata"]["deletionTimestamp"] = ts(dt)
                new["metadata"]["deletionGracePeriodSeconds"] = grace
                final = grace == 0
        else:
            if grace is None:
                grace = (old.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
            if not (old.get("spec") or {}).get("nodeName") or pod_terminal(old):
                grace = 0
            new = copy.deepcopy(old)
            new["metadata"]["deletionTimestamp"] = ts(now_utc() + datetime.timedelta(seconds=grace))
            new["metadata"]["deletionGracePeriodSeconds"] = grace
            final = grace == 0
        if dry:
            return 200, new or old
        cur_obj = old
        if new is not None:
            cur_obj = self.store.write(res.key, k, old, new)
        if final and not (cur_obj["metadata"].get("finalizers")):
            try:
                gone = self.store.write(res.key, k, cur_obj, None)
            except Retry:
                gone = cur_obj
            return 200, gone
        return 200, cur_obj

    def _gc_owned(self, uid):
        for key in ("leases", "pods", "configmaps", "secrets", "events"):
            for kk, o in list(self.store.objs[key].items()):
                refs = o["metadata"].get("ownerReferences") or []
                if refs and any(r.get("uid") == uid for r in refs) and \
                        all(r.get("uid") == uid for r in refs):
                    try:
                        if key == "pods":
                            self.delete(RESOURCES[("", "pods")], kk[0], kk[1], {"gracePeriodSeconds": 0})
                        else:
                            self.store.write(key, kk, o, None)
                    except (Retry, ApiError):
                        pass

    # -- internal helpers for controllers
    def mutate(self, key, k, fn):
        """Apply fn(copy) -> bool(changed) with retries; returns stored object or None."""
        for _ in range(20):
            old = self.store.get(key, k)
            if old is None:
                return None
            new = copy.deepcopy(old)
            if not fn(new):
                return old
            try:
                return self.store.write(key, k, old, new)
            except Retry:
                continue
        return None

    def record_event(self, ns, involved, etype, reason, message, component, host=None, action=None, series_style=False):
        now = ts()
        name = "%s.%x" % (involved.get("name", "x"), time.time_ns())
        ev = {"metadata": {"name": name, "namespace": ns}, "involvedObject": involved, "reason": reason,
              "message": message, "type": etype, "reportingComponent": component, "reportingInstance": host or "",
              "source": {"component": component} if not series_style else {}}
        if host and not series_style:
            ev["source"]["host"] = host
        if series_style:
            ev["eventTime"] = micro_ts()
            ev["action"] = action or ""
            ev["firstTimestamp"] = None
            ev["lastTimestamp"] = None
        else:
            ev["firstTimestamp"] = now
            ev["lastTimestamp"] = now
            ev["count"] = 1
            ev["eventTime"] = None
        try:
            return self.create(RESOURCES[("", "events")], ns, ev, internal=True)
        except ApiError:
            return None


# ---------------------------------------------------------------------------------------------
# controllers
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


class Scheduler(threading.Thread):
    def __init__(self, api, opts):
        threading.Thread.__init__(self, daemon=True, name="scheduler")
        self.api, self.opts = api, opts
        self.enabled = not opts.no_scheduler
        self.tried = {}     # pod uid -> (pod rv, cluster_gen, message)

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
        pods = list(store.objs["pods"].items())
        pending = []
        used = collections.defaultdict(lambda: collections.defaultdict(Fraction))
        count = collections.Counter()
        for k, p in pods:
            sp = p.get("spec") or {}
            if sp.get("nodeName"):
                if not pod_terminal(p):
                    count[sp["nodeName"]] += 1
                    for r, v in pod_requests(p).items():
                        used[sp["nodeName"]][r] += v
            elif sp.get("schedulerName", "default-scheduler") == "default-scheduler" and \
                    not p["metadata"].get("deletionTimestamp") and not pod_terminal(p):
                pending.append((k, p))
        live = set(p["metadata"]["uid"] for k, p in pods)
        for uid in list(self.tried):
            if uid not in live:
                del self.tried[uid]
        if not pending:
            return
        pending.sort(key=lambda kp: (-int((kp[1].get("spec") or {}).get("priority") or 0),
                                     kp[1]["metadata"].get("creationTimestamp", ""), kp[0]))
        nodes = sorted(store.items("nodes"), key=lambda n: n["metadata"]["name"])
        gen = self.api.cluster_gen
        for k, p in pending:
            uid = p["metadata"]["uid"]
            t = self.tried.get(uid)
            if t and t[0] == p["metadata"]["resourceVersion"] and t[1] == gen:
                continue
            best, reasons = self.pick(p, nodes, used, count)
            if best is not None:
                if self.bind(k, p, best):
                    count[best] += 1
                    for r, v in pod_requests(p).items():
                        used[best][r] += v
                    self.tried.pop(uid, None)
                continue
            msg = self.message(len(nodes), reasons)
            prev = self.tried.get(uid)
            self.mark_unschedulable(k, p, msg, prev is None or prev[2] != msg)
            cur = store.get("pods", k)
            self.tried[uid] = ((cur or p)["metadata"]["resourceVersion"], self.api.cluster_gen, msg)

    def pick(self, p, nodes, used, count):
        sp = p.get("spec") or {}
        req = pod_requests(p)
        reasons = []        # per failing node: list of (reason, resolvable)
        feasible = []
        for n in nodes:
            r = self.fit(p, sp, req, n, used[n["metadata"]["name"]], count[n["metadata"]["name"]])
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

    def fit(self, p, sp, req, n, used, npods):
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


def set_condition(o, c):
    conds = o.setdefault("status", {}).setdefault("conditions", [])
    for i, x in enumerate(conds):
        if x.get("type") == c["type"]:
            if x.get("status") == c["status"]:
                c["lastTransitionTime"] = x.get("lastTransitionTime", c["lastTransitionTime"])
            conds[i] = c
            return
    conds.append(c)


# ---------------------------------------------------------------------------------------------
# discovery
def api_resource_list(group, version):
    res = []
    for r in RESOURCES.values():
        if r.group != group or r.version != version:
            continue
        e = {"name": r.plural, "singularName": r.singular, "namespaced": r.namespaced, "kind": r.kind,
             "verbs": r.verbs}
        if r.short:
            e["shortNames"] = r.short
        res.append(e)
        for s in r.subs:
            sv = {"status": ["get", "patch", "update"], "log": ["get"], "binding": ["create"],
                  "eviction": ["create"], "proxy": ["create", "delete", "get", "patch", "update"],
                  "finalize": ["update"]}[s]
            kind = {"log": "Pod", "binding": "Binding", "eviction": "Eviction", "proxy": "NodeProxyOptions"}.get(s, r.kind)
            e2 = {"name": r.plural + "/" + s, "singularName": "", "namespaced": r.namespaced, "kind": kind, "verbs": sv}
            if s in ("binding", "eviction"):
                e2["group"], e2["version"] = ("policy", "v1") if s == "eviction" else ("", "v1")
                if s == "binding":
                    del e2["group"], e2["version"]
            res.append(e2)
    return {"kind": "APIResourceList", "groupVersion": (group + "/" + version) if group else version, "resources": res}


def api_group(g):
    vs = [{"groupVersion": g + "/" + v, "version": v} for v in GROUPS[g]]
    return {"kind": "APIGroup", "apiVersion": "v1", "name": g, "versions": vs, "preferredVersion": vs[0]}


def _pb_field(num, data):
    if isinstance(data, str):
        data = data.encode()
    n, ln = len(data), b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            ln += bytes([b | 0x80])
        else:
            ln += bytes([b])
            break
    return bytes([(num << 3) | 2]) + ln + data


def openapi_v2_pb():
    """gnostic openapi_v2.Document{swagger:"2.0", info:{title, version}, paths:{}} in protobuf."""
    info = _pb_field(1, "Kubernetes") + _pb_field(2, K8S_VERSION["gitVersion"])
    return _pb_field(1, "2.0") + _pb_field(2, info) + _pb_field(8, b"")


# ---------------------------------------------------------------------------------------------
# HTTP
class ReqLog(object):
    def __init__(self):
        self.lock = threading.Lock()
        self.entries = collections.deque(maxlen=200000)
        self.seq = 0
        self.by_user = collections.defaultdict(collections.Counter)
        self.by_client = collections.defaultdict(collections.Counter)

    def add(self, e):
        with self.lock:
            self.seq += 1
            e["seq"] = self.seq
            self.entries.append(e)
            key = "%s %s %s" % (e["method"], e["template"], e["status"])
            self.by_user[e["user"]][key] += 1
            self.by_client[e["client"]][key] += 1

    def reset(self):
        with self.lock:
            self.entries.clear()
            self.by_user.clear()
            self.by_client.clear()


def path_template(path, q):
    segs = [s for s in path.split("/") if s]
    out = []
    i = 0
    if segs[:1] == ["api"]:
        out, i = segs[:2], 2
    elif segs[:1] == ["apis"]:
        out, i = segs[:3], 3
    else:
        return path
    rest = segs[i:]
    if len(rest) >= 2 and rest[0] == "namespaces" and not (len(rest) == 3 and rest[2] in ("status", "finalize")):
        if len(rest) == 2:
            out += ["namespaces", "{name}"]
            rest = []
        else:
            out += ["namespaces", "{ns}"]
            rest = rest[2:]
    if rest:
        out.append(rest[0])
        if len(rest) > 1:
            out.append("{name}")
        out += rest[2:]
    t = "/" + "/".join(out)
    w = (q.get("watch") or [""])[0]
    if w in ("1", "true", "True"):
        t += "?watch=true"
    return t


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 4096

    def __init__(self, addr, handler, api, opts, ctx):
        http.server.ThreadingHTTPServer.__init__(self, addr, handler)
        self.api, self.opts, self.ctx = api, opts, ctx
        self.reqlog = ReqLog()
        self.fault = {"mode": "none"}
        self.refuse_until = 0.0
        self.conns = set()
        self.conns_lock = threading.Lock()
        self.stopping = False
        self.watchers = set()
        self.watchers_lock = threading.Lock()

    def finish_request(self, request, client_address):
        try:
            request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
        if self.ctx is not None:
            try:
                request.settimeout(10)
                request = self.ctx.wrap_socket(request, server_side=True)
                request.settimeout(None)
            except (OSError, ssl.SSLError) as e:
                if self.opts.log_requests:
                    log("TLS handshake from %s failed: %s" % (client_address, e))
                try:
                    request.close()
                except OSError:
                    pass
                return
        with self.conns_lock:
            self.conns.add(request)
        try:
            self.RequestHandlerClass(request, client_address, self)
        except (OSError, ssl.SSLError):
            pass
        finally:
            with self.conns_lock:
                self.conns.discard(request)
            try:
                request.close()
            except OSError:
                pass

    def shutdown_request(self, request):
        pass   # finish_request closes the (wrapped) socket

    def drop_all(self, keep=None):
        with self.conns_lock:
            conns = list(self.conns)
        for c in conns:
            if c is keep:
                continue
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def start_refuse(self, seconds):
        self.refuse_until = time.monotonic() + seconds
        self.fault = {"mode": "refuse", "seconds": seconds}
        try:
            self.socket.close()
        except OSError:
            pass
        self.drop_all()
        log("fault: refusing connections for %.1fs" % seconds)

    def reopen(self):
        s = socket.socket(self.address_family, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        for _ in range(100):
            try:
                s.bind(self.server_address)
                break
            except OSError:
                time.sleep(0.05)
        s.listen(self.request_queue_size)
        self.socket = s
        log("fault: accepting connections again")

    def loop(self):
        while not self.stopping:
            if self.refuse_until:
                if time.monotonic() >= self.refuse_until:
                    self.refuse_until = 0.0
                    self.fault = {"mode": "none"}
                    self.reopen()
                else:
                    time.sleep(0.02)
                    continue
            try:
                r, _, _ = select.select([self.socket], [], [], 0.2)
            except (OSError, ValueError):
                time.sleep(0.02)
                continue
            if not r:
                continue
            try:
                req, addr = self.socket.accept()
            except OSError:
                continue
            try:
                self.process_request(req, addr)
            except Exception:
                req.close()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "kube-test-double"
    sys_version = ""

    def log_message(self, fmt, *args):
        pass

    def do_GET(self):
        self.dispatch("GET")

    def do_POST(self):
        self.dispatch("POST")

    def do_PUT(self):
        self.dispatch("PUT")

    def do_PATCH(self):
        self.dispatch("PATCH")

    def do_DELETE(self):
        self.dispatch("DELETE")

    def do_HEAD(self):
        self.dispatch("HEAD")

    # -- plumbing
    def read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                line = self.rfile.readline()
                n = int(line.split(b";")[0].strip() or b"0", 16)
                if n == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return data
                data += self.rfile.read(n)
                self.rfile.readline()
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def send_bytes(self, code, body, ctype="application/json", extra=None):
        self.status_code = code
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        if self.close_connection:
            self.send_header("Connection", "close")
        self._headers_buffer.append(b"\r\n")
        if self.command != "HEAD":
            self._headers_buffer.append(body)
        self.flush_headers()

    def send_obj(self, code, obj, extra=None):
        self.send_bytes(code, (json.dumps(obj, separators=(",", ":")) + "\n").encode(), extra=extra)

    def send_err(self, e):
        self.send_obj(e.code, e.status())

    def start_chunked(self, ctype):
        self.status_code = 200
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def end_chunked(self):
        self.wfile.write(b"0\r\n\r\n")

    # -- authentication
    def authenticate(self):
        """Returns (user, groups) or None for a bad token. Anonymous -> ('system:anonymous', [...])."""
        authz = self.headers.get("Authorization")
        api = self.server.api
        if authz:
            parts = authz.split(None, 1)
            if len(parts) == 2 and parts[0].lower() == "bearer":
                t = api.auth.tokens.get(parts[1].strip())
                if t:
                    return t[0], list(t[2]) + ["system:authenticated"]
            return None
        if isinstance(self.connection, ssl.SSLSocket):
            try:
                cert = self.connection.getpeercert()
            except (ValueError, ssl.SSLError):
                cert = None
            if cert:
                cn, groups = None, []
                for rdn in cert.get("subject", ()):
                    for k, v in rdn:
                        if k == "commonName":
                            cn = v
                        elif k == "organizationName":
                            groups.append(v)
                if cn:
                    return cn, groups + ["system:authenticated"]
        return "system:anonymous", ["system:unauthenticated"]

    # -- main entry
    def dispatch(self, method):
        self.status_code = 0
        self.t0 = time.time()
        srv = self.server
        u = urllib.parse.urlsplit(self.path)
        path = u.path
        q = urllib.parse.parse_qs(u.query, keep_blank_values=True)
        self.q = q
        self.user = "?"
        self.after = None
        try:
            body = self.read_body() if method in ("POST", "PUT", "PATCH", "DELETE") else b""
            ident = self.authenticate()
            if ident is None:
                self.user = "<invalid token>"
                raise ApiError(401, "Unauthorized", "Unauthorized")
            self.user, self.groups = ident
            if path.startswith("/_test/") or path == "/_test":
                if not srv.api.auth.is_admin(self.user, self.groups):
                    raise ApiError(403, "Forbidden", 'forbidden: User "%s" cannot use the test controls' % self.user)
                self.control(method, path, q, body)
            else:
                f = srv.fault
                if f.get("mode") == "delay":
                    time.sleep(float(f.get("ms", 0)) / 1000.0)
                elif f.get("mode") == "status":
                    code = int(f.get("code", 503))
                    reason = {500: "InternalError", 503: "ServiceUnavailable", 429: "TooManyRequests",
                              504: "Timeout", 401: "Unauthorized", 403: "Forbidden"}.get(code, "InternalError")
                    extra = {"Retry-After": "1"} if code in (429, 503) else None
                    e = ApiError(code, reason, f.get("message", "injected fault (test double)"))
                    self.send_obj(code, e.status(), extra=extra)
                    return
                self.route(method, path, q, body)
        except ApiError as e:
            self.send_err(e)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
            self.close_connection = True
        except Exception as e:
            import traceback
            traceback.print_exc()
            try:
                self.send_err(ApiError(500, "InternalError", "Internal error occurred: %r" % e))
            except OSError:
                self.close_connection = True
        finally:
            if not path.startswith("/_test/"):
                entry = {"time": self.t0, "method": method, "path": path, "query": u.query,
                         "status": self.status_code, "user": self.user,
                         "contentType": self.headers.get("Content-Type", ""), "accept": self.headers.get("Accept", ""),
                         "client": self.client_address[0], "userAgent": self.headers.get("User-Agent", ""),
                         "template": path_template(path, q), "ms": round((time.time() - self.t0) * 1000, 2)}
                srv.reqlog.add(entry)
                if srv.opts.log_requests:
                    log("%s %s %s %s -> %s" % (self.client_address[0], self.user, method, self.path, self.status_code))
            if self.after:
                self.after()

    # -- non-resource and discovery
    def route(self, method, path, q, body):
        srv = self.server
        anon = self.user == "system:anonymous"
        if path in ("/healthz", "/livez", "/readyz") or path.startswith(("/healthz/", "/livez/", "/readyz/")):
            self.send_bytes(200, b"ok", "text/plain; charset=utf-8")
            return
        if path == "/version":
            self.send_obj(200, K8S_VERSION)
            return
        segs = [s for s in path.split("/") if s]
        if not segs or segs[0] not in ("api", "apis"):
            if anon:
                raise ApiError(403, "Forbidden", 'forbidden: User "system:anonymous" cannot %s path "%s"' % (method.lower(), path), {})
            if path == "/openapi/v2":
                # A minimal OpenAPI v2 document without definitions: kubectl then skips client-side
                # schema validation (no schema for the kind) and uses its built-in patch metadata.
                if "protobuf" in (self.headers.get("Accept") or ""):
                    self.send_bytes(200, openapi_v2_pb(), "application/com.github.proto-openapi.spec.v2.v1.0+protobuf")
                else:
                    self.send_obj(200, {"swagger": "2.0", "info": {"title": "Kubernetes", "version": K8S_VERSION["gitVersion"]},
                                        "paths": {}, "definitions": {}})
                return
            if path.startswith("/openapi"):
                self.send_bytes(404, b"404 page not found\n", "text/plain; charset=utf-8")
                return
            self.send_obj(404, ApiError(404, "NotFound", "the server could not find the requested resource", {
                "causes": [{"reason": "UnexpectedServerResponse", "message": "404 page not found"}]}).status())
            return
        if segs[0] == "api":
            if len(segs) == 1:
                if anon:
                    raise ApiError(403, "Forbidden", 'forbidden: User "system:anonymous" cannot get path "/api"', {})
                host = self.headers.get("Host") or "127.0.0.1"
                self.send_obj(200, {"kind": "APIVersions", "versions": ["v1"],
                                    "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": host}]})
                return
            if segs[1] != "v1":
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            group, version, rest = "", "v1", segs[2:]
        else:
            if len(segs) == 1:
                if anon:
                    raise ApiError(403, "Forbidden", 'forbidden: User "system:anonymous" cannot get path "/apis"', {})
                self.send_obj(200, {"kind": "APIGroupList", "apiVersion": "v1",
                                    "groups": [api_group(g) for g in GROUPS if g]})
                return
            group = segs[1]
            if group not in GROUPS or not group:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            if len(segs) == 2:
                if anon:
                    raise ApiError(403, "Forbidden", 'forbidden: User "system:anonymous" cannot get path "%s"' % path, {})
                self.send_obj(200, api_group(group))
                return
            version, rest = segs[2], segs[3:]
            if version not in GROUPS[group]:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if not rest:
            if anon:
                raise ApiError(403, "Forbidden", 'forbidden: User "system:anonymous" cannot get path "%s"' % path, {})
            self.send_obj(200, api_resource_list(group, version) if group == "" else
                          dict(api_resource_list(group, version), apiVersion="v1"))
            return
        ns = None
        if rest[0] == "namespaces" and len(rest) >= 3 and not (len(rest) == 3 and rest[2] in ("status", "finalize")):
            ns, rest = rest[1], rest[2:]
        if len(rest) > 3:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        res = RESOURCES.get((group, rest[0]))
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if res is None or (res.namespaced and name is not None and ns is None) or (not res.namespaced and ns is not None) \
                or (sub is not None and sub not in res.subs):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        watch = (q.get("watch") or [""])[0] in ("1", "true", "True")
        verb = {"GET": "get" if name else ("watch" if watch else "list"), "HEAD": "get", "POST": "create",
                "PUT": "update", "PATCH": "patch", "DELETE": "delete" if name else "deletecollection"}[method]
        if method == "POST" and name and not sub:
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        if not srv.api.auth.allowed(self.user, self.groups, verb, group, res.plural, sub, ns):
            raise forbidden(self.user, verb, res, sub, name, ns)
        self.resource(method, verb, res, ns, name, sub, q, body)

    def query1(self, q, k, default=None):
        v = q.get(k)
        return v[0] if v else default

    def parse_json(self, body, res):
        ct = (self.headers.get("Content-Type") or "application/json").split(";")[0].strip().lower()
        if ct not in ("application/json", "", "*/*", "application/yaml"):
            raise ApiError(415, "UnsupportedMediaType",
                           'the body of the request was in an unknown format - accepted media types include: application/json, application/yaml')
        try:
            return json.loads(body.decode("utf-8"))
        except Exception as e:
            raise bad_request('%s in version "%s" cannot be handled as a %s: %s' % (
                res.kind if res else "object", res.version if res else "v1", res.kind if res else "object", e))

    def wants_table(self):
        a = self.headers.get("Accept") or ""
        return "as=Table" in a

    def resource(self, method, verb, res, ns, name, sub, q, body):
        api = self.server.api
        dry = bool(q.get("dryRun"))
        if name is not None and sub is None and method == "GET":
            o = api.get(res, ns, name)
            if res.view_of:
                o = to_events_v1(o)
            if self.wants_table():
                self.send_obj(200, table_for(res, [o], o["metadata"]["resourceVersion"]))
            else:
                self.send_obj(200, o)
            return
        if name is None and method == "GET":
            lsel = parse_label_selector(self.query1(q, "labelSelector", ""))
            fsel = parse_field_selector(self.query1(q, "fieldSelector", ""), res)
            filt = Filter(res, ns, lsel, fsel)
            if verb == "watch":
                self.watch(res, filt, q)
                return
            items, rv = api.list(res, ns, filt)
            cont = self.query1(q, "continue")
            if cont:
                try:
                    start = tuple(json.loads(base64.b64decode(cont)))
                except Exception:
                    raise bad_request("continue key is not valid")
                items = [o for o in items if (o["metadata"].get("namespace", ""), o["metadata"]["name"]) > start]
            lim = int(self.query1(q, "limit", "0") or 0)
            lmd = {"resourceVersion": rv}
            if lim > 0 and len(items) > lim:
                last = items[lim - 1]["metadata"]
                lmd["continue"] = base64.b64encode(json.dumps([last.get("namespace", ""), last["name"]]).encode()).decode()
                lmd["remainingItemCount"] = len(items) - lim
                items = items[:lim]
            if res.view_of:
                items = [to_events_v1(o) for o in items]
            if self.wants_table():
                self.send_obj(200, table_for(res, items, rv))
                return
            self.send_obj(200, {"kind": res.kind + "List", "apiVersion": res.api_version, "metadata": lmd, "items": items})
            return
        if sub == "log":
            self.pod_log(api.get(res, ns, name), q)
            return
        if sub == "status" and method == "GET":
            self.send_obj(200, api.get(res, ns, name))
            return
        if method == "POST" and sub == "binding":
            b = self.parse_json(body, None)
            target = ((b or {}).get("target") or {}).get("name")
            if not target:
                raise invalid(res, name, [("target.name", None, "Required value")])
            old = api.get(res, ns, name)
            if (old.get("spec") or {}).get("nodeName"):
                raise conflict(res, name, "pod %s is already assigned to node \"%s\"" % (name, old["spec"]["nodeName"]))

            def fn(o):
                if (o.get("spec") or {}).get("nodeName"):
                    return False
                o["spec"]["nodeName"] = target
                set_condition(o, {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": ts()})
                return True
            api.mutate("pods", (ns, name), fn)
            self.send_obj(201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})
            return
        if sub == "eviction" or sub == "proxy" or sub == "finalize":
            raise ApiError(405, "MethodNotAllowed", "this test double does not implement %s/%s" % (res.plural, sub))
        if method == "POST":
            obj = self.parse_json(body, res)
            self.send_obj(201, api.create(res, ns, obj, dry=dry))
            return
        if method == "PUT":
            obj = self.parse_json(body, res)
            self.send_obj(200, api.update(res, ns, name, obj, sub, dry=dry))
            return
        if method == "PATCH":
            o, code = api.patch(res, ns, name, self.headers.get("Content-Type"), body, sub, dry=dry)
            self.send_obj(code, o)
            return
        if method == "DELETE":
            opts = {}
            if body.strip():
                opts = self.parse_json(body, None) or {}
            g = self.query1(q, "gracePeriodSeconds")
            if g not in (None, ""):
                opts["gracePeriodSeconds"] = int(g)
            if name is None:
                lsel = parse_label_selector(self.query1(q, "labelSelector", ""))
                fsel = parse_field_selector(self.query1(q, "fieldSelector", ""), res)
                items, rv = api.list(res, ns, Filter(res, ns, lsel, fsel))
                out = []
                for o in items:
                    try:
                        c, b = api.delete(res, o["metadata"].get("namespace"), o["metadata"]["name"], opts, dry)
                        out.append(b if b.get("kind") != "Status" else o)
                    except ApiError:
                        pass
                self.send_obj(200, {"kind": res.kind + "List", "apiVersion": res.api_version,
                                    "metadata": {"resourceVersion": str(api.store.rv)}, "items": out})
                return
            code, b = api.delete(res, ns, name, opts, dry)
            self.send_obj(code, b)
            return
        raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")

    # -- watch
    def watch(self, res, filt, q):
        srv = self.server
        store = srv.api.store
        rvp = self.query1(q, "resourceVersion")
        tmo = self.query1(q, "timeoutSeconds")
        deadline = time.monotonic() + float(tmo) if tmo not in (None, "") and float(tmo) > 0 else None
        bookmarks = (self.query1(q, "allowWatchBookmarks") or "").lower() in ("true", "1")
        table = self.wants_table()
        w = Watcher(res.key)
        initial = []
        err = None
        with store.lock:
            if rvp in (None, ""):
                start_rv, with_rv = store.rv, False
                initial = [("ADDED", o) for k, o in sorted(store.objs[res.key].items()) if filt(o)]
            elif rvp == "0":
                start_rv, with_rv = store.rv, True
                initial = [("ADDED", o) for k, o in sorted(store.objs[res.key].items()) if filt(o)]
            else:
                try:
                    n = int(rvp)
                except ValueError:
                    raise invalid(res, "", [("resourceVersion", rvp, "must be a non-negative integer")])
                start_rv, with_rv = n, True
                h = store.hist[res.key]
                if store.evicted[res.key] > n:
                    oldest = h[0].rv if h else store.rv + 1
                    err = {"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                                       "status": "Failure", "message": "too old resource version: %d (%d)" % (n, oldest - 1),
                                                       "reason": "Expired", "code": 410}}
                else:
                    for ev in h:
                        if ev.rv > n:
                            w.q.put(ev)
            if err is None:
                store.watchers[res.key].add(w)
        self.start_chunked("application/json")
        if err is not None:
            self.chunk((json.dumps(err) + "\n").encode())
            self.end_chunked()
            return
        with srv.watchers_lock:
            srv.watchers.add(w)
        last_sent = start_rv
        interval = srv.opts.bookmark_interval
        next_bm = time.monotonic() + interval
        pre_deadline_bm = deadline - 2 if deadline and bookmarks else None
        abrupt = False
        try:
            for etype, o in initial:
                self.chunk(self.encode(etype, o, res, table))
            while True:
                now = time.monotonic()
                if deadline and now >= deadline:
                    break
                wait = min(1.0, next_bm - now)
                if deadline:
                    wait = min(wait, deadline - now)
                if pre_deadline_bm:
                    wait = min(wait, max(0.0, pre_deadline_bm - now))
                try:
                    ev = w.q.get(timeout=max(0.0, wait))
                except queue.Empty:
                    ev = None
                if ev is CLOSE:
                    break
                if ev is ABORT:
                    abrupt = True
                    break
                if ev is not None:
                    cur_ok = ev.type != "DELETED" and filt(ev.obj)
                    prev_ok = ev.prev is not None and filt(ev.prev)
                    if cur_ok and prev_ok:
                        self.chunk(self.encode("MODIFIED", ev.obj, res, table, ev))
                    elif cur_ok:
                        self.chunk(self.encode("ADDED", ev.obj, res, table, ev))
                    elif prev_ok:
                        if ev.type == "DELETED":
                            o = ev.obj
                        else:
                            o = copy.copy(ev.prev)
                            o["metadata"] = dict(ev.prev["metadata"], resourceVersion=str(ev.rv))
                        self.chunk(self.encode("DELETED", o, res, table, ev if ev.type == "DELETED" else None))
                    last_sent = max(last_sent, ev.rv)
                    continue
                now = time.monotonic()
                due = now >= next_bm
                if pre_deadline_bm and now >= pre_deadline_bm:
                    due, pre_deadline_bm = True, None
                if due:
                    next_bm = now + interval
                    if bookmarks and with_rv:
                        with store.lock:
                            if w.q.empty() and store.latest[res.key] > start_rv:
                                brv = store.rv
                            else:
                                brv = None
                        if brv is not None:
                            bm = {"kind": res.kind, "apiVersion": res.api_version, "metadata": {"resourceVersion": str(brv)}}
                            self.chunk((json.dumps({"type": "BOOKMARK", "object": bm}, separators=(",", ":")) + "\n").encode())
                            last_sent = brv
                # detect a client that went away
                try:
                    r, _, _ = select.select([self.connection], [], [], 0)
                except (OSError, ValueError):
                    r = [1]
                if r:
                    abrupt = True
                    break
            if not abrupt:
                self.end_chunked()
        finally:
            with store.lock:
                store.watchers[res.key].discard(w)
            with srv.watchers_lock:
                srv.watchers.discard(w)
            if abrupt:
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def encode(self, etype, o, res, table, ev=None):
        if ev is not None and not table and etype == ev.type:
            c = ev.cache.get(res.plural + res.group)
            if c is None:
                c = ev.cache[res.plural + res.group] = self._enc(etype, o, res, False)
            return c
        return self._enc(etype, o, res, table)

    def _enc(self, etype, o, res, table):
        if res.view_of:
            o = to_events_v1(o)
        if table:
            o = table_for(res, [o], o["metadata"].get("resourceVersion", ""))
        return (json.dumps({"type": etype, "object": o}, separators=(",", ":")) + "\n").encode()

    # -- pods/log proxy
    def pod_log(self, pod, q):
        srv = self.server
        api = srv.api
        name = pod["metadata"]["name"]
        ns = pod["metadata"]["namespace"]
        sp = pod.get("spec") or {}
        main = [c["name"] for c in sp.get("containers") or []]
        init = [c["name"] for c in sp.get("initContainers") or []]
        eph = [c["name"] for c in sp.get("ephemeralContainers") or []]
        container = self.query1(q, "container", "")
        if not container:
            if len(main) == 1:
                container = main[0]
            else:
                m = "a container name must be specified for pod %s, choose one of: [%s]" % (name, " ".join(main))
                if init:
                    m += " or one of the init containers: [%s]" % " ".join(init)
                raise bad_request(m)
        if container not in main + init + eph:
            raise bad_request("container %s is not valid for pod %s" % (container, name))
        node_name = sp.get("nodeName")
        if not node_name:
            self.send_bytes(200, b"", "text/plain")
            return
        node = api.store.get("nodes", ("", node_name))
        if node is None:
            raise not_found(RESOURCES[("", "nodes")], node_name)
        addrs = (node.get("status") or {}).get("addresses") or []
        host = None
        for t in ("InternalIP", "ExternalIP", "Hostname", "InternalDNS", "ExternalDNS"):
            host = next((a.get("address") for a in addrs if a.get("type") == t and a.get("address")), None)
            if host:
                break
        if not host:
            raise ApiError(500, "InternalError", "no preferred addresses found; known addresses: %s" % json.dumps(addrs))
        port = int((((node.get("status") or {}).get("daemonEndpoints") or {}).get("kubeletEndpoint") or {}).get("Port") or 10250)
        params = []
        follow = (self.query1(q, "follow") or "").lower() in ("true", "1")
        for k in ("follow", "previous", "timestamps"):
            if (self.query1(q, k) or "").lower() in ("true", "1"):
                params.append((k, "true"))
        for k in ("tailLines", "sinceSeconds", "sinceTime", "limitBytes"):
            v = self.query1(q, k)
            if v not in (None, ""):
                params.append((k, v))
        upath = "/containerLogs/%s/%s/%s" % (ns, name, container)
        if params:
            upath += "?" + urllib.parse.urlencode(params)
        insecure = srv.opts.kubelet_insecure or (self.query1(q, "insecureSkipTLSVerifyBackend") or "").lower() == "true"
        ctx = srv.kubelet_ctx_insecure if insecure else srv.kubelet_ctx
        if insecure:
            log("WARNING: not verifying the kubelet serving certificate of node %s" % node_name)
        hostport = "[%s]" % host if ":" in host else host
        try:
            conn = http.client.HTTPSConnection(host, port, context=ctx, timeout=10)
            conn.request("GET", upath, headers={"Host": "%s:%d" % (hostport, port)})
            # getresponse() drops conn.sock when the kubelet answers
            # "Connection: close"; keep it to lift the timeout for follow.
            sock = conn.sock
            resp = conn.getresponse()
        except (OSError, ssl.SSLError, http.client.HTTPException) as e:
            raise ApiError(500, "InternalError", 'Get "https://%s:%d%s": %s' % (hostport, port, upath, e))
        try:
            if resp.status != 200:
                text = resp.read(16384).decode("utf-8", "replace").strip()
                reason = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound"}.get(resp.status, "InternalError")
                raise ApiError(resp.status, reason, text or "the server could not find the requested resource ( pods/log %s)" % name)
            if follow and sock is not None:
                sock.settimeout(None)
            self.start_chunked("text/plain")
            while True:
                try:
                    data = resp.read1(65536)
                except (OSError, http.client.HTTPException):
                    break
                if not data:
                    break
                self.chunk(data)
            self.end_chunked()
        finally:
            conn.close()

    # -- test controls
    def control(self, method, path, q, body):
        srv = self.server
        api = srv.api
        data = {}
        if body.strip():
            try:
                data = json.loads(body)
            except ValueError:
                raise bad_request("control body must be JSON")
        p = path.rstrip("/")
        if p == "/_test/info":
            self.send_obj(200, {"double": True, "version": K8S_VERSION["gitVersion"], "pid": os.getpid(),
                                "historySize": api.store.history_size, "controllers": self.ctl_state()})
        elif p == "/_test/requests":
            since = int(self.query1(q, "since", "0") or 0)
            with srv.reqlog.lock:
                items = [e for e in srv.reqlog.entries if e["seq"] > since]
            self.send_obj(200, {"items": items})
        elif p == "/_test/counters":
            with srv.reqlog.lock:
                out = {"byUser": {k: dict(v) for k, v in srv.reqlog.by_user.items()},
                       "byClient": {k: dict(v) for k, v in srv.reqlog.by_client.items()},
                       "total": sum(sum(v.values()) for v in srv.reqlog.by_user.values())}
            self.send_obj(200, out)
        elif p == "/_test/reset" and method == "POST":
            srv.reqlog.reset()
            self.send_obj(200, {"ok": True})
        elif p == "/_test/fault":
            if method == "GET":
                self.send_obj(200, srv.fault)
                return
            mode = "none" if method == "DELETE" else data.get("mode", "none")
            if mode == "refuse":
                secs = float(data.get("seconds", 5))
                self.send_obj(200, {"mode": "refuse", "seconds": secs})
                self.close_connection = True
                self.after = lambda: srv.start_refuse(secs)
                return
            if mode == "status":
                srv.fault = {"mode": "status", "code": int(data.get("code", 503))}
                if data.get("message"):
                    srv.fault["message"] = data["message"]
            elif mode == "delay":
                srv.fault = {"mode": "delay", "ms": float(data.get("ms", 500))}
            elif mode == "none":
                srv.fault = {"mode": "none"}
            else:
                raise bad_request("unknown fault mode %r" % mode)
            log("fault: %s" % json.dumps(srv.fault))
            self.send_obj(200, srv.fault)
        elif p == "/_test/history" and method == "POST":
            api.store.set_history(int(data.get("size", 1000)))
            self.send_obj(200, {"size": api.store.history_size})
        elif p == "/_test/watches/close" and method == "POST":
            with srv.watchers_lock:
                ws = list(srv.watchers)
            for w in ws:
                w.q.put(ABORT if data.get("abrupt") else CLOSE)
            self.send_obj(200, {"closed": len(ws)})
        elif p == "/_test/controllers":
            if method == "POST":
                o = srv.opts
                if "scheduler" in data:
                    srv.scheduler.enabled = bool(data["scheduler"])
                if "nodeLifecycle" in data:
                    srv.nlc.enabled = bool(data["nodeLifecycle"])
                for k, a in (("leaseGrace", "lease_grace"), ("monitorPeriod", "monitor_period"),
                             ("taintRemovalDelay", "taint_removal_delay"), ("bookmarkInterval", "bookmark_interval")):
                    if k in data:
                        setattr(o, a, float(data[k]))
                if "fullDisruption" in data:
                    o.full_disruption = bool(data["fullDisruption"])
                api.wake_sched.set()
                api.wake_nlc.set()
            self.send_obj(200, self.ctl_state())
        elif p == "/_test/rbac" and method == "POST":
            subj, role = data.get("subject"), data.get("role")
            if not subj or role is None:
                raise bad_request('need {"subject":"user:NAME|group:NAME","role":...}')
            with api.auth.lock:
                api.auth.bindings[subj] = role
            self.send_obj(200, {"subject": subj, "role": role})
        elif p == "/_test/tokens" and method == "POST":
            tok = data.get("token") or uuid.uuid4().hex
            api.auth.tokens[tok] = (data.get("user", "user-" + tok[:6]), data.get("uid", ""), data.get("groups", []))
            self.send_obj(200, {"token": tok})
        else:
            raise ApiError(404, "NotFound", "unknown test control %s %s" % (method, path))

    def ctl_state(self):
        srv, o = self.server, self.server.opts
        return {"scheduler": srv.scheduler.enabled, "nodeLifecycle": srv.nlc.enabled, "leaseGrace": o.lease_grace,
                "monitorPeriod": o.monitor_period, "taintRemovalDelay": o.taint_removal_delay,
                "fullDisruption": o.full_disruption, "bookmarkInterval": o.bookmark_interval}


# ---------------------------------------------------------------------------------------------
# certificates and state
def openssl(*args):
    r = subprocess.run(["openssl"] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if r.returncode != 0:
        raise RuntimeError("openssl %s failed: %s" % (" ".join(args), r.stderr.decode()))


def make_certs(d):
    def p(n):
        return os.path.join(d, n)
    if not (os.path.exists(p("ca.crt")) and os.path.exists(p("ca.key"))):
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-keyout", p("ca.key"), "-out", p("ca.crt"), "-days", "3650", "-subj", "/CN=kube-test-double-ca",
                "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")

    def leaf(name, subj, ext):
        if os.path.exists(p(name + ".crt")) and os.path.exists(p(name + ".key")):
            return
        with open(p(name + ".ext"), "w") as f:
            f.write(ext)
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-keyout", p(name + ".key"), "-out", p(name + ".csr"), "-subj", subj)
        openssl("x509", "-req", "-in", p(name + ".csr"), "-CA", p("ca.crt"), "-CAkey", p("ca.key"),
                "-CAcreateserial", "-out", p(name + ".crt"), "-days", "3650", "-extfile", p(name + ".ext"))
        os.unlink(p(name + ".csr"))
        os.unlink(p(name + ".ext"))
    san = "subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost\n"
    leaf("server", "/CN=kube-apiserver", "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n"
         "extendedKeyUsage=serverAuth\n" + san)
    leaf("kubelet-client", "/O=system:masters/CN=kube-apiserver-kubelet-client",
         "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n")
    leaf("kubelet-serving", "/O=system:nodes/CN=system:node:localhost",
         "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n" + san)


def write_file(path, text, mode=0o644):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.chmod(tmp, mode)
    os.rename(tmp, path)


def main():
    ap = argparse.ArgumentParser(description="Kubernetes API test double (not a Kubernetes API server)")
    ap.add_argument("--listen", default="127.0.0.1:0")
    ap.add_argument("--state-dir", required=True)
    ap.add_argument("--plain-http", action="store_true")
    ap.add_argument("--token-file", help="CSV token,user,uid,\"group1,group2\" like kube-apiserver")
    ap.add_argument("--role", action="append", default=[], metavar="SUBJECT=ROLE",
                    help="bind user:NAME or group:NAME to admin|agent|none (repeatable)")
    ap.add_argument("--history", type=int, default=1000, help="watch history per resource type")
    ap.add_argument("--no-scheduler", action="store_true")
    ap.add_argument("--no-node-lifecycle", action="store_true")
    ap.add_argument("--lease-grace", type=float, default=40.0)
    ap.add_argument("--monitor-period", type=float, default=5.0)
    ap.add_argument("--taint-removal-delay", type=float, default=0.0)
    ap.add_argument("--no-full-disruption", dest="full_disruption", action="store_false",
                    help="add unreachable:NoExecute even when every node is NotReady")
    ap.add_argument("--bookmark-interval", type=float, default=60.0)
    ap.add_argument("--kubelet-ca", help="CA that signs kubelet serving certs (default: our own CA)")
    ap.add_argument("--kubelet-insecure", action="store_true", help="do not verify kubelet serving certs")
    ap.add_argument("--log-requests", action="store_true")
    opts = ap.parse_args()
    try:
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = hard if hard != resource.RLIM_INFINITY else 65536
        if soft < want:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    except (ImportError, ValueError, OSError):
        pass

    d = os.path.abspath(opts.state_dir)
    os.makedirs(d, exist_ok=True)
    for f in ("ready",):
        if os.path.exists(os.path.join(d, f)):
            os.unlink(os.path.join(d, f))
    api = Api(opts)
    if opts.token_file:
        api.auth.load_csv(opts.token_file)
    else:
        toks = {}
        for name, user, groups in (("admin", "admin", "system:masters"), ("agent", "slurm-k8s-agent", "slurm-k8s:agent"),
                                   ("noright", "noright", "")):
            tp = os.path.join(d, name + ".token")
            if os.path.exists(tp):
                tok = open(tp).read().strip()
            else:
                tok = uuid.uuid4().hex + uuid.uuid4().hex
                write_file(tp, tok + "\n", 0o600)
            toks[name] = tok
            api.auth.tokens[tok] = (user, user, [g for g in groups.split(",") if g])
        write_file(os.path.join(d, "tokens.csv"), "".join(
            '%s,%s,%s,"%s"\n' % (toks[n], u, u, g) for n, u, g in (("admin", "admin", "system:masters"),
                                                                   ("agent", "slurm-k8s-agent", "slurm-k8s:agent"),
                                                                   ("noright", "noright", ""))), 0o600)
    for r in opts.role:
        s, _, role = r.partition("=")
        api.auth.bindings[s] = role
    admin_tok = next((t for t, v in api.auth.tokens.items() if "system:masters" in v[2]), None)

    ctx = None
    make_certs(d)
    if not opts.plain_http:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(os.path.join(d, "server.crt"), os.path.join(d, "server.key"))
        ctx.load_verify_locations(os.path.join(d, "ca.crt"))
        ctx.verify_mode = ssl.CERT_OPTIONAL
    host, _, port = opts.listen.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    Server.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
    srv = Server((host, int(port)), Handler, api, opts, ctx)
    kctx = ssl.create_default_context(cafile=opts.kubelet_ca or os.path.join(d, "ca.crt"))
    kctx.load_cert_chain(os.path.join(d, "kubelet-client.crt"), os.path.join(d, "kubelet-client.key"))
    srv.kubelet_ctx = kctx
    ictx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ictx.check_hostname = False
    ictx.verify_mode = ssl.CERT_NONE
    ictx.load_cert_chain(os.path.join(d, "kubelet-client.crt"), os.path.join(d, "kubelet-client.key"))
    srv.kubelet_ctx_insecure = ictx
    if opts.kubelet_insecure:
        log("WARNING: --kubelet-insecure: kubelet serving certificates are not verified")
    srv.scheduler = Scheduler(api, opts)
    srv.nlc = NodeLifecycle(api, opts)
    srv.scheduler.start()
    srv.nlc.start()

    port = srv.server_address[1]
    hp = "[%s]" % host if ":" in host else host
    url = "%s://%s:%d" % ("http" if opts.plain_http else "https", hp, port)
    kc = ["apiVersion: v1", "kind: Config", "clusters:", "- name: kube-test-double", "  cluster:",
          "    server: %s" % url]
    if not opts.plain_http:
        kc.append("    certificate-authority: %s" % os.path.join(d, "ca.crt"))
    kc += ["users:", "- name: admin", "  user:", "    token: %s" % (admin_tok or ""), "contexts:",
           "- name: kube-test-double", "  context:", "    cluster: kube-test-double", "    user: admin",
           "    namespace: default", "current-context: kube-test-double", ""]
    write_file(os.path.join(d, "kubeconfig"), "\n".join(kc), 0o600)
    write_file(os.path.join(d, "pid"), "%d\n" % os.getpid())
    write_file(os.path.join(d, "server.json"), json.dumps({
        "url": url, "port": port, "pid": os.getpid(), "ca": None if opts.plain_http else os.path.join(d, "ca.crt"),
        "kubeconfig": os.path.join(d, "kubeconfig"), "adminToken": os.path.join(d, "admin.token"),
        "agentToken": os.path.join(d, "agent.token"), "norightToken": os.path.join(d, "noright.token"),
        "kubeletClientCert": os.path.join(d, "kubelet-client.crt"), "kubeletClientKey": os.path.join(d, "kubelet-client.key"),
        "kubeletServingCert": os.path.join(d, "kubelet-serving.crt"),
        "kubeletServingKey": os.path.join(d, "kubelet-serving.key")}, indent=1) + "\n")

    def stop(signum, frame):
        srv.stopping = True
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    def clear_fault(signum, frame):
        srv.fault = {"mode": "none"}
        if srv.refuse_until:
            srv.refuse_until = time.monotonic()
    signal.signal(signal.SIGUSR1, clear_fault)
    write_file(os.path.join(d, "ready"), url + "\n")
    log("listening on %s (state dir %s, pid %d)" % (url, d, os.getpid()))
    srv.loop()
    log("stopping")
    try:
        os.unlink(os.path.join(d, "ready"))
    except OSError:
        pass
    with srv.watchers_lock:
        for w in list(srv.watchers):
            w.q.put(ABORT)
    try:
        srv.socket.close()
    except OSError:
        pass
    srv.drop_all()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
