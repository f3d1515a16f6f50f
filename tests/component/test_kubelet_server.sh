#!/bin/bash
# Component test of the kubelet endpoint: the real server (HTTPS with client
# certificates, libmicrohttpd + GnuTLS) over a directory of CRI log files,
# exercised with curl the way the API server's proxy reaches a kubelet.
set -u
BUILD=${SK_TOP_BUILDDIR:-$(pwd)}
SERVER=$BUILD/tests/component/kubelet_server_main
for tool in openssl curl; do
    command -v $tool >/dev/null || { echo "SKIP: $tool not installed"; exit 77; }
done
[ -x "$SERVER" ] || { echo "FAIL: $SERVER not built"; exit 1; }

T=$(mktemp -d /tmp/sk-kubelet-XXXXXX)
# SK_VALGRIND=1 (make check-valgrind): the servers run under memcheck with the
# options of tests/pylib/sktest/memcheck.py; an error or a leak makes their
# exit status 99 (checked at each stop), and no descriptor may be left open.
RUN=()
if [ "${SK_VALGRIND:-}" == 1 ]; then
    RUN=(valgrind --tool=memcheck --leak-check=full --show-leak-kinds=all
        --errors-for-leak-kinds=all --error-exitcode=99 --track-fds=yes --num-callers=30
        "--suppressions=${SK_TOP_SRCDIR:-$BUILD/..}/tests/valgrind/slurm-k8s.supp"
        "--log-file=$T/memcheck.%p.log")
fi
PID=
cleanup() {
    [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT
# Each check also a record of the one result protocol (tests/lib/report.sh).
# shellcheck source=../lib/report.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/report.sh"
FAILS=0
PASSES=0
ok() {  # ok [NAME]: the checks that pass print nothing
    PASSES=$((PASSES + 1))
    report_record pass "kubelet server: ${1:-check $PASSES (line ${BASH_LINENO[0]})}"
}
bad() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); report_record fail "kubelet server: $*"; }
expect_eq() {  # name want got
    if [ "$2" == "$3" ]; then ok "$1"; else bad "$1: want [$2] got [$3]"; fi
}

# ---- certificates: a test CA, the serving cert, the API server's client cert,
# and a client cert from another CA (the commands an admin would run, see
# docs in agent/kubelet/kubelet_server.h's report) ----
cd "$T"
gen_ca() {  # name
    openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=$1" \
        -keyout "$1.key" -out "$1.crt" 2>/dev/null
}
gen_cert() {  # name ca subject [ext]
    openssl req -newkey rsa:2048 -nodes -subj "$3" -keyout "$1.key" -out "$1.csr" 2>/dev/null
    printf '%s\n' "${4:-extendedKeyUsage=clientAuth}" >"$1.ext"
    openssl x509 -req -in "$1.csr" -CA "$2.crt" -CAkey "$2.key" -CAcreateserial -days 1 \
        -extfile "$1.ext" -out "$1.crt" 2>/dev/null
}
gen_ca ca
gen_ca other-ca
gen_cert serving ca "/CN=slurm-n1-42" \
    "$(printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth')"
gen_cert client ca "/O=system:masters/CN=kube-apiserver-kubelet-client"
gen_cert intruder other-ca "/CN=intruder"
for f in ca.crt serving.crt serving.key client.crt intruder.crt; do
    [ -s $f ] || { echo "FAIL: could not generate $f with openssl"; exit 1; }
done

# ---- log files: pod uid-1 container "main" restarted once (0.log is the
# previous instance, 1.log.1 + 1.log the current one, rotated once) ----
S=$T/state
D=$S/pods/uid-1/main
mkdir -p "$D" "$S/pods/uid-2/side"
cat >"$D/0.log" <<'EOF'
2024-05-01T11:00:00.000000000Z stdout F previous run
2024-05-01T11:00:01.000000000Z stderr F previous crash
EOF
cat >"$D/1.log.1" <<'EOF'
2024-05-01T12:00:01.000000000Z stdout F one
2024-05-01T12:00:02.000000000Z stdout F two
EOF
cat >"$D/1.log" <<'EOF'
2024-05-01T12:00:03.000000000Z stdout P thr
2024-05-01T12:00:03.500000000Z stdout F ee
this line is not CRI and is skipped
2024-05-01T12:00:04.000000000Z stderr F four
EOF
printf '2024-05-01T12:00:05.000000000Z stdout F side\n' >"$S/pods/uid-2/side/0.log"
# Hostile pods: what a job's user can put where the agent reads. A secret
# only root may read, reached by a symlinked 0.log, a symlinked container
# dir, a hard link; a FIFO; 1.5 GB without a newline (sparse) before records.
printf '2024-05-01T12:00:00.000000000Z stdout F the secret\n' >"$T/secret"
chmod 600 "$T/secret"
mkdir -p "$S/pods/uid-3/main" "$S/pods/uid-4" "$T/elsewhere" "$S/pods/uid-5/main" \
    "$S/pods/uid-6/main" "$S/pods/uid-7/main"
