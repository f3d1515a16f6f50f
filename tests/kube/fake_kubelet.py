#!/usr/bin/python3
"""A small fake kubelet HTTPS endpoint for the API server's proxies (Python 3 standard library only).

A protocol double for the proxy tests, not a runtime: it runs no program. It requires a TLS
client certificate signed by --ca (the API server's kubelet client certificate) and serves:

GET /containerLogs/NS/POD/CONTAINER?follow=&tailLines=&timestamps=&sinceSeconds=&previous=
  Log lines "log line 1" .. "log line N" (N = --lines, default 5).  tailLines keeps the last ones,
  timestamps prefixes an RFC 3339 time, previous=true answers "previous log line 1".  With
  follow=true it then writes "follow line K" every 0.2 s until the client goes away (at most
  --follow-max lines).

POST|GET /exec/NS/POD/CONTAINER?command=..&input=1&output=1&error=1&tty=1, /attach/NS/POD/CONTAINER
  The streaming endpoints in both protocols a kubelet speaks: SPDY/3.1 (POST or GET with
  `Upgrade: SPDY/3.1`, X-Stream-Protocol-Version v4/v3/v2.channel.k8s.io, channel.k8s.io: one
  stream per streamtype header error, stdin, stdout, stderr, resize, each answered with a
  SYN_REPLY) and WebSocket (RFC 6455, subprotocols v5.channel.k8s.io and v4.channel.k8s.io:
  each message's first byte is its channel, 0 stdin 1 stdout 2 stderr 3 error 4 resize, v5's
  [255, c] closes channel c). Once every stream the query asks for is open, the command runs;
  its metav1.Status goes on the error stream and the session ends. Commands (argv words, never
  a shell): `echo WORDS` (stdout), `echoerr WORDS` (stderr), `cat` (stdin to stdout until its
  end), `exit N`, `true`, `false`; any other gives a Failure Status (500, InternalError).
  attach writes "attached to CONTAINER" and then copies stdin to stdout until its end.

POST /portForward/NS/POD (SPDY/3.1, portforward.k8s.io)
  Per connection the client opens an error and a data stream (headers port, requestid); the
  data stream is relayed to 127.0.0.1:PORT (the pod is on this host); a failed connect writes
  the kubelet's message on the error stream.

GET /metrics/resource
  The kubelet's resource metrics in Prometheus text: node_cpu_usage_seconds_total,
  node_memory_working_set_bytes, container_cpu_usage_seconds_total,
  container_memory_working_set_bytes, container_start_time_seconds {container, namespace, pod},
  scrape_error, each sample stamped with the time of the scrape in ms. The figures are .usage
  (default: the node uses 0.25 cores and 1 MiB, no containers), or --usage-file's JSON read at
  each scrape; CPU counters grow at the given rate from the kubelet's start, so two scrapes give
  back that rate (see resource_metrics). .metrics_text, when set, is served instead, as it is,
  with the status .metrics_status (default 200).

GET /healthz, /stats/summary and anything under /fakeproxy/ (nodes/proxy tests)
  Fixed bodies; /fakeproxy/... echoes the request line.

A pod named missing* answers 404 text (like a kubelet without that pod); a pod named
notrunning* answers 400 with a JSON Status "container C is not running" on the streaming paths.
Every request is recorded in .requests: method, path, query (first values), queryList,
requestLine, headers (as received: [name, value]), clientCN, protocol (the one negotiated); each
SPDY stream's headers as {"event": "stream", "headers": {...}}, each message on a resize stream as
{"event": "resize", "data": ...}. Under tty=1 a ^D ends cat's input.

As a module:  k = FakeKubelet(cert, key, ca); k.port; k.requests; k.active (sessions running); k.usage;
              k.metrics_text; k.metrics_status; k.stop()
As a program: fake_kubelet.py --cert C --key K --ca CA [--listen 127.0.0.1:0] [--port-file F]
              [--requests-file F]  (appends one JSON line per request) [--usage-file F]
"""
import argparse
import base64
import hashlib
import http.server
import json
import os
import select
import socket
import ssl
import struct
import sys
import threading
import time
import urllib.parse
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kubetest.util import send_all  # noqa: E402

