"""ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1, GA in Kubernetes 1.30; v1beta1
behind the ValidatingAdmissionPolicy feature gate in 1.28/1.29) as kube-apiserver's admission
plugin applies it: each binding whose validationActions hold Deny, with its policy's
matchConstraints.resourceRules (apiGroups, apiVersions, operations, resources with
subresources and "*"), matchConditions (all true, else the policy does not apply) and
validations in CEL (cel.py: a subset; an expression outside it is an evaluation error).
failurePolicy Fail (the default) turns an error into a denial, Ignore skips it. A denial is
admission.NewForbidden's text with the reason of the validation (default Invalid: 422;
Forbidden: 403):
  nodes "n1" is forbidden: ValidatingAdmissionPolicy 'P' with binding 'B' denied request: MSG
MSG is the validation's message, else "failed expression: EXPR"; an error is "expression
'EXPR' resulted in error: ERR".
Params: a policy's paramKind (apiVersion, kind of a resource the double stores) with its
binding's paramRef: name (one object) or selector (every object whose labels match), in
paramRef.namespace, else the request's namespace for a namespaced kind (a cluster-scoped
request then errs); the matchConditions and validations run once per param, `params` the
object, and any denial denies. No param found: parameterNotFoundAction Deny denies ("no
params found for policy binding with `Deny` parameterNotFoundAction"), Allow (the default
here) lets the request pass; a policy with a paramKind and a binding without paramRef errs.
Not modelled: the binding's matchResources (a binding applies to every request its policy
matches), excludeResourceRules, messageExpression, auditAnnotations, variables, the Warn
and Audit actions (tests/kube/README.md).
"""
from .cel import CelError, compile_expr, evaluate
from .errors import ApiError
from .resources import RESOURCES
from .selectors import match_label_selector

GROUP = "admissionregistration.k8s.io"
REASON_CODES = {"Unauthorized": 401, "Forbidden": 403, "Invalid": 422, "RequestEntityTooLarge": 413}


def _in(value, allowed):
    return "*" in allowed or value in allowed


def _resource_matches(rule_resources, plural, sub):
    want = plural + ("/" + sub if sub else "")
    for r in rule_resources or []:
        if r == want or r == "*/*":
            return True
        if r == "*" and not sub:
            return True
        base, _, rsub = r.partition("/")
        if rsub and sub and ((base == "*" and rsub == sub) or (base == plural and rsub == "*")):
            return True
    return False


def rule_matches(rules, op, res, sub):
    for rule in rules or []:
        if _in(res.group, rule.get("apiGroups") or []) and _in(res.version, rule.get("apiVersions") or []) \
                and _in(op, rule.get("operations") or []) \
                and _resource_matches(rule.get("resources"), res.plural, sub):
            return True
    return False


def _denied(res, name, policy, binding, msg, reason):
    qual = res.plural + ("." + res.group if res.group else "")
    text = "ValidatingAdmissionPolicy '%s' with binding '%s' denied request: %s" % (policy, binding, msg)
    full = ('%s "%s" is forbidden: %s' % (qual, name, text)) if name else "%s is forbidden: %s" % (qual, text)
    d = {"kind": res.plural, "causes": [{"message": text}]}
    if name:
        d["name"] = name
    if res.group:
        d["group"] = res.group
    reason = reason or "Invalid"
    return ApiError(REASON_CODES.get(reason, 422), reason, full, d)


