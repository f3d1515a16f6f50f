# Sourced by test_kubectl.sh (its helpers t, tn, trc, ok, nok, skipped, k, api and its NS, NODE,
# pod kp1 bound to NODE, the fake kubelet on FKPORT recording to $WORK/fk.req): the real kubectl
# 1.28 (SPDY) and 1.32 (WebSocket first) drive exec, attach and port-forward through the API
# server's proxy to the fake kubelet, and nodes/proxy. What the proxy must send is in
# tests/kube/README.md ("What it implements").

KDIR=$(dirname "$(readlink -f "$(command -v "$KUBECTL")")")
K128=${KUBECTL_128:-$KDIR/kubectl.1.28}
K132=${KUBECTL_132:-$KDIR/kubectl.1.32}
APIHOST=$("$PY" -c 'import json,sys,urllib.parse; print(urllib.parse.urlsplit(json.load(open(sys.argv[1]))["url"]).netloc)' "$SD/server.json")
DOUBLE=
case $(api GET /_test/info) in *'"double":true'*) DOUBLE=1 ;; esac

# lastreq PATH-PREFIX: the last request the fake kubelet got under that path:
# "METHOD REQUEST-LINE-TARGET PROTOCOL CLIENT-CN", then "H Name: value" per header as received.
lastreq() {
    "$PY" - "$WORK/fk.req" "$1" <<'EOF'
import json, sys
reqs = [json.loads(l) for l in open(sys.argv[1]).read().split("\n")[:-1] if l.strip()]
r = [x for x in reqs if x.get("path", "").startswith(sys.argv[2])][-1]
print(r["requestLine"].split(" ")[1], r["protocol"] or "-", r["clientCN"] or "-", "method=" + r["method"])
for k, v in r["headers"]:
    print("H %s: %s" % (k, v))
EOF
}
# wsretry COMMAND...: runs COMMAND (output and status as its own), again when kubectl said
# "Unknown stream id N, discarding message". kubectl 1.32's WebSocket client (client-go's
# remotecommand, readDemuxLoop) reads frames before it has made its streams, and drops a frame
# that comes first: a command that writes at once can lose its output on a loaded machine. That
# race is the client's (a real kubelet meets it too), so such a run is made again, at most twice,
# and recorded in $WORK/ws-retries; any other outcome stands as it is.
wsretry() {
    local out rc i
    for i in 1 2 3; do
        out=$("$@" 2>&1)
        rc=$?
        case $out in
            *"Unknown stream id"*) [ "$i" -lt 3 ] && { echo "$*" >>"$WORK/ws-retries"; continue; } ;;
        esac
        break
    done
    printf '%s\n' "$out"
    return "$rc"
}
wsretries() { [ -f "$WORK/ws-retries" ] && wc -l <"$WORK/ws-retries" || echo 0; }
# nreq PATH-PREFIX: how many requests the fake kubelet got under that path
nreq() { "$PY" -c 'import json,sys; print(sum(1 for l in open(sys.argv[1]).read().split("\n")[:-1] if l.strip() and json.loads(l).get("path", "").startswith(sys.argv[2])))' "$WORK/fk.req" "$1"; }

# renew: play the node agent's Lease renewal, so that NODE stays Ready through this section
# (the node lifecycle controller marks it Unknown after 40 s without one).
renew() {
    api PATCH "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/$NODE" \
        "{\"spec\":{\"renewTime\":\"$(date -u +%Y-%m-%dT%H:%M:%S.000000Z)\"}}" application/merge-patch+json >/dev/null
}
renew

# A TCP echo server: the port-forward target (the fake kubelet dials 127.0.0.1:PORT)
"$PY" -c '
import os, socket, sys, threading
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(16)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write("%d\n" % s.getsockname()[1])
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
def echo(c):
    while True:
        d = c.recv(65536)
        if not d:
            break
        c.sendall(d)
    c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=echo, args=(c,), daemon=True).start()
