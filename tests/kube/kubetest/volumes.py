"""kube-controller-manager's persistentvolume-binder for statically provisioned volumes, with
its observable behaviour (pkg/controller/volume/persistentvolume):

- a new PersistentVolume becomes Available; one whose claim is gone becomes Released (the
  Retain policy: it is not bound again until an admin clears its claimRef);
- a PersistentVolumeClaim is Pending until a volume binds to it: the one it names
  (spec.volumeName, if that volume is free or pre-bound to it), else the smallest Available
  volume of its storageClassName ("" when unset), volumeMode, access modes and selector with
  at least its requested storage. Binding sets the volume's claimRef (uid included) and
  phase Bound, then the claim's volumeName and status (phase Bound, accessModes, capacity),
  with the controller's bind-completed annotations.
No dynamic provisioning, no default StorageClass: what a site with hostPath, local or nfs
volumes made by its admins has.
"""

from .errors import ApiError
from .resources import RESOURCES
from .selectors import match_label_selector
from .util import log, parse_q

PV = RESOURCES[("", "persistentvolumes")]
PVC = RESOURCES[("", "persistentvolumeclaims")]

def quantity(q):
    """A storage quantity ("10Gi", "500M", "1e9") as a number; None when it is not one."""
    try:
        return parse_q(q)
    except ValueError:
        return None


def _class(o):
    return (o.get("spec") or {}).get("storageClassName") or ""


def _mode(o):
    return (o.get("spec") or {}).get("volumeMode") or "Filesystem"


def _fits(pv, pvc):
    s, c = pv.get("spec") or {}, pvc.get("spec") or {}
    if _class(pv) != _class(pvc) or _mode(pv) != _mode(pvc):
        return False
    if not set(c.get("accessModes") or []) <= set(s.get("accessModes") or []):
        return False
    want = quantity(((c.get("resources") or {}).get("requests") or {}).get("storage")) or 0
    have = quantity((s.get("capacity") or {}).get("storage"))
    if have is None or have < want:
        return False
    sel = c.get("selector")
    return not sel or match_label_selector(sel, pv["metadata"].get("labels") or {})


def _claim_key(ref):
    return ((ref or {}).get("namespace") or "", (ref or {}).get("name") or "")


class VolumeBinder(object):
    def __init__(self, api):
        self.api = api

    def _set(self, res, o, fn):
        k = (o["metadata"].get("namespace") or "", o["metadata"]["name"])

        def guarded(new):
            return new["metadata"]["uid"] == o["metadata"]["uid"] and fn(new)
        return self.api.mutate(res.plural, k, guarded)

    def _phase(self, res, o, phase):
        def fn(new):
            if (new.get("status") or {}).get("phase") == phase:
                return False
            new["status"] = dict(new.get("status") or {}, phase=phase)
            return True
        return self._set(res, o, fn)

    def sync(self):
        store = self.api.store
        claims = {(c["metadata"]["namespace"], c["metadata"]["name"]): c for c in store.items(PVC.plural)}
        volumes = store.items(PV.plural)
        for pv in volumes:
            ref = (pv.get("spec") or {}).get("claimRef")
            if not ref:
                self._phase(PV, pv, "Available")
                continue
            c = claims.get(_claim_key(ref))
            if ref.get("uid") and (not c or c["metadata"]["uid"] != ref["uid"]):
                self._phase(PV, pv, "Released")
        for key, c in sorted(claims.items()):
            if c["metadata"].get("deletionTimestamp"):
                continue
            if (c.get("status") or {}).get("phase") == "Bound":
                continue
            try:
                self._bind_claim(c, store.items(PV.plural))
            except ApiError as e:
                log("volumes: binding %s/%s: %s" % (key[0], key[1], e))

    def _bind_claim(self, c, volumes):
        ns, name, uid = c["metadata"]["namespace"], c["metadata"]["name"], c["metadata"]["uid"]
        named = (c.get("spec") or {}).get("volumeName")

        def free_for_this_claim(pv):
            ref = (pv.get("spec") or {}).get("claimRef")
            if not ref:
                return (pv.get("status") or {}).get("phase") in (None, "", "Available")
            return _claim_key(ref) == (ns, name) and ref.get("uid") in (None, "", uid)

        if named:
            cands = [v for v in volumes if v["metadata"]["name"] == named and free_for_this_claim(v)]
        else:
            # A volume pre-bound to this claim first, then the smallest that fits.
            pre = [v for v in volumes if (v.get("spec") or {}).get("claimRef")
                   and free_for_this_claim(v) and _fits(v, c)]
            cands = pre or sorted((v for v in volumes if not (v.get("spec") or {}).get("claimRef")
                                   and free_for_this_claim(v) and _fits(v, c)),
                                  key=lambda v: quantity(v["spec"]["capacity"]["storage"]))
        if not cands:
            self._phase(PVC, c, "Pending")
            return
        pv = cands[0]
        ref = {"kind": "PersistentVolumeClaim", "namespace": ns, "name": name, "uid": uid,
               "apiVersion": "v1", "resourceVersion": c["metadata"].get("resourceVersion", "")}

        def bind_pv(new):
            new["spec"]["claimRef"] = ref
            ann = new["metadata"].setdefault("annotations", {})
            ann["pv.kubernetes.io/bound-by-controller"] = "yes"
            new["status"] = dict(new.get("status") or {}, phase="Bound")
            return True
        if not self._set(PV, pv, bind_pv):
            return

        def bind_claim(new):
            new["spec"]["volumeName"] = pv["metadata"]["name"]
            ann = new["metadata"].setdefault("annotations", {})
            ann["pv.kubernetes.io/bind-completed"] = "yes"
            if not named:
                ann["pv.kubernetes.io/bound-by-controller"] = "yes"
            new["status"] = dict(new.get("status") or {}, phase="Bound",
                                 accessModes=list(pv["spec"].get("accessModes") or []),
                                 capacity=dict(pv["spec"].get("capacity") or {}))
            return True
        self._set(PVC, c, bind_claim)
