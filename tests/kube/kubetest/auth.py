"""Authorization: bearer tokens (a kube-apiserver token CSV or the generated admin, agent and
noright tokens) and RBAC-like rules per user or group (admin, agent, none or explicit rules)."""

import threading

from .errors import ApiError


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
