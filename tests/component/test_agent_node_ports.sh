#!/bin/sh
# Component test: kubelet_node_ports, a kubelet endpoint per virtual node: two jobs
# with real shims on one host, each Node with its own port and its own pods and stats.
: "${SK_TOP_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${SK_TOP_BUILDDIR:=$SK_TOP_SRCDIR}"
: "${PYTHON3:=python3}"
exec "$PYTHON3" "$SK_TOP_SRCDIR/tests/component/agent_node_ports_test.py" \
    --agent "$SK_TOP_BUILDDIR/agent/slurm-k8s-agent" \
    --shim "$SK_TOP_BUILDDIR/k8s-shim/slurm-k8s-shim" \
    --server "$SK_TOP_SRCDIR/tests/kube/kube_test_server.py"