' "$WORK/echo.port" &
# shellcheck disable=SC2034  # test_kubectl.sh's cleanup stops it
ECHO_PID=$!
for _ in $(seq 600); do [ -s "$WORK/echo.port" ] && break; sleep 0.1; done
ECHO_PORT=$(cat "$WORK/echo.port" 2>/dev/null || echo 9)
# pfclient LOCAL-PORT: two connections through a port-forward, each echoed back
pfclient() {
    "$PY" - "$1" <<'EOF'
import socket, sys
for word in ("hello-through-the-double", "second-connection"):
    c = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=30)
    c.sendall(word.encode() + b"\n")
    got = b""
    while not got.endswith(b"\n"):
        d = c.recv(4096)
        if not d:
            break
        got += d
    c.close()
    print("got: " + got.decode().strip())
EOF
}

# ttyexec KUBECTL ARGS...: kubectl on a pseudo-terminal of 30 rows, 100 columns without local echo
# (so that what comes back came through the fake kubelet); types a line once the kubelet has the
# request, then ^D once the line came back and the kubelet got the terminal size; prints what the
# terminal showed, "resize: DATA" per resize message the kubelet got, and kubectl's exit status.
ttyexec() {
    "$PY" - "$WORK/fk.req" "$@" <<'EOF'
import fcntl, json, os, pty, select, struct, subprocess, sys, termios, time
reqfile, argv = sys.argv[1], sys.argv[2:]
master, slave = pty.openpty()
fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
attrs = termios.tcgetattr(slave)
attrs[3] &= ~termios.ECHO
termios.tcsetattr(slave, termios.TCSANOW, attrs)
def recorded():
    # The fake kubelet appends while this reads: a last line without its
    # newline is still being written and waits for the next look.
    try:
        text = open(reqfile).read()
    except OSError:
        return []
    return [json.loads(l) for l in text.split("\n")[:-1] if l.strip()]
def n_tty_requests():
    return sum(1 for r in recorded() if "tty=1" in r.get("requestLine", ""))
def resizes():
    return [r["data"] for r in recorded()[skip:] if r.get("event") == "resize"]
skip = len(recorded())
before = n_tty_requests()
p = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
os.close(slave)
out, deadline, typed, ended = b"", time.time() + 60, False, False
while time.time() < deadline and p.poll() is None:
    if not typed and n_tty_requests() > before:
        os.write(master, b"typed-on-a-tty\r")
        typed = True
    if typed and not ended and b"typed-on-a-tty" in out and resizes():
        os.write(master, b"\x04")
        ended = True
    r, _, _ = select.select([master], [], [], 0.1)
    if r:
        try:
            out += os.read(master, 4096)
        except OSError:
            break
try:
    rc = p.wait(timeout=max(1, deadline - time.time()))
except subprocess.TimeoutExpired:
    p.kill()
    rc = "timeout"
print(out.decode("utf-8", "replace").replace("\r", "\n"))
for d in resizes():
    print("resize: " + d.strip())
print("exit=%s" % rc)
EOF
}

# Pods: kp1 (Running, so that port-forward is allowed), pods whose names the fake kubelet
# answers with 404 text (missing-*) and a 400 JSON Status (notrunning-*), one bound to a node
# whose kubelet port refuses connections, one not bound at all.
running='{"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}'
api PATCH "/api/v1/namespaces/$NS/pods/kp1/status" "$running" application/merge-patch+json >/dev/null
DEADNODE=kd-$SFX
api POST /api/v1/nodes "{\"metadata\":{\"name\":\"$DEADNODE\"},\"status\":{\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"127.0.0.1\"}],\"daemonEndpoints\":{\"kubeletEndpoint\":{\"Port\":1}}}}" >/dev/null
for p in missing-x:$NODE notrunning-x:$NODE kdead:$DEADNODE; do
    api POST "/api/v1/namespaces/$NS/pods" "{\"metadata\":{\"name\":\"${p%%:*}\"},\"spec\":{\"nodeName\":\"${p#*:}\",\"containers\":[{\"name\":\"main\",\"image\":\"busybox:1.35\"}]}}" >/dev/null
    api PATCH "/api/v1/namespaces/$NS/pods/${p%%:*}/status" "$running" application/merge-patch+json >/dev/null
