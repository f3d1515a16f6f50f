#!/usr/bin/python3
"""A tiny fake kubelet HTTPS endpoint for log-proxy tests (Python 3 standard library only).

Serves GET /containerLogs/NS/POD/CONTAINER?follow=&tailLines=&timestamps=&sinceSeconds=&previous=
and requires a TLS client certificate signed by --ca (the API server's kubelet client cert).

Log lines: "log line 1" .. "log line N" (N = --lines, default 5).  tailLines keeps the last ones,
timestamps prefixes an RFC 3339 time, previous=true answers "previous log line 1".  With follow=true
it then writes "follow line K" every 0.2 s until the client goes away (at most --follow-max lines).
An unknown pod name starting with "missing" answers 404 like a kubelet.

As a module:  k = FakeKubelet(cert, key, ca); k.port; k.requests (list of dicts); k.stop()
As a program: fake_kubelet.py --cert C --key K --ca CA [--listen 127.0.0.1:0] [--port-file F]
"""
import argparse
import http.server
import os
import ssl
import sys
import threading
import time
import urllib.parse


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_GET(self):
        fk = self.server.fk
        u = urllib.parse.urlsplit(self.path)
        q = dict(urllib.parse.parse_qsl(u.query))
        cert = self.connection.getpeercert() or {}
        cn = ""
        for rdn in cert.get("subject", ()):
            for k, v in rdn:
                if k == "commonName":
                    cn = v
        fk.requests.append({"path": u.path, "query": q, "clientCN": cn})
        parts = u.path.split("/")
        if len(parts) != 5 or parts[1] != "containerLogs":
            self.reply(404, b"404 page not found\n")
            return
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

    def chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def reply(self, code, body):
        self.send_response(code)
        self.send_header("Content-Type", "text/plain")
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
    def __init__(self, cert, key, ca, host="127.0.0.1", port=0, lines=5, follow_max=50):
        self.requests = []
        self.lines, self.follow_max, self.stopped = lines, follow_max, False
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
    a = ap.parse_args()
    host, _, port = a.listen.rpartition(":")
    k = FakeKubelet(a.cert, a.key, a.ca, host or "127.0.0.1", int(port), a.lines)
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
