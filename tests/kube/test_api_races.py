#!/usr/bin/env python3
"""White-box tests of the API test double's store races: a write by one of its
controllers (node lifecycle, scheduler) between two steps of a request must not change
what the request answers. These run against kubetest.api.Api directly, since a real
API server's interleavings cannot be forced from outside.
  KUBE_TEST_SUMMARY     file to write "passed failed skipped" counts to
"""

import os
import sys
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kubetest.api import Api  # noqa: E402
from kubetest.resources import RESOURCES  # noqa: E402

PASSED, FAILED = 0, 0


def check(name, ok, detail=""):
    global PASSED, FAILED
    if ok:
        PASSED += 1
        print(f"ok   {name}")
    else:
        FAILED += 1
        print(f"FAIL {name}: {detail}")


PODS = RESOURCES[("", "pods")]


def bound_pod(api, name):
    api.create(PODS, "default", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                                 "spec": {"nodeName": "n1", "terminationGracePeriodSeconds": 30,
                                          "containers": [{"name": "c", "image": "x"}]}})
    return api.get(PODS, "default", name)


def interleave_after_writes(api, n, action):
    """Runs action() once, right after the store's n-th next successful write."""
    real, count = api.store.write, [0]

    def write(*a, **kw):
        out = real(*a, **kw)
        count[0] += 1
        if count[0] == n:
            action()
        return out
    api.store.write = write
    return lambda: setattr(api.store, "write", real)


def touch(api, name):
    """What the node lifecycle does to a pod of a node gone Unknown: a status write."""
    cur = api.get(PODS, "default", name)
    new = dict(cur, status=dict(cur.get("status") or {}, reason="touched"))
    new["metadata"] = dict(cur["metadata"])
    api.store.write(PODS.key, ("default", name), cur, new)


def test_final_delete_races_a_status_write():
    api = Api(types.SimpleNamespace(history=1000))
    pod = bound_pod(api, "p1")
    code, _ = api.delete(PODS, "default", "p1", {})
    check("a graceful DELETE of a bound pod leaves it Terminating", code == 200 and
          api.get(PODS, "default", "p1")["metadata"].get("deletionTimestamp"))
    # The node's final DELETE (grace 0, uid precondition): its first write sets the grace
    # to 0; a controller's write lands before the object is removed.
    restore = interleave_after_writes(api, 1, lambda: touch(api, "p1"))
    try:
        code, _ = api.delete(PODS, "default", "p1",
                             {"gracePeriodSeconds": 0, "preconditions": {"uid": pod["metadata"]["uid"]}})
    finally:
        restore()
    gone = api.store.get(PODS.key, ("default", "p1")) is None
    check("the final DELETE answered 200 removed the pod although a write came in between",
          code == 200 and gone, (code, None if gone else api.get(PODS, "default", "p1")["metadata"]))


def test_immediate_delete_races_a_status_write():
    api = Api(types.SimpleNamespace(history=1000))
    bound_pod(api, "p2")
    restore = interleave_after_writes(api, 1, lambda: touch(api, "p2"))
    try:
        code, _ = api.delete(PODS, "default", "p2", {"gracePeriodSeconds": 0})
    finally:
        restore()
    gone = api.store.get(PODS.key, ("default", "p2")) is None
    check("a DELETE with grace 0 answered 200 removed the pod although a write came in between",
          code == 200 and gone)


def main():
    test_final_delete_races_a_status_write()
    test_immediate_delete_races_a_status_write()
    print(f"{PASSED} passed, {FAILED} failed")
    out = os.environ.get("KUBE_TEST_SUMMARY")
    if out:
        with open(out, "w") as f:
            f.write(f"{PASSED} {FAILED} 0\n")
    return 0 if FAILED == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
