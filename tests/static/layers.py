#!/usr/bin/env python3
"""The house's layers, checked on the sources (make check): who may include
whom. Each rule names a set of files and the headers they must never reach,
directly or through the project's own headers (the transitive closure of
#include "..." within the tree). Prints one line per rule and
"N passed, N failed"; exit 1 when a rule is broken.

Rules:
- the agent's pure core (the sources of agent/core/libagentcore.la, read
  from agent/core/local.mk), the controllers' pure modules (PURE_CONTROLLERS
  below) and the codecs of agent/kubelet/streams/ reach neither libuv nor
  libcurl (they are unit-tested without a loop or a network);
- a wing never reaches the folders above it: agent/core/ nothing of agent/
  but agent/kube/ (agent.conf names kubeconfigs), agent/controllers/ nothing
  of the agent's own room (agent/*.h), agent/kube/ and agent/kubelet/
  nothing of agent/ outside themselves (agent/kubelet/ may use its streams/),
  agent/kubelet/streams/ nothing of agent/kubelet/, agent/images/ nothing
  of agent/ but agent/core/ (and agent/kube/, which agent.conf reaches),
  agent/network/ nothing of agent/ but agent/core/, common/ nothing of agent/,
  k8s-shim/, spank/ or uv/, the plugin's part of common/ (common/ and
  common/cgroup/) nothing of common/daemons/ nor jsoncpp, uv/ nothing of
  agent/, k8s-shim/ or spank/.
"""
import os
import re
import sys

top = os.environ.get("SK_TOP_SRCDIR") or os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__))))
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]', re.M)


def includes(path, cache={}):
    """(system, project) includes of one file."""
    if path not in cache:
        try:
            with open(os.path.join(top, path), encoding="utf-8") as f:
                text = f.read()
        except OSError:
            text = ""
        sys_inc, proj = set(), set()
        for kind, name in INCLUDE.findall(text):
            if kind == "<":
                sys_inc.add(name)
            elif os.path.exists(os.path.join(top, name)):
                proj.add(name)
        cache[path] = (sys_inc, proj)
    return cache[path]


def closure(path):
    """Every project header path reaches, and every system header on the way,
    with the chain that led to each (for the message)."""
    seen, sys_seen, todo = {path: [path]}, {}, [path]
    while todo:
        p = todo.pop()
        s, proj = includes(p)
        for h in s:
            sys_seen.setdefault(h, seen[p] + [h])
        for h in proj:
            if h not in seen:
                seen[h] = seen[p] + [h]
                todo.append(h)
    return seen, sys_seen


def sources_of(mk, var):
    with open(os.path.join(top, mk), encoding="utf-8") as f:
        text = f.read()
    m = re.search(var + r"\s*=\s*((?:[^\n]*\\\n)*[^\n]*)", text)
    return [w for w in m.group(1).replace("\\\n", " ").split() if w.endswith((".cc", ".h"))]


def files_under(folder, exclude=()):
    out = []
    for root, _, names in os.walk(os.path.join(top, folder)):
        rel = os.path.relpath(root, top)
        if any(rel == e or rel.startswith(e + "/") for e in exclude):
            continue
        out += [os.path.join(rel, n) for n in sorted(names) if n.endswith((".cc", ".h"))]
    return out


def check(name, files, bad):
    """bad(header, system) -> True when reaching it breaks the rule."""
    broken = []
    for f in files:
        proj, sys_inc = closure(f)
        for h, chain in proj.items():
            if h != f and bad(h, False):
                broken.append(" -> ".join(chain))
        for h, chain in sys_inc.items():
            if bad(h, True):
                broken.append(" -> ".join(chain))
    print(("PASS" if not broken else "FAIL") + ": " + name + " (%d files)" % len(files))
    for b in sorted(set(broken))[:20]:
        print("    " + b)
    return not broken


# The modules of agent/controllers/ that build or read objects without I/O.
PURE_CONTROLLERS = ("env_resolver", "event_correlator", "host_volumes", "lost_shim", "node_builder",
                    "node_identity", "pod_status_patch")


def under(h, *folders):
    return any(h.startswith(f + "/") for f in folders)


def main():
    results = []
    loop_or_net = lambda h, system: (system and (h == "uv.h" or h.startswith("curl/"))) or (
        not system and (under(h, "uv") or h in ("agent/kube/http_client.h",
                                                  "agent/kube/kube_client.h",
                                                  "agent/kube/api_auth.h")))
    pure = sources_of("agent/core/local.mk", "agent_core_libagentcore_la_SOURCES")
    results.append(check("the agent's pure core reaches neither libuv nor libcurl", pure,
                         loop_or_net))
    pure_controllers = [f for m in PURE_CONTROLLERS for f in ("agent/controllers/%s.cc" % m,
                                                              "agent/controllers/%s.h" % m)]
    results.append(check("the controllers' pure modules reach neither libuv nor libcurl",
                         pure_controllers, loop_or_net))
    results.append(check("agent/core/ reaches nothing of the agent above it but agent/kube/",
                         files_under("agent/core"),
                         lambda h, s: not s and under(h, "agent") and not under(h, "agent/core", "agent/kube")))
    results.append(check("agent/controllers/ reaches nothing of the agent's own room",
                         files_under("agent/controllers"),
                         lambda h, s: not s and under(h, "agent") and
                         not under(h, "agent/controllers", "agent/core", "agent/kube", "agent/kubelet")))
    results.append(check("the streaming codecs reach neither libuv nor libcurl",
                         files_under("agent/kubelet/streams"), loop_or_net))
    results.append(check("agent/images/ reaches nothing of the agent above it but agent/core/ (and its agent/kube/)",
                         files_under("agent/images"),
                         lambda h, s: not s and under(h, "agent") and not under(h, "agent/images", "agent/core", "agent/kube")))
    results.append(check("agent/network/ reaches nothing of the agent but agent/core/",
                         files_under("agent/network"),
                         lambda h, s: not s and under(h, "agent") and not under(h, "agent/network", "agent/core")))
    results.append(check("agent/kube/ reaches nothing of the agent above it",
                         files_under("agent/kube"),
                         lambda h, s: not s and under(h, "agent") and not under(h, "agent/kube")))
    results.append(check("agent/kubelet/ reaches nothing of the agent above it",
                         files_under("agent/kubelet"),
                         lambda h, s: not s and under(h, "agent") and not under(h, "agent/kubelet")))
    results.append(check("agent/kubelet/streams/ reaches nothing of the endpoint above it",
                         files_under("agent/kubelet/streams"),
                         lambda h, s: not s and under(h, "agent") and
                         not under(h, "agent/kubelet/streams")))
    results.append(check("common/ reaches nothing of the daemons, the plugin or uv/",
                         files_under("common"),
                         lambda h, s: not s and under(h, "agent", "k8s-shim", "spank", "uv")))
    results.append(check("common/ and common/cgroup/ (the plugin links them) reach nothing of "
                         "common/daemons/ (jsoncpp)",
                         files_under("common", exclude=("common/daemons",)),
                         lambda h, s: (not s and under(h, "common/daemons")) or (s and h.startswith("json/"))))
    results.append(check("uv/ reaches nothing of the daemons or the plugin", files_under("uv"),
                         lambda h, s: not s and under(h, "agent", "k8s-shim", "spank")))
    passed = sum(results)
    print("%d passed, %d failed" % (passed, len(results) - passed))
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
