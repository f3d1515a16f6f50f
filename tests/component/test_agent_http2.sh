#!/bin/sh
# Component test: the agent's API traffic over HTTP/2 (nghttpx in front of the
# test API server, kube-apiserver's 100 streams per connection) shares its
# connections, also after 100 registrations at once. Runs as any user in < 1 min.
: "${SK_TOP_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${SK_TOP_BUILDDIR:=$SK_TOP_SRCDIR}"
: "${PYTHON3:=python3}"
exec "$PYTHON3" "$SK_TOP_SRCDIR/tests/component/agent_http2_test.py" \
    --agent "$SK_TOP_BUILDDIR/tests/agent/slurm-k8s-test-agent" \
    --server "$SK_TOP_SRCDIR/tests/kube/kube_test_server.py"
