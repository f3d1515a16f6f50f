"""kube-apiserver's impersonation filter (k8s.io/apiserver endpoints/filters WithImpersonation), between
authentication and everything else: a request with `Impersonate-User` (and optionally
`Impersonate-Group`, repeated, `Impersonate-Uid`, `Impersonate-Extra-<key>`) is served as that user
once the authenticated requester may `impersonate` each of them:

- the user: resource `users` in the core group, named the user (a ServiceAccount's user name
  `system:serviceaccount:NS:NAME` is resource `serviceaccounts` NAME in namespace NS instead);
- each group: resource `groups`, named the group;
- the uid: resource `uids` in `authentication.k8s.io`; each extra value: `userextras/<key>` there;

each checked by the same authorizers as any request (so RBAC's resourceNames limit whom one may act
as). A refusal is the usual 403 naming the requester, verb `impersonate` and the resource. Groups,
uid and extra without a user: 500 ("requested ... without impersonating a user"). The new user has
exactly the groups asked for, plus `system:authenticated` unless it is `system:anonymous` or one of
them already is it; a ServiceAccount without groups gets its fixed ones. The Node authorizer and
NodeRestriction then see the impersonated user: an identity allowed to impersonate
`system:node:X` in `system:nodes` is confined as node X."""
from types import SimpleNamespace

from .auth import forbidden
from .errors import ApiError

USER, GROUP, UID, EXTRA = "Impersonate-User", "Impersonate-Group", "Impersonate-Uid", "Impersonate-Extra-"
SA_PREFIX = "system:serviceaccount:"
AUTHN = "authentication.k8s.io"


def _resource(plural, group=""):
    """What auth.forbidden names in its message: the resource's qualified name, plural and group."""
    return SimpleNamespace(plural=plural, group=group, qual=plural + ("." + group if group else ""))


def requests_of(headers):
    """[(resource, group, namespace, name, subresource)] of the impersonation headers, in the
    filter's order (user, groups, uid, extras); raises the 500 for groups/uid/extra without a user."""
    out = []
    user = headers.get(USER) or ""
    if user:
        if user.startswith(SA_PREFIX) and user.count(":") == 3:
            ns, name = user[len(SA_PREFIX):].split(":", 1)
            out.append(("serviceaccounts", "", ns, name, ""))
        else:
            out.append(("users", "", "", user, ""))
    others = [("groups", "", "", g, "") for g in headers.get_all(GROUP) or []]
    uid = headers.get(UID)
    if uid:
        others.append(("uids", AUTHN, "", uid, ""))
    for k in headers.keys():
        if k.lower().startswith(EXTRA.lower()):
            key = k[len(EXTRA):].lower()
            for v in headers.get_all(k) or []:
                others.append(("userextras", AUTHN, "", v, key))
    if others and not user:
        raise ApiError(500, "InternalError", "Internal error occurred: requested %s without impersonating a user"
                       % [o[3] for o in others])
    return out + others


def impersonate(auth, user, groups, headers):
    """(user, uid, groups, extra) to serve the request as, or None when it asks for no impersonation;
    raises the 403 of the first thing the requester (user, groups) may not impersonate."""
    reqs = requests_of(headers)
    if not reqs:
        return None
    name, uid, new_groups, extra, sa_groups = "", "", [], {}, []
    for res, group, ns, value, sub in reqs:
        ok, reason = auth.decide(user, groups, "impersonate", group, res, sub, ns or None, value)
        if not ok:
            raise forbidden(user, "impersonate", _resource(res, group), sub, value, ns, reason)
        if res == "serviceaccounts":
            name = SA_PREFIX + ns + ":" + value
            sa_groups = ["system:serviceaccounts", "system:serviceaccounts:" + ns]
        elif res == "users":
            name = value
        elif res == "groups":
            new_groups.append(value)
        elif res == "uids":
            uid = value
        else:
            extra.setdefault(sub, []).append(value)
    if not headers.get_all(GROUP):
        new_groups = sa_groups
    if name != "system:anonymous" and not {"system:authenticated", "system:unauthenticated"} & set(new_groups):
        new_groups.append("system:authenticated")
    return name, uid, new_groups, extra