class Policies(object):
    def __init__(self, store):
        self.store = store
        self.compiled = {}  # expression -> AST (or the CelError)

    def _compile(self, src):
        if src not in self.compiled:
            try:
                self.compiled[src] = compile_expr(src)
            except CelError as e:
                self.compiled[src] = e
        c = self.compiled[src]
        if isinstance(c, CelError):
            raise c
        return c

    def _eval(self, src, env):
        return evaluate(self._compile(src), env)

    def admit(self, user, op, res, sub, ns, name, obj, old):
        """Raises the denial of the first binding that denies the request of `user`."""
        bindings = self.store.objs.get("validatingadmissionpolicybindings", {})
        if not bindings:
            return
        uname, uid, groups, extra = user
        request = {"operation": op, "name": name or "", "namespace": ns or "",
                   "kind": {"group": res.group, "version": res.version, "kind": res.kind},
                   "resource": {"group": res.group, "version": res.version, "resource": res.plural},
                   "subResource": sub or "",
                   "userInfo": {"username": uname, "uid": uid or "", "groups": list(groups or [])}}
        if extra:
            request["userInfo"]["extra"] = extra
        for _, binding in sorted(bindings.items()):
            bspec = binding.get("spec") or {}
            if "Deny" not in (bspec.get("validationActions") or []):
                continue
            policy = self.store.get("validatingadmissionpolicies", ("", bspec.get("policyName") or ""))
            if policy is None:
                continue
            pspec = policy.get("spec") or {}
            if not rule_matches((pspec.get("matchConstraints") or {}).get("resourceRules"), op, res, sub):
                continue
            pname, bname = policy["metadata"]["name"], binding["metadata"]["name"]
            fail = (pspec.get("failurePolicy") or "Fail") == "Fail"
            try:
                params = self._params(pspec.get("paramKind"), bspec.get("paramRef"), ns)
            except CelError as e:
                if fail:
                    raise _denied(res, name, pname, bname, str(e), "Invalid")
                continue
            if params == []:
                if ((bspec.get("paramRef") or {}).get("parameterNotFoundAction") or "Allow") == "Deny":
                    raise _denied(res, name, pname, bname,
                                  "no params found for policy binding with `Deny` parameterNotFoundAction", "Invalid")
                continue
            for param in params:
                env = {"object": obj, "oldObject": old, "request": request, "params": param}
                self._validate(pspec, env, fail, res, name, pname, bname)

    def _params(self, kind, ref, ns):
        """[None] for a policy without paramKind, else the param objects the binding's paramRef
        selects ([] when none); CelError for a misconfigured pair."""
        if not kind:
            return [None]
        if not ref:
            raise CelError("policy '%s' has a paramKind and its binding has no paramRef" % kind.get("kind"))
        group, _, version = (kind.get("apiVersion") or "").rpartition("/")
        r = next((x for x in RESOURCES.values() if x.kind == kind.get("kind") and x.group == group
                  and x.version == version and not x.view_of and x.stored), None)
        if r is None:
            raise CelError("failed to find resource referenced by paramKind: '%s/%s'"
                           % (kind.get("apiVersion"), kind.get("kind")))
        pns = ""
        if r.namespaced:
            pns = ref.get("namespace") or ns or ""
            if not pns:
                raise CelError("cannot use namespaced paramRef in policy binding that matches cluster-scoped resources")
        if ref.get("name"):
            o = self.store.get(r.key, (pns, ref["name"]))
            return [o] if o is not None else []
        sel = ref.get("selector") or {}
        return [o for o in sorted(self.store.items(r.key), key=lambda o: o["metadata"]["name"])
                if (o["metadata"].get("namespace") or "") == pns
                and match_label_selector(sel, o["metadata"].get("labels"))]

    def _validate(self, pspec, env, fail, res, name, pname, bname):
        applies = True
        for mc in pspec.get("matchConditions") or []:
            try:
                v = self._eval(mc.get("expression", ""), env)
            except CelError as e:
                if fail:
                    raise _denied(res, name, pname, bname, "failed to evaluate match condition '%s': %s"
                                  % (mc.get("name", ""), e), "Invalid")
                applies = False
                break
            if v is not True:
                applies = False
                break
        if not applies:
            return
        for v in pspec.get("validations") or []:
            expr = v.get("expression", "")
            try:
                ok = self._eval(expr, env)
            except CelError as e:
                if fail:
                    raise _denied(res, name, pname, bname, "expression '%s' resulted in error: %s" % (expr, e),
                                  v.get("reason"))
                continue
            if ok is not True:
                raise _denied(res, name, pname, bname, v.get("message") or "failed expression: " + expr,
                              v.get("reason"))

    def validate_policy(self, obj):
        """kube-apiserver compiles each expression at create/update: errors for a 422 (field,
        value, detail)."""
        errs = []
        spec = obj.get("spec") or {}
        for i, mc in enumerate(spec.get("matchConditions") or []):
            errs += self._check("spec.matchConditions[%d].expression" % i, mc.get("expression"))
        for i, v in enumerate(spec.get("validations") or []):
            errs += self._check("spec.validations[%d].expression" % i, v.get("expression"))
        return errs

    def _check(self, field, src):
        if not src:
            return [(field, None, "Required value")]
        try:
            self._compile(src)
        except CelError as e:
            return [(field, src, "compilation failed: ERROR: <input>: %s" % e)]
        return []
