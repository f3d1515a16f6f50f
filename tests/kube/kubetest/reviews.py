"""The review APIs kube-apiserver serves for webhook authentication and authorization (a kubelet in
--authentication-token-webhook / --authorization-mode=Webhook calls the first two) and for kubectl
auth can-i / whoami (the self reviews): POST only, answered at once with 201 and the object echoed
plus its status, never stored.

  authentication.k8s.io/v1 tokenreviews              spec {token, audiences} -> status {authenticated,
                                                     user {username, uid, groups, extra}, audiences, error}
  authentication.k8s.io/v1 selfsubjectreviews        -> status {userInfo} of the caller
  authorization.k8s.io/v1  subjectaccessreviews      spec {user, groups, uid, extra, resourceAttributes |
                                                     nonResourceAttributes} -> status {allowed, reason}
  authorization.k8s.io/v1  selfsubjectaccessreviews  spec {resourceAttributes | nonResourceAttributes},
                                                     for the caller

The objects are written as Go's encoding/json writes the v1 types: empty fields left out (so
"authenticated": false, "audiences", "error", "reason" and "denied" appear only when set), but
"allowed" always, "user": {} in a TokenReview that did not authenticate, and "metadata":
{"creationTimestamp": null}."""

import json

from .auth import API_AUDIENCE
from .errors import ApiError, bad_request

RA_FIELDS = ("namespace", "verb", "group", "version", "resource", "subresource", "name")
NRA_FIELDS = ("path", "verb")


def _strings(d, fields):
    """The string fields of d that are set, in the order of the Go struct (omitempty)."""
    d = d if isinstance(d, dict) else {}
    return {k: d[k] for k in fields if isinstance(d.get(k), str) and d[k]}


class GoStruct(str):
    """A value field.Invalid prints with %#v (a Go struct), written out as it is."""


def _go_value(v):
    """A field.Invalid value as apimachinery prints it: a string quoted, nil as "null", a struct
    with %#v (best effort: JSON for one this module does not spell out)."""
    if isinstance(v, GoStruct):
        return str(v)
    return json.dumps("null" if v is None else v if isinstance(v, str) else json.dumps(v, separators=(",", ":")))


def _invalid(kind, group, errs):
    """422 as apierrors.NewInvalid writes it for an object without a name."""
    causes, msgs = [], []
    for field, value, detail in errs:
        m = "Invalid value: %s: %s" % (_go_value(value), detail)
        causes.append({"reason": "FieldValueInvalid", "message": m, "field": field})
        msgs.append("%s: %s" % (field, m))
    body = msgs[0] if len(msgs) == 1 else "[" + ", ".join(msgs) + "]"
    return ApiError(422, "Invalid", '%s.%s "" is invalid: %s' % (kind, group, body),
                    {"group": group, "kind": kind, "causes": causes})


