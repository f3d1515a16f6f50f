"""pods/exec, pods/attach, pods/portforward and nodes/proxy: proxied to the kubelet endpoint of
the Node as kube-apiserver 1.28 does (tests/kube/README.md, "What it implements").

An upgrade request (exec, attach, port-forward; an upgrade on nodes/proxy) is checked, then
relayed as it came: the path rewritten to the kubelet's form, the query flags renamed, the
client's headers copied under Go's canonical names (no Authorization, no Impersonate-*), Host
kept, X-Forwarded-For appended. A kubelet answer other than 101 is passed through and the
connection closed; after a 101 the bytes are relayed both ways until either side closes.
Other nodes/proxy requests are reverse-proxied (hop-by-hop headers dropped)."""

import collections
import http.client
import select
import socket
import ssl
import urllib.parse

from .errors import ApiError, bad_request
from .util import send_all
from .kubelet import dial, go_dial_error, join_host_port, kubelet_context, node_endpoint, pick_container, proxyable

# Dropped by Go's net/http/httputil.ReverseProxy in both directions.
HOP_BY_HOP = ("Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te",
              "Trailer", "Transfer-Encoding", "Upgrade")

_TOKEN_CHARS = set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def canonical(key):
    """Go's textproto.CanonicalMIMEHeaderKey: 'sec-websocket-key' -> 'Sec-Websocket-Key'; a key
    with a character outside the HTTP token set is left as it is."""
    if not key or any(c not in _TOKEN_CHARS for c in key):
        return key
    out, up = [], True
    for c in key:
        out.append(c.upper() if up else c.lower())
        up = c == "-"
    return "".join(out)


def is_upgrade(headers):
    """apimachinery's httpstream.IsUpgradeRequest: a Connection header naming upgrade."""
    return any("upgrade" in v.lower() for v in headers.get_all("Connection") or [])


def _bool(q, k):
    v = (q.get(k) or [""])[0]
    return v not in ("", "0") and v.lower() != "false"




def relay(a, b, max_queued=4 << 20):
    """Copies bytes both ways between the sockets a and b (TLS or plain) until either side
    ends or fails, as apimachinery's UpgradeAwareHandler does after a 101. One thread, so that
    no TLS connection is read and written from two threads at once; each direction has a queue
    of its own (a side is not read while its peer's queue holds max_queued bytes), so that a
    peer that is slow to read one way never stops the other way (a blocking write would: the
    API server copies each direction in a goroutine of its own). When a side ends or fails,
    what was already read from either side still goes out to the other (the API server's copy
    writes what it read before it looks at the next read), so a session's last frames are not
    lost to a peer's reset or a failed write the other way."""
    socks = (a, b)
    peer = {a: b, b: a}
    out = {a: bytearray(), b: bytearray()}  # what waits to be written to each socket

    def flush_and_end(failed=None):
        for t in socks:
            if t is not failed and out[t]:
                try:
                    send_all(t, bytes(out[t]))
                except (OSError, ValueError):
                    pass

    try:
        for s in socks:
            s.setblocking(False)
    except (OSError, ValueError):
        return
    while True:
        readable = [s for s in socks if len(out[peer[s]]) < max_queued]
        writable = [s for s in socks if out[s]]
        ready_r = [s for s in readable if isinstance(s, ssl.SSLSocket) and s.pending()]
        ready_w = []
        if not ready_r:
            try:
                ready_r, ready_w, _ = select.select(readable, writable, [])
            except (OSError, ValueError):
                return
        for s in ready_w:
            try:
                n = s.send(out[s])
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError, InterruptedError):
                continue
            except (OSError, ValueError):
                return flush_and_end(failed=s)
            del out[s][:n]
        for s in ready_r:
            try:
                data = s.recv(65536)
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError, InterruptedError):
                continue
            except (OSError, ValueError):
                return flush_and_end(failed=s)
            if not data:  # what the side that ended sent still goes out
                return flush_and_end()
            out[peer[s]] += data


