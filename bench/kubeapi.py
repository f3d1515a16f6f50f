"""The benchmarks' client of a real cluster's API server and their reading of its audit log
(Python 3 standard library only; no import of the test layers, so it can be tested alone).

  load_kubeconfig(path, context)  a kubeconfig's server, CA and credential, as kubectl reads them
                                  (YAML or JSON; paths relative to the file's directory). Supported
                                  credentials: token, tokenFile, client-certificate/client-key
                                  (files or -data). Everything else (exec plugins, auth-provider,
                                  basic auth, impersonation, insecure-skip-tls-verify, proxy-url)
                                  is refused with a KubeconfigError naming what is supported.
  ClusterApi(creds)               requests as that credential: api(), connection() and
                                  auth_headers() (for sktest.kube.Watch), version(), whoami()
                                  (SelfSubjectReview), can_i() (SelfSubjectAccessReview)
  audit_position / read_audit     kube-apiserver's JSON-lines audit log (audit.k8s.io/v1 Event)
  audit_requests                  its events folded to one record per request (auditID): a
                                  long-running request (watch, exec, ...) counts at its
                                  ResponseStarted, every other one at its ResponseComplete
  audit_window                    the requests received in a window: per user, per
                                  "VERB resource CODE", and the API server's latency of each
                                  (stageTimestamp - requestReceivedTimestamp of ResponseComplete)
"""
import base64
import calendar
import http.client
import json
import os
import re
import ssl
import tempfile
import urllib.parse

SUPPORTED_CREDENTIALS = ("token, tokenFile, client-certificate/client-key (files) or "
                         "client-certificate-data/client-key-data")


class KubeconfigError(Exception):
    pass


# ---------------------------------------------------------------- YAML (the subset kubeconfigs use)
class YamlError(ValueError):
    pass


def _strip_comment(s):
    """s without a trailing ` # comment` (outside quotes)."""
    q = None
    for i, c in enumerate(s):
        if q:
            if c == q:
                q = None
        elif c in "'\"" and (i == 0 or s[i - 1] in " \t:-[{,"):
            q = c
        elif c == "#" and (i == 0 or s[i - 1] in " \t"):
            return s[:i].rstrip()
    return s.rstrip()


def _scalar(s):
    s = s.strip()
    if s in ("", "~", "null", "Null", "NULL"):
        return None
    if s in ("true", "True", "TRUE"):
        return True
    if s in ("false", "False", "FALSE"):
        return False
    if s[0] == '"':
        try:
            return json.loads(s)
        except ValueError:
            raise YamlError("bad double-quoted string: " + s)
    if s[0] == "'":
        if len(s) < 2 or s[-1] != "'":
            raise YamlError("bad single-quoted string: " + s)
        return s[1:-1].replace("''", "'")
    if s[0] in "[{":
        if s in ("[]", "{}"):
            return [] if s == "[]" else {}
        try:
            return json.loads(s)
        except ValueError:
            pass
        if s[0] == "[" and s[-1] == "]":  # [a, b] of plain scalars
            return [_scalar(x) for x in s[1:-1].split(",") if x.strip()]
        raise YamlError("flow collection not understood: " + s)
    if s[0] in "&*!|>@`%":
        raise YamlError("YAML feature not supported here: " + s)
    return s


def _split_key(text):
    """('key', 'rest') of a mapping line `key: rest` / `key:`, or None."""
    if text[0] in "'\"":
        q = text[0]
        end = text.find(q, 1)
        if end < 0 or text[end + 1:end + 2] != ":":
            return None
        key, rest = text[1:end], text[end + 2:]
        if rest and rest[0] not in " \t":
            return None
        return key, rest.strip()
    m = re.match(r"([^:#\s'\"][^:]*?)\s*:(?:\s+(.*)|$)", text)
    if not m:
        return None
    return m.group(1), (m.group(2) or "").strip()


