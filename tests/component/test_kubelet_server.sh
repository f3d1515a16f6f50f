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
PID=
cleanup() {
    [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT
FAILS=0
PASSES=0
ok() { PASSES=$((PASSES + 1)); }
bad() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
expect_eq() {  # name want got
    if [ "$2" == "$3" ]; then ok; else bad "$1: want [$2] got [$3]"; fi
}

# ---- certificates: a test CA, the serving cert, the API server's client cert,
# and a client cert from another CA (the commands an admin would run, see
# docs in agent/kubelet_server.h's report) ----
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

"$SERVER" --state-dir "$S" --port-file "$T/port" --cert serving.crt --key serving.key \
    --client-ca ca.crt 2>"$T/server.log" &
PID=$!
for _ in $(seq 50); do [ -s "$T/port" ] && break; sleep 0.1; done
[ -s "$T/port" ] || { echo "FAIL: server did not start"; cat "$T/server.log"; exit 1; }
PORT=$(cat "$T/port")
URL=https://127.0.0.1:$PORT
CURL=(curl -sS --max-time 10 --cacert ca.crt --cert client.crt --key client.key)

get() {  # path -> body
    "${CURL[@]}" "$URL$1"
}
code() {  # path [curl args] -> HTTP status (000 on a TLS failure)
    local p=$1
    shift
    curl -s -o /dev/null -w '%{http_code}' --max-time 10 --cacert ca.crt "$@" "$URL$p"
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
now() { date -u +%Y-%m-%dT%H:%M:%S.%NZ; }
"${CURL[@]}" -N --max-time 20 "$URL/containerLogs/default/web/main?follow=true&tailLines=1" \
    >"$T/follow.out" 2>"$T/follow.err" &
FOLLOW=$!
sleep 0.5
printf '%s stdout F live-1\n' "$(now)" >>"$D/1.log"
sleep 0.3
mv "$D/1.log" "$D/1.log.1"
printf '%s stdout F live-2\n' "$(now)" >"$D/1.log"
sleep 0.5
printf '%s stderr F live-3\n' "$(now)" >>"$D/1.log"
sleep 0.5
expect_eq "follow streams while running" "$(printf 'four\nlive-1\nlive-2\nlive-3')" \
    "$(cat "$T/follow.out")"
kill -0 $FOLLOW 2>/dev/null && ok || bad "follow ended while the container runs"
# The container writes its last words and terminates: the follow ends by
# itself (resolver says not running). Written before the status changes, as
# the shim does: the other order races the server's final poll.
printf '%s stdout F last words\n' "$(now)" >>"$D/1.log"
sed -i 's/^default web main uid-1 1 1$/default web main uid-1 1 0/' "$S/containers.tsv"
for _ in $(seq 40); do kill -0 $FOLLOW 2>/dev/null || break; sleep 0.1; done
if kill -0 $FOLLOW 2>/dev/null; then
    bad "follow did not end after the container terminated"
    kill $FOLLOW
fi
wait $FOLLOW
expect_eq "follow exit status" 0 $?
expect_eq "follow got everything" "$(printf 'four\nlive-1\nlive-2\nlive-3\nlast words')" \
    "$(cat "$T/follow.out")"

# ---- follow of a running container, client goes away, server still stops ----
"${CURL[@]}" -N --max-time 20 "$URL/containerLogs/default/side/side?follow=1" >"$T/f2.out" &
F2=$!
sleep 0.5
expect_eq "second follow" "side" "$(cat "$T/f2.out")"
kill $F2
wait $F2 2>/dev/null
"${CURL[@]}" -N --max-time 20 "$URL/containerLogs/default/side/side?follow=1" >/dev/null &
F3=$!
# A follow of the huge file is served (its first batch read within bounds)
# and is under way when the server is told to stop.
"${CURL[@]}" -N --max-time 60 "$URL/containerLogs/default/huge/main?follow=1" >"$T/f4.out" &
F4=$!
for _ in $(seq 200); do grep -q huge-end "$T/f4.out" && break; sleep 0.1; done
expect_eq "follow of the huge file" "huge-end" "$(cat "$T/f4.out")"
sleep 0.3
start=$(date +%s%N)
kill $PID
# Wait on the exit with a generous deadline: a reader the stop waits on
# would keep the server up for minutes.
for _ in $(seq 300); do kill -0 $PID 2>/dev/null || break; sleep 0.1; done
if kill -0 $PID 2>/dev/null; then
    bad "server still running 30 s after SIGTERM with follows open"
    kill -9 $PID
fi
wait $PID
rc=$?
PID=
ms=$((($(date +%s%N) - start) / 1000000))
expect_eq "server exit status on SIGTERM" 0 $rc
if [ $ms -lt 3000 ]; then ok; else bad "server stop with an open follow took ${ms} ms"; fi
wait $F3 2>/dev/null
wait $F4 2>/dev/null

echo "kubelet server: $PASSES passed, $FAILS failed"
[ $FAILS -eq 0 ]