# SPDY/3 header-block compression dictionary (draft 3, section 2.6.10.1): each name behind its
# 4-byte big-endian length, then a run of common values; 1423 bytes.
_DICT_NAMES = ["options", "head", "post", "put", "delete", "trace", "accept", "accept-charset", "accept-encoding",
               "accept-language", "accept-ranges", "age", "allow", "authorization", "cache-control", "connection",
               "content-base", "content-encoding", "content-language", "content-length", "content-location",
               "content-md5", "content-range", "content-type", "date", "etag", "expect", "expires", "from", "host",
               "if-match", "if-modified-since", "if-none-match", "if-range", "if-unmodified-since", "last-modified",
               "location", "max-forwards", "pragma", "proxy-authenticate", "proxy-authorization", "range", "referer",
               "retry-after", "server", "te", "trailer", "transfer-encoding", "upgrade", "user-agent", "vary", "via",
               "warning", "www-authenticate", "method", "get", "status", "200 OK", "version", "HTTP/1.1", "url",
               "public", "set-cookie", "keep-alive", "origin"]
_DICT_TAIL = ("100101201202205206300302303304305306307402405406407408409410411412413414415416417502504505"
              "203 Non-Authoritative Information204 No Content301 Moved Permanently400 Bad Request"
              "401 Unauthorized403 Forbidden404 Not Found500 Internal Server Error501 Not Implemented"
              "503 Service UnavailableJan Feb Mar Apr May Jun Jul Aug Sept Oct Nov Dec 00:00:00 "
              "Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMTchunked,text/html,image/png,image/jpg,image/gif,"
              "application/xml,application/xhtml+xml,text/plain,text/javascript,publicprivatemax-age="
              "gzip,deflate,sdchcharset=utf-8charset=iso-8859-1,utf-,*,enq=0.")
SPDY_DICT = b"".join(struct.pack(">I", len(n)) + n.encode() for n in _DICT_NAMES) + _DICT_TAIL.encode()
assert len(SPDY_DICT) == 1423

WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
SPDY_EXEC_PROTOCOLS = ["v4.channel.k8s.io", "v3.channel.k8s.io", "v2.channel.k8s.io", "channel.k8s.io"]
WS_EXEC_PROTOCOLS = ["v5.channel.k8s.io", "v4.channel.k8s.io"]
DEFAULT_USAGE = {"node": {"cpu": 0.25, "memory": 1 << 20}, "containers": []}
STDIN, STDOUT, STDERR, ERROR, RESIZE = 0, 1, 2, 3, 4
CHANNELS = {"stdin": STDIN, "stdout": STDOUT, "stderr": STDERR, "error": ERROR, "resize": RESIZE}


