#!/usr/bin/env bash
# e2e-v2.sh -- the e2e layer's cgroup v2 case in the guest of tests/vm (pure
# unified hierarchy, Slurm's cgroup/v2):
#
#   tests/vm/vm.sh run tests/vm/e2e-v2.sh
#
# Runs tests/e2e/run-all.sh pod_devices there (the case finds v2 and takes
# its paths), with one Slurm node: the test API server, an agent, Slurm with
# spank_k8s.so and the host's kubectl (vm.sh installs it in the guest), all
# inside the guest, on its loopback.
# Prints the e2e's PASS:/FAIL: lines and "e2e: N passed, N failed". Exit 0, 1
# on a failure, 77 when not root or not on a pure cgroup v2 hierarchy.
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TOP="$(cd "$HERE/../.." && pwd)"
[ "$(id -u)" = 0 ] || { echo "e2e-v2: skipped (needs root)"; exit 77; }
[ "$(cut -d: -f1,2 /proc/self/cgroup)" = "0:" ] || { echo "e2e-v2: skipped (not a pure cgroup v2 hierarchy: run it in tests/vm)"; exit 77; }
command -v kubectl >/dev/null || { echo "FAIL: no kubectl in the guest (vm.sh build installs the host's)"; echo "e2e: 0 passed, 1 failed"; exit 1; }
# The guest is slow (TCG): one Slurm node, the e2e's own waits. Its pods
# on the node's network: the guest has no CNI plugins (GUEST_PKGS), and the
# case is about devices.
export E2E_REGISTRY_OFF=1 NUM_NODES=1 E2E_POD_NETWORK=host SK_BUILD_DIR="${SK_TOP_BUILDDIR:-$TOP/build}"
exec bash "$TOP/tests/e2e/run-all.sh" pod_devices
