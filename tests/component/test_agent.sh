#!/bin/sh
# Component test: the agent daemon (its test build, tests/agent/, which adds
# runtime=fake) against the test API server (tests/kube/kube_test_server.py).
# Runs as any user in < 1 min.
: "${SK_TOP_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${SK_TOP_BUILDDIR:=$SK_TOP_SRCDIR}"
: "${PYTHON3:=python3}"
exec "$PYTHON3" "$SK_TOP_SRCDIR/tests/component/agent_test.py" \
    --agent "$SK_TOP_BUILDDIR/tests/agent/slurm-k8s-test-agent" \
    --server "$SK_TOP_SRCDIR/tests/kube/kube_test_server.py"
