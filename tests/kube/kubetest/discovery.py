"""Discovery documents: APIResourceList and APIGroup per group version, and the minimal
OpenAPI v2 document kubectl fetches (protobuf or JSON)."""

from .resources import GROUPS, RESOURCES
from .util import K8S_VERSION


def api_resource_list(group, version):
    res = []
    for r in RESOURCES.values():
        if r.group != group or r.version != version:
            continue
        e = {"name": r.plural, "singularName": r.singular, "namespaced": r.namespaced, "kind": r.kind,
             "verbs": r.verbs}
        if r.short:
            e["shortNames"] = r.short
        res.append(e)
        for s in r.subs:
            sv = {"status": ["get", "patch", "update"], "approval": ["get", "patch", "update"], "log": ["get"], "binding": ["create"],
                  "eviction": ["create"], "proxy": ["create", "delete", "get", "patch", "update"],
                  "finalize": ["update"], "exec": ["create", "get"], "attach": ["create", "get"],
                  "portforward": ["create", "get"], "token": ["create"]}[s]
            kind = {"log": "Pod", "binding": "Binding", "eviction": "Eviction", "proxy": "NodeProxyOptions",
                    "exec": "PodExecOptions", "attach": "PodAttachOptions",
                    "portforward": "PodPortForwardOptions", "token": "TokenRequest"}.get(s, r.kind)
            e2 = {"name": r.plural + "/" + s, "singularName": "", "namespaced": r.namespaced, "kind": kind, "verbs": sv}
            if s in ("eviction", "token"):     # a kind of another group
                e2["group"], e2["version"] = {"eviction": "policy", "token": "authentication.k8s.io"}[s], "v1"
            res.append(e2)
    return {"kind": "APIResourceList", "groupVersion": (group + "/" + version) if group else version, "resources": res}


def api_group(g):
    vs = [{"groupVersion": g + "/" + v, "version": v} for v in GROUPS[g]]
    return {"kind": "APIGroup", "apiVersion": "v1", "name": g, "versions": vs, "preferredVersion": vs[0]}


def _pb_field(num, data):
    if isinstance(data, str):
        data = data.encode()
    n, ln = len(data), b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            ln += bytes([b | 0x80])
        else:
            ln += bytes([b])
            break
    return bytes([(num << 3) | 2]) + ln + data


def openapi_v2_pb():
    """gnostic openapi_v2.Document{swagger:"2.0", info:{title, version}, paths:{}} in protobuf."""
    info = _pb_field(1, "Kubernetes") + _pb_field(2, K8S_VERSION["gitVersion"])
    return _pb_field(1, "2.0") + _pb_field(2, info) + _pb_field(8, b"")
