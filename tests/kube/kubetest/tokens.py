"""ServiceAccount tokens: the TokenRequest API (POST serviceaccounts/NAME/token) as kube-apiserver
1.28 answers it, and the authentication of the tokens it issued.

A token is shaped like the real one, a JWT `header.payload.signature` (base64url, no padding):
header {"alg":"RS256","kid":K}, payload {aud, exp, iat, iss, kubernetes.io: {namespace, [pod: {name,
uid}], serviceaccount: {name, uid}, [warnafter]}, nbf, sub} with the keys sorted (as go-jose writes
the merged claims), and random bytes for the signature. The double signs nothing: it remembers each
token it issued with its claims and authenticates exactly those, checking what the real validator
checks (pkg/serviceaccount/claims.go): `exp` plus a leeway (go-jose's 60 s by default), the
ServiceAccount still there with the uid of the claim, a bound Pod or Secret still there with its uid
(a Pod whose deletionTimestamp is older than the leeway counts as gone), and an audience in common
with the ones asked for (the API audience for a request)."""

import base64
import json
import os
import threading
import time

from .auth import API_AUDIENCE
from .errors import ApiError, bad_request, not_found
from .resources import AUTHN_GROUP, RESOURCES, Res
from .util import parse_ts, ts


TOKEN_REQUEST = Res("serviceaccounts/token", "TokenRequest", group=AUTHN_GROUP, verbs=("create",), stored=False)


# pkg/serviceaccount: a TokenRequest for exactly WARN_ONLY_SECONDS bound to a Pod (what the
# ServiceAccount admission plugin puts into every pod's projected token volume) is issued for
# EXTENDED_SECONDS instead, with a warnafter claim (--service-account-extend-token-expiration,
# on by default); its status.expirationTimestamp still says the time asked for.
WARN_ONLY_SECONDS = 3607
EXTENDED_SECONDS = 365 * 24 * 3600
DEFAULT_SECONDS = 3600                  # SetDefaults_TokenRequestSpec
MAX_SECONDS = 1 << 32                   # ValidateTokenRequest
MIN_SECONDS = 600                       # ValidateTokenRequest: 10 minutes
LEEWAY_SECONDS = 60.0                   # go-jose jwt.DefaultLeeway

# The keys of a pod-bound token's user "extra" (pkg/serviceaccount/util.go, 1.28).
POD_NAME_KEY, POD_UID_KEY = "authentication.kubernetes.io/pod-name", "authentication.kubernetes.io/pod-uid"


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64url_json(obj):
    return b64url(json.dumps(obj, separators=(",", ":"), sort_keys=True).encode())


