"""The API's verbs on the store: get, list, create, update, patch, delete (graceful pod
deletion, garbage collection of owned objects), pod eviction and event recording, with the admission
checks kube-apiserver makes for the requester (NodeRestriction, the ServiceAccount plugin's mirror-pod
rules, CertificateApproval / CertificateSigning / CertificateSubjectRestriction). A verb called
with user=None is the double's own (a controller's): no admission."""

import base64
import copy
import datetime
import json
import threading
import time

from . import csr as csrapi
from .auth import Auth
from .errors import ApiError, Retry, bad_request, conflict, invalid, not_found
from .vap import Policies
from .node_authorizer import BindingView, NodeAuthorizer, NodeRestriction, admission_forbidden, is_mirror_pod, mirror_pod_checks
from .objects import new_uid, pod_terminal, rand_suffix, strip_for_compare
from .patch import PATCH_TYPES, json_patch, merge_patch, smp
from .resources import RESOURCES, STORE_RES
from .store import Store
from .tokens import ServiceAccountTokens
from .util import micro_ts, now_utc, parse_ts, ts
from .validation import check_quantities, default_pod, lease_times, qos_class, validate



def typed_container_states(st):
    """What decoding into core/v1 PodStatus does to a container's state: a
    null pointer member (waiting/running/terminated) is dropped, a null
    lastState (a struct, not a pointer) reads as {}. A real server never
    stores or serves those nulls; readers (tables, the agent) rely on it."""
    if not isinstance(st, dict):
        return
    for f in ("initContainerStatuses", "containerStatuses", "ephemeralContainerStatuses"):
        for cs in st.get(f) or []:
            if not isinstance(cs, dict):
                continue
            for which in ("state", "lastState"):
                v = cs.get(which)
                if v is None:
                    if which in cs:
                        cs[which] = {}
                    continue
                if isinstance(v, dict):
                    for k in [k for k, x in v.items() if x is None]:
                        del v[k]

