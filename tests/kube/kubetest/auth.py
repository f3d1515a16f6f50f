"""Authorization: bearer tokens (a kube-apiserver token CSV or the generated admin, agent and
noright tokens) and RBAC-like rules per user or group (one or several named roles: admin, agent,
none, the bootstrap ClusterRoles of kubelet TLS bootstrapping; or explicit rules), plus the built-in
ClusterRoles a real cluster binds to every authenticated user, and the decisions with the reason text
that SubjectAccessReviews report. The decision is kube-apiserver's authorizer chain with
--authorization-mode=Node,RBAC: the privileged group system:masters, then the Node authorizer
(kubetest/node_authorizer.py, set as Auth.node), then RBAC."""

import threading

from .errors import ApiError


AGENT_RULES = [
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["create", "get", "list", "watch", "patch", "update", "delete"]},
    {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch", "update"]},
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create", "get", "list", "update", "delete"],
     "namespaces": ["kube-node-lease"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "delete"]},
    {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch", "update"]},
    {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
    {"apiGroups": [""], "resources": ["configmaps", "secrets"], "verbs": ["get"]},
    {"apiGroups": [""], "resources": ["persistentvolumeclaims", "persistentvolumes"], "verbs": ["get"]},
    # The pods' projected ServiceAccount tokens (TokenRequest bound to the pod): bound per
    # namespace in etc/rbac.yaml (slurm-k8s-agent-tokens), here in default as there.
    {"apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"],
     "namespaces": ["default"]},
    # The kubelet endpoint's --authentication-token-webhook / --authorization-mode=Webhook: what the
    # ClusterRole system:auth-delegator grants.
    {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
    {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]},
    # Node identities by kubelet TLS bootstrapping (etc/rbac-node-identity.yaml binds
    # system:node-bootstrapper and ...:nodeclient): a kube-apiserver-client-kubelet CSR per virtual
    # node, which csrapproving then approves (the requester may create
    # certificatesigningrequests/nodeclient); renewal too goes through the agent's identity. The
    # kubelet endpoint's kubelet-serving CSRs (kubelet_serving = csr) need the first only, which
    # etc/rbac.yaml binds too.
    {"apiGroups": ["certificates.k8s.io"], "resources": ["certificatesigningrequests"],
     "verbs": ["create", "get", "list", "watch"]},
    {"apiGroups": ["certificates.k8s.io"], "resources": ["certificatesigningrequests/nodeclient"], "verbs": ["create"]},
]


# The bootstrap ClusterRoles of kubelet TLS bootstrapping (bootstrappolicy): a cluster has them
# but binds them to nobody.
NODE_BOOTSTRAPPER_RULES = [{"apiGroups": ["certificates.k8s.io"], "resources": ["certificatesigningrequests"],
                            "verbs": ["create", "get", "list", "watch"]}]
NODECLIENT_RULES = [{"apiGroups": ["certificates.k8s.io"], "resources": ["certificatesigningrequests/nodeclient"],
                     "verbs": ["create"]}]
SELFNODECLIENT_RULES = [{"apiGroups": ["certificates.k8s.io"],
                         "resources": ["certificatesigningrequests/selfnodeclient"], "verbs": ["create"]}]


# kube-apiserver's bootstrap policy for the group system:authenticated: the ClusterRoles
# system:basic-user (self reviews), system:discovery and system:public-info-viewer.
BASIC_RULES = [
    {"apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
     "verbs": ["create"]},
    {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]},
    {"nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*",
                         "/readyz", "/version", "/version/"], "verbs": ["get"]},
]


# system:public-info-viewer, bound to system:unauthenticated too.
PUBLIC_RULES = [{"nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"], "verbs": ["get"]}]


ROLES = {"admin": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"], "nonResourceURLs": ["*"]}],
         "agent": AGENT_RULES, "basic": BASIC_RULES, "public": PUBLIC_RULES, "none": [],
         "node-bootstrapper": NODE_BOOTSTRAPPER_RULES, "nodeclient": NODECLIENT_RULES,
         "selfnodeclient": SELFNODECLIENT_RULES}


# The (Cluster)Role and binding name each named role stands for on a real cluster (etc/rbac.yaml,
# the bootstrap policy), for the reason of an RBAC allow; explicit rule lists get "kubetest:SUBJECT".
ROLE_NAMES = {"admin": "cluster-admin", "agent": "slurm-k8s-agent", "basic": "system:basic-user",
              "public": "system:public-info-viewer", "node-bootstrapper": "system:node-bootstrapper",
              "nodeclient": "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
              "selfnodeclient": "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient"}