class ReviewHandler:
    """Mixin of handler.Handler: the review APIs (resource group authentication.k8s.io or
    authorization.k8s.io; the caller's create right is checked before, as for any resource)."""

    def review(self, method, res, name, body):
        if name is not None:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if method != "POST":
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        obj = self.parse_json(body, res)
        if not isinstance(obj, dict):
            raise bad_request('%s in version "%s" cannot be handled as a %s: expected an object' % (
                res.kind, res.version, res.kind))
        meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
        spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
        out = {"kind": res.kind, "apiVersion": res.api_version, "metadata": dict(meta, creationTimestamp=None)}
        fn = {"tokenreviews": self.token_review, "selfsubjectreviews": self.self_subject_review,
              "subjectaccessreviews": self.subject_access_review,
              "selfsubjectaccessreviews": self.self_subject_access_review}[res.plural]
        out.update(fn(res, meta, spec))
        self.send_obj(201, out)

    def token_review(self, res, meta, spec):
        """pkg/registry/authentication/tokenreview: the token through the server's own authenticators,
        with spec.audiences (or the API audience when none). A token file's tokens are audience-agnostic:
        valid for the API audience only; an issued ServiceAccount token for the audiences it was issued
        for (status.audiences: those asked for that it has)."""
        token = spec.get("token") if isinstance(spec.get("token"), str) else ""
        if not token:
            raise bad_request("token is required for TokenReview in authentication")
        auds = [a for a in spec.get("audiences") or [] if isinstance(a, str)]
        echo = {"token": token}
        if auds:
            echo["audiences"] = auds
        ident = self.server.api.auth.authenticate_token(token, auds or [API_AUDIENCE])
        if ident is None:
            return {"spec": echo, "status": {"user": {}, "error": "invalid bearer token"}}
        user, uid, groups, extra, good = ident
        info = {"username": user}
        if uid:
            info["uid"] = uid
        info["groups"] = groups
        if extra:
            info["extra"] = extra
        return {"spec": echo, "status": {"authenticated": True, "user": info, "audiences": good}}

    def self_subject_review(self, res, meta, spec):
        info = {"username": self.user}
        if getattr(self, "uid", ""):
            info["uid"] = self.uid
        if self.groups:
            info["groups"] = list(self.groups)
        if getattr(self, "extra", None):
            info["extra"] = self.extra
        return {"status": {"userInfo": info}}

    def _attributes(self, res, meta, spec, errs):
        """(resourceAttributes, nonResourceAttributes, echoed spec) with the checks the validation of
        both access reviews makes, in its order."""
        ra = spec.get("resourceAttributes") if isinstance(spec.get("resourceAttributes"), dict) else None
        nra = spec.get("nonResourceAttributes") if isinstance(spec.get("nonResourceAttributes"), dict) else None
        if ra is not None and nra is not None:
            errs.append(("spec.nonResourceAttributes", GoStruct("authorization.NonResourceAttributes{Path:%s, Verb:%s}" % (
                json.dumps(str(nra.get("path") or "")), json.dumps(str(nra.get("verb") or "")))),
                "cannot be specified in combination with resourceAttributes"))
        if ra is None and nra is None:
            errs.append(("spec.resourceAttributes", None,
                         "exactly one of nonResourceAttributes or resourceAttributes must be specified"))
        echo = {}
        if ra is not None:
            echo["resourceAttributes"] = _strings(ra, RA_FIELDS)
        if nra is not None:
            echo["nonResourceAttributes"] = _strings(nra, NRA_FIELDS)
        return echo.get("resourceAttributes"), echo.get("nonResourceAttributes"), echo

    def _check_metadata(self, meta, errs):
        if any(v not in (None, "", {}, []) for k, v in meta.items() if k not in ("managedFields", "creationTimestamp")):
            errs.append(("metadata", meta, "must be empty"))

    def subject_access_review(self, res, meta, spec):
        errs = []
        ra, nra, echo = self._attributes(res, meta, spec, errs)
        user = spec.get("user") if isinstance(spec.get("user"), str) else ""
        groups = [g for g in spec.get("groups") or [] if isinstance(g, str)]
        if not user and not groups:
            errs.append(("spec.user", user, "at least one of user or group must be specified"))
        self._check_metadata(meta, errs)
        if errs:
            raise _invalid(res.kind, res.group, errs)
        if user:
            echo["user"] = user
        if groups:
            echo["groups"] = groups
        if isinstance(spec.get("extra"), dict) and spec["extra"]:
            echo["extra"] = spec["extra"]
        if isinstance(spec.get("uid"), str) and spec["uid"]:
            echo["uid"] = spec["uid"]
        # The groups as given: kube-apiserver adds no system:authenticated to a SubjectAccessReview.
        return {"spec": echo, "status": self.server.api.auth.review(user, groups, ra, nra)}

    def self_subject_access_review(self, res, meta, spec):
        errs = []
        ra, nra, echo = self._attributes(res, meta, spec, errs)
        self._check_metadata(meta, errs)
        if errs:
            raise _invalid(res.kind, res.group, errs)
        return {"spec": echo, "status": self.server.api.auth.review(self.user, self.groups, ra, nra)}