done
api POST "/api/v1/namespaces/$NS/pods" "{\"metadata\":{\"name\":\"kunbound\"},\"spec\":{\"nodeSelector\":{\"no-such-label\":\"x\"},\"containers\":[{\"name\":\"main\",\"image\":\"busybox:1.35\"}]}}" >/dev/null

for kv in 1.28 1.32; do
    case $kv in
        1.28) kc=$K128 meth=POST proto=v4.channel.k8s.io ;;
        1.32) kc=$K132 meth=GET proto=v5.channel.k8s.io ;;
    esac
    if [ ! -x "$kc" ]; then
        skipped "kubectl $kv exec/attach/port-forward (no $kc)"
        continue
    fi
    kx() { wsretry timeout 60 "$kc" "$@"; }
    renew
    t "$kv exec echo" "^hi there$" kx exec -n "$NS" kp1 -- echo hi there
    t "$kv exec reaches the kubelet path, renamed flags, one command= per word" \
        "^/exec/$NS/kp1/main\?command=echo&command=hi&command=there&error=1&output=1 $proto kube-apiserver-kubelet-client method=$meth$" \
        lastreq /exec/
    t "$kv exec keeps the API server's Host" "^H Host: $APIHOST$" lastreq /exec/
    t "$kv exec appends X-Forwarded-For" "^H X-Forwarded-For: 127\.0\.0\.1$" lastreq /exec/
    t "$kv exec copies the client's headers" "^H Kubectl-Command: kubectl exec$" lastreq /exec/
    tn "$kv exec forwards no credentials" "^H (Authorization|Impersonate-)" lastreq /exec/
    if [ "$kv" = 1.28 ]; then
        t "1.28 exec offers the channel protocols (SPDY)" "^H X-Stream-Protocol-Version: v4\.channel\.k8s\.io$" lastreq /exec/
        t "1.28 exec sends Content-Length: 0" "^H Content-Length: 0$" lastreq /exec/
    else
        t "1.32 exec WebSocket headers under Go's names" "^H Sec-Websocket-Protocol: v5\.channel\.k8s\.io$" lastreq /exec/
        tn "1.32 exec needed no SPDY fallback" "^H X-Stream-Protocol-Version" lastreq /exec/
    fi
    trc "$kv exec exit code propagated" 3 kx exec -n "$NS" kp1 -- exit 3
    t "$kv exec non-zero exit message" "command terminated with exit code 3" kx exec -n "$NS" kp1 -- exit 3
    t "$kv exec stderr" "^oops$" kx exec -n "$NS" kp1 -- echoerr oops
    t "$kv exec -i stdin piped" "^line 1,line 2,$" wsretry sh -c "printf 'line 1\nline 2\n' | timeout 60 '$kc' exec -i -n '$NS' kp1 -- cat | tr '\n' ','"
    t "$kv exec -i query" "^/exec/$NS/kp1/main\?command=cat&error=1&input=1&output=1 $proto " lastreq /exec/
    t "$kv exec unknown command" "executable file not found" kx exec -n "$NS" kp1 -- nosuchcommand
    ttyexec "$kc" exec -it -n "$NS" kp1 -- cat >"$WORK/tty.out" 2>&1
    t "$kv exec -it on a pseudo-terminal" "^typed-on-a-tty$" cat "$WORK/tty.out"
    t "$kv exec -it ends with ^D" "^exit=0$" cat "$WORK/tty.out"
    t "$kv exec -it query (tty, no stderr)" "^/exec/$NS/kp1/main\?command=cat&input=1&output=1&tty=1 $proto " lastreq /exec/
    t "$kv exec -it sends the terminal size" '^resize: \{"Width":100,"Height":30\}$' cat "$WORK/tty.out"
    t "$kv attach" "^attached to main$" kx attach -n "$NS" kp1
    t "$kv attach path" "^/attach/$NS/kp1/main\?error=1&output=1 $proto " lastreq /attach/
    t "$kv attach -i" "^attached to main,piped,$" wsretry sh -c "echo piped | timeout 60 '$kc' attach -i -n '$NS' kp1 | tr '\n' ','"
    t "$kv exec -c wrong (pre-dial 400)" "^Error from server \(BadRequest\): container zz is not valid for pod kp1$" \
        kx exec -n "$NS" kp1 -c zz -- echo
    t "$kv exec unbound pod" "pod kunbound does not have a host assigned" kx exec -n "$NS" kunbound -- echo
    t "$kv exec dial failure" "^Error from server: error dialing backend: dial tcp 127\.0\.0\.1:1: connect: connection refused$" \
        kx exec -n "$NS" kdead -- echo
    t "$kv exec kubelet 404 text passed through" "unable to upgrade connection: pod $NS/missing-x not found" \
        kx exec -n "$NS" missing-x -- echo
    t "$kv exec kubelet 400 Status passed through" "^Error from server \(BadRequest\): container main is not running$" \
        kx exec -n "$NS" notrunning-x -- echo

    rm -f "$WORK/pf.out"
    timeout 120 "$kc" port-forward -n "$NS" pod/kp1 "0:$ECHO_PORT" >"$WORK/pf.out" 2>&1 &
    pf=$!
    for _ in $(seq 600); do
        grep -q '^Forwarding from 127\.0\.0\.1:' "$WORK/pf.out" && break
        kill -0 "$pf" 2>/dev/null || break
        sleep 0.1
    done
    lp=$(sed -n 's/^Forwarding from 127\.0\.0\.1:\([0-9]*\) .*/\1/p' "$WORK/pf.out" | head -1)
    t "$kv port-forward relays connections both ways" "^got: hello-through-the-double$" pfclient "${lp:-9}"
    t "$kv port-forward second connection" "^got: second-connection$" pfclient "${lp:-9}"
    kill "$pf" 2>/dev/null
    wait "$pf" 2>/dev/null
    t "$kv port-forward upgrade request" "^/portForward/$NS/kp1 portforward\.k8s\.io kube-apiserver-kubelet-client method=POST$" \
        lastreq /portForward/
    t "$kv port-forward offers portforward.k8s.io" "^H X-Stream-Protocol-Version: portforward\.k8s\.io$" lastreq /portForward/
    t "$kv port-forward data stream names the port" "\"port\": \"$ECHO_PORT\"" \
        sh -c "grep '\"streamtype\": \"data\"' '$WORK/fk.req' | tail -1"
    t "$kv port-forward kubelet 400 Status" "error upgrading connection: container main is not running" \
        kx port-forward -n "$NS" pod/notrunning-x 0:80