def _read_head(s, limit=65536):
    """(head, rest): the response head up to its blank line and the bytes read past it."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        if len(buf) > limit:
            raise ValueError("response head over %d bytes" % limit)
        data = s.recv(65536)
        if not data:
            raise EOFError("EOF")
        buf += data
    i = buf.index(b"\r\n\r\n") + 4
    return buf[:i], buf[i:]


def _chunked_len(buf):
    """The length of a complete chunked body at the start of buf, or None while incomplete."""
    i = 0
    while True:
        j = buf.find(b"\r\n", i)
        if j < 0:
            return None
        n = int(buf[i:j].split(b";")[0].strip() or b"0", 16)
        i = j + 2
        if n == 0:
            while True:
                j = buf.find(b"\r\n", i)
                if j < 0:
                    return None
                if j == i:
                    return j + 2
                i = j + 2
        i += n + 2
        if i > len(buf):
            return None


def _read_body(s, code, head, rest, method, limit=1 << 20):
    """The body of a response (its bytes as framed on the wire), read within the socket's timeout."""
    if method == "HEAD" or code in (204, 304) or 100 <= code < 200:
        return b""
    msg = http.client.parse_headers(_Lines(head.split(b"\r\n", 1)[1]))
    te = (msg.get("Transfer-Encoding") or "").lower()
    cl = msg.get("Content-Length")
    body = rest
    try:
        while len(body) < limit:
            if "chunked" in te:
                n = _chunked_len(body)
                if n is not None:
                    return body[:n]
            elif cl is not None and len(body) >= int(cl):
                return body[:int(cl)]
            data = s.recv(65536)
            if not data:
                break
            body += data
    except (OSError, ValueError):
        pass
    return body


class _Lines(object):
    """A file-like readline() over bytes, for http.client.parse_headers."""

    def __init__(self, data):
        self.lines = data.splitlines(True)

    def readline(self, limit=-1):
        return self.lines.pop(0) if self.lines else b""