ln -s "$T/secret" "$S/pods/uid-3/main/0.log"
cp "$T/secret" "$T/elsewhere/0.log"
ln -s "$T/elsewhere" "$S/pods/uid-4/main"
ln "$T/secret" "$S/pods/uid-5/main/0.log"
mkfifo "$S/pods/uid-6/main/0.log"
HUGE=$S/pods/uid-7/main/0.log
truncate -s 1536M "$HUGE"
printf '\n2024-05-01T12:00:06.000000000Z stdout F huge-end\n' >>"$HUGE"
cat >"$S/containers.tsv" <<'EOF'
default web main uid-1 1 1
default side side uid-2 0 1
default link main uid-3 0 1
default linkdir main uid-4 0 1
default hardlink main uid-5 0 1
default fifo main uid-6 0 1
default huge main uid-7 0 1
EOF

"${RUN[@]}" "$SERVER" --state-dir "$S" --port-file "$T/port" --cert serving.crt --key serving.key \
    --client-ca ca.crt 2>"$T/server.log" &
PID=$!
for _ in $(seq 300); do [ -s "$T/port" ] && break; sleep 0.1; done
[ -s "$T/port" ] || { echo "FAIL: server did not start"; cat "$T/server.log"; exit 1; }
PORT=$(cat "$T/port")
URL=https://127.0.0.1:$PORT
CURL=(curl -sS --max-time 60 --cacert ca.crt --cert client.crt --key client.key)

get() {  # path -> body
    "${CURL[@]}" "$URL$1"
}
code() {  # path [curl args] -> HTTP status (000 on a TLS failure)
    local p=$1
    shift
    curl -s -o /dev/null -w '%{http_code}' --max-time 60 --cacert ca.crt "$@" "$URL$p"
}

# ---- authentication ----
expect_eq "healthz with client cert" "ok" "$(get /healthz)"
c=$(code /healthz)
if [ "$c" == 401 ] || [ "$c" == 000 ]; then ok; else bad "no client cert: got HTTP $c"; fi
c=$(code /containerLogs/default/web/main --cert intruder.crt --key intruder.key)
if [ "$c" == 401 ] || [ "$c" == 000 ]; then ok; else bad "client cert of another CA: got HTTP $c"; fi
grep -q "refused" "$T/server.log" && ok || bad "refusals are logged"
c=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 --cacert other-ca.crt \
    --cert client.crt --key client.key "$URL/healthz")
expect_eq "server cert checked by the client" "000" "$c"

# ---- plain reads ----
expect_eq "all logs (rotated + current, partial joined, junk skipped)" \
    "$(printf 'one\ntwo\nthree\nfour')" "$(get /containerLogs/default/web/main)"
expect_eq "tailLines=2" "$(printf 'three\nfour')" "$(get '/containerLogs/default/web/main?tailLines=2')"
expect_eq "sinceTime" "$(printf 'three\nfour')" \
    "$(get '/containerLogs/default/web/main?sinceTime=2024-05-01T12:00:03Z')"
expect_eq "timestamps" "$(printf '2024-05-01T12:00:03Z three\n2024-05-01T12:00:04Z four')" \
    "$(get '/containerLogs/default/web/main?tailLines=2&timestamps=true')"
expect_eq "limitBytes" "one
tw" "$(get '/containerLogs/default/web/main?limitBytes=6')"
expect_eq "previous" "$(printf 'previous run\nprevious crash')" \
    "$(get '/containerLogs/default/web/main?previous=true')"
expect_eq "sinceSeconds (all these lines are old)" "" \
    "$(get '/containerLogs/default/web/main?sinceSeconds=60')"
expect_eq "other pod" "side" "$(get /containerLogs/default/side/side)"

# ---- errors ----
expect_eq "unknown pod -> 404" 404 "$(code /containerLogs/default/nope/main --cert client.crt --key client.key)"
expect_eq "previous of a first instance -> 404" 404 \
    "$(code '/containerLogs/default/side/side?previous=1' --cert client.crt --key client.key)"