def parse_yaml(text):
    """The block YAML kubectl, kubeadm, kind and the clouds write kubeconfigs in: mappings,
    sequences (also at their key's indentation, as kubectl writes them), plain and quoted
    scalars, `{}`/`[]`/JSON flow collections, `|`/`>` block scalars, comments, one document.
    Anchors, tags and multi-documents raise YamlError."""
    lines = []
    raw = text.splitlines()
    i = 0
    while i < len(raw):
        ln = raw[i].rstrip("\r")
        i += 1
        if "\t" in ln[:len(ln) - len(ln.lstrip())]:
            raise YamlError("tab in indentation")
        body = ln.strip()
        if not body or body.startswith("#") or body == "---":
            continue
        if body == "...":
            break
        ind = len(ln) - len(ln.lstrip(" "))
        body = _strip_comment(ln.strip())
        # a block scalar: the more-indented lines that follow are its text
        if re.search(r"(^|:\s|-\s)[|>][-+]?$", body):
            block = []
            while i < len(raw) and (not raw[i].strip() or
                                    len(raw[i]) - len(raw[i].lstrip(" ")) > ind):
                block.append(raw[i])
                i += 1
            while block and not block[-1].strip():
                block.pop()
            bi = min((len(b) - len(b.lstrip(" ")) for b in block if b.strip()), default=0)
            style = body.rstrip("-+")[-1]
            parts = [b[bi:] for b in block]
            val = ("\n".join(parts) if style == "|" else " ".join(p.strip() for p in parts)) + "\n"
            if body.endswith("-"):
                val = val.rstrip("\n")
            lines.append([ind, body.rstrip("|>-+").rstrip(), val])
            continue
        lines.append([ind, body, None])
    if not lines:
        return None
    val, j = _block(lines, 0, lines[0][0])
    if j != len(lines):
        raise YamlError("unexpected indentation at: " + lines[j][1])
    return val


def _is_item(body):
    return body == "-" or body.startswith("- ")


def _value_after(lines, i, ind, rest, literal):
    """The value of `key: rest` (or `- rest`) on line i-1 whose own indentation is ind."""
    if literal is not None:
        return literal, i
    if rest != "":
        return _scalar(rest), i
    if i < len(lines) and lines[i][0] > ind:
        return _block(lines, i, lines[i][0])
    return None, i


def _block(lines, i, ind):
    if _is_item(lines[i][1]):
        return _seq(lines, i, ind)
    return _map(lines, i, ind)


def _seq(lines, i, ind):
    out = []
    while i < len(lines) and lines[i][0] == ind and _is_item(lines[i][1]):
        body, literal = lines[i][1], lines[i][2]
        rest = body[1:].lstrip(" ")
        if rest and _is_item(rest):   # `- - x`: a sequence in a sequence
            col = ind + (len(body) - len(rest))
            lines[i] = [col, rest, literal]
            val, i = _seq(lines, i, col)
        elif rest and rest[0] not in "{[" and _split_key(rest):
            # `- key: value` opens a mapping whose keys sit at the column of `key`
            col = ind + (len(body) - len(rest))
            lines[i] = [col, rest, literal]
            val, i = _map(lines, i, col)
        else:
            val, i = _value_after(lines, i + 1, ind, rest, literal)
        out.append(val)
    return out, i


def _map(lines, i, ind):
    out = {}
    while i < len(lines) and lines[i][0] == ind and not _is_item(lines[i][1]):
        body, literal = lines[i][1], lines[i][2]
        kv = _split_key(body)
        if kv is None:
            raise YamlError("expected `key: value`: " + body)
        key, rest = kv
        i += 1
        if rest == "" and literal is None and i < len(lines) and lines[i][0] == ind \
                and _is_item(lines[i][1]):
            val, i = _seq(lines, i, ind)   # kubectl's style: the list at the key's column
        else:
            val, i = _value_after(lines, i, ind, rest, literal)
        out[key] = val
    if i < len(lines) and lines[i][0] > ind:
        raise YamlError("unexpected indentation at: " + lines[i][1])
    return out, i


def load_yaml(text):
    """A kubeconfig's document: JSON, else the subset above, else PyYAML if it is installed."""
    t = text.lstrip()
    if t.startswith("{"):
        return json.loads(t)
    try:
        return parse_yaml(text)
    except YamlError as e:
        try:
            import yaml  # optional: only for YAML beyond the subset
        except ImportError:
            raise KubeconfigError("%s (flatten it: kubectl config view --raw --minify --flatten "
                                  "-o json > FILE)" % e)
        return yaml.safe_load(text)


# ---------------------------------------------------------------- kubeconfig
def _named(items, name, what, path):
    for it in items or []:
        if isinstance(it, dict) and it.get("name") == name:
            return it.get(what) or {}
    raise KubeconfigError("%s: no %s named %r" % (path, what, name))


