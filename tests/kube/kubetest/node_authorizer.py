"""What a node identity (user system:node:NAME in group system:nodes: a kubelet's client certificate,
or the agent's per-node one) may do, as kube-apiserver 1.28 with --authorization-mode=Node,RBAC and
--enable-admission-plugins=NodeRestriction decides it:

* the Node authorizer (plugin/pkg/auth/authorizer/node): secrets, configmaps and persistentvolumeclaims
  only when a pod bound to the node references them (the graph: node <- pod <- secret/configmap/pvc,
  node <- pod <- serviceaccount for serviceaccounts/NAME/token, and persistentvolumes whose claimRef
  names such a claim), Leases only its own in kube-node-lease,
  everything else by the static rules bootstrappolicy.NodeRules() grants; a refusal carries the reason
  the 403 message and a SubjectAccessReview report;
* the NodeRestriction admission plugin (plugin/pkg/admission/noderestriction): only its own Node
  (labels outside the kubelet's set, taints), Lease, pod status, pod deletion and eviction, mirror pods
  and TokenRequests bound to its pods;
* the ServiceAccount admission plugin's rules for mirror pods (any requester): no service account, no
  secrets, no projected ServiceAccount token.

Both read the pods through BindingView: kube-apiserver builds the Node authorizer's graph and
NodeRestriction's pod lister from its own informers, so they learn of a binding a moment after it
is written (shared/reference node facts §7: right after a pod is bound, its node's read of the
pod's ConfigMap or its TokenRequest is refused with 403, and succeeds when retried). With
--node-authorizer-lag SEC the double models that delay; 0 (the default) reads the store as it is."""

import threading
import time

from .auth import rule_allows
from .errors import ApiError, not_found
from .resources import RESOURCES


NODE_USER_PREFIX, NODES_GROUP = "system:node:", "system:nodes"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
NODE_LEASE_NS = "kube-node-lease"

_READ = ["get", "list", "watch"]