class StreamingHandler:
    """Mixin of handler.Handler: the streaming subresources and nodes/proxy."""

    def forwarded_headers(self, drop=()):
        """The client's headers as Go's server reads them (canonical names, values in order),
        less Host, User-Agent, framing, credentials and drop, plus X-Forwarded-For."""
        groups = collections.OrderedDict()
        conn_named = set()
        for v in self.headers.get_all("Connection") or []:
            conn_named |= {canonical(t.strip()) for t in v.split(",") if t.strip()}
        for k, v in self.headers.items():
            ck = canonical(k)
            if ck in ("Host", "User-Agent", "Content-Length", "Transfer-Encoding", "Authorization") or \
                    ck.startswith("Impersonate-") or ck in drop or ("Connection" in drop and ck in conn_named):
                continue
            groups.setdefault(ck, []).append(v)
        prior = groups.pop("X-Forwarded-For", [])
        groups["X-Forwarded-For"] = [", ".join(prior + [self.client_address[0]])]
        return groups

    def request_head(self, method, target, body):
        """The request as Go's http.Request.Write puts it on the wire: Host, User-Agent,
        Content-Length, then the other headers sorted by name."""
        lines = ["%s %s HTTP/1.1" % (method, target), "Host: " + (self.headers.get("Host") or "")]
        ua = self.headers.get("User-Agent")
        if ua is None:
            lines.append("User-Agent: Go-http-client/1.1")
        elif ua:
            lines.append("User-Agent: " + ua)
        if body or method in ("POST", "PUT", "PATCH"):
            lines.append("Content-Length: %d" % len(body))
        groups = self.forwarded_headers()
        for k in sorted(groups):
            lines += ["%s: %s" % (k, v) for v in groups[k]]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    # -- pods/exec, pods/attach, pods/portforward
    def pod_stream(self, method, pod, sub, q, body):
        """The checks kube-apiserver makes before it dials (in its order), then the relay."""
        if method not in ("GET", "POST"):
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        name, ns = pod["metadata"]["name"], pod["metadata"]["namespace"]
        params = []
        if sub == "portforward":
            ports = []
            for v in q.get("ports") or []:      # one port per value, as PodPortForwardOptions.Ports
                try:
                    ports.append(str(int(v, 10)))
                except ValueError:
                    raise bad_request('strconv.ParseInt: parsing "%s": invalid syntax' % v)
            if ports:
                params.append(("port", ",".join(ports)))
            path = "/portForward/%s/%s" % (ns, name)
        else:
            container = pick_container(pod, self.query1(q, "container", ""))
            if sub == "exec":
                params += [("command", c) for c in q.get("command") or []]
            for flag, param in (("stderr", "error"), ("stdin", "input"), ("stdout", "output"), ("tty", "tty")):
                if _bool(q, flag):
                    params.append((param, "1"))
            path = "/%s/%s/%s/%s" % (sub, ns, name, container)
        node_name = (pod.get("spec") or {}).get("nodeName")
        if not node_name:
            raise bad_request("pod %s does not have a host assigned" % name)
        host, port = node_endpoint(self.server.api, node_name, self.server.opts.kubelet_preferred_address_types)
        if not is_upgrade(self.headers):
            raise bad_request("Upgrade request required")
        target = path + ("?" + urllib.parse.urlencode(params) if params else "")
        self.proxy_upgrade(method, host, port, target, kubelet_context(self.server, {}, node_name), body)

    def proxy_upgrade(self, method, host, port, target, ctx, body):
        try:
            be = dial(ctx, host, port)
        except (OSError, ssl.SSLError) as e:
            raise ApiError(500, "", "error dialing backend: " + go_dial_error(e, host, port))
        try:
            be.settimeout(30)
            try:
                be.sendall(self.request_head(method, target, body) + body)
                head, rest = _read_head(be)
                code = int(head.split(b" ", 2)[1])
            except (OSError, EOFError, ValueError, IndexError) as e:
                raise ApiError(500, "", "error proxying to the kubelet: %s" % (e or "EOF"))
            self.close_connection = True
            self.status_code = code
            client = self.connection
            if code != 101:
                send_all(client, head + _read_body(be, code, head, rest, method))
            else:
                be.settimeout(None)
                client.sendall(head + rest)
                pipelined = b""
                client.setblocking(False)
                try:
                    pipelined = self.rfile.read1(65536) or b""
                except (ssl.SSLWantReadError, BlockingIOError, TypeError):
                    pass
                if pipelined:
                    send_all(be, pipelined)
                relay(client, be)
            try:
                client.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        finally:
            be.close()

    # -- nodes/proxy
    def node_proxy(self, method, name, body):
        """GET|POST|... /api/v1/nodes/NAME[:PORT]/proxy/PATH -> the same method on
        https://<node address>:<kubelet port>/PATH with the kubelet client certificate."""
        srv = self.server
        node_name, _, req_port = name.partition(":")
        host, port = node_endpoint(srv.api, node_name, srv.opts.kubelet_preferred_address_types)
        if req_port and req_port != str(port):
            raise bad_request("this test double proxies nodes/proxy to the kubelet port (%d) only" % port)
        if srv.opts.node_proxy_global_only:
            why = proxyable(host)
            if why:
                raise bad_request(why)
        u = urllib.parse.urlsplit(self.path)
        mark = "/nodes/%s/proxy" % name
        tail = u.path[u.path.index(mark) + len(mark):] or "/"
        target = tail + ("?" + u.query if u.query else "")
        ctx = kubelet_context(srv, {}, node_name)
        if is_upgrade(self.headers):
            self.proxy_upgrade(method, host, port, target, ctx, body)
            return
        conn = http.client.HTTPSConnection(host, port, context=ctx, timeout=30)
        try:
            try:
                conn.sock = dial(ctx, host, port)
                conn.sock.settimeout(30)
                conn.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
                conn.putheader("Host", self.headers.get("Host") or join_host_port(host, port))
                if self.headers.get("User-Agent"):
                    conn.putheader("User-Agent", self.headers["User-Agent"])
                for k, vs in self.forwarded_headers(drop=HOP_BY_HOP).items():
                    for v in vs:
                        conn.putheader(k, v)
                if body or method in ("POST", "PUT", "PATCH"):
                    conn.putheader("Content-Length", str(len(body)))
                conn.endheaders(body or None)
                resp = conn.getresponse()
            except (OSError, ssl.SSLError, http.client.HTTPException) as e:
                if isinstance(e, http.client.RemoteDisconnected):
                    raise ApiError(503, "ServiceUnavailable", "error trying to reach service: EOF")
                raise ApiError(503, "ServiceUnavailable", "error trying to reach service: " + go_dial_error(e, host, port))
            self.status_code = resp.status
            self.send_response_only(resp.status, resp.reason)
            length = resp.getheader("Content-Length")
            for k, v in resp.getheaders():
                if canonical(k) not in HOP_BY_HOP + ("Content-Length",):
                    self.send_header(k, v)
            chunked = length is None and method != "HEAD" and resp.status not in (204, 304)
            if length is not None:
                self.send_header("Content-Length", length)
            elif chunked:
                self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            if method == "HEAD":
                return
            while True:
                try:
                    data = resp.read1(65536)
                except (OSError, http.client.HTTPException):
                    self.close_connection = True
                    break
                if not data:
                    break
                if chunked:
                    self.chunk(data)
                else:
                    self.wfile.write(data)
            if chunked:
                self.end_chunked()
        finally:
            conn.close()
