"""Label and field selectors, and the list/watch filter built from them."""

import re

from .errors import bad_request
from .objects import to_events_v1


def get_path(obj, path):
    cur = obj
    for p in path.split("."):
        if not isinstance(cur, dict):
            return None
        cur = cur.get(p)
    return cur


def field_value(obj, field):
    v = get_path(obj, field)
    if v is None:
        if field == "spec.unschedulable" or field == "spec.hostNetwork":
            return "false"
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if field == "source" and isinstance(v, dict):
        return v.get("component", "")
    return str(v)


def parse_field_selector(s, res):
    out = []
    if not s:
        return out
    for part in s.split(","):
        part = part.strip()
        if not part:
            continue
        m = re.match(r"^([^!=]+)(!=|==|=)(.*)$", part)
        if not m:
            raise bad_request('invalid selector: \'%s\'; can\'t understand \'%s\'' % (s, part))
        k, op, v = m.group(1).strip(), m.group(2), m.group(3).strip()
        if k not in res.fields:
            raise bad_request('field label not supported: %s' % k)
        out.append((k, op != "!=", v))
    return out


def selector_name(q):
    """The name of an exact metadata.name requirement in the fieldSelector of query q (kube-apiserver's
    RequestInfo takes it as the request's name for authorization), or None."""
    raw = (q.get("fieldSelector") or [""])[0]
    for part in raw.split(","):
        m = re.match(r"^\s*metadata\.name\s*(==|=)\s*(.*?)\s*$", part)
        if m and m.group(2) and m.group(2) not in (".", "..") and "/" not in m.group(2) and "%" not in m.group(2):
            return m.group(2)
    return None


def match_fields(obj, sel):
    for k, eq, v in sel:
        if (field_value(obj, k) == v) != eq:
            return False
    return True


def parse_label_selector(s):
    reqs = []
    if not s:
        return reqs
    toks = []
    buf = ""
    depth = 0
    for ch in s:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            toks.append(buf)
            buf = ""
        else:
            buf += ch
    toks.append(buf)
    for t in toks:
        t = t.strip()
        if not t:
            raise bad_request("unable to parse requirement: found '', expected: identifier")
        m = re.match(r"^([A-Za-z0-9_./-]+)\s+(in|notin)\s*\((.*)\)$", t)
        if m:
            vals = set(x.strip() for x in m.group(3).split(",") if x.strip() != "")
            reqs.append((m.group(1), m.group(2), vals))
            continue
        m = re.match(r"^!\s*([A-Za-z0-9_./-]+)$", t)
        if m:
            reqs.append((m.group(1), "!", None))
            continue
        m = re.match(r"^([A-Za-z0-9_./-]+)\s*(==|!=|=)\s*([A-Za-z0-9_.-]*)$", t)
        if m:
            reqs.append((m.group(1), "!=" if m.group(2) == "!=" else "=", m.group(3)))
            continue
        m = re.match(r"^([A-Za-z0-9_./-]+)$", t)
        if m:
            reqs.append((m.group(1), "exists", None))
            continue
        raise bad_request("unable to parse requirement: <nil>: Invalid value: \"%s\"" % t)
    return reqs


def match_labels(labels, reqs):
    labels = labels or {}
    for k, op, v in reqs:
        has = k in labels
        if op == "=" and labels.get(k) != v:
            return False
        if op == "!=" and has and labels[k] == v:
            return False
        if op == "in" and (not has or labels[k] not in v):
            return False
        if op == "notin" and has and labels[k] in v:
            return False
        if op == "exists" and not has:
            return False
        if op == "!" and has:
            return False
    return True


def match_label_selector(sel, labels):
    """A metav1.LabelSelector (matchLabels, matchExpressions) against labels; an empty
    selector matches everything."""
    labels = labels or {}
    for k, v in (sel.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in sel.get("matchExpressions") or []:
        k, op, vals = e.get("key"), e.get("operator"), set(e.get("values") or [])
        if op == "In" and labels.get(k) not in vals:
            return False
        if op == "NotIn" and k in labels and labels[k] in vals:
            return False
        if op == "Exists" and k not in labels:
            return False
        if op == "DoesNotExist" and k in labels:
            return False
    return True


class Filter(object):
    def __init__(self, res, ns, lsel, fsel):
        self.res, self.ns, self.lsel, self.fsel = res, ns, lsel, fsel

    def __call__(self, obj):
        if obj is None:
            return False
        md = obj.get("metadata", {})
        if self.ns is not None and md.get("namespace") != self.ns:
            return False
        if self.lsel and not match_labels(md.get("labels"), self.lsel):
            return False
        if self.fsel:
            o = to_events_v1(obj) if self.res.view_of else obj
            if not match_fields(o, self.fsel):
                return False
        return True
