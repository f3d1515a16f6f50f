"""The metrics.k8s.io/v1beta1 API (NodeMetrics, PodMetrics) that metrics-server serves behind
the API server's aggregation layer, computed here as metrics-server computes it: each Ready
node's kubelet endpoint is scraped at GET /metrics/resource (Prometheus text, the kubelet's
resource metrics) over the TLS dial of the pods/log and nodes/proxy proxies, with the kubelet
client certificate, and two scrapes make a rate (CPU: delta of the cumulative core-seconds over
delta of the kubelet's sample timestamps; memory: the working set of the later scrape; window:
the time between the two samples).

Scrapes happen on demand, not every 15 s: a request for a node's figures scrapes it when its
newest scrape (or failed try) is older than MAX_AGE seconds; the last two samples are kept. A
node or container with fewer than two samples, or whose counter went down, or whose kubelet
failed its latest scrape (unreachable, not 200, malformed text) has no metrics, as
metrics-server's "metrics not available yet"; the failure is logged and the server goes on.
"""

import collections
import concurrent.futures
import datetime
import http.client
import math
import re
import ssl
import threading
import time

from .errors import ApiError
from .kubelet import dial, go_dial_error, join_host_port, kubelet_context, node_endpoint
from .objects import cond
from .resources import METRICS_GROUP, RESOURCES
from .selectors import Filter, parse_field_selector, parse_label_selector
from .tables import col
from .util import log, parse_q, ts

MAX_AGE = 1.0               # seconds a scrape stays fresh
SCRAPE_TIMEOUT = 5.0        # seconds the connect, the TLS handshake and each read of a scrape may take
MAX_BODY = 16 << 20         # a kubelet's /metrics/resource larger than this is refused

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LINE_RE = re.compile(r"^(%s)(?:\{(.*)\})?[ \t]+(\S+)(?:[ \t]+(-?\d+))?[ \t]*$" % _NAME)
_LABEL_RE = re.compile(r'[ \t]*([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*"((?:[^"\\]|\\.)*)"[ \t]*(,|$)')


def _unescape(v):
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), v)


def _labels(s):
    out, i = {}, 0
    while i < len(s):
        m = _LABEL_RE.match(s, i)
        if not m or m.end() == i:
            raise ValueError("bad label set {%s}" % s)
        out[m.group(1)] = _unescape(m.group(2))
        i = m.end()
    return out


