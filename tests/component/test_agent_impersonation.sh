#!/bin/sh
# Component test: node_identity = impersonate: each virtual node's traffic as system:node:<node>
# over the agent's own connections, no CSR, confined by the double's Node authorizer and
# NodeRestriction, within the RBAC etc/slurm-k8s-impersonation-rbac prints. Runs as any user in
# under a minute.
: "${SK_TOP_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${SK_TOP_BUILDDIR:=$SK_TOP_SRCDIR}"
: "${PYTHON3:=python3}"
exec "$PYTHON3" "$SK_TOP_SRCDIR/tests/component/agent_impersonation_test.py" \
    --agent "$SK_TOP_BUILDDIR/tests/agent/slurm-k8s-test-agent" \
    --server "$SK_TOP_SRCDIR/tests/kube/kube_test_server.py"