def load_kubeconfig(path, context=None):
    """{server, ca_file, ca_data, tls_server_name, token, token_file, cert_file, cert_data,
    key_file, key_data, namespace, context, path} of a kubeconfig's context (default: its
    current-context). Raises KubeconfigError for what this client does not support."""
    path = os.path.abspath(path)
    try:
        with open(path) as f:
            doc = load_yaml(f.read())
    except OSError as e:
        raise KubeconfigError("%s: %s" % (path, e.strerror))
    except ValueError as e:
        raise KubeconfigError("%s: not a kubeconfig: %s" % (path, e))
    if not isinstance(doc, dict):
        raise KubeconfigError("%s: not a kubeconfig" % path)
    ctx_name = context or doc.get("current-context")
    if not ctx_name:
        raise KubeconfigError("%s: no current-context (name one with BENCH_KUBECONTEXT)" % path)
    ctx = _named(doc.get("contexts"), ctx_name, "context", path)
    cl = _named(doc.get("clusters"), ctx.get("cluster"), "cluster", path)
    user = _named(doc.get("users"), ctx.get("user"), "user", path) if ctx.get("user") else {}
    base = os.path.dirname(path)

    def rel(p):
        return p if os.path.isabs(p) else os.path.join(base, p)

    def b64(v, what):
        try:
            return base64.b64decode(v, validate=False)
        except ValueError:
            raise KubeconfigError("%s: %s is not base64" % (path, what))
    where = "%s (context %s)" % (path, ctx_name)
    if not cl.get("server"):
        raise KubeconfigError(where + ": its cluster has no server")
    for k, why in (("insecure-skip-tls-verify", "the API server must be verified (give its CA)"),
                   ("proxy-url", "no proxy support; run the benchmark where the server is reached "
                                 "directly")):
        if cl.get(k):
            raise KubeconfigError("%s: cluster %s is not supported: %s" % (where, k, why))
    for k in ("exec", "auth-provider", "username", "password", "as", "as-uid", "as-groups",
              "as-user-extra"):
        if user.get(k):
            raise KubeconfigError(
                "%s: user %s is not supported by the benchmarks' client; supported: %s "
                "(for example a ServiceAccount token: kubectl create token NAME -n NS)"
                % (where, k, SUPPORTED_CREDENTIALS))
    c = {"path": path, "context": ctx_name, "server": cl["server"].rstrip("/"),
         "namespace": ctx.get("namespace"), "tls_server_name": cl.get("tls-server-name"),
         "ca_file": rel(cl["certificate-authority"]) if cl.get("certificate-authority") else None,
         "ca_data": b64(cl["certificate-authority-data"], "certificate-authority-data")
         if cl.get("certificate-authority-data") else None,
         "token": user.get("token"),
         "token_file": rel(user["tokenFile"]) if user.get("tokenFile") else None,
         "cert_file": rel(user["client-certificate"]) if user.get("client-certificate") else None,
         "cert_data": b64(user["client-certificate-data"], "client-certificate-data")
         if user.get("client-certificate-data") else None,
         "key_file": rel(user["client-key"]) if user.get("client-key") else None,
         "key_data": b64(user["client-key-data"], "client-key-data")
         if user.get("client-key-data") else None}
    has_cert = c["cert_file"] or c["cert_data"]
    has_key = c["key_file"] or c["key_data"]
    if bool(has_cert) != bool(has_key):
        raise KubeconfigError(where + ": a client certificate needs its key and a key its "
                                      "certificate")
    if not (c["token"] or c["token_file"] or has_cert):
        raise KubeconfigError("%s: its user has no credential; supported: %s"
                              % (where, SUPPORTED_CREDENTIALS))
    for k in ("ca_file", "token_file", "cert_file", "key_file"):
        if c[k] and not os.path.isfile(c[k]):
            raise KubeconfigError("%s: %s: no such file" % (where, c[k]))
    if not c["server"].startswith(("https://", "http://")):
        raise KubeconfigError(where + ": server must be an https:// URL")
    return c


class _Conn(http.client.HTTPSConnection):
    """HTTPS with the TLS server name of the kubeconfig (tls-server-name), not the host's."""

    def __init__(self, host, port, sni, **kw):
        super().__init__(host, port, **kw)
        self._sni = sni

    def connect(self):
        http.client.HTTPConnection.connect(self)
        self.sock = self._context.wrap_socket(self.sock, server_hostname=self._sni or self.host)