def resource_metrics(usage, now_ms, t0_ms):
    """The kubelet's /metrics/resource (Prometheus text format 0.0.4) for usage: {"node": {"cpu":
    cores, "memory": bytes}, "containers": [{"namespace", "pod", "container", "cpu", "memory",
    "start" (unix seconds, default t0)}]}. The CPU counters grow at the given rate since t0_ms
    (cpu * elapsed seconds), so two scrapes give back that rate; every sample is stamped now_ms."""
    el = (now_ms - t0_ms) / 1000.0
    node = usage.get("node")
    cs = usage.get("containers") or []

    def lab(c):
        return '{container="%s",namespace="%s",pod="%s"}' % (c["container"], c["namespace"], c["pod"])
    out = []
    for name, typ, what, val in (
            ("container_cpu_usage_seconds_total", "counter", "Cumulative cpu time consumed by the container in core-seconds",
             lambda c: c["cpu"] * el),
            ("container_memory_working_set_bytes", "gauge", "Current working set of the container in bytes",
             lambda c: c["memory"]),
            ("container_start_time_seconds", "gauge", "Start time of the container since unix epoch in seconds",
             lambda c: c.get("start", t0_ms / 1000.0))):
        if cs:
            out.append("# HELP %s [STABLE] %s\n# TYPE %s %s\n" % (name, what, name, typ))
            out += ["%s%s %r %d\n" % (name, lab(c), float(val(c)), now_ms) for c in cs]
    if node:
        out.append("# HELP node_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the node in core-seconds\n"
                   "# TYPE node_cpu_usage_seconds_total counter\n"
                   "node_cpu_usage_seconds_total %r %d\n" % (float(node["cpu"] * el), now_ms))
        out.append("# HELP node_memory_working_set_bytes [STABLE] Current working set of the node in bytes\n"
                   "# TYPE node_memory_working_set_bytes gauge\n"
                   "node_memory_working_set_bytes %r %d\n" % (float(node["memory"]), now_ms))
    out.append("# HELP scrape_error [STABLE] 1 if there was an error while getting container metrics, 0 otherwise\n"
               "# TYPE scrape_error gauge\nscrape_error 0\n")
    return "".join(out)


def status_for(code, error=None):
    """The metav1.Status a kubelet writes on the error stream: the command's exit code, or the
    error that kept it from running."""
    if error is not None:
        return {"metadata": {}, "status": "Failure", "message": "Internal error occurred: " + error,
                "reason": "InternalError", "details": {"causes": [{"message": error}]}, "code": 500}
    if code == 0:
        return {"metadata": {}, "status": "Success"}
    return {"metadata": {}, "status": "Failure",
            "message": "command terminated with non-zero exit code: exit status %d" % code,
            "reason": "NonZeroExitCode", "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]}}


class Program(object):
    """The fixed command set. out(channel, data) writes a stream; finish(status) ends the session."""

    def __init__(self, kind, argv, container, out, finish, has_stdin, tty=False):
        self.kind, self.argv, self.container = kind, argv, container
        self.out, self.finish, self.has_stdin, self.tty = out, finish, has_stdin, tty
        self.copying = False

    def start(self):
        if self.kind == "attach":
            self.out(STDOUT, ("attached to %s\n" % self.container).encode())
            return self._copy()
        a = self.argv
        if not a:
            return self.finish(status_for(0, error="error executing command in container: no command"))
        if a[0] == "echo":
            self.out(STDOUT, (" ".join(a[1:]) + "\n").encode())
            return self.finish(status_for(0))
        if a[0] == "echoerr":
            self.out(STDERR, (" ".join(a[1:]) + "\n").encode())
            return self.finish(status_for(0))
        if a[0] == "cat" and len(a) == 1:
            return self._copy()
        if a[0] in ("true", "false") and len(a) == 1:
            return self.finish(status_for(0 if a[0] == "true" else 1))
        if a[0] == "exit" and len(a) == 2 and a[1].isdigit():
            return self.finish(status_for(int(a[1]) & 255))
        self.finish(status_for(0, error='error executing command in container: exec: "%s": executable file not found in $PATH' % a[0]))

    def _copy(self):
        if not self.has_stdin:
            return self.finish(status_for(0))
        self.copying = True

    def stdin(self, data):
        """Under a TTY a ^D ends the input, as a terminal's line discipline would."""
        if self.copying and data:
            eof = self.tty and b"\x04" in data
            if eof:
                data = data[:data.index(b"\x04")]
            if data:
                self.out(STDOUT, data)
            if eof:
                self.stdin_eof()

    def stdin_eof(self):
        if self.copying:
            self.copying = False
            self.finish(status_for(0))




class Session(object):
    """One upgraded connection, driven by one thread: select over the connection (and, for
    port-forward, the upstream sockets), feed() the bytes read, write with send()."""

    def __init__(self, sock, leftover):
        self.sock = sock
        self.leftover = leftover
        self.done = False            # the session's last bytes are written
        self.upstreams = {}          # socket -> handler(data or b"" at EOF)

    def send(self, data):
        send_all(self.sock, data)

    def run(self, fk):
        self.sock.setblocking(False)
        if self.leftover:
            self.feed(self.leftover)
        deadline = None
        try:
            while not fk.stopped:
                if self.done and deadline is None:
                    # As a kubelet closes the connection when the command ended: no more bytes
                    # from here; go on reading (so that the close is no reset) until the client
                    # closes too, for 10 s at most.
                    deadline = time.monotonic() + 10
                    try:
                        self.sock.shutdown(socket.SHUT_WR)
                    except OSError:
                        pass
                if deadline is not None and time.monotonic() > deadline:
                    return
                socks = [self.sock] + list(self.upstreams)
                ready = [self.sock] if self.sock.pending() else []
                if not ready:
                    ready, _, _ = select.select(socks, [], [], 0.5)
                for s in ready:
                    try:
                        data = s.recv(65536)
                    except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError, InterruptedError):
                        continue
                    except OSError:
                        data = b""
                    if s is self.sock:
                        if not data:
                            return
                        if not self.done:
                            self.feed(data)
                    else:
                        self.upstreams[s](data)
        except (OSError, ValueError, KeyError, IndexError, struct.error, zlib.error):
            return      # a broken peer or garbage: the session ends, the server goes on
        finally:
            for s in list(self.upstreams):
                s.close()