def parse_roles(spec):
    """A binding as /_test/rbac and --role give it: a role name, a list of rules (dicts), or a list of
    role names and rules. Returns the list of roles (names, or one list of the rules given), or
    raises ValueError naming an unknown role."""
    if isinstance(spec, str):
        names = [n.strip() for n in spec.split(",") if n.strip()] or ["none"]
        out = names
    elif isinstance(spec, list):
        out, rules = [], []
        for x in spec:
            if isinstance(x, dict):
                rules.append(x)
            elif isinstance(x, str):
                out.append(x)
            else:
                raise ValueError("a role is a name or a rule object, not %r" % (x,))
        if rules:
            out.append(rules)
    else:
        raise ValueError("role must be a name or a list of names and rules")
    for n in out:
        if isinstance(n, str) and n not in ROLES:
            raise ValueError("unknown role %r (known: %s)" % (n, ", ".join(sorted(ROLES))))
    return out


# The audience of tokens the double issues, as kube-apiserver's --api-audiences defaults to its
# --service-account-issuer (kubeadm: https://kubernetes.default.svc.cluster.local).
API_AUDIENCE = "https://kubernetes.default.svc.cluster.local"


def _any(patterns, value):
    return any(p in ("*", value) for p in patterns)


def rule_allows(r, verb, group, resource, sub, ns, name):
    """RBAC's RuleAllows for a resource request (plus the double's "namespaces" key: a rule that
    only applies in those namespaces, a RoleBinding's)."""
    res = resource + ("/" + sub if sub else "")
    if not _any(r.get("apiGroups", []), group) or not _any(r.get("resources", []), res):
        return False
    if not _any(r.get("verbs", []), verb):
        return False
    if r.get("namespaces") and ns not in r["namespaces"]:
        return False
    if r.get("resourceNames") and name not in r["resourceNames"]:
        return False
    return True


def _url_matches(patterns, path):
    """RBAC's NonResourceURLMatches: "*", the exact path, or a prefix ending in "*"."""
    return any(p == "*" or p == path or (p.endswith("*") and path.startswith(p.rstrip("*"))) for p in patterns)


