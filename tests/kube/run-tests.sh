#!/bin/bash
# Runs the Kubernetes API test double's own test suites against a private server instance.
# Prints "N passed, N failed[, N skipped]" as its last line; exit 0 on success, 1 on failure,
# 77 (automake SKIP) when python3, openssl or kubectl is missing.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3) || { echo "0 passed, 0 failed (python3 missing: SKIP)"; exit 77; }
command -v openssl >/dev/null 2>&1 || { echo "0 passed, 0 failed (openssl missing: SKIP)"; exit 77; }
KUBECTL=${KUBECTL:-$(command -v kubectl)} || { echo "0 passed, 0 failed (kubectl missing: SKIP)"; exit 77; }
export KUBECTL PYTHON=$PY

TMP=$(mktemp -d "${TMPDIR:-/tmp}/kube-tests.XXXXXX")
SD=$TMP/state
cleanup() {
    "$HERE/start-server.sh" --stop "$SD" >/dev/null 2>&1
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Tokens of a second that die at once (the real minimum is 10 minutes, the leeway 60 s): the
# expiry test of test_kube_api.py runs only against such a server.
if ! env_out=$("$HERE/start-server.sh" "$SD" --min-token-expiration 1 --token-expiry-leeway 0); then
    echo "0 passed, 1 failed (server did not start)"
    exit 1
fi
eval "$env_out"
export KUBE_STATE_DIR=$SD
unset KUBE_URL KUBE_TOKEN KUBE_CA   # the suites read everything from the state dir

P=0 F=0 S=0
add() {  # add SUMMARYFILE
    local p=0 f=1 s=0
    [ -s "$1" ] && read -r p f s <"$1"
    P=$((P + p)) F=$((F + f)) S=$((S + s))
}
KUBE_TEST_SUMMARY=$TMP/api.sum timeout 600 "$PY" "$HERE/test_kube_api.py" 2>&1
add "$TMP/api.sum"
KUBE_TEST_SUMMARY=$TMP/races.sum timeout 60 "$PY" "$HERE/test_api_races.py" 2>&1
add "$TMP/races.sum"
# --audit-log and the benchmarks' reading of it (bench/kubeapi.py): a double of its own
KUBE_TEST_SUMMARY=$TMP/audit.sum timeout 120 "$PY" "$HERE/test_audit_log.py" 2>&1
add "$TMP/audit.sum"
KUBE_TEST_SUMMARY=$TMP/kubectl.sum timeout 300 bash "$HERE/test_kubectl.sh" 2>&1
add "$TMP/kubectl.sum"
if ! kill -0 "$KUBE_SERVER_PID" 2>/dev/null; then
    echo "server died during the tests:"; tail -20 "$SD/server.log"
    F=$((F + 1))
fi
if [ "$S" -gt 0 ]; then
    echo "$P passed, $F failed, $S skipped"
else
    echo "$P passed, $F failed"
fi
[ "$F" -eq 0 ]