class SpdySession(Session):
    """SPDY/3.1 server side: frames, zlib header blocks with the SPDY/3 dictionary."""

    def __init__(self, sock, leftover, fk, kind, q, container):
        Session.__init__(self, sock, leftover)
        self.fk, self.kind, self.q, self.container = fk, kind, q, container
        self.buf = b""
        self.inflate = zlib.decompressobj(zdict=SPDY_DICT)
        self.deflate = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, 15, 8, zlib.Z_DEFAULT_STRATEGY, SPDY_DICT)
        self.streams = {}            # stream id -> streamtype
        self.by_type = {}
        self.prog = None
        self.pf = {}                 # port-forward: data stream id -> upstream socket
        if kind != "portforward":
            want = ["error"] + [t for t, p in (("stdin", "input"), ("stdout", "output"), ("stderr", "error"))
                                if q.get(p) == "1"]
            if q.get("tty") == "1":
                want.append("resize")
            self.want = set(want)

    # -- frames
    def header_block(self, pairs):
        raw = struct.pack(">I", len(pairs))
        for k, v in pairs:
            raw += struct.pack(">I", len(k)) + k.encode() + struct.pack(">I", len(v)) + v.encode()
        return self.deflate.compress(raw) + self.deflate.flush(zlib.Z_SYNC_FLUSH)

    def control(self, ftype, flags, payload):
        self.send(struct.pack(">HHI", 0x8003, ftype, (flags << 24) | len(payload)) + payload)

    def data(self, sid, payload, fin=False):
        self.send(struct.pack(">II", sid & 0x7FFFFFFF, ((1 if fin else 0) << 24) | len(payload)) + payload)

    def feed(self, data):
        self.buf += data
        while len(self.buf) >= 8:
            w0, w1 = struct.unpack(">II", self.buf[:8])
            length = w1 & 0xFFFFFF
            if len(self.buf) < 8 + length:
                return
            payload, flags = self.buf[8:8 + length], w1 >> 24
            self.buf = self.buf[8 + length:]
            if w0 & 0x80000000:
                self.on_control((w0 >> 16) & 0x7FFF, w0 & 0xFFFF, flags, payload)
            else:
                self.on_data(w0 & 0x7FFFFFFF, flags, payload)
            if self.done:
                return

    def decode_headers(self, block):
        raw = self.inflate.decompress(block)
        n, = struct.unpack(">I", raw[:4])
        i, out = 4, {}
        for _ in range(n):
            ln, = struct.unpack(">I", raw[i:i + 4])
            k = raw[i + 4:i + 4 + ln].decode()
            i += 4 + ln
            ln, = struct.unpack(">I", raw[i:i + 4])
            out[k] = raw[i + 4:i + 4 + ln].decode()
            i += 4 + ln
        return out

    def on_control(self, version, ftype, flags, payload):
        if version != 3:
            return self.goaway(1)
        if ftype == 1:                                   # SYN_STREAM
            sid = struct.unpack(">I", payload[:4])[0] & 0x7FFFFFFF
            h = self.decode_headers(payload[10:])
            st = h.get("streamtype", "")
            self.control(2, 0, struct.pack(">I", sid) + self.header_block([]))   # SYN_REPLY
            self.streams[sid] = st
            self.fk.record({"event": "stream", "headers": h})
            if self.kind == "portforward":
                self.pf_stream(sid, st, h)
                return
            self.by_type[st] = sid
            if self.prog is None and self.want <= set(self.by_type):
                self.prog = Program(self.kind, self.q.get("command_list", []), self.container, self.out, self.finish,
                                    "stdin" in self.want, "resize" in self.want)
                self.prog.start()
        elif ftype == 3:                                 # RST_STREAM
            sid = struct.unpack(">I", payload[:4])[0] & 0x7FFFFFFF
            self.on_data(sid, 1, b"")
        elif ftype == 6:                                 # PING: echo it
            self.control(6, 0, payload)
        elif ftype == 7:                                 # GOAWAY
            self.done = True
        # SETTINGS, WINDOW_UPDATE, HEADERS: nothing to do for this double

    def on_data(self, sid, flags, payload):
        st = self.streams.get(sid)
        if self.kind == "portforward":
            up = self.pf.get(sid)
            if up is not None and st == "data":
                if payload:
                    send_all(up, payload)
                if flags & 1:
                    try:
                        up.shutdown(socket.SHUT_WR)
                    except OSError:
                        pass
            return
        if st == "resize" and payload:
            self.fk.record({"event": "resize", "data": payload.decode("utf-8", "replace")})
        if st == "stdin" and self.prog is not None:
            if payload:
                self.prog.stdin(payload)
            if flags & 1:
                self.prog.stdin_eof()

    def out(self, ch, data):
        name = {STDOUT: "stdout", STDERR: "stderr"}[ch]
        sid = self.by_type.get(name)
        if sid is not None:
            self.data(sid, data)

    def finish(self, status):
        for name in ("stdout", "stderr"):
            if name in self.by_type:
                self.data(self.by_type[name], b"", fin=True)
        self.data(self.by_type["error"], json.dumps(status).encode(), fin=True)
        self.goaway(0)

    def goaway(self, code):
        self.control(7, 0, struct.pack(">II", max(self.streams or [0]), code))
        self.done = True

    # -- port-forward
    def pf_stream(self, sid, st, h):
        if st != "data":
            return
        port = int(h.get("port") or 0)
        err_sid = next((i for i, t in self.streams.items() if t == "error" and i < sid), None)
        try:
            up = socket.create_connection(("127.0.0.1", port), timeout=5)
        except OSError as e:
            if err_sid is not None:
                self.data(err_sid, ("error forwarding port %d to pod %s, uid : failed to connect to localhost:%d "
                                    "inside namespace: %s" % (port, self.q.get("pod", ""), port, e)).encode(), fin=True)
            self.data(sid, b"", fin=True)
            return
        up.setblocking(False)
        self.pf[sid] = up

        def upstream(data, sid=sid, up=up, err_sid=err_sid):
            if data:
                self.data(sid, data)
                return
            self.data(sid, b"", fin=True)
            if err_sid is not None:
                self.data(err_sid, b"", fin=True)
            del self.upstreams[up]
            up.close()
        self.upstreams[up] = upstream