class Auth(object):
    def __init__(self):
        self.tokens = {}      # token -> (user, uid, groups)
        self.issuer = None    # the issued ServiceAccount tokens (tokens.ServiceAccountTokens), set by api.Api
        self.node = None      # the Node authorizer (node_authorizer.NodeAuthorizer), set by api.Api
        self.bindings = {"group:system:masters": "admin", "group:slurm-k8s:agent": "agent",
                         "group:system:authenticated": "basic", "group:system:unauthenticated": "public"}
        self.lock = threading.Lock()

    def authenticate_token(self, token, audiences=None):
        """(user, uid, groups, extra, audiences) of a bearer token valid for one of `audiences` (default:
        the API audience, what a request to the API asks for), groups with system:authenticated added as
        kube-apiserver adds it, audiences those of `audiences` it is valid for; None for an unknown or
        no longer valid token. A token of the token table is audience-agnostic, as kube-apiserver wraps a
        token file's (valid for the API audience only); an issued ServiceAccount token is valid for the
        audiences it was issued for, while its claims hold (tokens.py)."""
        auds = list(audiences or [API_AUDIENCE])
        t = self.tokens.get(token)
        if t:
            if API_AUDIENCE not in auds:
                return None
            user, uid, groups, extra, good = t[0], t[1], t[2], {}, [API_AUDIENCE]
        elif self.issuer is not None:
            r = self.issuer.authenticate(token, auds)
            if r is None:
                return None
            user, uid, groups, extra, good = r
        else:
            return None
        groups = list(groups)
        if "system:authenticated" not in groups:
            groups.append("system:authenticated")
        return user, uid, groups, extra, good

    def load_csv(self, path):
        import csv
        with open(path) as f:
            for row in csv.reader(f):
                if not row or row[0].startswith("#"):
                    continue
                groups = [g for g in (row[3].split(",") if len(row) > 3 else []) if g]
                self.tokens[row[0].strip()] = (row[1].strip(), row[2].strip() if len(row) > 2 else row[1], groups)

    def bound(self, user, groups):
        """[(subject, role, rules)] of the bindings of a user and its groups, user first; role is a
        name of ROLES or a list of rules."""
        out = []
        with self.lock:
            for s in ["user:" + user] + ["group:" + g for g in groups]:
                role = self.bindings.get(s)
                if role is None:
                    continue
                if isinstance(role, str) or (role and all(isinstance(r, dict) for r in role)):
                    role = [role]
                for one in role:
                    out.append((s, one, ROLES.get(one, []) if isinstance(one, str) else one))
        return out

    def rules(self, user, groups):
        return [r for _, _, rules in self.bound(user, groups) for r in rules]

    def match(self, user, groups, verb, group, resource, sub, ns, name=None):
        """(subject, role, rule) of the first RBAC rule that allows the resource request, or None."""
        for s, role, rules in self.bound(user, groups):
            for r in rules:
                if rule_allows(r, verb, group, resource, sub, ns, name):
                    return s, role, r
        return None

    def match_path(self, user, groups, verb, path):
        """(subject, role, rule) of the first rule that allows the non-resource request, or None."""
        for s, role, rules in self.bound(user, groups):
            for r in rules:
                if _url_matches(r.get("nonResourceURLs", []), path) and _any(r.get("verbs", []), verb):
                    return s, role, r
        return None

    def allowed(self, user, groups, verb, group, resource, sub, ns, name=None):
        return self.decide(user, groups, verb, group, resource, sub, ns, name)[0]

    def decide(self, user, groups, verb, group, resource, sub, ns, name=None):
        """(allowed, reason) for a resource request, as kube-apiserver's union authorizer answers:
        on a refusal the reasons of the authorizers that had no opinion, joined by newlines (the
        Node authorizer's; RBAC gives none)."""
        st = self.review(user, groups, {"verb": verb, "group": group, "resource": resource,
                                        "subresource": sub or "", "namespace": ns or "", "name": name or ""})
        return st["allowed"], st.get("reason", "") if not st["allowed"] else ""

    def is_admin(self, user, groups):
        return any("*" in r.get("nonResourceURLs", ()) for r in self.rules(user, groups))

    def review(self, user, groups, ra=None, nra=None):
        """A SubjectAccessReviewStatus for resourceAttributes ra or nonResourceAttributes nra, as
        kube-apiserver's authorizers decide it (--authorization-mode=Node,RBAC): system:masters is
        allowed by the privileged-group authorizer first (no reason); then the Node authorizer for
        system:node:NAME in group system:nodes (an allow has no reason; its refusal reason is kept);
        an RBAC allow names the binding, role and subject; RBAC only ever allows, so a refusal is
        {"allowed": false} with the Node authorizer's reason or none."""
        with self.lock:
            b = self.bindings.get("group:system:masters")
        privileged = b == "admin" or (isinstance(b, list) and "admin" in b)
        if privileged and "system:masters" in groups:
            return {"allowed": True}
        node_reason = ""
        if self.node is not None:
            ok, node_reason = self.node.authorize(user, groups, ra, nra)
            if ok:
                return {"allowed": True}
        if ra is not None:
            m = self.match(user, groups, ra.get("verb", ""), ra.get("group", ""), ra.get("resource", ""),
                           ra.get("subresource", ""), ra.get("namespace") or None, ra.get("name") or None)
        else:
            m = self.match_path(user, groups, nra.get("verb", ""), nra.get("path", ""))
        if m is None:
            return {"allowed": False, "reason": node_reason} if node_reason else {"allowed": False}
        subject, role, rule = m
        kind, _, name = subject.partition(":")
        role_name = ROLE_NAMES.get(role, role) if isinstance(role, str) else "kubetest:" + subject
        if rule.get("namespaces"):
            ns = ra.get("namespace")
            via = 'RoleBinding "%s/%s" of Role "%s"' % (role_name, ns, role_name)
        else:
            via = 'ClusterRoleBinding "%s" of ClusterRole "%s"' % (role_name, role_name)
        return {"allowed": True, "reason": 'RBAC: allowed by %s to %s "%s"' % (via, kind.capitalize(), name)}


def forbidden(user, verb, res, sub, name, ns, reason=""):
    """The 403 of a refused request (responsewriters.Forbidden): the authorizers' reason, if any, after
    a colon."""
    qual = res.qual
    pre = '%s "%s" is forbidden' % (qual, name) if name else "%s is forbidden" % qual
    scope = 'in the namespace "%s"' % ns if ns else "at the cluster scope"
    msg = '%s: User "%s" cannot %s resource "%s" in API group "%s" %s' % (
        pre, user, verb, res.plural + ("/" + sub if sub else ""), res.group, scope)
    if reason:
        msg += ": " + reason
    d = {"kind": res.plural}
    if name:
        d["name"] = name
    if res.group:
        d["group"] = res.group
    return ApiError(403, "Forbidden", msg, d)
