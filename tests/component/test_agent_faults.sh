#!/bin/sh
# Component test: the agent behind a faulty API (503/500/429 with Retry-After,
# cut watches, only the agent's requests): its Lease never lapses. About 45 s.
: "${SK_TOP_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${SK_TOP_BUILDDIR:=$SK_TOP_SRCDIR}"
: "${PYTHON3:=python3}"
exec "$PYTHON3" "$SK_TOP_SRCDIR/tests/component/agent_faults_test.py" \
    --agent "$SK_TOP_BUILDDIR/tests/agent/slurm-k8s-test-agent" \
    --server "$SK_TOP_SRCDIR/tests/kube/kube_test_server.py"