class ClusterApi:
    """Requests to the API server of a kubeconfig's context, as its user."""

    def __init__(self, creds, tmpdir=None):
        self.creds = creds
        self.url = creds["server"]
        u = urllib.parse.urlsplit(self.url)
        self.scheme = u.scheme
        self.host = u.hostname
        self.port = u.port or (443 if u.scheme == "https" else 80)
        self.prefix = u.path.rstrip("/")   # a server URL may have a path (a proxy in front)
        self.ctx = None
        self._tmp = None
        if self.scheme == "https":
            cadata = creds["ca_data"].decode() if creds.get("ca_data") else None
            self.ctx = ssl.create_default_context(cafile=creds.get("ca_file"), cadata=cadata)
            cert, key = creds.get("cert_file"), creds.get("key_file")
            if creds.get("cert_data") or creds.get("key_data"):
                # ssl wants files: the -data of the kubeconfig in a private directory
                self._tmp = tempfile.mkdtemp(prefix="sk-bench-cred-", dir=tmpdir)
                if creds.get("cert_data"):
                    cert = self._write("client.crt", creds["cert_data"])
                if creds.get("key_data"):
                    key = self._write("client.key", creds["key_data"])
            if cert:
                self.ctx.load_cert_chain(cert, key)

    def _write(self, name, data):
        p = os.path.join(self._tmp, name)
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return p

    def close(self):
        if self._tmp:
            for n in os.listdir(self._tmp):
                os.unlink(os.path.join(self._tmp, n))
            os.rmdir(self._tmp)
            self._tmp = None

    def token(self):
        if self.creds.get("token_file"):   # read at each use: such files are rotated in place
            with open(self.creds["token_file"]) as f:
                return f.read().strip()
        return self.creds.get("token")

    def auth_headers(self):
        t = self.token()
        return {"Authorization": "Bearer " + t} if t else {}

    def connection(self, timeout=30):
        if self.scheme == "http":
            return http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        return _Conn(self.host, self.port, self.creds.get("tls_server_name"), context=self.ctx,
                     timeout=timeout)

    def api(self, method, path, body=None, ctype="application/json", timeout=30):
        """(HTTP status, decoded JSON body) of one request; connection errors raise."""
        data = json.dumps(body).encode() if body is not None else None
        headers = dict(self.auth_headers(), Accept="application/json")
        if data is not None:
            headers["Content-Type"] = ctype
        conn = self.connection(timeout)
        try:
            conn.request(method, self.prefix + path, body=data, headers=headers)
            r = conn.getresponse()
            raw = r.read()
        finally:
            conn.close()
        try:
            return r.status, json.loads(raw or b"{}")
        except ValueError:
            return r.status, {"raw": raw.decode("utf-8", "replace")[:500]}

    def version(self):
        code, v = self.api("GET", "/version")
        return v.get("gitVersion") if code == 200 else None

    def whoami(self):
        """The user name the API server sees for this credential (SelfSubjectReview), or None."""
        for ver in ("v1", "v1beta1"):
            code, r = self.api("POST", "/apis/authentication.k8s.io/%s/selfsubjectreviews" % ver,
                               {"apiVersion": "authentication.k8s.io/" + ver,
                                "kind": "SelfSubjectReview"})
            if code in (200, 201):
                return r.get("status", {}).get("userInfo", {}).get("username")
        return None

    def can_i(self, verb, resource, group="", namespace=None, subresource=None):
        """True/False (SelfSubjectAccessReview), None when the review itself failed."""
        ra = {"verb": verb, "resource": resource, "group": group}
        if namespace:
            ra["namespace"] = namespace
        if subresource:
            ra["subresource"] = subresource
        code, r = self.api("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                           {"apiVersion": "authorization.k8s.io/v1",
                            "kind": "SelfSubjectAccessReview", "spec": {"resourceAttributes": ra}})
        if code not in (200, 201):
            return None
        return bool(r.get("status", {}).get("allowed"))


# ---------------------------------------------------------------- audit log
_TS = re.compile(r"(\d{4})-(\d\d)-(\d\d)[Tt ](\d\d):(\d\d):(\d\d)(?:\.(\d+))?(Z|z|[+-]\d\d:?\d\d)$")


def parse_time(s):
    """Epoch seconds of an RFC 3339 time (kube's MicroTime: 2024-05-01T10:00:00.123456Z)."""
    m = _TS.match(s or "")
    if not m:
        raise ValueError("not an RFC 3339 time: %r" % (s,))
    y, mo, d, h, mi, sec, frac, tz = m.groups()
    t = calendar.timegm((int(y), int(mo), int(d), int(h), int(mi), int(sec), 0, 0, 0))
    if frac:
        t += int(frac) / 10.0 ** len(frac)
    if tz not in ("Z", "z"):
        sign = 1 if tz[0] == "+" else -1
        tz = tz[1:].replace(":", "")
        t -= sign * (int(tz[:2]) * 3600 + int(tz[2:]) * 60)
    return t