class WsSession(Session):
    """WebSocket (RFC 6455) server side with the v4/v5.channel.k8s.io channel byte."""

    def __init__(self, sock, leftover, fk, kind, q, container, protocol):
        Session.__init__(self, sock, leftover)
        self.v5 = protocol == "v5.channel.k8s.io"
        self.buf, self.msg, self.closed_sent = b"", None, False
        want_stdin = q.get("input") == "1"
        self.fk = fk
        self.prog = Program(kind, q.get("command_list", []), container, self.out, self.finish, want_stdin,
                            q.get("tty") == "1")
        self.prog.start()

    def frame(self, opcode, payload):
        n = len(payload)
        if n < 126:
            head = struct.pack(">BB", 0x80 | opcode, n)
        elif n < 65536:
            head = struct.pack(">BBH", 0x80 | opcode, 126, n)
        else:
            head = struct.pack(">BBQ", 0x80 | opcode, 127, n)
        self.send(head + payload)

    def out(self, ch, data):
        self.frame(2, bytes([ch]) + data)

    def finish(self, status):
        self.frame(2, bytes([ERROR]) + json.dumps(status).encode())
        self.close(1000)

    def close(self, code):
        if not self.closed_sent:
            self.closed_sent = True
            self.frame(8, struct.pack(">H", code))
        self.done = True

    def feed(self, data):
        self.buf += data
        while len(self.buf) >= 2:
            b0, b1 = self.buf[0], self.buf[1]
            n, i = b1 & 0x7F, 2
            if n == 126:
                if len(self.buf) < 4:
                    return
                n, i = struct.unpack(">H", self.buf[2:4])[0], 4
            elif n == 127:
                if len(self.buf) < 10:
                    return
                n, i = struct.unpack(">Q", self.buf[2:10])[0], 10
            if not b1 & 0x80:
                return self.close(1002)                  # client frames must be masked
            if len(self.buf) < i + 4 + n:
                return
            mask = self.buf[i:i + 4]
            payload = bytes(c ^ mask[k % 4] for k, c in enumerate(self.buf[i + 4:i + 4 + n]))
            self.buf = self.buf[i + 4 + n:]
            self.on_frame(b0 & 0x80, b0 & 0x0F, payload)
            if self.done:
                return

    def on_frame(self, fin, opcode, payload):
        if opcode == 8:
            return self.close(1000)
        if opcode == 9:
            return self.frame(10, payload)
        if opcode == 10:
            return
        if opcode in (1, 2):
            self.msg = payload
        elif opcode == 0 and self.msg is not None:
            self.msg += payload
        else:
            return self.close(1002)
        if not fin:
            return
        msg, self.msg = self.msg, None
        if not msg:
            return
        ch, data = msg[0], msg[1:]
        if ch == STDIN:
            self.prog.stdin(data)
        elif ch == RESIZE:
            self.fk.record({"event": "resize", "data": data.decode("utf-8", "replace")})
        elif ch == 255 and self.v5 and data[:1] == bytes([STDIN]):
            self.prog.stdin_eof()


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_GET(self):
        self.route("GET")

    def do_POST(self):
        self.route("POST")

    def route(self, method):
        fk = self.server.fk
        u = urllib.parse.urlsplit(self.path)
        ql = urllib.parse.parse_qsl(u.query, keep_blank_values=True)
        q = dict(ql)
        cert = self.connection.getpeercert() or {}
        cn = ""
        for rdn in cert.get("subject", ()):
            for k, v in rdn:
                if k == "commonName":
                    cn = v
        self.rec = {"method": method, "path": u.path, "query": q, "queryList": ql, "requestLine": self.requestline,
                    "headers": [[k, v] for k, v in self.headers.items()], "clientCN": cn, "protocol": ""}
        self.recorded = False
        parts = u.path.split("/")
        if method == "GET" and len(parts) == 5 and parts[1] == "containerLogs":
            return self.logs(parts, q)
        if len(parts) == 5 and parts[1] in ("exec", "attach"):
            sq = dict(q, command_list=[v for k, v in ql if k == "command"])
            return self.stream(parts[1], parts[2], parts[3], parts[4], sq)
        if len(parts) == 4 and parts[1] == "portForward":
            return self.stream("portforward", parts[2], parts[3], "", dict(q, pod=parts[3]))
        if method == "GET" and u.path == "/metrics/resource":
            return self.reply(fk.metrics_status, fk.metrics_body(), "text/plain; version=0.0.4")
        if method == "GET" and u.path == "/healthz":
            return self.reply(200, b"ok", "text/plain; charset=utf-8")
        if method == "GET" and u.path == "/stats/summary":
            return self.reply(200, json.dumps({"node": {"nodeName": "fake"}, "pods": []}).encode(), "application/json")
        if u.path.startswith("/fakeproxy/"):
            return self.reply(200, (self.requestline + "\n").encode(), "text/plain")
        self.reply(404, b"404 page not found\n")

    def commit(self):
        """Records the request once what it negotiated is known, before it is answered."""
        if not self.recorded:
            self.recorded = True
            self.server.fk.record(self.rec)

    def logs(self, parts, q):
        fk = self.server.fk
        self.commit()
        ns, pod, container = parts[2], parts[3], parts[4]
        if pod.startswith("missing"):
            self.reply(404, ("pod %s/%s not found\n" % (ns, pod)).encode())
            return
        prefix = "previous log line" if q.get("previous") == "true" else "log line"
        lines = ["%s %d" % (prefix, i + 1) for i in range(fk.lines)]
        lines = ["%s (%s)" % (l, container) for l in lines]
        if "tailLines" in q:
            n = int(q["tailLines"])
            lines = lines[-n:] if n > 0 else []
        stamp = q.get("timestamps") == "true"

        def fmt(l):
            return ((time.strftime("%Y-%m-%dT%H:%M:%S.000000000Z ", time.gmtime()) if stamp else "") + l + "\n").encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for l in lines:
                self.chunk(fmt(l))
            if q.get("follow") == "true":
                for k in range(fk.follow_max):
                    time.sleep(0.2)
                    if fk.stopped:
                        break
                    self.chunk(fmt("follow line %d" % (k + 1)))
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            self.close_connection = True

    def stream(self, kind, ns, pod, container, q):
        fk = self.server.fk
        self.close_connection = True
        if pod.startswith("missing"):
            return self.reply(404, ("pod %s/%s not found\n" % (ns, pod)).encode())
        if pod.startswith("notrunning"):
            st = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                  "message": "container %s is not running" % (container or "main"), "reason": "BadRequest", "code": 400}
            return self.reply(400, json.dumps(st).encode(), "application/json")
        upgrade = (self.headers.get("Upgrade") or "").lower()
        if upgrade == "websocket" and kind != "portforward":
            offered = [p.strip() for v in self.headers.get_all("Sec-WebSocket-Protocol") or [] for p in v.split(",")]
            proto = next((p for p in offered if p in WS_EXEC_PROTOCOLS), None)
            key = self.headers.get("Sec-WebSocket-Key") or ""
            if proto is None or not key:
                return self.reply(400, b"unable to upgrade: no supported websocket subprotocol\n")
            accept = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
            self.rec["protocol"] = proto
            self.switch(["Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Accept: " + accept,
                         "Sec-WebSocket-Protocol: " + proto])
            fk.session(WsSession(self.connection, self.leftover(), fk, kind, q, container, proto))
            return
        if upgrade != "spdy/3.1":
            return self.reply(400, b"Upgrade request required\n")
        server = ["portforward.k8s.io"] if kind == "portforward" else SPDY_EXEC_PROTOCOLS
        offered = [p.strip() for v in self.headers.get_all("X-Stream-Protocol-Version") or [] for p in v.split(",")]
        proto = next((p for p in offered if p in server), None)
        if proto is None:
            return self.reply(403, ("unable to upgrade: unable to negotiate protocol: client supports %s, server "
                                    "supports %s\n" % (offered, server)).encode())
        self.rec["protocol"] = proto
        self.switch(["Connection: Upgrade", "Upgrade: SPDY/3.1", "X-Stream-Protocol-Version: " + proto])
        fk.session(SpdySession(self.connection, self.leftover(), fk, kind, q, container))

    def switch(self, headers):
        self.commit()
        self.wfile.write(("HTTP/1.1 101 Switching Protocols\r\n" + "".join(h + "\r\n" for h in headers) + "\r\n").encode())

    def leftover(self):
        """Bytes the client sent after its request head that the request reader buffered."""
        self.connection.setblocking(False)
        try:
            return self.rfile.read1(65536) or b""
        except (ssl.SSLWantReadError, BlockingIOError, TypeError):
            return b""

    def chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def reply(self, code, body, ctype="text/plain"):
        self.commit()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def finish_request(self, request, client_address):
        try:
            request = self.ctx.wrap_socket(request, server_side=True)
        except (OSError, ssl.SSLError):
            request.close()
            return
        try:
            self.RequestHandlerClass(request, client_address, self)
        except OSError:
            pass
        finally:
            try:
                request.close()
            except OSError:
                pass

    def shutdown_request(self, request):
        pass