def _duration_words(secs):
    """How ValidateTokenRequest words its minimum: a constant "10 minutes" for the real 600 s; the
    double's own words for another --min-token-expiration."""
    if secs % 60 == 0:
        return "%d minute%s" % (secs // 60, "" if secs == 60 else "s")
    return "%d second%s" % (secs, "" if secs == 1 else "s")


def _invalid(name, errs):
    """422 as apierrors.NewInvalid(TokenRequest, name, errs) writes it: details without a name when
    the name is empty (omitempty). errs: (field, value as Go prints it, detail)."""
    causes = [{"reason": "FieldValueInvalid", "message": "Invalid value: %s: %s" % (v, d), "field": f}
              for f, v, d in errs]
    msgs = ["%s: %s" % (c["field"], c["message"]) for c in causes]
    body = msgs[0] if len(msgs) == 1 else "[" + ", ".join(msgs) + "]"
    d = {"group": AUTHN_GROUP, "kind": "TokenRequest", "causes": causes}
    if name:
        d = dict({"name": name}, **d)
    return ApiError(422, "Invalid", 'TokenRequest.%s "%s" is invalid: %s' % (AUTHN_GROUP, name, body), d)


def ts_of(epoch):
    """An epoch second as metav1.Time writes it (RFC 3339, UTC, seconds)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def _decode_error(msg):
    return bad_request('TokenRequest in version "v1" cannot be handled as a TokenRequest: %s' % msg)


class ServiceAccountTokens(object):
    """The issued tokens (kept until the server stops; an expired one is forgotten at the next
    issue) and the TokenRequest API. opts: min_token_expiration (s, int), token_expiry_leeway (s),
    read at each use so /_test/controllers can change them."""

    def __init__(self, store, opts):
        self.store = store
        self.opts = opts
        self.lock = threading.Lock()
        self.issued = {}          # token -> claims (the payload)
        # The real kid is the base64url SHA-256 of the signing key's public key: 43 characters.
        self.kid = b64url(os.urandom(32))

    def min_seconds(self):
        return int(getattr(self.opts, "min_token_expiration", MIN_SECONDS))

    def leeway(self):
        return float(getattr(self.opts, "token_expiry_leeway", LEEWAY_SECONDS))

    # -- TokenRequest
    def request(self, ns, name, req):
        """The TokenRequest answered (201) to POST .../namespaces/NS/serviceaccounts/NAME/token with
        body req, checked in the order of pkg/registry/core/serviceaccount/storage/token.go."""
        if not isinstance(req, dict):
            raise _decode_error("expected an object")
        if req.get("kind") not in (None, "", "TokenRequest"):
            raise _decode_error('no kind "%s" is registered for version "%s" in scheme' % (
                req["kind"], req.get("apiVersion") or TOKEN_REQUEST.api_version))
        md = req.get("metadata") if isinstance(req.get("metadata"), dict) else {}
        spec = req.get("spec") if isinstance(req.get("spec"), dict) else {}
        auds = spec.get("audiences")
        if auds is not None and not (isinstance(auds, list) and all(isinstance(a, str) for a in auds)):
            raise _decode_error("spec.audiences: expected a list of strings")
        exp_s = spec.get("expirationSeconds")
        if exp_s is None:
            exp_s = DEFAULT_SECONDS
        if isinstance(exp_s, bool) or not isinstance(exp_s, int):
            raise _decode_error("spec.expirationSeconds: expected an integer")
        ref = spec.get("boundObjectRef")
        if ref is not None and not isinstance(ref, dict):
            raise _decode_error("spec.boundObjectRef: expected an object")
        for f, want, what in (("name", name, "name"), ("namespace", ns, "namespace")):
            if md.get(f) and md[f] != want:
                raise _invalid(name, [("metadata." + f, json.dumps(md[f]),
                                       "must match the service account %s if specified" % what)])
        sa = self.store.get("serviceaccounts", (ns, name))
        if sa is None:
            raise not_found(RESOURCES[("", "serviceaccounts")], name)
        auds = list(auds) if auds else [API_AUDIENCE]
        now = int(time.time())
        errs = []
        if exp_s < self.min_seconds():
            errs.append(("spec.expirationSeconds", str(exp_s),
                         "may not specify a duration less than %s" % _duration_words(self.min_seconds())))
        if exp_s > MAX_SECONDS:
            errs.append(("spec.expirationSeconds", str(exp_s), "may not specify a duration larger than 2^32 seconds"))
        if errs:
            raise _invalid("", errs)
        pod, secret, out_ref = None, None, None
        if ref is not None:
            out_ref = {k: ref[k] for k in ("kind", "apiVersion", "name", "uid") if isinstance(ref.get(k), str) and ref[k]}
            kind, av = out_ref.get("kind", ""), out_ref.get("apiVersion", "")
            group, _, version = av.rpartition("/")
            rname = out_ref.get("name", "")
            if group == "" and kind == "Pod":
                pod = self.store.get("pods", (ns, rname))
                if pod is None:
                    raise not_found(RESOURCES[("", "pods")], rname)
                if (pod.get("spec") or {}).get("serviceAccountName") != name:
                    raise bad_request('cannot bind token for serviceaccount "%s" to pod running with different '
                                      'serviceaccount name.' % name)
                uid = pod["metadata"]["uid"]
            elif group == "" and kind == "Secret":
                secret = self.store.get("secrets", (ns, rname))
                if secret is None:
                    raise not_found(RESOURCES[("", "secrets")], rname)
                uid = secret["metadata"]["uid"]
            else:
                # schema.GroupVersionKind.String()
                raise bad_request("cannot bind token to object of type %s/%s, Kind=%s" % (group, version, kind))
            if out_ref.get("uid") and out_ref["uid"] != uid:
                # apierrors.NewConflict(GroupResource{Group: "", Resource: KIND}, ...): the kind, not a plural
                raise ApiError(409, "Conflict", 'Operation cannot be fulfilled on %s "%s": the UID in the bound '
                               'object reference (%s) does not match the UID in record. The object might have been '
                               'deleted and then recreated' % (kind, rname, out_ref["uid"]), {"name": rname, "kind": kind})
        warn_after, lifetime = None, exp_s
        if pod is not None and exp_s == WARN_ONLY_SECONDS and all(a == API_AUDIENCE for a in auds):
            warn_after, lifetime = now + exp_s, EXTENDED_SECONDS
        k8s = {"namespace": ns, "serviceaccount": {"name": name, "uid": sa["metadata"]["uid"]}}
        if pod is not None:
            k8s["pod"] = {"name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}
        if secret is not None:
            k8s["secret"] = {"name": secret["metadata"]["name"], "uid": secret["metadata"]["uid"]}
        if warn_after is not None:
            k8s["warnafter"] = warn_after
        claims = {"aud": auds, "exp": now + lifetime, "iat": now, "iss": API_AUDIENCE, "kubernetes.io": k8s,
                  "nbf": now, "sub": "system:serviceaccount:%s:%s" % (ns, name)}
        token = "%s.%s.%s" % (b64url_json({"alg": "RS256", "kid": self.kid}), b64url_json(claims),
                              b64url(os.urandom(256)))
        with self.lock:
            cut = time.time() - self.leeway()
            for t in [t for t, c in self.issued.items() if c["exp"] < cut]:
                del self.issued[t]
            self.issued[token] = claims
        out_md = dict(md, name=name, namespace=ns, creationTimestamp=ts())
        return {"kind": "TokenRequest", "apiVersion": TOKEN_REQUEST.api_version, "metadata": out_md,
                "spec": {"audiences": auds, "expirationSeconds": exp_s, "boundObjectRef": out_ref},
                "status": {"token": token, "expirationTimestamp": ts_of(now + exp_s)}}

    # -- authentication
    def authenticate(self, token, audiences):
        """(user, uid, groups, extra, audiences) of an issued token that is still valid for one of
        `audiences`, the audiences it is valid for among them; None otherwise."""
        with self.lock:
            c = self.issued.get(token)
        if c is None:
            return None
        now = time.time()
        leeway = self.leeway()
        if now - leeway > c["exp"]:
            return None
        good = [a for a in audiences if a in c["aud"]]
        if not good:
            return None
        k8s = c["kubernetes.io"]
        ns, sa_ref = k8s["namespace"], k8s["serviceaccount"]
        sa = self.store.get("serviceaccounts", (ns, sa_ref["name"]))
        if sa is None or sa["metadata"]["uid"] != sa_ref["uid"]:
            return None
        extra = {}
        for key, ref in (("secrets", k8s.get("secret")), ("pods", k8s.get("pod"))):
            if ref is None:
                continue
            o = self.store.get(key, (ns, ref["name"]))
            if o is None or o["metadata"]["uid"] != ref["uid"]:
                return None
            dt = parse_ts(o["metadata"].get("deletionTimestamp") or "")
            if dt is not None and dt.timestamp() < now - leeway:
                return None
            if key == "pods":
                extra = {POD_NAME_KEY: [ref["name"]], POD_UID_KEY: [ref["uid"]]}
        return (c["sub"], sa_ref["uid"], ["system:serviceaccounts", "system:serviceaccounts:" + ns], extra, good)

