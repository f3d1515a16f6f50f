"""Server-side printing: the meta.k8s.io/v1 Table kubectl asks for (Accept: ...;as=Table)
for nodes, pods, events, CertificateSigningRequests and the others listed in table_for, with
kubectl's columns."""

from .csr import condition_row
from .objects import cond
from .util import age_of, human_duration


def col(name, typ="string", desc="", prio=0, fmt=""):
    return {"name": name, "type": typ, "format": fmt, "description": desc, "priority": prio}


def node_row(n):
    st = n.get("status") or {}
    rc = cond(n, "Ready")
    s = "Unknown" if not rc else {"True": "Ready", "False": "NotReady"}.get(rc.get("status"), "Unknown")
    if (n.get("spec") or {}).get("unschedulable"):
        s += ",SchedulingDisabled"
    roles = []
    for k, v in ((n.get("metadata") or {}).get("labels") or {}).items():
        if k.startswith("node-role.kubernetes.io/"):
            roles.append(k.split("/", 1)[1])
        elif k == "kubernetes.io/role" and v:
            roles.append(v)
    addrs = st.get("addresses") or []
    ip = lambda t: next((a.get("address") for a in addrs if a.get("type") == t), "<none>")
    ni = st.get("nodeInfo") or {}
    return [n["metadata"]["name"], s, ",".join(sorted(roles)) or "<none>",
            age_of(n["metadata"].get("creationTimestamp")), ni.get("kubeletVersion", ""),
            ip("InternalIP"), ip("ExternalIP"), ni.get("osImage", "<unknown>"), ni.get("kernelVersion", "<unknown>"),
            ni.get("containerRuntimeVersion", "<unknown>")]


NODE_COLS = [col("Name", fmt="name"), col("Status"), col("Roles"), col("Age"), col("Version"),
             col("Internal-IP", prio=1), col("External-IP", prio=1), col("OS-Image", prio=1),
             col("Kernel-Version", prio=1), col("Container-Runtime", prio=1)]


def pod_row(p):
    md, sp, st = p["metadata"], p.get("spec") or {}, p.get("status") or {}
    cs = st.get("containerStatuses") or []
    total = len(sp.get("containers") or [])
    ready = sum(1 for c in cs if c.get("ready"))
    restarts = sum(int(c.get("restartCount") or 0) for c in cs)
    reason = st.get("reason") or st.get("phase") or "Pending"
    init = False
    ics = st.get("initContainerStatuses") or []
    for i, c in enumerate(ics):
        s = c.get("state") or {}
        if "terminated" in s and s["terminated"].get("exitCode") == 0:
            continue
        init = True
        if "terminated" in s:
            t = s["terminated"]
            reason = "Init:" + (t.get("reason") or ("Signal:%s" % t.get("signal") if t.get("signal") else "ExitCode:%s" % t.get("exitCode")))
        elif "waiting" in s and s["waiting"].get("reason") and s["waiting"]["reason"] != "PodInitializing":
            reason = "Init:" + s["waiting"]["reason"]
        else:
            reason = "Init:%d/%d" % (i, len(sp.get("initContainers") or []))
        break
    if not init:
        has_running = False
        for c in reversed(cs):
            s = c.get("state") or {}
            if s.get("waiting", {}).get("reason"):
                reason = s["waiting"]["reason"]
            elif s.get("terminated", {}).get("reason"):
                reason = s["terminated"]["reason"]
            elif "terminated" in s:
                t = s["terminated"]
                reason = "Signal:%s" % t.get("signal") if t.get("signal") else "ExitCode:%s" % t.get("exitCode")
            elif "running" in s and c.get("ready"):
                has_running = True
        if reason == "Completed" and has_running:
            c = cond(p, "Ready")
            reason = "Running" if c and c.get("status") == "True" else "NotReady"
    if md.get("deletionTimestamp"):
        reason = "Unknown" if st.get("reason") == "NodeLost" else "Terminating"
    rg = sp.get("readinessGates") or []
    rgs = "<none>"
    if rg:
        okc = sum(1 for g in rg if (cond(p, g.get("conditionType")) or {}).get("status") == "True")
        rgs = "%d/%d" % (okc, len(rg))
    return [md["name"], "%d/%d" % (ready, total), reason, restarts, age_of(md.get("creationTimestamp")),
            st.get("podIP") or "<none>", sp.get("nodeName") or "<none>", st.get("nominatedNodeName") or "<none>", rgs]


POD_COLS = [col("Name", fmt="name"), col("Ready"), col("Status"), col("Restarts", "string"), col("Age"),
            col("IP", prio=1), col("Node", prio=1), col("Nominated Node", prio=1), col("Readiness Gates", prio=1)]


def event_row(e):
    io = e.get("involvedObject") or {}
    last = e.get("lastTimestamp") or e.get("eventTime") or (e.get("series") or {}).get("lastObservedTime") or \
        e["metadata"].get("creationTimestamp")
    first = e.get("firstTimestamp") or e.get("eventTime") or e["metadata"].get("creationTimestamp")
    src = e.get("source") or {}
    s = src.get("component") or e.get("reportingComponent") or ""
    if src.get("host"):
        s += ", " + src["host"]
    count = e.get("count") or ((e.get("series") or {}).get("count")) or 1
    return [age_of(last), e.get("type", ""), e.get("reason", ""),
            "%s/%s" % ((io.get("kind") or "").lower(), io.get("name", "")), io.get("fieldPath", ""), s,
            e.get("message", ""), age_of(first), count, e["metadata"]["name"]]


