#!/bin/sh
# Component test: the kubelet endpoint's serving certificate from kubelet-serving CSRs
# (kubelet_serving = csr), approved with kubectl, renewed, kept across restarts. The real
# agent and shim against the test API server; any user; about a minute.
: "${SK_TOP_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${SK_TOP_BUILDDIR:=$SK_TOP_SRCDIR}"
: "${PYTHON3:=python3}"
exec "$PYTHON3" "$SK_TOP_SRCDIR/tests/component/agent_serving_cert_test.py" \
    --agent "$SK_TOP_BUILDDIR/agent/slurm-k8s-agent" \
    --shim "$SK_TOP_BUILDDIR/k8s-shim/slurm-k8s-shim" \
    --server "$SK_TOP_SRCDIR/tests/kube/kube_test_server.py"
