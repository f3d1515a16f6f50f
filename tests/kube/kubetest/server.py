"""The HTTP(S) server: per-connection TLS, the request log and counters behind /_test/requests
and /_test/counters, and the refuse fault (the listening socket closed for a while)."""

import collections
import http.server
import select
import socket
import ssl
import threading
import time

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