class Api(object):
    def __init__(self, opts):
        self.opts = opts
        self.store = Store(opts.history)
        self.auth = Auth()
        self.tokens = ServiceAccountTokens(self.store, opts)
        self.auth.issuer = self.tokens
        self.bindings = BindingView(self.store, getattr(opts, "node_authorizer_lag", 0.0))
        self.auth.node = NodeAuthorizer(self.store, self.bindings)
        self.node_restriction = NodeRestriction(self.store, self.bindings)
        self.policies = Policies(self.store)
        self.wake_csr = threading.Event()
        self.wake_sched = threading.Event()
        self.wake_nlc = threading.Event()
        self.wake_workloads = threading.Event()
        self.cluster_ips = 10       # the next Service gets 10.96.0.<n> (then .1.0 ...)
        self.cluster_gen = 0
        self.store.listeners.append(self._on_event)
        for ns in ("default", "kube-system", "kube-public", "kube-node-lease"):
            self.create(RESOURCES[("", "namespaces")], None, {"metadata": {"name": ns}}, internal=True)

    def _on_event(self, key, ev):
        if key in ("nodes", "pods"):
            self.cluster_gen += 1
            self.wake_sched.set()
        if key in ("nodes", "leases"):
            self.wake_nlc.set()
        if key in ("deployments", "replicasets", "pods", "services", "endpoints", "persistentvolumes",
                   "persistentvolumeclaims"):
            self.wake_workloads.set()
        if key == "certificatesigningrequests":
            self.wake_csr.set()

    # -- admission
    def admit(self, user, op, res, sub, ns, name, obj, old):
        """The admission plugins for a request of `user` ((name, uid, groups, extra); None: the double's
        own write, not admitted): NodeRestriction, and for CSRs CertificateApproval (approve on the
        signer for /approval), CertificateSigning (sign on the signer when /status changes the
        certificate) and CertificateSubjectRestriction."""
        if user is None:
            return
        uname, _, groups, _ = user
        self.node_restriction.admit(uname, groups, op, res, sub, ns, name, obj, old)
        self.policies.admit(user, op, res, sub, ns, name, obj, old)
        if res.plural == "certificatesigningrequests" and op == "UPDATE":
            signer = ((old.get("spec") or {}).get("signerName")) or ""
            if sub == "approval" and not self.authorized_for_signer(uname, groups, "approve", signer):
                raise admission_forbidden(res.plural, res.group, name, 'user not permitted to approve requests with '
                                                                       'signerName "%s"' % signer)
            if sub == "status" and (obj.get("status") or {}).get("certificate") != \
                    (old.get("status") or {}).get("certificate") and \
                    not self.authorized_for_signer(uname, groups, "sign", signer):
                raise admission_forbidden(res.plural, res.group, name, 'user not permitted to sign requests with '
                                                                       'signerName "%s"' % signer)

    def authorized_for_signer(self, user, groups, verb, signer):
        """certificates.IsAuthorizedForSignerName: VERB on signers named after the signer, or after its
        domain with "/*"."""
        for n in (signer, signer.split("/", 1)[0] + "/*"):
            if self.auth.allowed(user, groups, verb, "certificates.k8s.io", "signers", "", None, n):
                return True
        return False

    # -- read
    def get(self, res, ns, name):
        o = self.store.get(res.key, (ns or "", name))
        if o is None:
            raise not_found(res, name)
        return o

    def list(self, res, ns, filt):
        with self.store.lock:
            items = list(self.store.objs[res.key].items())
            rv = str(self.store.rv)
        items.sort(key=lambda kv: kv[0])
        return [o for k, o in items if filt(o)], rv

    # -- create
    def create(self, res, ns, obj, internal=False, dry=False, user=None):
        if not isinstance(obj, dict):
            raise bad_request("the object provided is unrecognized")
        if res.view_of:
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        obj = copy.deepcopy(obj)
        kind, av = obj.get("kind"), obj.get("apiVersion")
        if kind and kind != res.kind:
            raise bad_request('%s in version "%s" cannot be handled as a %s: no kind "%s" is registered for version "%s" in scheme' % (
                res.kind, res.version, res.kind, kind, av or res.api_version))
        obj["kind"], obj["apiVersion"] = res.kind, res.api_version
        md = obj.get("metadata")
        if not isinstance(md, dict):
            md = obj["metadata"] = {}
        if res.namespaced:
            if md.get("namespace") and md["namespace"] != ns:
                raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
            md["namespace"] = ns
        else:
            md.pop("namespace", None)
        req_name = md.get("name") or md.get("generateName") or ""     # the name admission errors give
        is_csr = res.plural == "certificatesigningrequests"
        if is_csr:
            csrapi.decode_spec(obj)
            csrapi.prepare_for_create(obj, user)
        if not md.get("name") and md.get("generateName"):
            md["name"] = md["generateName"] + rand_suffix()
        check_quantities(res, obj)
        lease_times(res, obj, False)
        for k in ("uid", "resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields"):
            md.pop(k, None)
        md["uid"] = new_uid()
        md["creationTimestamp"] = ts()
        if res.plural == "pods":
            mirror = is_mirror_pod(obj)
            if mirror:     # the ServiceAccount admission plugin leaves a mirror pod's account empty
                mirror_pod_checks(obj, req_name)
            default_pod(obj, service_account=not mirror)
            obj["status"] = {"phase": "Pending"}
        elif res.plural == "nodes":
            spec = obj.setdefault("spec", {})
            taints = spec.setdefault("taints", [])
            if not any(t.get("key") == "node.kubernetes.io/not-ready" and t.get("effect") == "NoSchedule" for t in taints):
                taints.append({"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"})
            st = obj.setdefault("status", {})
            if st.get("capacity") and not st.get("allocatable"):
                st["allocatable"] = dict(st["capacity"])
            st.setdefault("daemonEndpoints", {"kubeletEndpoint": {"Port": 0}})
            st.setdefault("nodeInfo", {"machineID": "", "systemUUID": "", "bootID": "", "kernelVersion": "",
                                       "osImage": "", "containerRuntimeVersion": "", "kubeletVersion": "",
                                       "kubeProxyVersion": "", "operatingSystem": "", "architecture": ""})
        elif res.plural == "namespaces":
            obj["spec"] = {"finalizers": ["kubernetes"]}
            obj["status"] = {"phase": "Active"}
            md.setdefault("labels", {})["kubernetes.io/metadata.name"] = md.get("name", "")
        elif res.plural == "secrets":
            obj.setdefault("type", "Opaque")
            # stringData is write-only: merged into data, base64-encoded (its keys win).
            sd = obj.pop("stringData", None)
            if isinstance(sd, dict):
                if not isinstance(obj.get("data"), dict):
                    obj["data"] = {}
                data = obj["data"]
                for k, v in sd.items():
                    data[k] = base64.b64encode(str(v).encode()).decode()
        elif res.plural in ("deployments", "replicasets"):
            md["generation"] = 1
            sp = obj.setdefault("spec", {})
            if isinstance(sp, dict):
                sp.setdefault("replicas", 1)
            obj["status"] = {}
        elif res.plural == "services":
            self._default_service(obj)
        self.admit(user, "CREATE", res, None, ns, req_name, obj, None)
        if is_csr:
            parsed = csrapi.validate_create(obj)
            if user is not None and obj["spec"].get("signerName") == csrapi.APISERVER_CLIENT_SIGNER and \
                    "system:masters" in parsed["orgs"]:
                # CertificateSubjectRestriction
                raise admission_forbidden(res.plural, res.group, req_name, "use of kubernetes.io/kube-apiserver-client "
                                                                           "signer with system:masters group is not allowed")
        else:
            validate(res, obj)
        if res.plural == "pods":
            obj["status"]["qosClass"] = qos_class(obj)
        if res.namespaced and not internal and self.store.get("namespaces", ("", ns)) is None:
            raise not_found(RESOURCES[("", "namespaces")], ns)
        name = md["name"]
        k = (ns or "", name)
        if self.store.get(res.key, k) is not None:
            d = {"name": name, "kind": res.plural}
            if res.group:
                d["group"] = res.group
            raise ApiError(409, "AlreadyExists", '%s "%s" already exists' % (res.qual, name), d)
        if dry:
            obj["metadata"]["resourceVersion"] = ""
            return obj
        try:
            return self.store.write(res.key, k, None, obj)
        except Retry:
            d = {"name": name, "kind": res.plural}
            raise ApiError(409, "AlreadyExists", '%s "%s" already exists' % (res.qual, name), d)

    def _default_service(self, obj, old=None):
        sp = obj.setdefault("spec", {})
        if not isinstance(sp, dict):
            return
        sp.setdefault("type", "ClusterIP")
        sp.setdefault("sessionAffinity", "None")
        if old is not None and (old.get("spec") or {}).get("clusterIP"):
            sp["clusterIP"] = old["spec"]["clusterIP"]
        elif not sp.get("clusterIP"):
            with self.store.lock:
                n = self.cluster_ips
                self.cluster_ips += 1
            sp["clusterIP"] = "10.96.%d.%d" % (n // 256, n % 256)
        sp["clusterIPs"] = [sp["clusterIP"]]
        for p in sp.get("ports") or []:
            if isinstance(p, dict):
                p.setdefault("protocol", "TCP")
                p.setdefault("targetPort", p.get("port"))
        obj.setdefault("status", {"loadBalancer": {}})

    # -- update / patch
    def _finish_update(self, res, sub, old, new, patch_mode):
        """Shape `new` (a full object from the client or a patch result) into the object to store."""
        name = old["metadata"]["name"]
        if not isinstance(new, dict):
            raise bad_request("the object provided is unrecognized")
        nmd = new.get("metadata") if isinstance(new.get("metadata"), dict) else {}
        if nmd.get("name") and nmd["name"] != name:
            if patch_mode:
                raise invalid(res, name, [("metadata.name", nmd["name"], "field is immutable")])
            raise bad_request("the name of the object (%s) does not match the name on the URL (%s)" % (nmd["name"], name))
        if nmd.get("uid") and nmd["uid"] != old["metadata"]["uid"]:
            raise conflict(res, name, "Precondition failed: UID in precondition: %s, UID in object meta: %s" % (
                nmd["uid"], old["metadata"]["uid"]))
        rv = nmd.get("resourceVersion")
        if rv and rv != old["metadata"]["resourceVersion"]:
            raise conflict(res, name)
        check_quantities(res, new)
        lease_times(res, new, patch_mode)
        if res.plural == "certificatesigningrequests" and sub is None:
            csrapi.decode_spec(new)
        if sub in ("status", "approval"):
            out = copy.deepcopy(old)
            if "status" in new:
                out["status"] = copy.deepcopy(new.get("status"))
            # labels/annotations may change through /status too
            for f in ("labels", "annotations"):
                if f in nmd:
                    out["metadata"][f] = copy.deepcopy(nmd[f])
        else:
            out = copy.deepcopy(new)
            out["kind"], out["apiVersion"] = res.kind, res.api_version
            md = out.setdefault("metadata", {}) if isinstance(out.get("metadata"), dict) else out.setdefault("metadata", {})
            if not isinstance(md, dict):
                md = out["metadata"] = {}
            for f in ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp",
                      "deletionGracePeriodSeconds", "generateName"):
                if f in old["metadata"]:
                    md[f] = old["metadata"][f]
                else:
                    md.pop(f, None)
            if res.has_status:
                if "status" in old:
                    out["status"] = copy.deepcopy(old["status"])
                else:
                    out.pop("status", None)
            if res.plural == "pods":
                # most of a pod's spec is immutable; keep the stored one except for mutable bits
                nsp = out.get("spec") or {}
                osp = copy.deepcopy(old.get("spec") or {})
                for i, c in enumerate(nsp.get("containers") or []):
                    if i < len(osp.get("containers") or []) and c.get("image"):
                        osp["containers"][i]["image"] = c["image"]
                if "activeDeadlineSeconds" in nsp:
                    osp["activeDeadlineSeconds"] = nsp["activeDeadlineSeconds"]
                if "tolerations" in nsp:
                    osp["tolerations"] = nsp["tolerations"]
                out["spec"] = osp
        if res.plural == "pods" and sub == "status":
            typed_container_states(out.get("status"))
        if res.plural == "nodes" and sub == "status":
            st = out.setdefault("status", {})
            if st.get("capacity") and not st.get("allocatable"):
                st["allocatable"] = dict(st["capacity"])
        if res.plural in ("deployments", "replicasets"):
            # metadata.generation counts spec changes (status writes leave it).
            gen = int(old["metadata"].get("generation", 1))
            if sub != "status" and out.get("spec") != old.get("spec"):
                gen += 1
            out["metadata"]["generation"] = gen
        if res.plural == "services" and sub != "status":
            self._default_service(out, old)
        if res.plural == "certificatesigningrequests":
            if sub is not None:
                csrapi.decode_spec(dict(new, spec={}))
            out = csrapi.prepare_for_update(sub, old, out)
        else:
            validate(res, out, old)
        md = out["metadata"]
        md["resourceVersion"] = old["metadata"]["resourceVersion"]
        md.pop("managedFields", None)
        return out

    def update(self, res, ns, name, body, sub=None, dry=False, user=None):
        """The stored object after a PUT; (the object, True) when the PUT created it."""
        if res.view_of:
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        k = (ns or "", name)
        for _ in range(100):
            old = self.store.get(res.key, k)
            if old is None and res.plural == "leases" and sub is None and isinstance(body, dict):
                # A Lease is created on update (kube-apiserver's AllowCreateOnUpdate for
                # coordination.k8s.io), unless the body holds a uid: then the storage's uid
                # precondition fails against the missing object: a 409, not a 404, as
                # kube-apiserver 1.28 answers (tests/kube/test_kube_api.py checks both).
                uid = (body.get("metadata") or {}).get("uid") if isinstance(body.get("metadata"), dict) else None
                if uid:
                    raise conflict(res, name, "Precondition failed: UID in precondition: %s, UID in object meta: " % uid)
                md = dict(body.get("metadata") or {}, name=name)
                return self.create(res, ns, dict(body, metadata=md), dry=dry, user=user), True
            if old is None:
                raise not_found(res, name)
            if not isinstance(body, dict):
                raise bad_request("the object provided is unrecognized")
            if body.get("kind") and body["kind"] != res.kind:
                raise bad_request('%s in version "%s" cannot be handled as a %s: no kind "%s" is registered' % (
                    res.kind, res.version, res.kind, body["kind"]))
            md = body.get("metadata") or {}
            if res.namespaced and md.get("namespace") and md["namespace"] != ns:
                raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
            new = self._finish_update(res, sub, old, body, False)
            self.admit(user, "UPDATE", res, sub, ns, name, new, old)
            if strip_for_compare(new) == strip_for_compare(old) or dry:
                return old if not dry else new
            try:
                return self.store.write(res.key, k, old, new)
            except Retry:
                continue
        raise ApiError(500, "InternalError", "too many retries")

    def patch(self, res, ns, name, ctype, raw, sub=None, dry=False, force_create=False, user=None):
        if res.view_of:
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        ctype = (ctype or "").split(";")[0].strip().lower()
        if ctype not in PATCH_TYPES:
            raise ApiError(415, "UnsupportedMediaType", "the body of the request was in an unknown format - accepted media types include: " + ", ".join(PATCH_TYPES))
        try:
            p = json.loads(raw.decode("utf-8") or "null")
        except Exception as e:
            if ctype == "application/apply-patch+yaml":
                raise bad_request("this test double accepts server-side apply only as JSON: %s" % e)
            raise bad_request("error decoding patch: %s" % e)
        if ctype != "application/json-patch+json" and not isinstance(p, dict):
            raise bad_request("error decoding patch: patch must be a JSON object")
        k = (ns or "", name)
        for _ in range(100):
            old = self.store.get(res.key, k)
            if old is None:
                if ctype == "application/apply-patch+yaml" and sub is None:
                    body = copy.deepcopy(p)
                    body.setdefault("metadata", {})["name"] = name
                    return self.create(res, ns, body, dry=dry, user=user), 201
                raise not_found(res, name)
            base = copy.deepcopy(old)
            try:
                if ctype == "application/json-patch+json":
                    new = json_patch(base, p)
                elif ctype == "application/merge-patch+json":
                    new = merge_patch(base, p)
                elif ctype == "application/apply-patch+yaml":
                    new = merge_patch(base, {k2: v for k2, v in p.items() if k2 not in ("kind", "apiVersion")})
                else:
                    new = smp(base, p)
            except ApiError:
                raise
            except Exception as e:
                raise ApiError(422, "Invalid", "the server rejected our request due to an error in our request: %s" % e)
            new = self._finish_update(res, sub, old, new, True)
            self.admit(user, "UPDATE", res, sub, ns, name, new, old)
            if strip_for_compare(new) == strip_for_compare(old):
                return old, 200
            if dry:
                return new, 200
            try:
                return self.store.write(res.key, k, old, new), 200
            except Retry:
                continue
        raise ApiError(500, "InternalError", "too many retries")

    # -- delete
    def delete(self, res, ns, name, opts, dry=False, user=None):
        """Returns (http code, body). The DeleteOptions' preconditions are checked as the generic
        registry's BeforeDelete words them, after the admission (the delete handler runs mutating
        admission, NodeRestriction, before the storage)."""
        if res.view_of:
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
        k = (ns or "", name)
        for _ in range(100):
            if user is not None:
                self.admit(user, "DELETE", res, None, ns, name, None, self.store.get(res.key, k))
            old = self.store.get(res.key, k)
            if old is None:
                raise not_found(res, name)
            pre = opts.get("preconditions") or {}
            if pre.get("uid") and pre["uid"] != old["metadata"]["uid"]:
                raise self._precondition_failed(res, name, "the UID in the precondition (%s) does not match the UID in "
                                                "record (%s). The object might have been deleted and then recreated" % (
                                                    pre["uid"], old["metadata"]["uid"]))
            if pre.get("resourceVersion") and pre["resourceVersion"] != old["metadata"]["resourceVersion"]:
                raise self._precondition_failed(res, name, "the ResourceVersion in the precondition (%s) does not match "
                                                "the ResourceVersion in record (%s). The object might have been "
                                                "modified" % (pre["resourceVersion"], old["metadata"]["resourceVersion"]))
            try:
                if res.plural == "pods":
                    return self._delete_pod(res, k, old, opts, dry)
                if dry:
                    return 200, self._delete_status(res, old)
                gone = self.store.write(res.key, k, old, None)
            except Retry:
                continue
            if res.plural == "nodes":
                self._gc_owned(old["metadata"]["uid"])
            if res.plural == "namespaces":
                for key in STORE_RES:
                    if STORE_RES[key].namespaced:
                        for kk, o in list(self.store.objs[key].items()):
                            if kk[0] == name:
                                try:
                                    self.store.write(key, kk, o, None)
                                except Retry:
                                    pass
                g = copy.deepcopy(gone)
                g.setdefault("status", {})["phase"] = "Terminating"
                return 200, g
            return 200, self._delete_status(res, gone)
        raise ApiError(500, "InternalError", "too many retries")

    def _precondition_failed(self, res, name, msg):
        """rest.BeforeDelete: apierrors.NewConflict(GroupResource{group, Kind}, name, ...)."""
        d = {"name": name, "kind": res.kind}
        if res.group:
            d["group"] = res.group
        return ApiError(409, "Conflict", 'Operation cannot be fulfilled on %s%s "%s": %s' % (
            res.kind, "." + res.group if res.group else "", name, msg), d)

    def evict(self, ns, name, body, user=None):
        """POST pods/NAME/eviction (policy/v1 Eviction): the double has no PodDisruptionBudgets, so
        an eviction that passes admission is a delete with the Eviction's deleteOptions; 201 Success."""
        res = RESOURCES[("", "pods")]
        if not isinstance(body, dict):
            raise bad_request("the object provided is unrecognized")
        if user is not None:
            self.admit(user, "CREATE", res, "eviction", ns, name, body, None)
        bname = (body.get("metadata") or {}).get("name") if isinstance(body.get("metadata"), dict) else None
        if bname and bname != name:
            raise bad_request("name in URL does not match name in Eviction object")
        opts = body.get("deleteOptions") if isinstance(body.get("deleteOptions"), dict) else {}
        self.delete(res, ns, name, opts)
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}

    def _delete_status(self, res, obj):
        d = {"name": obj["metadata"]["name"], "kind": res.plural, "uid": obj["metadata"]["uid"]}
        if res.group:
            d["group"] = res.group
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": d}

    def _delete_pod(self, res, k, old, opts, dry):
        grace = opts.get("gracePeriodSeconds")
        if grace is not None:
            grace = int(grace)
            if grace < 0:
                grace = 1
        md = old["metadata"]
        if md.get("deletionTimestamp"):
            cur = md.get("deletionGracePeriodSeconds")
            if cur is None or cur == 0:
                final = True
                new = None
            elif grace is None or grace >= cur:
                return 200, old          # graceful deletion pending; nothing changes
            else:
                dt = parse_ts(md["deletionTimestamp"]) - datetime.timedelta(seconds=cur) + datetime.timedelta(seconds=grace)
                new = copy.deepcopy(old)
                new["metadata"]["deletionTimestamp"] = ts(dt)
                new["metadata"]["deletionGracePeriodSeconds"] = grace
                final = grace == 0
        else:
            if grace is None:
                grace = (old.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
            if not (old.get("spec") or {}).get("nodeName") or pod_terminal(old):
                grace = 0
            new = copy.deepcopy(old)
            new["metadata"]["deletionTimestamp"] = ts(now_utc() + datetime.timedelta(seconds=grace))
            new["metadata"]["deletionGracePeriodSeconds"] = grace
            final = grace == 0
        if dry:
            return 200, new or old
        cur_obj = old
        if new is not None:
            cur_obj = self.store.write(res.key, k, old, new)
        if final and not (cur_obj["metadata"].get("finalizers")):
            # A write in between (the node lifecycle marking the pod not Ready) raises
            # Retry to delete()'s loop, which then finds the grace already 0 and removes
            # the object, as the API server's retried update does: a 200 here always
            # means the object is gone.
            return 200, self.store.write(res.key, k, cur_obj, None)
        return 200, cur_obj

    def _gc_owned(self, uid):
        for key in ("leases", "pods", "configmaps", "secrets", "events"):
            for kk, o in list(self.store.objs[key].items()):
                refs = o["metadata"].get("ownerReferences") or []
                if refs and any(r.get("uid") == uid for r in refs) and \
                        all(r.get("uid") == uid for r in refs):
                    try:
                        if key == "pods":
                            self.delete(RESOURCES[("", "pods")], kk[0], kk[1], {"gracePeriodSeconds": 0})
                        else:
                            self.store.write(key, kk, o, None)
                    except (Retry, ApiError):
                        pass

    # -- internal helpers for controllers
    def mutate(self, key, k, fn):
        """Apply fn(copy) -> bool(changed) with retries; returns stored object or None."""
        for _ in range(20):
            old = self.store.get(key, k)
            if old is None:
                return None
            new = copy.deepcopy(old)
            if not fn(new):
                return old
            try:
                return self.store.write(key, k, old, new)
            except Retry:
                continue
        return None

    def record_event(self, ns, involved, etype, reason, message, component, host=None, action=None, series_style=False):
        now = ts()
        name = "%s.%x" % (involved.get("name", "x"), time.time_ns())
        ev = {"metadata": {"name": name, "namespace": ns}, "involvedObject": involved, "reason": reason,
              "message": message, "type": etype, "reportingComponent": component, "reportingInstance": host or "",
              "source": {"component": component} if not series_style else {}}
        if host and not series_style:
            ev["source"]["host"] = host
        if series_style:
            ev["eventTime"] = micro_ts()
            ev["action"] = action or ""
            ev["firstTimestamp"] = None
            ev["lastTimestamp"] = None
        else:
            ev["firstTimestamp"] = now
            ev["lastTimestamp"] = now
            ev["count"] = 1
            ev["eventTime"] = None
        try:
            return self.create(RESOURCES[("", "events")], ns, ev, internal=True)
        except ApiError:
            return None
