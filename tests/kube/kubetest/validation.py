"""Validation and defaulting of objects on create and update, as kube-apiserver 1.28 answers
(422 Invalid with the causes), lease time handling, pod defaults and the QoS class."""

import ipaddress
import re

from .errors import bad_request, invalid
from .resources import LABEL_MSG, LABEL_RE, SUBDOMAIN_MSG, SUBDOMAIN_RE
from .selectors import match_label_selector
from .util import check_microtime, is_extended, parse_q, q_str
from .vap import Policies


def validate_name(res, name, errs):
    if res.plural == "namespaces":
        if not LABEL_RE.match(name) or len(name) > 63:
            errs.append(("metadata.name", name, LABEL_MSG))
    elif not SUBDOMAIN_RE.match(name) or len(name) > 253:
        errs.append(("metadata.name", name, SUBDOMAIN_MSG))


def validate_resource_list(rl, path, errs, lim=None):
    for k, v in (rl or {}).items():
        q = parse_q(v)     # ValueError -> 400 by caller
        p = "%s[%s]" % (path, k) if lim is not None else "%s.%s" % (path, k)
        if q < 0:
            errs.append((p, q_str(v), "must be greater than or equal to 0"))
        elif is_extended(k) and q.denominator != 1:
            errs.append((p, q_str(v), "must be an integer"))


def check_quantities(res, obj):
    """Quantities that cannot be parsed are a decoding error (400) like the real server."""
    def chk(rl):
        for v in (rl or {}).values():
            parse_q(v)
    try:
        if res.plural == "nodes":
            chk((obj.get("status") or {}).get("capacity"))
            chk((obj.get("status") or {}).get("allocatable"))
        elif res.plural == "pods":
            sp = obj.get("spec") or {}
            for c in (sp.get("containers") or []) + (sp.get("initContainers") or []):
                chk((c.get("resources") or {}).get("limits"))
                chk((c.get("resources") or {}).get("requests"))
    except ValueError as e:
        raise bad_request('%s in version "v1" cannot be handled as a %s: %s' % (res.kind, res.kind, e))


# The volume sources of a PersistentVolumeSpec (ValidatePersistentVolumeSpec: exactly one).
PV_SOURCES = ("awsElasticBlockStore", "azureDisk", "azureFile", "cephfs", "cinder", "csi", "fc", "flexVolume",
              "flocker", "gcePersistentDisk", "glusterfs", "hostPath", "iscsi", "local", "nfs",
              "photonPersistentDisk", "portworxVolume", "quobyte", "rbd", "scaleIO", "storageos",
              "vsphereVolume")
ACCESS_MODES = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")


def _access_modes(modes, errs):
    if not modes:
        errs.append(("spec.accessModes", None, "Required value"))
    for m in modes or []:
        if m not in ACCESS_MODES:
            errs.append(("spec.accessModes", m, "Unsupported value: \"%s\": supported values: \"%s\""
                         % (m, '", "'.join(ACCESS_MODES))))


def validate_pv(sp, errs):
    _access_modes(sp.get("accessModes"), errs)
    if "storage" not in (sp.get("capacity") or {}):
        errs.append(("spec.capacity", None, "Required value"))
    sources = [k for k in PV_SOURCES if k in sp]
    if not sources:
        errs.append(("spec", None, "Required value: must specify a volume type"))
    elif len(sources) > 1:
        errs.append(("spec.%s" % sources[1], None, "Forbidden: may not specify more than 1 volume type"))
    for k in ("hostPath", "local"):
        if k in sp and not str((sp.get(k) or {}).get("path") or "").startswith("/"):
            errs.append(("spec.%s.path" % k, (sp.get(k) or {}).get("path"), "Required value"))
    if "nfs" in sp:
        n = sp.get("nfs") or {}
        if not n.get("server"):
            errs.append(("spec.nfs.server", None, "Required value"))
        if not str(n.get("path") or "").startswith("/"):
            errs.append(("spec.nfs.path", n.get("path"), "Invalid value: must be an absolute path"))


def validate_pvc(sp, old_sp, errs):
    _access_modes(sp.get("accessModes"), errs)
    if "storage" not in ((sp.get("resources") or {}).get("requests") or {}):
        errs.append(("spec.resources[storage]", None, "Required value"))
    # Once bound, only the requested storage may change (ValidatePersistentVolumeClaimUpdate);
    # the binder's write of volumeName into a claim that had none is allowed.
    if old_sp is not None:
        a, b = dict(old_sp), dict(sp)
        for x in (a, b):
            x.pop("resources", None)
        if not a.get("volumeName"):
            b.pop("volumeName", None)
            a.pop("volumeName", None)
        if a != b:
            errs.append(("spec", None, "Forbidden: spec is immutable after creation except "
                         "resources.requests for bound claims"))


