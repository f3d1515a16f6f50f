#!/bin/sh
# Component test: the real slurm-k8s-agent with the real slurm-k8s-shim
# (pods are processes), kubectl logs through the test API server's log proxy
# to the agent's kubelet endpoint. No Slurm; any user; about a minute.
: "${SK_TOP_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${SK_TOP_BUILDDIR:=$SK_TOP_SRCDIR}"
: "${PYTHON3:=python3}"
exec "$PYTHON3" "$SK_TOP_SRCDIR/tests/component/agent_shim_test.py" \
    --agent "$SK_TOP_BUILDDIR/agent/slurm-k8s-agent" \
    --shim "$SK_TOP_BUILDDIR/k8s-shim/slurm-k8s-shim" \
    --server "$SK_TOP_SRCDIR/tests/kube/kube_test_server.py"
