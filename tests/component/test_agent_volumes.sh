#!/bin/sh
# Component test: hostPath and persistentVolumeClaim volumes under the agent's volume_roots, with
# the real agent (each node acting as itself) and the real shim; pods are processes. Runs as any
# user in under a minute.
: "${SK_TOP_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${SK_TOP_BUILDDIR:=$SK_TOP_SRCDIR}"
: "${PYTHON3:=python3}"
exec "$PYTHON3" "$SK_TOP_SRCDIR/tests/component/agent_volumes_test.py" \
    --agent "$SK_TOP_BUILDDIR/agent/slurm-k8s-agent" \
    --shim "$SK_TOP_BUILDDIR/k8s-shim/slurm-k8s-shim" \
    --server "$SK_TOP_SRCDIR/tests/kube/kube_test_server.py"
