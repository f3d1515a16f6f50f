#!/bin/sh
# Component test: the agent's API credential (agent/kube/api_auth.h): ServiceAccount tokens from
# the test API server's TokenRequest API rotated in the token file, an expired token refused
# and recovered, a kubeconfig with an exec credential plugin. Runs as any user in < 1 min.
: "${SK_TOP_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${SK_TOP_BUILDDIR:=$SK_TOP_SRCDIR}"
: "${PYTHON3:=python3}"
exec "$PYTHON3" "$SK_TOP_SRCDIR/tests/component/agent_credentials_test.py" \
    --agent "$SK_TOP_BUILDDIR/tests/agent/slurm-k8s-test-agent" \
    --server "$SK_TOP_SRCDIR/tests/kube/kube_test_server.py"