def validate(res, obj, old=None):
    errs = []
    md = obj.get("metadata") or {}
    name = md.get("name") or ""
    if old is None:
        if not name:
            errs.append(("metadata.name", None, "Required value: name or generateName is required"))
        else:
            validate_name(res, name, errs)
    for lk, lv in (md.get("labels") or {}).items():
        if not isinstance(lv, str) or len(lv) > 63 or (lv and not re.match(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$", lv)):
            errs.append(("metadata.labels", lv, "a valid label must be an empty string or consist of alphanumeric "
                         "characters, '-', '_' or '.', and must start and end with an alphanumeric character"))
    if res.plural == "nodes":
        st = obj.get("status") or {}
        validate_resource_list(st.get("capacity"), "status.capacity", errs)
        validate_resource_list(st.get("allocatable"), "status.allocatable", errs)
        for i, t in enumerate((obj.get("spec") or {}).get("taints") or []):
            if t.get("effect") not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
                errs.append(("spec.taints[%d].effect" % i, t.get("effect"),
                             'supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"'))
    elif res.plural == "pods":
        sp = obj.get("spec") or {}
        cs = sp.get("containers") or []
        if not cs:
            errs.append(("spec.containers", None, "Required value"))
        for kind in ("containers", "initContainers"):
            for i, c in enumerate(sp.get(kind) or []):
                p = "spec.%s[%d]" % (kind, i)
                if not c.get("name"):
                    errs.append((p + ".name", None, "Required value"))
                if not c.get("image") and old is None:
                    errs.append((p + ".image", None, "Required value"))
                r = c.get("resources") or {}
                lim, req = r.get("limits") or {}, r.get("requests") or {}
                validate_resource_list(lim, p + ".resources.limits", errs, lim=True)
                validate_resource_list(req, p + ".resources.requests", errs, lim=True)
                for k, v in req.items():
                    if is_extended(k):
                        if k not in lim:
                            errs.append((p + ".resources.limits", None, "Required value: Limit must be set for non overcommitable resources"))
                        elif parse_q(lim[k]) != parse_q(v):
                            errs.append(("%s.resources.requests[%s]" % (p, k), q_str(v), "must be equal to %s limit of %s" % (k, q_str(lim[k]))))
                    elif k in lim and parse_q(v) > parse_q(lim[k]):
                        errs.append(("%s.resources.requests" % p, q_str(v), "must be less than or equal to %s limit of %s" % (k, q_str(lim[k]))))
        validate_host_network(sp, "spec", True, errs)
    elif res.plural in ("deployments", "replicasets"):
        validate_workload(obj, old, errs)
    elif res.plural == "services":
        sp = obj.get("spec") or {}
        ports = sp.get("ports") or []
        if not ports and sp.get("clusterIP") != "None":
            errs.append(("spec.ports", None, "Required value"))
        for i, p in enumerate(ports):
            port = p.get("port") if isinstance(p, dict) else None
            if not isinstance(port, int) or not 0 < port < 65536:
                errs.append(("spec.ports[%d].port" % i, port, "must be between 1 and 65535, inclusive"))
            if len(ports) > 1 and isinstance(p, dict) and not p.get("name"):
                errs.append(("spec.ports[%d].name" % i, None, "Required value"))
        if old is not None and (old.get("spec") or {}).get("clusterIP") not in (None, sp.get("clusterIP")):
            errs.append(("spec.clusterIP", sp.get("clusterIP"), "field is immutable"))
    elif res.plural == "endpoints":
        # ValidateEndpoints: no address in the loopback range (kube-apiserver answers so for a
        # pod IP of 127.0.0.1, and its endpoint controller's update of the whole object fails).
        for i, sub in enumerate(obj.get("subsets") or []):
            for which in ("addresses", "notReadyAddresses"):
                for j, a in enumerate((sub or {}).get(which) or []):
                    ip = (a or {}).get("ip")
                    try:
                        loop = ipaddress.ip_address(ip).is_loopback
                    except (TypeError, ValueError):
                        errs.append(("subsets[%d].%s[%d].ip" % (i, which, j), ip, "must be a valid IP address"))
                        continue
                    if loop:
                        errs.append(("subsets[%d].%s[%d].ip" % (i, which, j), ip,
                                     "may not be in the loopback range (127.0.0.0/8, ::1/128)"))
    elif res.plural == "persistentvolumes":
        validate_pv(obj.get("spec") or {}, errs)
    elif res.plural == "persistentvolumeclaims":
        validate_pvc(obj.get("spec") or {}, (old or {}).get("spec"), errs)
    elif res.plural == "events":
        io = obj.get("involvedObject") or {}
        if io.get("namespace") and io.get("namespace") != md.get("namespace"):
            errs.append(("involvedObject.namespace", io.get("namespace"), "does not match event.namespace"))
    if res.plural == "validatingadmissionpolicies":
        errs += Policies(None).validate_policy(obj)
    if errs:
        raise invalid(res, name, errs)


def validate_workload(obj, old, errs):
    """A Deployment's or ReplicaSet's selector and template labels, as kube-apiserver checks
    them (apps/v1: the selector is required and immutable)."""
    sp = obj.get("spec") or {}
    sel = sp.get("selector")
    labels = ((sp.get("template") or {}).get("metadata") or {}).get("labels") or {}
    if not isinstance(sel, dict) or not (sel.get("matchLabels") or sel.get("matchExpressions")):
        errs.append(("spec.selector", None, "Required value"))
        return
    if old is not None and (old.get("spec") or {}).get("selector") != sel:
        errs.append(("spec.selector", "v1.LabelSelector", "field is immutable"))
    if not match_label_selector(sel, labels):
        errs.append(("spec.template.metadata.labels", labels, "`selector` does not match template `labels`"))
    if not ((sp.get("template") or {}).get("spec") or {}).get("containers"):
        errs.append(("spec.template.spec.containers", None, "Required value"))
    validate_host_network((sp.get("template") or {}).get("spec") or {}, "spec.template.spec", False, errs)
    r = sp.get("replicas", 1)
    if not isinstance(r, int) or r < 0:
        errs.append(("spec.replicas", r, "must be greater than or equal to 0"))


def validate_host_network(sp, path, is_pod, errs):
    """kube-apiserver's validatePodHostNetworkDeps: with hostNetwork, each port of the regular
    containers (not the init containers) has hostPort == containerPort. A pod template (a
    Deployment's, a ReplicaSet's) may leave hostPort 0: only pods are defaulted (1.28: the
    DefaultHostNetworkHostPortsInPodTemplates gate, off)."""
    if sp.get("hostNetwork") is not True:
        return
    for i, c in enumerate(sp.get("containers") or []):
        for j, port in enumerate(c.get("ports") or []):
            hp, cp = port.get("hostPort") or 0, port.get("containerPort") or 0
            if (is_pod or hp != 0) and hp != cp:
                errs.append(("%s.containers[%d].ports[%d].hostPort" % (path, i, j), hp,
                             "must match `containerPort` when `hostNetwork` is true"))


def lease_times(res, obj, patch_mode):
    if res.plural != "leases":
        return
    spec = obj.get("spec") or {}
    for f in ("renewTime", "acquireTime"):
        if f in spec and spec[f] is not None:
            norm, err = check_microtime(spec[f])
            if err:
                name = (obj.get("metadata") or {}).get("name", "")
                if patch_mode:
                    raise invalid(res, name, [("patch", spec[f], err)])
                raise bad_request('Lease in version "v1" cannot be handled as a Lease: %s' % err)
            spec[f] = norm


def default_pod(pod, service_account=True):
    """The pod defaults; service_account: the account "default" the ServiceAccount admission plugin
    gives a pod without one (not a mirror pod)."""
    sp = pod.setdefault("spec", {})
    sp.setdefault("restartPolicy", "Always")
    sp.setdefault("terminationGracePeriodSeconds", 30)
    sp.setdefault("dnsPolicy", "ClusterFirst")
    if service_account:
        sp.setdefault("serviceAccountName", "default")
        sp.setdefault("serviceAccount", sp["serviceAccountName"])
    sp.setdefault("securityContext", {})
    sp.setdefault("schedulerName", "default-scheduler")
    sp.setdefault("enableServiceLinks", True)
    sp.setdefault("priority", 0)
    sp.setdefault("preemptionPolicy", "PreemptLowerPriority")
    for kind in ("initContainers", "containers"):
        for c in sp.get(kind) or []:
            img = c.get("image") or ""
            if "imagePullPolicy" not in c:
                tail = img.split("/")[-1]
                tag = tail.split(":", 1)[1] if ":" in tail and "@" not in tail else ("" if "@" not in tail else "digest")
                c["imagePullPolicy"] = "Always" if tag in ("", "latest") else "IfNotPresent"
            c.setdefault("terminationMessagePath", "/dev/termination-log")
            c.setdefault("terminationMessagePolicy", "File")
            r = c.setdefault("resources", {})
            if r.get("limits"):
                req = r.setdefault("requests", {})
                for k, v in r["limits"].items():
                    req.setdefault(k, v)
            for p in c.get("ports") or []:
                p.setdefault("protocol", "TCP")
                # SetDefaults_Pod's defaultHostNetworkPorts (containers and init containers)
                if sp.get("hostNetwork") is True and not p.get("hostPort") and p.get("containerPort"):
                    p["hostPort"] = p["containerPort"]
    tols = sp.setdefault("tolerations", [])
    for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
        if not any(t.get("key") == key and t.get("effect") in ("NoExecute", None, "") for t in tols):
            tols.append({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300})
    if not tols:
        del sp["tolerations"]


def qos_class(pod):
    cs = (pod.get("spec") or {}).get("containers") or []
    reqs, lims = set(), set()
    guaranteed = True
    for c in cs:
        r = c.get("resources") or {}
        lim, req = r.get("limits") or {}, r.get("requests") or {}
        for k in ("cpu", "memory"):
            if k in req and parse_q(req[k]) != 0:
                reqs.add(k)
            if k in lim and parse_q(lim[k]) != 0:
                lims.add(k)
            if k not in lim or (k in req and parse_q(req[k]) != parse_q(lim[k])):
                guaranteed = False
    if not reqs and not lims:
        return "BestEffort"
    if guaranteed and cs:
        return "Guaranteed"
    return "Burstable"
