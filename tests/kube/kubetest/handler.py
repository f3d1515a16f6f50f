"""The request handler: HTTP plumbing (bodies, chunked responses), authentication (bearer
token or client certificate), the faults of /_test/fault, the request log entry and routing of
discovery and resource paths. The resource verbs, watches, pod logs, the review APIs and test
controls are its mixins.

Verbs for authorization, as kube-apiserver maps them: GET get (list, watch), POST create, PUT update,
PATCH patch, DELETE delete; so pods/exec, pods/attach and pods/portforward need create for
kubectl's SPDY POST and get for a WebSocket GET, and nodes/proxy the verb of its method."""

import http.server
import json
import ssl
import time
import urllib.parse

from .auth import forbidden
from .controls import TestControls
from .discovery import api_group, api_resource_list, openapi_v2_pb
from .errors import ApiError
from .impersonation import impersonate
from .metrics import MetricsHandler
from .pod_log import PodLogHandler
from .resource_handler import ResourceHandler
from .resources import AUTHN_GROUP, AUTHZ_GROUP, GROUPS, METRICS_GROUP, RESOURCES
from .reviews import ReviewHandler
from .selectors import selector_name
from .server import path_template
from .streaming import StreamingHandler
from .util import K8S_VERSION, log
from .watch import WatchHandler


class Handler(ResourceHandler, WatchHandler, PodLogHandler, StreamingHandler, MetricsHandler, ReviewHandler,
              TestControls, http.server.BaseHTTPRequestHandler):
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
        """Returns (user, groups) or None for a bad token. Anonymous -> ('system:anonymous', [...]).
        Sets self.uid and self.extra (a token's uid and user extra; empty for a certificate or
        anonymous)."""
        authz = self.headers.get("Authorization")
        api = self.server.api
        self.uid, self.extra = "", {}
        if authz:
            parts = authz.split(None, 1)
            if len(parts) == 2 and parts[0].lower() == "bearer":
                t = api.auth.authenticate_token(parts[1].strip())
                if t:
                    self.uid, self.extra = t[1], t[3]
                    return t[0], t[2]
            return None
        if isinstance(self.connection, ssl.SSLSocket):
            try:
                cert = self.connection.getpeercert()
            except (ValueError, ssl.SSLError):
                cert = None
            if cert:
                # The TLS layer checks the chain but not the validity period (tls.server_context):
                # kube-apiserver asks for a client certificate without requiring it and verifies it in
                # its x509 authenticator, so an expired one (or one not valid yet) gets 401.
                now = time.time()
                try:
                    if not ssl.cert_time_to_seconds(cert["notBefore"]) <= now <= ssl.cert_time_to_seconds(cert["notAfter"]):
                        return None
                except (KeyError, ValueError):
                    return None
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
        self.user_info = None
        self.impersonator = None
        self.after = None
        try:
            body = self.read_body() if method in ("POST", "PUT", "PATCH", "DELETE") else b""
            ident = self.authenticate()
            if ident is None:
                self.user = "<invalid token>"
                raise ApiError(401, "Unauthorized", "Unauthorized")
            self.user, self.groups = ident
            acting = impersonate(srv.api.auth, self.user, self.groups, self.headers)
            if acting is not None:
                self.impersonator = self.user
                self.user, self.uid, self.groups, self.extra = acting
            self.user_info = (self.user, self.uid, list(self.groups), dict(self.extra))
            if path.startswith("/_test/") or path == "/_test":
                if not srv.api.auth.is_admin(self.user, self.groups):
                    raise ApiError(403, "Forbidden", 'forbidden: User "%s" cannot use the test controls' % self.user)
                self.control(method, path, q, body)
            else:
                if self.injected_fault():
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
                if self.impersonator:
                    entry["impersonator"] = self.impersonator
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
        if len(rest) > 3 and not (rest[0] == "nodes" and rest[2] == "proxy"):   # nodes/NAME/proxy/PATH
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
        # kube-apiserver's RequestInfo: a list or watch with an exact metadata.name field selector is
        # authorized (and refused) as a request for that name.
        authz_name = name if name is not None or verb not in ("list", "watch") else selector_name(q)
        allowed, reason = srv.api.auth.decide(self.user, self.groups, verb, group, res.plural, sub, ns, authz_name)
        if not allowed:
            raise forbidden(self.user, verb, res, sub, authz_name, ns, reason)
        if res.group == METRICS_GROUP:
            self.metrics(method, verb, res, ns, name, q)
            return
        if res.group in (AUTHN_GROUP, AUTHZ_GROUP):
            self.review(method, res, name, body)
            return
        self.resource(method, verb, res, ns, name, sub, q, body)