# bootstrappolicy.NodeRules() of 1.28 (the rules the Node authorizer applies to what it does not subdivide).
NODE_RULES = [
    {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
    {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews", "localsubjectaccessreviews"],
     "verbs": ["create"]},
    {"apiGroups": [""], "resources": ["services"], "verbs": _READ},
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["create", "get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["update", "patch"]},
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["update", "patch"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "update", "patch"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": _READ},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "delete"]},
    {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["update", "patch"]},
    {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
    {"apiGroups": [""], "resources": ["secrets", "configmaps"], "verbs": _READ},
    {"apiGroups": [""], "resources": ["persistentvolumeclaims", "persistentvolumes"], "verbs": ["get"]},
    {"apiGroups": [""], "resources": ["endpoints"], "verbs": ["get"]},
    {"apiGroups": ["certificates.k8s.io"], "resources": ["certificatesigningrequests"],
     "verbs": ["create", "get", "list", "watch"]},
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update", "patch", "delete"]},
    {"apiGroups": ["storage.k8s.io"], "resources": ["volumeattachments"], "verbs": ["get"]},
    {"apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"]},
    {"apiGroups": [""], "resources": ["persistentvolumeclaims/status"], "verbs": ["get", "update", "patch"]},
    {"apiGroups": ["storage.k8s.io"], "resources": ["csidrivers"], "verbs": _READ},
    {"apiGroups": ["storage.k8s.io"], "resources": ["csinodes"], "verbs": ["get", "create", "update", "patch", "delete"]},
    {"apiGroups": ["node.k8s.io"], "resources": ["runtimeclasses"], "verbs": _READ},
]

# k8s.io/kubelet/pkg/apis: the labels a kubelet may set on its Node (IsKubeletLabel).
KUBELET_LABELS = {"kubernetes.io/hostname", "topology.kubernetes.io/zone", "topology.kubernetes.io/region",
                  "failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region",
                  "beta.kubernetes.io/instance-type", "node.kubernetes.io/instance-type", "kubernetes.io/os",
                  "kubernetes.io/arch", "beta.kubernetes.io/os", "beta.kubernetes.io/arch"}
KUBELET_LABEL_NAMESPACES = ("kubelet.kubernetes.io", "node.kubernetes.io")


def node_identity(user, groups):
    """nodeidentifier.NodeIdentity: (node name, True) for a user system:node:NAME in group
    system:nodes (the name may be empty), else (None, False)."""
    if not (user or "").startswith(NODE_USER_PREFIX) or NODES_GROUP not in (groups or ()):
        return None, False
    return user[len(NODE_USER_PREFIX):], True


# -- what a pod references (pkg/api/pod VisitPodSecretNames / VisitPodConfigmapNames, all containers)
def _containers(spec):
    return (spec.get("initContainers") or []) + (spec.get("containers") or []) + (spec.get("ephemeralContainers") or [])


def _name_of(d, *path):
    for p in path:
        if not isinstance(d, dict):
            return None
        d = d.get(p)
    return d if isinstance(d, str) and d else None


def pod_secret_names(pod):
    spec = pod.get("spec") or {}
    out = set(filter(None, (_name_of(s, "name") for s in spec.get("imagePullSecrets") or [])))
    for c in _containers(spec):
        for e in c.get("env") or []:
            out.add(_name_of(e, "valueFrom", "secretKeyRef", "name"))
        for e in c.get("envFrom") or []:
            out.add(_name_of(e, "secretRef", "name"))
    for v in spec.get("volumes") or []:
        out.add(_name_of(v, "secret", "secretName"))
        out.add(_name_of(v, "azureFile", "secretName"))
        for kind in ("cephfs", "cinder", "flexVolume", "rbd", "scaleIO", "iscsi", "storageos"):
            out.add(_name_of(v, kind, "secretRef", "name"))
        out.add(_name_of(v, "csi", "nodePublishSecretRef", "name"))
        for src in ((v.get("projected") or {}).get("sources") or []):
            out.add(_name_of(src, "secret", "name"))
    out.discard(None)
    return out


def pod_configmap_names(pod):
    spec = pod.get("spec") or {}
    out = set()
    for c in _containers(spec):
        for e in c.get("env") or []:
            out.add(_name_of(e, "valueFrom", "configMapKeyRef", "name"))
        for e in c.get("envFrom") or []:
            out.add(_name_of(e, "configMapRef", "name"))
    for v in spec.get("volumes") or []:
        out.add(_name_of(v, "configMap", "name"))
        for src in ((v.get("projected") or {}).get("sources") or []):
            out.add(_name_of(src, "configMap", "name"))
    out.discard(None)
    return out


def pod_pvc_names(pod):
    return set(filter(None, (_name_of(v, "persistentVolumeClaim", "claimName")
                             for v in (pod.get("spec") or {}).get("volumes") or [])))


class BindingView(object):
    """spec.nodeName of pods as the API server's informers have it: a binding (a pod written with a
    nodeName it did not have, or a new pod with one) is seen `lag` seconds after the write."""

    def __init__(self, store, lag=0.0):
        self.store, self.lag = store, max(0.0, float(lag or 0))
        self.lock = threading.Lock()
        self.bound_at = {}   # (ns, name) -> (uid, nodeName, monotonic time of the binding's write)
        store.listeners.append(self._on_event)

    def _on_event(self, key, ev):
        if key != "pods":
            return
        md = ev.obj.get("metadata") or {}
        k = (md.get("namespace"), md.get("name"))
        with self.lock:
            if ev.type == "DELETED":
                self.bound_at.pop(k, None)
                return
            node = (ev.obj.get("spec") or {}).get("nodeName") or ""
            cur = self.bound_at.get(k)
            if node and (cur is None or cur[0] != md.get("uid") or cur[1] != node):
                self.bound_at[k] = (md.get("uid"), node, time.monotonic())

    def node_of(self, pod):
        """The pod's node as the informers have it now ("" while its binding is younger than the lag)."""
        node = (pod.get("spec") or {}).get("nodeName") or ""
        if not node or self.lag <= 0:
            return node
        md = pod.get("metadata") or {}
        with self.lock:
            cur = self.bound_at.get((md.get("namespace"), md.get("name")))
        if cur is None or cur[0] != md.get("uid") or cur[1] != node:
            return ""
        return node if time.monotonic() - cur[2] >= self.lag else ""


class NodeAuthorizer(object):
    """The Node authorizer over the double's store (the graph is computed from the pods bound to
    the node, as BindingView sees them, at each decision)."""

    def __init__(self, store, view=None):
        self.store = store
        self.view = view or BindingView(store)

    def _pods_on(self, node, ns):
        return [p for (pns, _), p in list(self.store.objs["pods"].items())
                if pns == ns and self.view.node_of(p) == node]

    def has_path(self, node, kind, ns, name):
        """Whether an object of kind secrets/configmaps/persistentvolumeclaims/serviceaccounts is related
        to the node in the graph."""
        if kind == "configmaps":
            n = self.store.get("nodes", ("", node))
            cs = ((n or {}).get("spec") or {}).get("configSource") or {}
            cm = cs.get("configMap") or {}
            if cm.get("namespace") == ns and cm.get("name") == name:
                return True
        for p in self._pods_on(node, ns):
            if kind == "secrets" and name in pod_secret_names(p):
                return True
            if kind == "configmaps" and name in pod_configmap_names(p):
                return True
            if kind == "persistentvolumeclaims" and name in pod_pvc_names(p):
                return True
            if kind == "serviceaccounts" and (p.get("spec") or {}).get("serviceAccountName") == name:
                return True
        return False

    def authorize(self, user, groups, ra, nra):
        """(allowed, reason) as NodeAuthorizer.Authorize: no opinion ("") for anyone not a node."""
        node, is_node = node_identity(user, groups)
        if not is_node:
            return False, ""
        if not node:
            return False, 'unknown node for user "%s"' % user
        if ra is None:
            return False, ""
        verb, group, resource = ra.get("verb", ""), ra.get("group", ""), ra.get("resource", "")
        sub, ns, name = ra.get("subresource", ""), ra.get("namespace", ""), ra.get("name", "")
        if group == "":
            if resource in ("secrets", "configmaps"):
                if verb not in _READ:
                    return False, "can only read resources of this type"
                if sub:
                    return False, "cannot read subresource"
                if not ns:
                    return False, "can only read namespaced object of this type"
                return self._related(node, resource, ns, name)
            if resource == "persistentvolumeclaims" and sub == "status":
                if verb not in ("update", "patch"):
                    return False, "can only get/update/patch this type"
                return self._related(node, resource, ns, name)
            if resource in ("persistentvolumeclaims", "persistentvolumes"):
                if verb != "get":
                    return False, "can only get individual resources of this type"
                if sub:
                    return False, "cannot get subresource"
                if resource == "persistentvolumes":
                    if not name:
                        return False, "No Object name found"
                    return self._related_pv(node, name)
                return self._related(node, resource, ns, name)
            if resource == "serviceaccounts":
                if verb != "create" or not name:
                    return False, "can only create tokens for individual service accounts"
                if sub != "token":
                    return False, "can only create token subresource of serviceaccount"
                if not self.has_path(node, "serviceaccounts", ns, name):
                    return False, "no relationship found between node '%s' and this object" % node
                return True, ""
        if group == "coordination.k8s.io" and resource == "leases":
            if verb not in ("get", "create", "update", "patch", "delete"):
                return False, "can only get, create, update, patch, or delete a node lease"
            if ns != NODE_LEASE_NS:
                return False, 'can only access leases in the "%s" system namespace' % NODE_LEASE_NS
            if verb != "create" and name != node:
                return False, "can only access node lease with the same name as the requesting node"
            return True, ""
        if any(rule_allows(r, verb, group, resource, sub, ns, name) for r in NODE_RULES):
            return True, ""
        return False, ""

    def _related(self, node, kind, ns, name):
        if not name:
            return False, "No Object name found"
        if not self.has_path(node, kind, ns, name):
            return False, "no relationship found between node '%s' and this object" % node
        return True, ""

    def _related_pv(self, node, name):
        """The graph's pv -> pvc edge comes from the volume's spec.claimRef (graph_populator's
        AddPV): a node may get a PersistentVolume whose claim a pod bound to it uses."""
        pv = self.store.get("persistentvolumes", ("", name))
        ref = ((pv or {}).get("spec") or {}).get("claimRef") or {}
        if not pv or not self.has_path(node, "persistentvolumeclaims", ref.get("namespace") or "",
                                       ref.get("name") or ""):
            return False, "no relationship found between node '%s' and this object" % node
        return True, ""


# -- admission
def admission_forbidden(res_plural, group, name, msg):
    """admission.NewForbidden: `RESOURCE "NAME" is forbidden: MSG` (the resource of the request, not
    its subresource)."""
    qual = res_plural + ("." + group if group else "")
    d = {"name": name, "kind": res_plural}
    if group:
        d["group"] = group
    if name:
        text = '%s "%s" is forbidden: %s' % (qual, name, msg)
    else:
        text = "%s is forbidden: %s" % (qual, msg)
        del d["name"]
    return ApiError(403, "Forbidden", text, d)


def _label_ns(key):
    return key.split("/", 1)[0] if "/" in key else ""


def _is_kubelet_label(key):
    if key in KUBELET_LABELS:
        return True
    ns = _label_ns(key)
    return any(ns == a or ns.endswith("." + a) for a in KUBELET_LABEL_NAMESPACES)


def forbidden_labels(modified):
    """getForbiddenLabels: node-restriction.kubernetes.io/*, and kubernetes.io / k8s.io labels
    outside the kubelet's set; sorted."""
    out = set()
    for k in modified:
        ns = _label_ns(k)
        if ns == "node-restriction.kubernetes.io" or ns.endswith(".node-restriction.kubernetes.io"):
            out.add(k)
        is_k8s = ns in ("kubernetes.io", "k8s.io") or ns.endswith(".kubernetes.io") or ns.endswith(".k8s.io")
        if is_k8s and not _is_kubelet_label(k):
            out.add(k)
    return sorted(out)


def modified_labels(a, b):
    a, b = a or {}, b or {}
    return set(k for k in set(a) | set(b) if a.get(k) != b.get(k) or (k in a) != (k in b))


def _taints_equal(a, b):
    """apiequality.Semantic.DeepEqual of two taint lists (nil and empty alike)."""
    norm = lambda ts: [{k: v for k, v in t.items() if v not in (None, "")} for t in (ts or [])]
    return norm(a) == norm(b)


def mirror_pod_checks(pod, name):
    """The ServiceAccount admission plugin for a mirror pod (any requester): 403 for a service
    account, secrets, a projected ServiceAccount token."""
    spec = pod.get("spec") or {}
    if spec.get("serviceAccountName") or spec.get("serviceAccount"):
        raise admission_forbidden("pods", "", name, "a mirror pod may not reference service accounts")
    if pod_secret_names(pod):
        raise admission_forbidden("pods", "", name, "a mirror pod may not reference secrets")
    for v in spec.get("volumes") or []:
        for src in ((v.get("projected") or {}).get("sources") or []):
            if isinstance(src, dict) and src.get("serviceAccountToken") is not None:
                raise admission_forbidden("pods", "", name, "a mirror pod may not use ServiceAccountToken volume "
                                                            "projections")


def is_mirror_pod(pod):
    return MIRROR_ANNOTATION in (((pod or {}).get("metadata") or {}).get("annotations") or {})


class NodeRestriction(object):
    """The NodeRestriction admission plugin (create, update, delete by a node identity). Its pod
    lister (evictions, TokenRequests) sees bindings through BindingView."""

    def __init__(self, store, view=None):
        self.store = store
        self.view = view or BindingView(store)

    def admit(self, user, groups, op, res, sub, ns, name, obj, old):
        """Raises ApiError (403, or 404 for an object it looks up that is gone) or returns. op:
        CREATE, UPDATE, DELETE; name: the request's (for a create: the object's name, or its
        generateName); obj: the new object (CREATE, UPDATE; an Eviction or TokenRequest for those
        subresources), old: the stored one (UPDATE, DELETE)."""
        node, is_node = node_identity(user, groups)
        if not is_node:
            return
        if not node:
            raise admission_forbidden(res.plural, res.group, name, 'could not determine node from user "%s"' % user)
        key = (res.group, res.plural)
        if key == ("", "pods"):
            if not sub:
                self._pod(node, op, ns, name, obj)
            elif sub == "status":
                if op != "UPDATE":
                    raise admission_forbidden("pods", "", name, 'unexpected operation "%s"' % op)
                if (old.get("spec") or {}).get("nodeName") != node:
                    raise admission_forbidden("pods", "", name, 'node "%s" can only update pod status for pods with '
                                                                "spec.nodeName set to itself" % node)
                if ((old.get("metadata") or {}).get("labels") or {}) != ((obj.get("metadata") or {}).get("labels") or {}):
                    raise admission_forbidden("pods", "", name, 'node "%s" cannot update labels through pod status' % node)
            elif sub == "eviction":
                if op != "CREATE":
                    raise admission_forbidden("pods", "", name, "unexpected operation %s" % op)
                pod_name = name or ((obj or {}).get("metadata") or {}).get("name")
                if not pod_name:
                    raise admission_forbidden("pods", "", name, "could not determine pod from request data")
                pod = self.store.get("pods", (ns, pod_name))
                if pod is None:
                    raise not_found(RESOURCES[("", "pods")], pod_name)
                if self.view.node_of(pod) != node:
                    raise admission_forbidden("pods", "", name, "node %s can only evict pods with spec.nodeName set to "
                                                                "itself" % node)
            else:
                raise admission_forbidden("pods", "", name, "unexpected pod subresource \"%s\", only 'status' and "
                                                            "'eviction' are allowed" % sub)
        elif key == ("", "nodes"):
            self._node(node, op, name, obj, old)
        elif key == ("", "serviceaccounts"):
            if op == "CREATE" and sub == "token":
                self._token(node, ns, name, obj)
        elif key == ("coordination.k8s.io", "leases"):
            if ns != NODE_LEASE_NS:
                raise admission_forbidden("leases", "coordination.k8s.io", name,
                                          'can only access leases in the "%s" system namespace' % NODE_LEASE_NS)
            lease_name = ((obj or {}).get("metadata") or {}).get("name") if op == "CREATE" else name
            if lease_name != node:
                raise admission_forbidden("leases", "coordination.k8s.io", name,
                                          "can only access node lease with the same name as the requesting node")

    def _pod(self, node, op, ns, name, pod):
        if op == "DELETE":
            old = self.store.get("pods", (ns, name))
            if old is None:
                raise not_found(RESOURCES[("", "pods")], name)
            if (old.get("spec") or {}).get("nodeName") != node:
                raise admission_forbidden("pods", "", name, 'node "%s" can only delete pods with spec.nodeName set to '
                                                            "itself" % node)
            return
        if op != "CREATE":
            raise admission_forbidden("pods", "", name, 'unexpected operation "%s", node "%s" can only create and delete '
                                                        "mirror pods" % (op, node))
        f = lambda msg: admission_forbidden("pods", "", name, msg)
        if not is_mirror_pod(pod):
            raise f('pod does not have "%s" annotation, node "%s" can only create mirror pods' % (MIRROR_ANNOTATION, node))
        spec = pod.get("spec") or {}
        if spec.get("nodeName") != node:
            raise f('node "%s" can only create pods with spec.nodeName set to itself' % node)
        refs = (pod.get("metadata") or {}).get("ownerReferences") or []
        if len(refs) > 1:
            raise f('node "%s" can only create pods with a single owner reference set to itself' % node)
        if not refs:
            raise f('node "%s" can only create pods with an owner reference set to itself' % node)
        owner = refs[0] if isinstance(refs[0], dict) else {}
        if owner.get("apiVersion") != "v1" or owner.get("kind") != "Node" or owner.get("name") != node:
            raise f('node "%s" can only create pods with an owner reference set to itself' % node)
        if owner.get("controller") is not True:
            raise f('node "%s" can only create pods with a controller owner reference set to itself' % node)
        if owner.get("blockOwnerDeletion") is True:
            raise f('node "%s" must not set blockOwnerDeletion on an owner reference' % node)
        n = self.store.get("nodes", ("", node))
        if n is None:
            raise not_found(RESOURCES[("", "nodes")], node)
        if owner.get("uid", "") != n["metadata"]["uid"]:
            raise f("node %s UID mismatch: expected %s got %s" % (node, owner.get("uid", ""), n["metadata"]["uid"]))
        if spec.get("serviceAccountName"):
            raise f('node "%s" can not create pods that reference a service account' % node)
        if pod_secret_names(pod):
            raise f('node "%s" can not create pods that reference secrets' % node)
        if pod_configmap_names(pod):
            raise f('node "%s" can not create pods that reference configmaps' % node)
        if pod_pvc_names(pod):
            raise f('node "%s" can not create pods that reference persistentvolumeclaims' % node)

    def _node(self, node, op, name, obj, old):
        f = lambda msg: admission_forbidden("nodes", "", name, msg)
        if name != node:
            raise f('node "%s" is not allowed to modify node "%s"' % (node, name))
        if op == "CREATE":
            if (obj.get("spec") or {}).get("configSource") is not None:
                raise f('node "%s" is not allowed to create pods with a non-nil configSource' % node)
            bad = forbidden_labels(((obj.get("metadata") or {}).get("labels") or {}).keys())
            if bad:
                raise f('node "%s" is not allowed to set the following labels: %s' % (node, ", ".join(bad)))
        elif op == "UPDATE":
            cs = (obj.get("spec") or {}).get("configSource")
            if cs is not None and cs != (old.get("spec") or {}).get("configSource"):
                raise f('node "%s" is not allowed to update configSource to a new non-nil configSource' % node)
            if not _taints_equal((obj.get("spec") or {}).get("taints"), (old.get("spec") or {}).get("taints")):
                raise f('node "%s" is not allowed to modify taints' % node)
            bad = forbidden_labels(modified_labels((obj.get("metadata") or {}).get("labels"),
                                                   (old.get("metadata") or {}).get("labels")))
            if bad:
                raise f("is not allowed to modify labels: %s" % ", ".join(bad))

    def _token(self, node, ns, name, tr):
        f = lambda msg: admission_forbidden("serviceaccounts", "", name, msg)
        spec = (tr or {}).get("spec") if isinstance((tr or {}).get("spec"), dict) else {}
        ref = spec.get("boundObjectRef") if isinstance(spec.get("boundObjectRef"), dict) else None
        if ref is None or ref.get("apiVersion") != "v1" or ref.get("kind") != "Pod" or not ref.get("name"):
            raise f("node requested token not bound to a pod")
        if not ref.get("uid"):
            raise f("node requested token with a pod binding without a uid")
        pod = self.store.get("pods", (ns, ref["name"]))
        if pod is None:
            raise not_found(RESOURCES[("", "pods")], ref["name"])
        if ref["uid"] != pod["metadata"]["uid"]:
            raise f("the UID in the bound object reference (%s) does not match the UID in record. The object might "
                    "have been deleted and then recreated" % ref["uid"])
        if self.view.node_of(pod) != node:
            raise f("node requested token bound to a pod scheduled on a different node")