def audit_position(path):
    """(inode, size) of the audit log now, None when it does not exist (yet)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size)


def read_audit(path, since=None):
    """(events, notes): the audit.k8s.io Events of the JSON-lines log written after position
    `since` (audit_position's); the whole file when it was rotated meanwhile (noted)."""
    notes = []
    events = []
    bad = 0
    with open(path, "rb") as f:
        st = os.fstat(f.fileno())
        if since is not None:
            if since[0] == st.st_ino and st.st_size >= since[1]:
                f.seek(since[1])
            else:
                notes.append("the audit log was rotated or truncated during the window: "
                             "events written to the old file before the rotation are missing")
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                ev = json.loads(line)
            except ValueError:
                bad += 1   # a line being written, or not JSON
                continue
            if isinstance(ev, dict) and ev.get("kind") == "Event" and \
                    str(ev.get("apiVersion", "")).startswith("audit.k8s.io/"):
                events.append(ev)
            elif isinstance(ev, dict) and ev.get("kind") == "EventList":
                events.extend(ev.get("items") or [])
            else:
                bad += 1
    if bad:
        notes.append("%d lines of the audit log are not audit.k8s.io Events" % bad)
    return events, notes


def request_key(verb, resource, code):
    return "%s %s %s" % (verb, resource, code)


def audit_requests(events):
    """One record per request (auditID) from its ResponseStarted / ResponseComplete events:
    {id, user, verb, resource, code, uri, received, latency_s (None for a long-running request or
    one not complete), long_running}. A request with a ResponseStarted (watch, exec, logs,
    proxy: kube-apiserver's long-running requests, and a failed authentication) is counted with
    that event's code, every other request with its ResponseComplete's. RequestReceived and
    Panic events, and requests only received, are left out."""
    reqs = {}
    for ev in events:
        stage = ev.get("stage")
        if stage not in ("ResponseStarted", "ResponseComplete"):
            continue
        aid = ev.get("auditID") or id(ev)
        r = reqs.get(aid)
        try:
            received = parse_time(ev.get("requestReceivedTimestamp"))
            at = parse_time(ev.get("stageTimestamp"))
        except ValueError:
            continue
        code = (ev.get("responseStatus") or {}).get("code")
        if r is None:
            obj = ev.get("objectRef") or {}
            if obj.get("resource"):
                res = obj["resource"] + ("/" + obj["subresource"] if obj.get("subresource") else "")
            else:
                res = urllib.parse.urlsplit(ev.get("requestURI") or "").path or "?"
            r = reqs[aid] = {"id": aid, "user": (ev.get("user") or {}).get("username") or "",
                             "verb": ev.get("verb") or "", "resource": res,
                             "uri": ev.get("requestURI") or "", "received": received,
                             "code": None, "latency_s": None, "long_running": False}
        if stage == "ResponseStarted":
            r["long_running"] = True
            r["code"] = code
        else:
            if not r["long_running"] and r["code"] is None:
                r["code"] = code
            if not r["long_running"]:
                r["latency_s"] = max(0.0, at - received)
    # a complete that came before its started in the file (it cannot, but be safe)
    for r in reqs.values():
        if r["long_running"]:
            r["latency_s"] = None
    return list(reqs.values())


def audit_window(reqs, t_from, t_to, exclude=()):
    """The requests received in [t_from, t_to] (epoch s, the API server's clock): {"requests",
    "by_user": {user: {"VERB resource CODE": n}}}; `exclude`: substrings of request URIs left
    out (the benchmark's window markers)."""
    by_user = {}
    n = 0
    for r in reqs:
        if r["received"] < t_from or r["received"] > t_to:
            continue
        if any(x in r["uri"] for x in exclude):
            continue
        k = request_key(r["verb"], r["resource"], r["code"] if r["code"] is not None else "-")
        u = by_user.setdefault(r["user"], {})
        u[k] = u.get(k, 0) + 1
        n += 1
    return {"requests": n, "by_user": {u: dict(sorted(c.items())) for u, c in sorted(by_user.items())}}


def window_latencies(reqs, t_from, t_to, user):
    """API-server latencies (s) of `user`'s requests received in the window that are not
    long-running (watches are open for minutes by design)."""
    return [r["latency_s"] for r in reqs if r["user"] == user and r["latency_s"] is not None
            and t_from <= r["received"] <= t_to]


def find_marker(reqs, token):
    """Received time (server clock) of the request whose URI contains token, or None."""
    for r in reqs:
        if token in r["uri"]:
            return r["received"]
    return None