expect_eq "bad tailLines -> 400" 400 \
    "$(code '/containerLogs/default/web/main?tailLines=x' --cert client.crt --key client.key)"
expect_eq "since both ways -> 400" 400 \
    "$(code '/containerLogs/default/web/main?sinceSeconds=1&sinceTime=2024-05-01T12:00:00Z' --cert client.crt --key client.key)"
expect_eq "message names the problem" "at most one of \`sinceTime\` or \`sinceSeconds\` may be specified" \
    "$(get '/containerLogs/default/web/main?sinceSeconds=1&sinceTime=2024-05-01T12:00:00Z')"
expect_eq "unknown path -> 404" 404 "$(code /pods --cert client.crt --key client.key)"
expect_eq "POST -> 405" 405 "$(code /healthz -X POST --cert client.crt --key client.key)"

# ---- hostile files: refused with the reason, never followed or read whole ----
for pod in link linkdir hardlink fifo; do
    expect_eq "$pod -> 403" 403 "$(code /containerLogs/default/$pod/main --cert client.crt --key client.key)"
    body=$(get /containerLogs/default/$pod/main)
    case "$body" in *secret*) bad "$pod: served the secret: $body" ;; *refused*) ok ;;
    *) bad "$pod: no refusal in [$body]" ;; esac
done
expect_eq "symlink named in the refusal" "a symbolic link" \
    "$(get /containerLogs/default/link/main | grep -o 'a symbolic link')"
expect_eq "huge file: the records after 1.5 GB without a newline" "huge-end" \
    "$(get '/containerLogs/default/huge/main?tailLines=3')"
expect_eq "huge file: all of it, i.e. the newest part" "huge-end" \
    "$(get /containerLogs/default/huge/main)"
expect_eq "huge file: limitBytes reads from the start, within its bound" "" \
    "$(get '/containerLogs/default/huge/main?limitBytes=100')"

# ---- follow: new lines, a rotation, then the container ends ----
# Each step waits for the follow to show what the last one wrote (the server
# may be slow: memcheck on a busy machine), never for a fixed time; a follow
# that never shows it fails at the deadline with what it did show.
now() { date -u +%Y-%m-%dT%H:%M:%S.%NZ; }
wait_out() {  # file want: until the file holds exactly want, 60 s at most
    for _ in $(seq 600); do [ "$(cat "$1")" == "$2" ] && return; sleep 0.1; done
}
# The server, sent SIGTERM, must exit by the deadline while follows that
# would last 300 s are open (a stop that waited on a reader would not):
# sets rc to its exit status, kills it if it is still there.
stop_within() {  # seconds message
    for _ in $(seq $(($1 * 10))); do kill -0 $PID 2>/dev/null || break; sleep 0.1; done
    if kill -0 $PID 2>/dev/null; then
        bad "$2"
        kill -9 $PID
    fi
    wait $PID
    rc=$?
    PID=
}
"${CURL[@]}" -N --max-time 300 "$URL/containerLogs/default/web/main?follow=true&tailLines=1" \
    >"$T/follow.out" 2>"$T/follow.err" &
FOLLOW=$!
wait_out "$T/follow.out" four
printf '%s stdout F live-1\n' "$(now)" >>"$D/1.log"
wait_out "$T/follow.out" "$(printf 'four\nlive-1')"
mv "$D/1.log" "$D/1.log.1"
printf '%s stdout F live-2\n' "$(now)" >"$D/1.log"
wait_out "$T/follow.out" "$(printf 'four\nlive-1\nlive-2')"
printf '%s stderr F live-3\n' "$(now)" >>"$D/1.log"
wait_out "$T/follow.out" "$(printf 'four\nlive-1\nlive-2\nlive-3')"
expect_eq "follow streams while running" "$(printf 'four\nlive-1\nlive-2\nlive-3')" \
    "$(cat "$T/follow.out")"
kill -0 $FOLLOW 2>/dev/null && ok || bad "follow ended while the container runs"
# The container writes its last words and terminates: the follow ends by
# itself (resolver says not running). Written before the status changes, as
# the shim does: the other order races the server's final poll.
printf '%s stdout F last words\n' "$(now)" >>"$D/1.log"
sed -i 's/^default web main uid-1 1 1$/default web main uid-1 1 0/' "$S/containers.tsv"
for _ in $(seq 600); do kill -0 $FOLLOW 2>/dev/null || break; sleep 0.1; done
if kill -0 $FOLLOW 2>/dev/null; then
    bad "follow did not end within 60 s after the container terminated"
    kill $FOLLOW
