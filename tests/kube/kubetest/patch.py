"""Patches: JSON merge patch (RFC 7386), strategic merge patch (with the merge keys and
directives of the core types the clients patch) and JSON patch (RFC 6902)."""

import copy
import json


# containerStatuses, initContainerStatuses and ephemeralContainerStatuses have no patch strategy in
# core/v1 (a patch replaces the list): not here.
MERGE_KEYS = {"conditions": "type", "containers": "name", "initContainers": "name",
              "ephemeralContainers": "name", "addresses": "type", "volumes": "name", "env": "name",
              "ports": "containerPort", "volumeMounts": "mountPath", "volumeDevices": "devicePath",
              "ownerReferences": "uid", "imagePullSecrets": "name", "podIPs": "ip", "hostIPs": "ip",
              "hostAliases": "ip", "resourceClaims": "name", "topologySpreadConstraints": "topologyKey"}


PRIMITIVE_MERGE = {"finalizers"}


def strip_directives(v):
    if isinstance(v, dict):
        return {k: strip_directives(x) for k, x in v.items() if not k.startswith("$")}
    if isinstance(v, list):
        return [strip_directives(x) for x in v if not (isinstance(x, dict) and x.get("$patch") == "delete")]
    return v


def merge_patch(target, patch):
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            result.pop(k, None)
        else:
            result[k] = merge_patch(result.get(k), v)
    return result


def smp(orig, patch):
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return strip_directives(patch)
    if patch.get("$patch") == "delete":
        return None
    result = dict(orig) if isinstance(orig, dict) else {}
    orders = {}
    for k, v in patch.items():
        if k.startswith("$setElementOrder/"):
            orders[k.split("/", 1)[1]] = v
            continue
        if k.startswith("$deleteFromPrimitiveList/"):
            f = k.split("/", 1)[1]
            if isinstance(result.get(f), list):
                result[f] = [x for x in result[f] if x not in (v or [])]
            continue
        if k.startswith("$"):
            continue
        if v is None:
            result.pop(k, None)
        elif isinstance(v, dict):
            r = smp(result.get(k), v)
            if r is None:
                result.pop(k, None)
            else:
                result[k] = r
        elif isinstance(v, list) and k in MERGE_KEYS and all(isinstance(x, dict) for x in v):
            result[k] = merge_list(result.get(k) or [], v, MERGE_KEYS[k])
        elif isinstance(v, list) and k in PRIMITIVE_MERGE:
            cur = list(result.get(k) or [])
            for x in v:
                if x not in cur:
                    cur.append(x)
            result[k] = cur
        else:
            result[k] = strip_directives(v)
    for k, order in orders.items():
        mk = MERGE_KEYS.get(k)
        lst = result.get(k)
        if not isinstance(lst, list) or not isinstance(order, list):
            continue
        if mk:
            keys = [o.get(mk) for o in order if isinstance(o, dict)]
            pos = {key: i for i, key in enumerate(keys)}
            inorder = sorted([x for x in lst if isinstance(x, dict) and x.get(mk) in pos], key=lambda x: pos[x.get(mk)])
            rest = [x for x in lst if not (isinstance(x, dict) and x.get(mk) in pos)]
            result[k] = inorder + rest
        else:
            pos = {json.dumps(x): i for i, x in enumerate(order)}
            result[k] = sorted([x for x in lst if json.dumps(x) in pos], key=lambda x: pos[json.dumps(x)]) + \
                [x for x in lst if json.dumps(x) not in pos]
    return result


def merge_list(orig, patch, mk):
    if any(x.get("$patch") == "replace" for x in patch):
        return [strip_directives(x) for x in patch if x.get("$patch") != "replace"]
    result = list(orig)
    for item in patch:
        key = item.get(mk)
        idx = next((i for i, x in enumerate(result) if isinstance(x, dict) and x.get(mk) == key), None)
        if item.get("$patch") == "delete":
            if idx is not None:
                del result[idx]
            continue
        if idx is None:
            result.append(strip_directives(item))
        else:
            result[idx] = smp(result[idx], item)
    return result


def _ptr(path):
    if path == "":
        return []
    if not path.startswith("/"):
        raise ValueError("invalid JSON pointer %r" % path)
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _walk(doc, parts):
    cur = doc
    for p in parts:
        if isinstance(cur, list):
            cur = cur[int(p)]
        elif isinstance(cur, dict):
            cur = cur[p]
        else:
            raise KeyError(p)
    return cur


def json_patch(doc, ops):
    doc = copy.deepcopy(doc)
    if not isinstance(ops, list):
        raise ValueError("json patch must be a list")
    for op in ops:
        o, path = op.get("op"), op.get("path")
        parts = _ptr(path)
        if o == "test":
            if _walk(doc, parts) != op.get("value"):
                raise ValueError("testing value %s failed" % path)
            continue
        if o in ("move", "copy"):
            src = _ptr(op.get("from"))
            val = copy.deepcopy(_walk(doc, src))
            if o == "move":
                par = _walk(doc, src[:-1])
                if isinstance(par, list):
                    del par[int(src[-1])]
                else:
                    del par[src[-1]]
            o, value = "add", val
        else:
            value = copy.deepcopy(op.get("value"))
        if not parts:
            if o in ("add", "replace"):
                doc = value
                continue
            raise ValueError("cannot remove root")
        par = _walk(doc, parts[:-1])
        last = parts[-1]
        if isinstance(par, list):
            if o == "add":
                if last == "-":
                    par.append(value)
                else:
                    par.insert(int(last), value)
            elif o == "remove":
                del par[int(last)]
            elif o == "replace":
                par[int(last)] = value
            else:
                raise ValueError("unknown op %r" % o)
        elif isinstance(par, dict):
            if o == "add":
                par[last] = value
            elif o == "remove":
                if last not in par:
                    raise ValueError("remove: missing key %s" % path)
                del par[last]
            elif o == "replace":
                if last not in par:
                    raise ValueError("replace operation does not apply: doc is missing key: %s" % path)
                par[last] = value
            else:
                raise ValueError("unknown op %r" % o)
        else:
            raise ValueError("path %s not found" % path)
    return doc


PATCH_TYPES = ["application/json-patch+json", "application/merge-patch+json",
               "application/strategic-merge-patch+json", "application/apply-patch+yaml"]
