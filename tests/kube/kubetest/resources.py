"""The resource types the double serves (group, version, kind, subresources, verbs, field
selectors) and the name formats it validates."""

import collections
import re


class Res(object):
    def __init__(self, plural, kind, group="", version="v1", namespaced=True, short=(), subs=(),
                 verbs=("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"),
                 fields=(), has_status=False, singular=None, view_of=None, stored=True):
        self.plural, self.kind, self.group, self.version = plural, kind, group, version
        self.namespaced, self.short, self.subs, self.verbs = namespaced, list(short), list(subs), list(verbs)
        self.fields = set(["metadata.name", "metadata.namespace"]) | set(fields)
        self.has_status = has_status
        self.singular = kind.lower() if singular is None else singular
        self.view_of = view_of              # events.k8s.io view: store key of the backing resource
        self.stored = stored                # False: computed per request (metrics.k8s.io), not in the store
        self.api_version = (group + "/" + version) if group else version
        self.qual = plural + ("." + group if group else "")
        self.key = view_of or (plural if stored else self.api_version + "/" + plural)  # store key


POD_FIELDS = ["spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
              "spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName"]


EVENT_FIELDS = ["involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
                "involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath",
                "reason", "reportingComponent", "source", "type"]


RESOURCES = {}


METRICS_GROUP = "metrics.k8s.io"


AUTHN_GROUP, AUTHZ_GROUP = "authentication.k8s.io", "authorization.k8s.io"


CERTS_GROUP = "certificates.k8s.io"


ADMREG_GROUP = "admissionregistration.k8s.io"


REVIEW_VERBS = ("create",)


for _r in [
    Res("nodes", "Node", namespaced=False, short=["no"], subs=["status", "proxy"], fields=["spec.unschedulable"],
        has_status=True),
    Res("pods", "Pod", short=["po"], subs=["status", "log", "binding", "eviction", "exec", "attach", "portforward"], fields=POD_FIELDS,
        has_status=True),
    Res("namespaces", "Namespace", namespaced=False, short=["ns"], subs=["status", "finalize"],
        fields=["status.phase"], has_status=True),
    Res("events", "Event", short=["ev"], fields=EVENT_FIELDS),
    Res("configmaps", "ConfigMap", short=["cm"]),
    Res("secrets", "Secret", fields=["type"]),
    # serviceaccounts/token: the TokenRequest API (kubetest/tokens.py), POST only.
    Res("serviceaccounts", "ServiceAccount", short=["sa"], subs=["token"]),
    Res("leases", "Lease", group="coordination.k8s.io"),
    # Statically provisioned storage (kubetest/volumes.py binds claims to volumes).
    Res("persistentvolumes", "PersistentVolume", namespaced=False, short=["pv"], subs=["status"],
        has_status=True),
    Res("persistentvolumeclaims", "PersistentVolumeClaim", short=["pvc"], subs=["status"], has_status=True),
    # Workloads and service discovery (kubetest/workloads.py runs their controllers).
    Res("deployments", "Deployment", group="apps", short=["deploy"], subs=["status"], has_status=True),
    Res("replicasets", "ReplicaSet", group="apps", short=["rs"], subs=["status"], has_status=True),
    Res("services", "Service", short=["svc"], subs=["status"], has_status=True),
    Res("endpoints", "Endpoints", short=["ep"], singular="endpoints"),
    Res("events", "Event", group="events.k8s.io", short=["ev"], verbs=("get", "list", "watch"),
        view_of="events", fields=["regarding.kind", "regarding.namespace", "regarding.name", "regarding.uid",
                                  "reason", "type", "reportingController"]),
    # The aggregated API metrics-server serves (kubetest/metrics.py computes it from kubelet scrapes).
    Res("nodes", "NodeMetrics", group=METRICS_GROUP, version="v1beta1", namespaced=False, verbs=("get", "list"),
        singular="", stored=False),
    Res("pods", "PodMetrics", group=METRICS_GROUP, version="v1beta1", verbs=("get", "list"), singular="",
        stored=False),
    # The review APIs (kubetest/reviews.py): create only, answered at once, never stored.
    Res("tokenreviews", "TokenReview", group=AUTHN_GROUP, namespaced=False, verbs=REVIEW_VERBS, stored=False),
    Res("selfsubjectreviews", "SelfSubjectReview", group=AUTHN_GROUP, namespaced=False, verbs=REVIEW_VERBS,
        stored=False),
    Res("selfsubjectaccessreviews", "SelfSubjectAccessReview", group=AUTHZ_GROUP, namespaced=False,
        verbs=REVIEW_VERBS, stored=False),
    Res("subjectaccessreviews", "SubjectAccessReview", group=AUTHZ_GROUP, namespaced=False, verbs=REVIEW_VERBS,
        stored=False),
    # CertificateSigningRequests (kubetest/csr.py; the approver and signer controllers in certificates.py).
    Res("certificatesigningrequests", "CertificateSigningRequest", group=CERTS_GROUP, namespaced=False,
        short=["csr"], subs=["approval", "status"], fields=["spec.signerName"], has_status=True),
    # ValidatingAdmissionPolicy (kubetest/vap.py applies them in admission).
    Res("validatingadmissionpolicies", "ValidatingAdmissionPolicy", group=ADMREG_GROUP, namespaced=False,
        subs=["status"], has_status=True),
    Res("validatingadmissionpolicybindings", "ValidatingAdmissionPolicyBinding", group=ADMREG_GROUP,
        namespaced=False),
]:
    RESOURCES[(_r.group, _r.plural)] = _r


STORE_RES = {r.key: r for r in RESOURCES.values() if not r.view_of and r.stored}


GROUPS = collections.OrderedDict([("", ["v1"]), ("apps", ["v1"]), ("coordination.k8s.io", ["v1"]),
                                  ("events.k8s.io", ["v1"]),
                                  (AUTHN_GROUP, ["v1"]), (AUTHZ_GROUP, ["v1"]), (CERTS_GROUP, ["v1"]), (ADMREG_GROUP, ["v1"]),
                                  (METRICS_GROUP, ["v1beta1"])])


SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                 "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
                 "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")


LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
             "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
             "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')")