fi
wait $FOLLOW
expect_eq "follow exit status" 0 $?
expect_eq "follow got everything" "$(printf 'four\nlive-1\nlive-2\nlive-3\nlast words')" \
    "$(cat "$T/follow.out")"

# ---- follow of a running container, client goes away, server still stops ----
"${CURL[@]}" -N --max-time 300 "$URL/containerLogs/default/side/side?follow=1" >"$T/f2.out" &
F2=$!
wait_out "$T/f2.out" side
expect_eq "second follow" "side" "$(cat "$T/f2.out")"
kill $F2
wait $F2 2>/dev/null
"${CURL[@]}" -N --max-time 300 "$URL/containerLogs/default/side/side?follow=1" >"$T/f3.out" &
F3=$!
wait_out "$T/f3.out" side
# A follow of the huge file is served (its first batch read within bounds)
# and is under way when the server is told to stop.
"${CURL[@]}" -N --max-time 300 "$URL/containerLogs/default/huge/main?follow=1" >"$T/f4.out" &
F4=$!
wait_out "$T/f4.out" huge-end
expect_eq "follow of the huge file" "huge-end" "$(cat "$T/f4.out")"
kill $PID
stop_within 60 "server still running 60 s after SIGTERM with follows open"
expect_eq "server exit status on SIGTERM" 0 $rc
wait $F3 2>/dev/null
wait $F4 2>/dev/null

# ---- unauthenticated peers are bounded (docs/security.md, "The kubelet
# endpoint"): a second server with small limits. Idle TCP connections that
# never start TLS, from one address, beyond the per-address and the total
# limit: the surplus is closed at once, another address is still served, the
# held ones are closed after the handshake timeout; a TLS session that sends
# no request is closed too. ----
# The handshake timeout: every check of the flood before the held
# connections' timeout must be done within it, so under memcheck (slow TLS,
# a busy machine) it is longer.
HS=8
[ "${SK_VALGRIND:-}" == 1 ] && HS=40
"${RUN[@]}" "$SERVER" --state-dir "$S" --port-file "$T/port2" --cert serving.crt --key serving.key \
    --client-ca ca.crt --max-connections 24 --max-per-address 8 --handshake-timeout $HS \
    2>"$T/server2.log" &
PID=$!
for _ in $(seq 300); do [ -s "$T/port2" ] && break; sleep 0.1; done
[ -s "$T/port2" ] || { echo "FAIL: bounded server did not start"; cat "$T/server2.log"; exit 1; }
PORT2=$(cat "$T/port2")
URL2=https://127.0.0.1:$PORT2
cat >"$T/flood.py" <<'EOF'
# Prints "ok NAME" or "bad NAME: why" per check; waits on events (EOF, select)
# with generous deadlines.
import socket, ssl, subprocess, sys, time, select
port, per, total, hs = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
def check(name, cond, why=""):
    print(("ok " if cond else "bad ") + name + ("" if cond else ": " + why), flush=True)
def conn(src):
    s = socket.socket()
    s.bind((src, 0))
    s.connect(("127.0.0.1", port))
    return s
def is_closed(s, wait):
    r, _, _ = select.select([s], [], [], wait)
    if not r:
        return False
    try:
        return s.recv(1) == b""  # the server sends nothing before a ClientHello
    except OSError:
        return True  # reset
def wait_closed(socks, deadline, since=None):
    """Waits until every socket in socks has EOF; returns {sock: seconds
    since `since` (default: now)}."""
    start = time.monotonic()
    since = start if since is None else since
    done = {}
    while len(done) < len(socks) and time.monotonic() - start < deadline:
        for s in socks:
            if s not in done and is_closed(s, 0.05):
                done[s] = time.monotonic() - since
    return done
def healthz(src):
    r = subprocess.run(["curl", "-sS", "--max-time", "10", "--interface", src, "--cacert",
                        "ca.crt", "--cert", "client.crt", "--key", "client.key",
                        "https://127.0.0.1:%d/healthz" % port],
                       capture_output=True, text=True)
    return r.stdout + r.stderr
n = total + 6  # beyond the per-address and the total limit
t0 = time.monotonic()
socks = [conn("127.0.0.1") for _ in range(n)]
# The surplus is closed at once: exactly `per` stay open.
closed = {}
while len(closed) < n - per and time.monotonic() - t0 < hs + 20:
    for s in socks:
        if s not in closed and is_closed(s, 0.05):
            closed[s] = True
