#!/usr/bin/env bash
# make check-valgrind: the agent's component tests with the agent (and the
# shim) under valgrind memcheck (tests/pylib/sktest/memcheck.py), and the agent
# stopped with SIGTERM in the middle of its work (sigterm_busy.py). Not part
# of `make check`: it takes minutes. Prints one "N passed, N failed" line
# over all suites; exit 0 only when every check passed.
: "${SK_TOP_SRCDIR:=$(cd "$(dirname "$0")/../.." && pwd)}"
: "${SK_TOP_BUILDDIR:=$SK_TOP_SRCDIR}"
: "${PYTHON3:=python3}"
export SK_TOP_SRCDIR SK_TOP_BUILDDIR PYTHON3
if ! command -v valgrind >/dev/null 2>&1; then
    echo "SKIP: valgrind not installed"
    exit 77
fi
SK_VALGRIND=1
export SK_VALGRIND
# shellcheck source=../lib/report.sh
. "$SK_TOP_SRCDIR/tests/lib/report.sh"
status=0
# One suite: its output, its checks as records (tests/lib/report.sh) counted
# into the totals; a suite that ends without its checks is a failure.
suite() {  # name command...
    local name=$1 start=$SECONDS rc p0=$REPORT_PASSED f0=$REPORT_FAILED
    shift
    report_run "$name under memcheck" "$@" 2>&1
    rc=$?
    echo "== $name under memcheck: $((REPORT_PASSED - p0)) passed, $((REPORT_FAILED - f0)) failed (exit $rc, $((SECONDS - start)) s)"
    [ $rc -eq 0 ] || [ $rc -eq 77 ] || status=1
}
suite test_agent.sh sh "$SK_TOP_SRCDIR/tests/component/test_agent.sh"
suite test_agent_shim.sh sh "$SK_TOP_SRCDIR/tests/component/test_agent_shim.sh"
# Node identities: keys, CSRs and certificates through GnuTLS, renewals.
suite test_agent_node_identity.sh sh "$SK_TOP_SRCDIR/tests/component/test_agent_node_identity.sh"
# Slot identities kept between jobs: the pool's certificates handed over to
# and back from the jobs' nodes, renewed while free, across a restart.
suite test_agent_slot_identity.sh sh "$SK_TOP_SRCDIR/tests/component/test_agent_slot_identity.sh"
# The kubelet endpoint's certificate from CSRs: credentials swapped under the
# TLS fronts while they serve, the CSR controller's watches and timers.
suite test_agent_serving_cert.sh sh "$SK_TOP_SRCDIR/tests/component/test_agent_serving_cert.sh"
# The kubelet endpoint's server (TLS, floods, follow streams, stops).
suite test_kubelet_server.sh bash "$SK_TOP_SRCDIR/tests/component/test_kubelet_server.sh"
# runtime=fake: the agent's test build (tests/agent/local.mk)
suite sigterm_busy.py "$PYTHON3" "$SK_TOP_SRCDIR/tests/valgrind/sigterm_busy.py" \
    --agent "$SK_TOP_BUILDDIR/tests/agent/slurm-k8s-test-agent" \
    --server "$SK_TOP_SRCDIR/tests/kube/kube_test_server.py"
echo "$REPORT_PASSED passed, $REPORT_FAILED failed"
[ "$REPORT_FAILED" = 0 ] || status=1
exit $status