EVENT_COLS = [col("Last Seen"), col("Type"), col("Reason"), col("Object"), col("Subobject", prio=1),
              col("Source", prio=1), col("Message"), col("First Seen", prio=1), col("Count", "integer", prio=1),
              col("Name", prio=1)]


def csr_row(o):
    """printCertificateSigningRequest: RequestedDuration is HumanDuration(expirationSeconds)."""
    sp = o.get("spec") or {}
    exp = sp.get("expirationSeconds")
    return [o["metadata"]["name"], age_of(o["metadata"].get("creationTimestamp")), sp.get("signerName") or "<none>",
            sp.get("username", ""), human_duration(exp) if exp is not None else "<none>", condition_row(o)]


CSR_COLS = [col("Name", fmt="name"), col("Age"), col("SignerName"), col("Requestor"), col("RequestedDuration"),
            col("Condition")]


def table_for(res, objs, rv):
    if res.plural == "nodes":
        cols, f = NODE_COLS, node_row
    elif res.plural == "pods":
        cols, f = POD_COLS, pod_row
    elif res.plural == "events":
        cols, f = EVENT_COLS, event_row
    elif res.plural == "namespaces":
        cols = [col("Name", fmt="name"), col("Status"), col("Age")]
        f = lambda o: [o["metadata"]["name"], (o.get("status") or {}).get("phase", ""), age_of(o["metadata"].get("creationTimestamp"))]
    elif res.plural == "leases":
        cols = [col("Name", fmt="name"), col("Holder"), col("Age")]
        f = lambda o: [o["metadata"]["name"], (o.get("spec") or {}).get("holderIdentity", ""), age_of(o["metadata"].get("creationTimestamp"))]
    elif res.plural == "configmaps":
        cols = [col("Name", fmt="name"), col("Data", "integer"), col("Age")]
        f = lambda o: [o["metadata"]["name"], len(o.get("data") or {}) + len(o.get("binaryData") or {}), age_of(o["metadata"].get("creationTimestamp"))]
    elif res.plural == "serviceaccounts":
        cols = [col("Name", fmt="name"), col("Secrets"), col("Age")]
        f = lambda o: [o["metadata"]["name"], len(o.get("secrets") or []), age_of(o["metadata"].get("creationTimestamp"))]
    elif res.plural == "deployments":
        cols = [col("Name", fmt="name"), col("Ready"), col("Up-to-date", "integer"), col("Available", "integer"),
                col("Age")]
        f = lambda o: [o["metadata"]["name"], "%d/%d" % ((o.get("status") or {}).get("readyReplicas", 0),
                                                        (o.get("spec") or {}).get("replicas", 1)),
                       (o.get("status") or {}).get("updatedReplicas", 0),
                       (o.get("status") or {}).get("availableReplicas", 0),
                       age_of(o["metadata"].get("creationTimestamp"))]
    elif res.plural == "replicasets":
        cols = [col("Name", fmt="name"), col("Desired", "integer"), col("Current", "integer"),
                col("Ready", "integer"), col("Age")]
        f = lambda o: [o["metadata"]["name"], (o.get("spec") or {}).get("replicas", 1),
                       (o.get("status") or {}).get("replicas", 0), (o.get("status") or {}).get("readyReplicas", 0),
                       age_of(o["metadata"].get("creationTimestamp"))]
    elif res.plural == "services":
        cols = [col("Name", fmt="name"), col("Type"), col("Cluster-IP"), col("External-IP"), col("Port(s)"),
                col("Age")]
        f = lambda o: [o["metadata"]["name"], (o.get("spec") or {}).get("type", "ClusterIP"),
                       (o.get("spec") or {}).get("clusterIP", ""), "<none>",
                       ",".join("%s/%s" % (p.get("port"), p.get("protocol", "TCP"))
                                for p in (o.get("spec") or {}).get("ports") or []) or "<none>",
                       age_of(o["metadata"].get("creationTimestamp"))]
    elif res.plural == "endpoints":
        cols = [col("Name", fmt="name"), col("Endpoints"), col("Age")]
        f = lambda o: [o["metadata"]["name"], ",".join(
            "%s:%s" % (a["ip"], p["port"]) for ss in o.get("subsets") or [] for a in ss.get("addresses") or []
            for p in ss.get("ports") or []) or "<none>", age_of(o["metadata"].get("creationTimestamp"))]
    elif res.plural == "certificatesigningrequests":
        cols, f = CSR_COLS, csr_row
    elif res.plural == "secrets":
        cols = [col("Name", fmt="name"), col("Type"), col("Data", "integer"), col("Age")]
        f = lambda o: [o["metadata"]["name"], o.get("type", "Opaque"), len(o.get("data") or {}), age_of(o["metadata"].get("creationTimestamp"))]
    else:
        cols = [col("Name", fmt="name"), col("Created At", "date")]
        f = lambda o: [o["metadata"]["name"], o["metadata"].get("creationTimestamp")]
    rows = []
    for o in objs:
        md = {k: v for k, v in o.get("metadata", {}).items() if k != "managedFields"}
        rows.append({"cells": f(o), "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": md}})
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": rv},
            "columnDefinitions": cols, "rows": rows}