class FakeKubelet(object):
    def __init__(self, cert, key, ca, host="127.0.0.1", port=0, lines=5, follow_max=50, requests_file=None,
                 usage_file=None):
        self.requests = []
        self.usage = dict(DEFAULT_USAGE)   # what /metrics/resource reports (resource_metrics)
        self.metrics_text = None           # when set: /metrics/resource answers these bytes as they are
        self.metrics_status = 200          # the HTTP status /metrics/resource answers with
        self.usage_file = usage_file       # when set: usage is read from this JSON file at each scrape
        self.t0_ms = int(time.time() * 1000)
        self.active = 0              # upgraded sessions now running
        self.lines, self.follow_max, self.stopped = lines, follow_max, False
        self.requests_file = requests_file
        self.lock = threading.Lock()
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        ctx.load_verify_locations(ca)
        ctx.verify_mode = ssl.CERT_REQUIRED
        self.srv = _Server((host, port), _Handler)
        self.srv.ctx = ctx
        self.srv.fk = self
        self.port = self.srv.server_address[1]
        self.thread = threading.Thread(target=self.srv.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        self.thread.start()

    def metrics_body(self):
        if self.metrics_text is not None:
            return self.metrics_text
        usage = self.usage
        if self.usage_file:
            try:
                with open(self.usage_file) as f:
                    usage = json.load(f)
            except (OSError, ValueError):
                pass
        return resource_metrics(usage, int(time.time() * 1000), self.t0_ms).encode()

    def record(self, rec):
        with self.lock:
            self.requests.append(rec)
            if self.requests_file:
                with open(self.requests_file, "a") as f:
                    f.write(json.dumps({k: v for k, v in rec.items()}) + "\n")

    def session(self, sess):
        with self.lock:
            self.active += 1
        try:
            sess.run(self)
        finally:
            with self.lock:
                self.active -= 1

    def stop(self):
        self.stopped = True
        self.srv.shutdown()
        self.srv.server_close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--ca", required=True)
    ap.add_argument("--listen", default="127.0.0.1:0")
    ap.add_argument("--lines", type=int, default=5)
    ap.add_argument("--port-file")
    ap.add_argument("--requests-file")
    ap.add_argument("--usage-file", help="JSON usage for /metrics/resource, read at each scrape (resource_metrics)")
    a = ap.parse_args()
    host, _, port = a.listen.rpartition(":")
    k = FakeKubelet(a.cert, a.key, a.ca, host or "127.0.0.1", int(port), a.lines, requests_file=a.requests_file,
                    usage_file=a.usage_file)
    if a.port_file:
        with open(a.port_file + ".tmp", "w") as f:
            f.write("%d\n" % k.port)
        os.rename(a.port_file + ".tmp", a.port_file)
    sys.stderr.write("fake kubelet on %s:%d\n" % (host, k.port))
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    import signal
    signal.signal(signal.SIGTERM, lambda *a: os._exit(0))
    main()