done

t "exec without upgrade headers" '"message":"Upgrade request required","reason":"BadRequest","code":400' \
    api GET "/api/v1/namespaces/$NS/pods/kp1/exec?command=echo&stdout=true"
t "portforward without upgrade headers" '"message":"Upgrade request required"' \
    api POST "/api/v1/namespaces/$NS/pods/kp1/portforward?ports=80" ""
t "nodes/proxy metrics" "^node_cpu_usage_seconds_total " k get --raw "/api/v1/nodes/$NODE/proxy/metrics/resource"
t "nodes/proxy path and client certificate" "^/metrics/resource - kube-apiserver-kubelet-client method=GET$" lastreq /metrics/
t "nodes/proxy query" "^GET /fakeproxy/a/b\?x=1&y=2 HTTP/1\.1$" k get --raw "/api/v1/nodes/$NODE/proxy/fakeproxy/a/b?x=1&y=2"
t "nodes/proxy kubelet 404 passed through" "NotFound" k get --raw "/api/v1/nodes/$NODE/proxy/no/such/path"
t "nodes/proxy dial failure" "^Error from server \(ServiceUnavailable\): error trying to reach service: dial tcp 127\.0\.0\.1:1: connect: connection refused$" \
    k get --raw "/api/v1/nodes/$DEADNODE/proxy/metrics/resource"