def parse_resource_metrics(text, scraped_ms):
    """The kubelet's /metrics/resource as {"node": {cpu, memory, ts}, "containers": {(ns, pod,
    container): {cpu, memory, start, ts}}}: cpu in core-seconds, memory in bytes, ts in ms (the
    sample's timestamp, scraped_ms where it has none). Unknown metric names are ignored; a line
    that is not Prometheus text format raises ValueError (the whole scrape is then refused, as
    metrics-server's parser fails the scrape)."""
    node, ctrs = {}, {}
    for n, line in enumerate(text.split("\n"), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = _LINE_RE.match(line)
        if not m:
            raise ValueError("line %d: not a sample: %r" % (n, line[:200]))
        name, lab, val, stamp = m.group(1), _labels(m.group(2) or ""), m.group(3), m.group(4)
        try:
            v = float(val)
        except ValueError:
            raise ValueError("line %d: bad value %r" % (n, val[:50]))
        t = int(stamp) if stamp is not None else scraped_ms
        if math.isnan(v) or math.isinf(v) or v < 0:
            continue
        if name in ("node_cpu_usage_seconds_total", "node_memory_working_set_bytes"):
            node["cpu" if "cpu" in name else "memory"] = v
            node["ts"] = t
        elif name in ("container_cpu_usage_seconds_total", "container_memory_working_set_bytes",
                      "container_start_time_seconds"):
            key = (lab.get("namespace", ""), lab.get("pod", ""), lab.get("container", ""))
            if not all(key):
                continue
            c = ctrs.setdefault(key, {})
            if name == "container_start_time_seconds":
                c["start"] = v
            else:
                c["cpu" if "cpu" in name else "memory"] = v
                c["ts"] = t
    return {"node": node if "cpu" in node and "memory" in node else None,
            "containers": {k: c for k, c in ctrs.items() if "cpu" in c and "memory" in c}}


def rate(prev, last):
    """(nanocores (rounded), memory bytes, timestamp ms, window ms) from two samples of one node or
    container, or None: no earlier sample, the kubelet's clock did not advance, the counter went
    down, or the container restarted in between (its start time changed)."""
    if prev is None or last is None or last["ts"] <= prev["ts"] or last["cpu"] < prev["cpu"]:
        return None
    if prev.get("start") != last.get("start"):
        return None
    window = last["ts"] - prev["ts"]
    return round((last["cpu"] - prev["cpu"]) * 1e9 * 1000 / window), int(last["memory"]), last["ts"], window


def cpu_quantity(nanocores):
    """A DecimalSI quantity in its canonical form (as resource.Quantity prints it): 250000000 ->
    250m, 1500 -> 1500n, 2000000000 -> 2."""
    if nanocores == 0:
        return "0"
    for div, sfx in ((10 ** 9, ""), (10 ** 6, "m"), (10 ** 3, "u")):
        if nanocores % div == 0:
            return "%d%s" % (nanocores // div, sfx)
    return "%dn" % nanocores


def memory_quantity(b):
    """A BinarySI quantity in its canonical form: 1048576 -> 1Mi, 1536 -> 1536."""
    for p, sfx in ((6, "Ei"), (5, "Pi"), (4, "Ti"), (3, "Gi"), (2, "Mi"), (1, "Ki")):
        if b and b % (1024 ** p) == 0:
            return "%d%s" % (b // 1024 ** p, sfx)
    return "%d" % b


def go_duration(ms):
    """A window of ms milliseconds as Go's time.Duration prints it: 1.003s, 500ms, 1m0.5s."""
    if ms == 0:
        return "0s"
    if ms < 1000:
        return "%dms" % ms
    h, rem = divmod(ms, 3600000)
    m, rem = divmod(rem, 60000)
    s = ("%d.%03d" % divmod(rem, 1000)).rstrip("0").rstrip(".") + "s"
    if h:
        return "%dh%dm%s" % (h, m, s)
    if m:
        return "%dm%s" % (m, s)
    return s


def _stamp(ms):
    return ts(datetime.datetime.fromtimestamp(ms // 1000, datetime.timezone.utc))


class _NodeCache(object):
    def __init__(self, endpoint):
        self.endpoint = endpoint
        self.samples = collections.deque(maxlen=2)
        self.tried = None           # time.monotonic() of the last scrape, failed or not
        self.lock = threading.Lock()


class Metrics(object):
    """The scrape cache of every node and the figures computed from it."""

    def __init__(self, srv):
        self.srv = srv
        self.nodes = {}             # node name -> _NodeCache
        self.lock = threading.Lock()
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=16, thread_name_prefix="metrics-scrape")

    def scrape(self, name, host, port):
        """One GET /metrics/resource of node name: the parsed sample, or raises with a message."""
        ctx = kubelet_context(self.srv, {}, name)
        try:
            sock = dial(ctx, host, port, timeout=SCRAPE_TIMEOUT)
        except (OSError, ssl.SSLError) as e:
            raise RuntimeError(go_dial_error(e, host, port))
        conn = http.client.HTTPSConnection(host, port, context=ctx, timeout=SCRAPE_TIMEOUT)
        try:
            sock.settimeout(SCRAPE_TIMEOUT)
            conn.sock = sock
            conn.request("GET", "/metrics/resource", headers={"Accept": "text/plain;version=0.0.4"})
            resp = conn.getresponse()
            body = resp.read(MAX_BODY + 1)
            if resp.status != 200:
                raise RuntimeError("request failed, status: %d %s" % (resp.status, resp.reason))
            if len(body) > MAX_BODY:
                raise RuntimeError("response larger than %d bytes" % MAX_BODY)
            scraped = int(time.time() * 1000)
            try:
                return parse_resource_metrics(body.decode("utf-8"), scraped)
            except (ValueError, UnicodeDecodeError) as e:
                raise RuntimeError("decoding the metrics: %s" % e)
        except (OSError, ssl.SSLError, http.client.HTTPException) as e:
            raise RuntimeError("reading the metrics: %s" % (e or type(e).__name__))
        finally:
            conn.close()

    def refresh(self, node):
        """Scrapes a node when its newest try is older than MAX_AGE; returns its samples (oldest
        first, at most two; none after a failed scrape)."""
        name = node["metadata"]["name"]
        try:
            host, port = node_endpoint(self.srv.api, name, self.srv.opts.kubelet_preferred_address_types)
        except ApiError:
            return []
        key = (node["metadata"].get("uid"), host, port)
        with self.lock:
            c = self.nodes.get(name)
            if c is None or c.endpoint != key:
                c = self.nodes[name] = _NodeCache(key)
        with c.lock:
            now = time.monotonic()
            if c.tried is None or now - c.tried >= MAX_AGE:
                c.tried = now
                try:
                    c.samples.append(self.scrape(name, host, port))
                except RuntimeError as e:
                    log("metrics: failed to scrape node %s (%s): %s" % (name, join_host_port(host, port), e))
                    c.samples.clear()
            return list(c.samples)

    def samples_of(self, nodes):
        """{node name: samples} for the Ready ones of nodes, scraped in parallel."""
        ready = [n for n in nodes if (cond(n, "Ready") or {}).get("status") == "True"]
        futs = {n["metadata"]["name"]: self.pool.submit(self.refresh, n) for n in ready}
        return {k: f.result() for k, f in futs.items()}

    def node_metrics(self, nodes):
        out = []
        samples = self.samples_of(nodes)
        for n in nodes:
            s = samples.get(n["metadata"]["name"]) or []
            r = rate(s[0]["node"], s[1]["node"]) if len(s) == 2 else None
            if r is None:
                continue
            md = n["metadata"]
            out.append({"kind": "NodeMetrics", "apiVersion": METRICS_GROUP + "/v1beta1",
                        "metadata": _md(md), "timestamp": _stamp(r[2]), "window": go_duration(r[3]),
                        "usage": {"cpu": cpu_quantity(r[0]), "memory": memory_quantity(r[1])}})
        return out

    def pod_metrics(self, pods):
        api = self.srv.api
        names = sorted(set((p.get("spec") or {}).get("nodeName") for p in pods) - {None, ""})
        nodes = [n for n in (api.store.get("nodes", ("", nn)) for nn in names) if n is not None]
        samples = self.samples_of(nodes)
        out = []
        for p in pods:
            md = p["metadata"]
            s = samples.get((p.get("spec") or {}).get("nodeName") or "") or []
            if len(s) != 2:
                continue
            ns, name = md.get("namespace", ""), md["name"]
            cs, when, window = [], 0, 0
            for c in sorted(k[2] for k in s[1]["containers"] if k[0] == ns and k[1] == name):
                k = (ns, name, c)
                r = rate(s[0]["containers"].get(k), s[1]["containers"][k])
                if r is None:
                    cs = None      # a pod is shown whole or not at all
                    break
                cs.append({"name": c, "usage": {"cpu": cpu_quantity(r[0]), "memory": memory_quantity(r[1])}})
                if r[2] > when:
                    when, window = r[2], r[3]
            if not cs:
                continue
            out.append({"kind": "PodMetrics", "apiVersion": METRICS_GROUP + "/v1beta1", "metadata": _md(md),
                        "timestamp": _stamp(when), "window": go_duration(window), "containers": cs})
        return out


def _md(md):
    out = {"name": md["name"]}
    if md.get("namespace"):
        out["namespace"] = md["namespace"]
    out["creationTimestamp"] = ts()
    if md.get("labels"):
        out["labels"] = dict(md["labels"])
    return out


def _sum_usage(m):
    if "usage" in m:
        return m["usage"]["cpu"], m["usage"]["memory"]
    cpu = sum(parse_q(c["usage"]["cpu"]) for c in m["containers"])
    mem = sum(parse_q(c["usage"]["memory"]) for c in m["containers"])
    return cpu_quantity(int(cpu * 10 ** 9)), memory_quantity(int(mem))


def metrics_table(items):
    """The Table metrics-server prints: name, CPU, memory (a pod's: its containers' sum), window."""
    rows = []
    for m in items:
        cpu, mem = _sum_usage(m)
        rows.append({"cells": [m["metadata"]["name"], cpu, mem, m["window"]],
                     "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": m["metadata"]}})
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {},
            "columnDefinitions": [col("Name", fmt="name"), col("CPU"), col("Memory"), col("Window")], "rows": rows}


class MetricsHandler:
    """Mixin of handler.Handler: GET (get, list) on metrics.k8s.io's nodes and pods."""

    def metrics(self, method, verb, res, ns, name, q):
        if method not in ("GET", "HEAD") or verb == "watch":
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        api, m = self.server.api, self.server.metrics
        store_res = "nodes" if res.plural == "nodes" else "pods"
        resname = "nodemetrics" if res.plural == "nodes" else "podmetrics"
        if name is not None:
            o = api.store.get(store_res, (ns or "", name))
            items = (m.node_metrics if store_res == "nodes" else m.pod_metrics)([o] if o else [])
            if not items:
                shown = name if store_res == "nodes" else "%s/%s" % (ns, name)
                raise ApiError(404, "NotFound", '%s.%s "%s" not found' % (resname, METRICS_GROUP, shown),
                               {"name": shown, "group": METRICS_GROUP, "kind": resname})
            self.send_obj(200, metrics_table(items) if self.wants_table() else items[0])
            return
        lsel = parse_label_selector(self.query1(q, "labelSelector", ""))
        fsel = parse_field_selector(self.query1(q, "fieldSelector", ""), res)
        objs, _ = api.list(RESOURCES[("", store_res)], ns, Filter(res, ns, lsel, fsel))
        items = m.node_metrics(objs) if store_res == "nodes" else m.pod_metrics(objs)
        if self.wants_table():
            self.send_obj(200, metrics_table(items))
            return
        self.send_obj(200, {"kind": res.kind + "List", "apiVersion": res.api_version, "metadata": {}, "items": items})

