"""The HTTP(S) server: per-connection TLS, the request log and counters behind /_test/requests
and /_test/counters, the refuse fault (the listening socket closed for a while), and the audit
log of --audit-log (AuditLog: kube-apiserver's JSON-lines format, level Metadata)."""

import collections
import datetime
import http.server
import json
import select
import socket
import ssl
import threading
import time
import urllib.parse
import uuid

from .util import log


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


# kube-apiserver's long-running requests (BasicLongRunningRequestCheck): their audit events are a
# ResponseStarted when the response starts and a ResponseComplete when it ends.
LONG_RUNNING_VERBS = ("watch", "proxy")
LONG_RUNNING_SUBRESOURCES = ("attach", "exec", "proxy", "log", "portforward")


def request_info(method, path, q):
    """(verb, objectRef or None) of a request as kube-apiserver's RequestInfoFactory names them:
    a resource request's verb get/list/watch/create/update/patch/delete/deletecollection and
    its objectRef {resource, namespace, name, apiGroup, apiVersion, subresource}; a
    non-resource request's verb is the method in lower case."""
    segs = [s for s in path.split("/") if s]
    if segs[:1] == ["api"] and len(segs) >= 2:
        group, version, parts = "", segs[1], segs[2:]
    elif segs[:1] == ["apis"] and len(segs) >= 3:
        group, version, parts = segs[1], segs[2], segs[3:]
    else:
        parts = []
    if not parts:
        return method.lower(), None
    ref = {}
    if parts[0] == "namespaces" and len(parts) > 1:
        ref["namespace"] = parts[1]
        if len(parts) > 2 and parts[2] not in ("status", "finalize"):
            parts = parts[2:]
    ref["resource"] = parts[0]
    if len(parts) > 1:
        ref["name"] = parts[1]
    if len(parts) > 2:
        ref["subresource"] = parts[2]
    if group:
        ref["apiGroup"] = group
    ref["apiVersion"] = version
    if method in ("GET", "HEAD"):
        if "name" in ref:
            verb = "get"
        else:
            verb = "watch" if (q.get("watch") or [""])[0] in ("1", "true", "True") else "list"
            # a list or watch of one name (fieldSelector metadata.name=NAME) names it
            for sel in q.get("fieldSelector", []):
                for term in sel.split(","):
                    k, _, v = term.partition("=")
                    v = v[1:] if v.startswith("=") else v   # = or ==, not !=
                    if k.strip() == "metadata.name" and v.strip():
                        ref["name"] = v.strip()
    else:
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch",
                "DELETE": "delete" if "name" in ref else "deletecollection"}.get(method, method.lower())
    return verb, ref


def micro_time(t):
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class AuditLog(object):
    """--audit-log PATH: one line per stage of every API request (not /_test), as kube-apiserver's
    log backend writes audit.k8s.io/v1 Events at level Metadata with RequestReceived omitted: a
    ResponseComplete when a request finished; a long-running one (watch, exec, attach,
    portforward, log, proxy) also a ResponseStarted when its response started; a failed
    authentication only a ResponseStarted (code 401, user {}). Appended and flushed line by line
    (the blocking mode)."""

    def __init__(self, path):
        self.path = path
        self.f = open(path, "a", encoding="utf-8")
        self.lock = threading.Lock()

    def close(self):
        with self.lock:
            self.f.close()

    @staticmethod
    def long_running(verb, ref):
        return verb in LONG_RUNNING_VERBS or bool(ref and ref.get("subresource") in LONG_RUNNING_SUBRESOURCES)

    def event(self, h, st, stage, code):
        if st["code"] == 401:
            user = {}
        else:
            user = {"username": getattr(h, "user", "") or ""}
            if getattr(h, "uid", ""):
                user["uid"] = h.uid
            groups = list(getattr(h, "groups", None) or [])
            if groups:
                user["groups"] = groups
        ev = {"kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata", "auditID": st["id"],
              "stage": stage, "requestURI": h.path, "verb": st["verb"], "user": user,
              "sourceIPs": [h.client_address[0]], "userAgent": h.headers.get("User-Agent", "")}
        if st["ref"]:
            ev["objectRef"] = st["ref"]
        ev["responseStatus"] = {"metadata": {}, "code": code}
        ev["requestReceivedTimestamp"] = micro_time(st["t0"])
        ev["stageTimestamp"] = micro_time(time.time())
        line = json.dumps(ev, separators=(",", ":")) + "\n"
        with self.lock:
            if not self.f.closed:
                self.f.write(line)
                self.f.flush()

    def handler_class(self, base):
        """base with its requests audited: dispatch() brackets a request, send_response_only()
        sees its response start."""
        audit = self

        class Audited(base):
            def dispatch(self, method):
                u = urllib.parse.urlsplit(self.path)
                st = None
                if not (u.path == "/_test" or u.path.startswith("/_test/")):
                    verb, ref = request_info(method, u.path, urllib.parse.parse_qs(u.query, keep_blank_values=True))
                    st = {"id": str(uuid.uuid4()), "t0": time.time(), "verb": verb, "ref": ref, "code": None,
                          "started": False, "long": audit.long_running(verb, ref)}
                self._audit = st
                try:
                    base.dispatch(self, method)
                finally:
                    self._audit = None
                    if st is not None:
                        audit.finished(self, st)

            def send_response_only(self, code, message=None):
                base.send_response_only(self, code, message)
                st = getattr(self, "_audit", None)
                if st is None or st["code"] is not None:
                    return
                st["code"] = code
                if code == 401 or st["long"]:
                    st["started"] = True
                    audit.event(self, st, "ResponseStarted", code)

        return Audited

    def finished(self, h, st):
        if st["code"] == 401:
            return   # kube-apiserver's failed-authentication event is the ResponseStarted alone
        code = st["code"] or getattr(h, "status_code", 0) or 200   # nothing sent: "closed early", 200
        if st["long"] and not st["started"]:
            self.event(h, st, "ResponseStarted", code)
        self.event(h, st, "ResponseComplete", code)


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 4096

    def __init__(self, addr, handler, api, opts, ctx):
        path = getattr(opts, "audit_log", None)
        self.audit = AuditLog(path) if path else None
        if self.audit:
            handler = self.audit.handler_class(handler)
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