held = [s for s in socks if s not in closed]
check("surplus connections from one address closed", len(closed) == n - per,
      "%d of %d closed" % (len(closed), n - per))
check("per-address limit keeps exactly the limit open", len(held) == per,
      "%d held" % len(held))
out = healthz("127.0.0.2")
check("healthz from another address while %d idle connections were made" % n, out == "ok", out)
extra = conn("127.0.0.1")
refused = wait_closed([extra], hs + 20)
still = [s for s in held if not is_closed(s, 0)]
elapsed = time.monotonic() - t0
check("the next connection from the full address is refused", extra in refused, "not closed")
check("... while the held ones are still open", len(still) == per,
      "%d open %.1f s after they were made (handshake timeout %.0f s)" % (len(still), elapsed, hs))
# TLS done with a valid client certificate, then no request: closed as well.
ctx = ssl.create_default_context(cafile="ca.crt")
ctx.load_cert_chain("client.crt", "client.key")
try:
    tls = ctx.wrap_socket(conn("127.0.0.3"), server_hostname="127.0.0.1")
except (ssl.SSLError, OSError) as e:
    tls = None
    check("TLS handshake from another address while one address is full", False, str(e))
t_tls = time.monotonic()
held_closed = wait_closed(held, hs + 40, since=t0)
check("idle connections closed after the handshake timeout", len(held_closed) == per,
      "%d of %d closed within %.0f s" % (len(held_closed), per, hs + 40))
# Counted from their connect, which is no later than the server's accept.
early = [t for t in held_closed.values() if t < hs * 0.9]
check("... not before it", not early, "closed %s s after they were made" % early)
tls_closed = False
if tls:
    tls.settimeout(hs + 40)
    try:
        tls_closed = tls.recv(1) == b""
    except (ssl.SSLError, OSError) as e:
        tls_closed = not isinstance(e, socket.timeout)
check("TLS session without a request closed after the handshake timeout", tls_closed,
      "still open after %.0f s" % (time.monotonic() - t_tls))
out = healthz("127.0.0.1")
check("the address is served again once its connections are gone", out == "ok", out)
EOF
while read -r verdict rest; do
    if [ "$verdict" == ok ]; then ok; else bad "$rest"; fi
done < <(cd "$T" && python3 "$T/flood.py" "$PORT2" 8 24 $HS 2>&1)

# A follow that has nothing to send does not hold up its server thread (the
# connection is parked): other requests are answered while follows are open.
CURL2=(curl -sS --max-time 300 --cacert ca.crt --cert client.crt --key client.key)
FOLLOWS=()
for i in 1 2 3 4; do
    "${CURL2[@]}" -N "$URL2/containerLogs/default/side/side?follow=1" >"$T/fb$i.out" 2>/dev/null &
    FOLLOWS+=($!)
done
for i in 1 2 3 4; do
    wait_out "$T/fb$i.out" side
done
expect_eq "follows streaming" "side side side side" "$(cat "$T"/fb[1-4].out | tr '\n' ' ' | sed 's/ $//')"
for i in 1 2 3; do
    expect_eq "healthz $i while 4 follows are open" ok "$("${CURL2[@]}" --max-time 10 "$URL2/healthz")"
done
expect_eq "a plain read while follows are open" "side" \
    "$("${CURL2[@]}" --max-time 10 "$URL2/containerLogs/default/side/side")"
printf '%s stdout F side-live\n' "$(now)" >>"$S/pods/uid-2/side/0.log"
wait_out "$T/fb4.out" "$(printf 'side\nside-live')"
expect_eq "a parked follow gets new lines" "side side-live" "$(tr '\n' ' ' <"$T/fb4.out" | sed 's/ $//')"
# Stop with open follows and idle connections: no wait on a reader.
exec 7<>/dev/tcp/127.0.0.1/$PORT2
kill $PID
stop_within 60 "bounded server still running 60 s after SIGTERM with 4 follows open"
exec 7>&-
expect_eq "bounded server exit status on SIGTERM" 0 $rc
for f in "${FOLLOWS[@]}"; do wait "$f" 2>/dev/null; done

if [ ${#RUN[@]} -gt 0 ]; then
    for log in "$T"/memcheck.*.log; do
        left=$(awk '/Open .*descriptor/ { d = $0; getline; if ($0 !~ /inherited from parent/) print d }' "$log")
        expect_eq "no descriptor left open ($(basename "$log"))" "" "$left"
    done
fi

echo "kubelet server: $PASSES passed, $FAILS failed"
[ $FAILS -eq 0 ]
