"""API errors as kube-apiserver writes them (a Status object with reason, code and details)."""

import json


class ApiError(Exception):
    def __init__(self, code, reason, message, details=None):
        Exception.__init__(self, message)
        self.code, self.reason, self.message, self.details = code, reason, message, details

    def status(self):
        st = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": self.message}
        if self.reason:     # Go's omitempty: an error kube-apiserver did not classify has none
            st["reason"] = self.reason
        st["code"] = self.code
        if self.details is not None:
            st["details"] = self.details
        return st


class Retry(Exception):
    pass


def not_found(res, name):
    d = {"name": name, "kind": res.plural}
    if res.group:
        d["group"] = res.group
    return ApiError(404, "NotFound", '%s "%s" not found' % (res.qual, name), d)


def conflict(res, name, msg="the object has been modified; please apply your changes to the latest version and try again"):
    d = {"name": name, "kind": res.plural}
    if res.group:
        d["group"] = res.group
    return ApiError(409, "Conflict", 'Operation cannot be fulfilled on %s "%s": %s' % (res.qual, name, msg), d)


def invalid(res, name, errs):
    """errs: list of (field, value, detail) or (field, None, 'Required value')"""
    causes, msgs = [], []
    for field, value, detail in errs:
        if value is None and detail.startswith("Required value"):
            m = detail
            causes.append({"reason": "FieldValueRequired", "message": m, "field": field})
        else:
            m = "Invalid value: %s: %s" % (json.dumps(value), detail)
            causes.append({"reason": "FieldValueInvalid", "message": m, "field": field})
        msgs.append("%s: %s" % (field, m))
    body = msgs[0] if len(msgs) == 1 else "[" + ", ".join(msgs) + "]"
    gk = res.kind + ("." + res.group if res.group else "")
    d = {"name": name, "kind": res.kind, "causes": causes}
    if res.group:
        d["group"] = res.group
    return ApiError(422, "Invalid", '%s "%s" is invalid: %s' % (gk, name, body), d)


def bad_request(msg):
    return ApiError(400, "BadRequest", msg)