t "logs dial failure (500, no reason)" \
    "^Error from server: Get \"https://127\.0\.0\.1:1/containerLogs/$NS/kdead/main\": dial tcp 127\.0\.0\.1:1: connect: connection refused$" \
    k logs -n "$NS" kdead

renew
# RBAC: kubectl 1.28's SPDY POST needs create on pods/exec, 1.32's WebSocket GET needs get (and
# falls back to the POST when the GET is refused).
if [ -n "$DOUBLE" ]; then
    before=$(nreq /exec/) retried=$(wsretries)
    for u in getpods:'[]' execcreate:'["create"]' execget:'["get"]'; do
        api POST /_test/tokens "{\"token\":\"tok-${u%%:*}-$SFX\",\"user\":\"${u%%:*}\",\"groups\":[]}" >/dev/null
        api POST /_test/rbac "{\"subject\":\"user:${u%%:*}\",\"role\":[{\"apiGroups\":[\"\"],\"resources\":[\"pods\"],\"verbs\":[\"get\"]},{\"apiGroups\":[\"\"],\"resources\":[\"pods/exec\",\"pods/portforward\"],\"verbs\":${u#*:}}]}" >/dev/null
    done
    t "1.28 exec without pods/exec create: Forbidden" \
        "pods \"kp1\" is forbidden: User \"getpods\" cannot create resource \"pods/exec\" in API group \"\" in the namespace \"$NS\"" \
        "$K128" exec -n "$NS" kp1 --token="tok-getpods-$SFX" -- echo hi
    t "1.28 exec with pods/exec create only" "^hi$" "$K128" exec -n "$NS" kp1 --token="tok-execcreate-$SFX" -- echo hi
    t "1.28 exec with pods/exec get only: Forbidden" "cannot create resource \"pods/exec\"" \
        "$K128" exec -n "$NS" kp1 --token="tok-execget-$SFX" -- echo hi
    if [ -x "$K132" ]; then
        t "1.32 exec without pods/exec: Forbidden" "cannot create resource \"pods/exec\"" \
            "$K132" exec -n "$NS" kp1 --token="tok-getpods-$SFX" -- echo hi
        t "1.32 exec with pods/exec get only (WebSocket)" "^hi$" wsretry "$K132" exec -n "$NS" kp1 --token="tok-execget-$SFX" -- echo hi
        t "1.32 exec with pods/exec create only (SPDY fallback)" "^hi$" \
            wsretry "$K132" exec -n "$NS" kp1 --token="tok-execcreate-$SFX" -- echo hi
        t "1.32 fallback reached the kubelet by SPDY" " v4\.channel\.k8s\.io kube-apiserver-kubelet-client method=POST$" lastreq /exec/
    fi
    # reached: 1.28 with create; 1.32 with get (WebSocket) and with create (after its GET was
    # refused); and each run made again for the client's race (wsretry)
    want=$((before + 1 + $(wsretries) - retried))
    [ -x "$K132" ] && want=$((want + 2))
    t "a refused exec never reaches the kubelet" "^$want$" nreq /exec/
    t "1.28 port-forward without pods/portforward create: Forbidden" "cannot create resource \"pods/portforward\"" \
        "$K128" port-forward -n "$NS" pod/kp1 --token="tok-getpods-$SFX" 0:80
else
    skipped "RBAC on pods/exec (needs the double's /_test controls)"
fi
api DELETE "/api/v1/nodes/$DEADNODE" >/dev/null
# The checks after this section want NODE Ready: should a loaded machine have let it go Unknown
# even so, post Ready as the agent would and wait for it.
renew
now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
api PATCH "/api/v1/nodes/$NODE/status" "{\"status\":{\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\",\"reason\":\"KubeletReady\",\"message\":\"kubelet is posting ready status\",\"lastHeartbeatTime\":\"$now\",\"lastTransitionTime\":\"$now\"}]}}" \
    application/strategic-merge-patch+json >/dev/null
for _ in $(seq 600); do k get node "$NODE" --no-headers 2>/dev/null | grep -Eq "^$NODE +Ready " && break; sleep 0.1; done
