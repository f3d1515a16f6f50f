#!/bin/sh
# Component test: each virtual node's own identity by the kubelet's TLS bootstrap (a CSR per
# node, auto-approved and signed by the test API server as by kube-controller-manager), its
# renewal, and what NodeRestriction lets it do. Runs as any user in about a minute.
: "${SK_TOP_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${SK_TOP_BUILDDIR:=$SK_TOP_SRCDIR}"
: "${PYTHON3:=python3}"
exec "$PYTHON3" "$SK_TOP_SRCDIR/tests/component/agent_node_identity_test.py" \
    --agent "$SK_TOP_BUILDDIR/tests/agent/slurm-k8s-test-agent" \
    --server "$SK_TOP_SRCDIR/tests/kube/kube_test_server.py"
