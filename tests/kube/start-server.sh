#!/bin/bash
# Start / stop the Kubernetes API test double for other test harnesses.
#
#   start-server.sh STATE_DIR [kube_test_server.py options...]
#       Starts the server in the background (log: STATE_DIR/server.log), waits until STATE_DIR/ready
#       exists (30 s at most) and prints shell assignments to eval:
#         KUBE_URL=... KUBE_TOKEN=... KUBE_CA=... KUBECONFIG=... KUBE_SERVER_PID=... KUBE_STATE_DIR=...
#       Default options: --listen 127.0.0.1:0.  Exit status 1 if it did not come up, 77 if
#       python3 or openssl are missing.
#   start-server.sh --stop STATE_DIR
#       Stops the server started with that state dir (SIGTERM to the pid in STATE_DIR/pid, then
#       SIGKILL after 5 s) and waits until it is gone.
#
# Example:
#   eval "$(tests/kube/start-server.sh "$tmp/kube" --no-scheduler)" || exit 1
#   curl --cacert "$KUBE_CA" -H "Authorization: Bearer $KUBE_TOKEN" "$KUBE_URL/api/v1/nodes"
#   tests/kube/start-server.sh --stop "$tmp/kube"
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3) || exit 77
command -v openssl >/dev/null 2>&1 || exit 77

if [ "${1:-}" = "--stop" ]; then
    SD=${2:?usage: start-server.sh --stop STATE_DIR}
    [ -s "$SD/pid" ] || exit 0
    pid=$(cat "$SD/pid")
    # gone, or a zombie whose (already exited) parent nobody reaps
    gone() { ! kill -0 "$pid" 2>/dev/null || [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" = Z ]; }
    kill -TERM "$pid" 2>/dev/null || exit 0
    for _ in $(seq 50); do gone && exit 0; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null
    for _ in $(seq 20); do gone && exit 0; sleep 0.1; done
    exit 0
fi

SD=${1:?usage: start-server.sh STATE_DIR [options]}
shift
mkdir -p "$SD"
SD=$(cd "$SD" && pwd)
rm -f "$SD/ready" "$SD/pid"
listen=()
case " $* " in *" --listen "*) ;; *) listen=(--listen 127.0.0.1:0) ;; esac
# KUBE_SERVER_COVERAGE=DIR: under python3-coverage, its data in DIR
# (tests/kube/coverage.sh).
cov=()
[ -n "${KUBE_SERVER_COVERAGE:-}" ] && cov=(-m coverage run --parallel-mode --concurrency=thread \
    --data-file="$KUBE_SERVER_COVERAGE/.coverage" --include="$HERE/*")
"$PY" "${cov[@]}" "$HERE/kube_test_server.py" "${listen[@]}" --state-dir "$SD" "$@" >"$SD/server.log" 2>&1 </dev/null &
pid=$!
for _ in $(seq 300); do
    [ -s "$SD/ready" ] && break
    kill -0 "$pid" 2>/dev/null || { echo "kube test server died:" >&2; cat "$SD/server.log" >&2; exit 1; }
    sleep 0.1
done
if [ ! -s "$SD/ready" ]; then
    echo "kube test server did not become ready" >&2
    kill "$pid" 2>/dev/null
    exit 1
fi
ca=$SD/ca.crt
case $(cat "$SD/ready") in http:*) ca= ;; esac
tok=
[ -s "$SD/admin.token" ] && tok=$(cat "$SD/admin.token")
printf 'KUBE_URL=%q\nKUBE_TOKEN=%q\nKUBE_CA=%q\nKUBECONFIG=%q\nKUBE_SERVER_PID=%q\nKUBE_STATE_DIR=%q\n' \
    "$(cat "$SD/ready")" "$tok" "$ca" "$SD/kubeconfig" "$pid" "$SD"
