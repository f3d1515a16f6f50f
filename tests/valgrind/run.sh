#!/bin/sh
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
passed=0
failed=0
status=0
# One suite: prints its output and a summary line, adds to the totals.
suite() {  # name command...
    name=$1
    shift
    out=$(mktemp)
    start=$(date +%s)
    "$@" >"$out" 2>&1
    rc=$?
    cat "$out"
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$out" | tail -n 1)
    rm -f "$out"
    echo "== $name under memcheck: ${line:-no result} (exit $rc, $(($(date +%s) - start)) s)"
    [ $rc -eq 77 ] && return
    if [ -z "$line" ]; then
        failed=$((failed + 1))
        status=1
        return
    fi
    passed=$((passed + ${line%% passed*}))
    f=${line#*, }
    failed=$((failed + ${f%% failed}))
    [ $rc -eq 0 ] || status=1
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
# The kubelet endpoint's server (TLS, floods, follow streams, stops); its
# summary line starts with "kubelet server: ".
suite test_kubelet_server.sh bash -o pipefail -c \
    'bash "$1" 2>&1 | sed "s/^kubelet server: //"' _ "$SK_TOP_SRCDIR/tests/component/test_kubelet_server.sh"
# runtime=fake: the agent's test build (tests/agent/local.mk)
suite sigterm_busy.py "$PYTHON3" "$SK_TOP_SRCDIR/tests/valgrind/sigterm_busy.py" \
    --agent "$SK_TOP_BUILDDIR/tests/agent/slurm-k8s-test-agent" \
    --server "$SK_TOP_SRCDIR/tests/kube/kube_test_server.py"
echo "$passed passed, $failed failed"
exit $status
