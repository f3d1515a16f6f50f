"""The /_test controls (not part of the Kubernetes API; admin identity required): request log
and counters, faults (delay, status; refuse in server.Server), watch history size, ending watches, controller settings (the CSR
controllers' too) and RBAC bindings (one role or several);
see the package docstring for the list."""

import json
import os
import random
import time
import uuid

from .auth import parse_roles
from .certificates import parse_duration
from .errors import ApiError, bad_request
from .store import ABORT, CLOSE
from .util import K8S_VERSION, log


class TestControls:
    """Mixin of handler.Handler: the /_test endpoints and the faults they set."""

    def injected_fault(self):
        """Applies the delay or status fault of /_test/fault to an API request; True when the
        fault answered the request (the refuse fault lives in server.Server)."""
        f = self.server.fault
        if f.get("mode") in ("delay", "status"):
            # Scoped (a fault in front of some clients only): "users", names or prefixes ending
            # in "*"; "ratio", the share of their requests that meet it.
            users = f.get("users")
            if users and not any(self.user == u or (u.endswith("*") and self.user.startswith(u[:-1]))
                                 for u in users):
                return False
            if random.random() >= float(f.get("ratio", 1.0)):
                return False
        if f.get("mode") == "delay":
            time.sleep(float(f.get("ms", 0)) / 1000.0)
        elif f.get("mode") == "status":
            code = int(f.get("code", 503))
            reason = {500: "InternalError", 503: "ServiceUnavailable", 429: "TooManyRequests",
                      504: "Timeout", 401: "Unauthorized", 403: "Forbidden"}.get(code, "InternalError")
            ra = f.get("retryAfter", 1)
            extra = {"Retry-After": str(int(ra))} if code in (429, 503) and ra else None
            e = ApiError(code, reason, f.get("message", "injected fault (test double)"))
            self.send_obj(code, e.status(), extra=extra)
            return True
        return False

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
                if "retryAfter" in data:
                    srv.fault["retryAfter"] = int(data["retryAfter"])
            elif mode == "delay":
                srv.fault = {"mode": "delay", "ms": float(data.get("ms", 500))}
            if mode in ("status", "delay"):
                if data.get("users"):
                    srv.fault["users"] = [str(u) for u in data["users"]]
                if "ratio" in data:
                    srv.fault["ratio"] = float(data["ratio"])
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
                if "nodeProxyGlobalOnly" in data:
                    o.node_proxy_global_only = bool(data["nodeProxyGlobalOnly"])
                if "minTokenExpiration" in data:
                    o.min_token_expiration = int(data["minTokenExpiration"])
                if "tokenExpiryLeeway" in data:
                    o.token_expiry_leeway = float(data["tokenExpiryLeeway"])
                if "clusterSigningDuration" in data:
                    try:
                        o.cluster_signing_duration = parse_duration(data["clusterSigningDuration"])
                    except ValueError as e:
                        raise bad_request("clusterSigningDuration: %s" % e)
                if "csrApproving" in data:
                    srv.certs.approving = bool(data["csrApproving"])
                if "csrSigning" in data:
                    srv.certs.signing = bool(data["csrSigning"])
                if "nodeAuthorizerLag" in data:
                    api.bindings.lag = max(0.0, float(data["nodeAuthorizerLag"]))
                api.wake_sched.set()
                api.wake_nlc.set()
                api.wake_csr.set()
            self.send_obj(200, self.ctl_state())
        elif p == "/_test/rbac" and method == "POST":
            subj = data.get("subject")
            role = data.get("roles", data.get("role"))
            if not subj or role is None or not subj.startswith(("user:", "group:")):
                raise bad_request('need {"subject":"user:NAME|group:NAME","role":NAME|[rules]} or "roles":[NAME|rule,...]')
            try:
                roles = parse_roles(role)
            except ValueError as e:
                raise bad_request(str(e))
            with api.auth.lock:
                api.auth.bindings[subj] = roles[0] if len(roles) == 1 else roles
            api.wake_csr.set()          # csrapproving looks at pending CSRs again
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
                "fullDisruption": o.full_disruption, "bookmarkInterval": o.bookmark_interval,
                "nodeProxyGlobalOnly": o.node_proxy_global_only, "minTokenExpiration": o.min_token_expiration,
                "tokenExpiryLeeway": o.token_expiry_leeway, "clusterSigningDuration": o.cluster_signing_duration,
                "csrApproving": srv.certs.approving, "csrSigning": srv.certs.signing,
                "nodeAuthorizerLag": srv.api.bindings.lag}
