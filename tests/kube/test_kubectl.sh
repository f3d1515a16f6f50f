#!/bin/bash
# Real kubectl against the Kubernetes API test double (or any server whose state dir layout matches).
# Usage: KUBE_STATE_DIR=DIR test_kubectl.sh     (DIR from kube_test_server.py --state-dir)
# Optional: KUBECTL (default: kubectl on PATH), KUBE_TEST_SUMMARY (file for "passed failed skipped"),
# KUBECTL_128 / KUBECTL_132 (the 1.28 and 1.32 clients for the exec, attach, port-forward and top
# checks; default: kubectl.1.28 / kubectl.1.32 beside the kubectl dispatcher, whose pick follows
# the server's /version: 1.28 here, which speaks SPDY only, while 1.32 tries WebSocket first).
# Prints one "ok - ..." / "FAIL - ..." line per check and "kubectl: N passed, N failed" at the end.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
SD=${KUBE_STATE_DIR:?KUBE_STATE_DIR must point at the test server state dir}
KUBECTL=${KUBECTL:-kubectl}
PY=${PYTHON:-/usr/bin/python3}
[ -x "$PY" ] || PY=python3
export KUBECONFIG=$SD/kubeconfig
WORK=$(mktemp -d)
FK_PID=
ECHO_PID=
HB_PID=
cleanup() {
    [ -n "$HB_PID" ] && { pkill -P "$HB_PID" 2>/dev/null; kill "$HB_PID" 2>/dev/null; wait "$HB_PID" 2>/dev/null; }
    [ -n "$FK_PID" ] && kill "$FK_PID" 2>/dev/null && wait "$FK_PID" 2>/dev/null
    [ -n "$ECHO_PID" ] && kill "$ECHO_PID" 2>/dev/null && wait "$ECHO_PID" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT

pass=0 fail=0 skip=0
ok() { pass=$((pass + 1)); echo "ok - $1"; }
skipped() { skip=$((skip + 1)); echo "skip - $1"; }
nok() { fail=$((fail + 1)); echo "FAIL - $1"; printf '%s\n' "$2" | head -25 | sed 's/^/    /'; }
# t NAME EXTENDED-REGEX COMMAND...   (passes when the command's output matches)
t() {
    local name=$1 re=$2 out; shift 2
    out=$("$@" 2>&1)
    if printf '%s\n' "$out" | grep -Eq -- "$re"; then ok "$name"; else nok "$name" "$out"; fi
}
# tn NAME EXTENDED-REGEX COMMAND...  (passes when the output does NOT match)
tn() {
    local name=$1 re=$2 out; shift 2
    out=$("$@" 2>&1)
    if printf '%s\n' "$out" | grep -Eq -- "$re"; then nok "$name" "$out"; else ok "$name"; fi
}
# trc NAME RC COMMAND...  (passes when the command exits with RC)
trc() {
    local name=$1 want=$2 out rc; shift 2
    out=$("$@" 2>&1)
    rc=$?
    if [ "$rc" -eq "$want" ]; then ok "$name"; else nok "$name" "exit $rc, want $want: $out"; fi
}
k() { timeout 60 "$KUBECTL" "$@"; }
api() {  # api METHOD PATH [JSON]  -> prints body (admin token)
    "$PY" - "$@" <<'EOF'
import json, os, ssl, sys, urllib.request
sd = os.environ["KUBE_STATE_DIR"]
sj = json.load(open(os.path.join(sd, "server.json")))
tok = open(sj["adminToken"]).read().strip()
m, p = sys.argv[1], sys.argv[2]
data = sys.argv[3].encode() if len(sys.argv) > 3 else None
ct = sys.argv[4] if len(sys.argv) > 4 else "application/json"
req = urllib.request.Request(sj["url"] + p, data=data, method=m, headers={"Authorization": "Bearer " + tok, "Content-Type": ct})
ctx = ssl.create_default_context(cafile=sj["ca"]) if sj.get("ca") else None
try:
    print(urllib.request.urlopen(req, context=ctx).read().decode())
except urllib.error.HTTPError as e:
    print(e.read().decode())
EOF
}

# --- a fake kubelet for kubectl logs, exec, attach, port-forward and nodes/proxy
"$PY" "$HERE/fake_kubelet.py" --cert "$SD/kubelet-serving.crt" --key "$SD/kubelet-serving.key" --ca "$SD/ca.crt" \
    --port-file "$WORK/fk.port" --requests-file "$WORK/fk.req" --usage-file "$WORK/usage.json" 2>/dev/null &
FK_PID=$!
# Waits poll a condition with a generous deadline (60 s): a loaded machine
# starts Python and kubectl slowly.
for _ in $(seq 600); do [ -s "$WORK/fk.port" ] && break; sleep 0.1; done
FKPORT=$(cat "$WORK/fk.port" 2>/dev/null || echo 10250)

SFX=$RANDOM
NODE=kn-$SFX
NS=kc-$SFX
NOW=$(date -u +%Y-%m-%dT%H:%M:%SZ)
cat >"$WORK/node.json" <<EOF
{"apiVersion":"v1","kind":"Node","metadata":{"name":"$NODE","labels":{"kubectl-test":"$SFX","node-role.kubernetes.io/gpu":""}},
 "status":{"capacity":{"cpu":"4","memory":"8Gi","pods":"110","nvidia.com/gpu":"2"},
  "addresses":[{"type":"InternalIP","address":"127.0.0.1"}],
  "daemonEndpoints":{"kubeletEndpoint":{"Port":$FKPORT}},
  "nodeInfo":{"kubeletVersion":"v1.28.7","osImage":"Debian GNU/Linux 12 (bookworm)","kernelVersion":"6.1.0","containerRuntimeVersion":"slurm://1.0",
   "operatingSystem":"linux","architecture":"amd64","machineID":"","systemUUID":"","bootID":"","kubeProxyVersion":""},
  "conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","message":"kubelet is posting ready status","lastHeartbeatTime":"$NOW","lastTransitionTime":"$NOW"}]}}
EOF
cat >"$WORK/pod.yaml" <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: kp1
  namespace: $NS
  labels: {app: kubectl-test}
spec:
  nodeSelector: {kubectl-test: "$SFX"}
  containers:
  - name: main
    image: busybox:1.35
    command: ["sh", "-c", "sleep 1000"]
    resources:
      limits: {nvidia.com/gpu: 1}
EOF
sed -e 's/name: kp1/name: kp2/' "$WORK/pod.yaml" >"$WORK/pod2.yaml"

t "version" "Server Version: v1\.28" k version
t "create namespace" "namespace/$NS created" k create namespace "$NS"
t "create -f node" "node/$NODE created" k create -f "$WORK/node.json"
NODE_UID=$(k get node "$NODE" -o jsonpath='{.metadata.uid}')
api POST /apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases \
    "{\"metadata\":{\"name\":\"$NODE\",\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"name\":\"$NODE\",\"uid\":\"$NODE_UID\"}]},\"spec\":{\"holderIdentity\":\"$NODE\",\"leaseDurationSeconds\":40,\"renewTime\":\"$(date -u +%Y-%m-%dT%H:%M:%S.000000Z)\"}}" >/dev/null
# Renewed every 10 s, as a kubelet does: however long the checks take on a
# loaded machine, the node-lifecycle controller never finds the Lease stale
# (40 s) and marks the node Unknown under the checks that read its status.
( while :; do
    sleep 10
    api PATCH "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/$NODE" \
        "{\"spec\":{\"renewTime\":\"$(date -u +%Y-%m-%dT%H:%M:%S.000000Z)\"}}" \
        application/merge-patch+json >/dev/null 2>&1
  done ) &
HB_PID=$!
for _ in $(seq 600); do k get node "$NODE" -o jsonpath='{.spec.taints}' | grep -q not-ready || break; sleep 0.1; done
t "get nodes" "^NAME +STATUS +ROLES +AGE +VERSION" k get nodes
t "get nodes row" "^$NODE +Ready +gpu +[0-9]+[smhd].* +v1\.28\.7$" k get nodes
t "get nodes -o wide" "^NAME +STATUS +ROLES +AGE +VERSION +INTERNAL-IP +EXTERNAL-IP +OS-IMAGE +KERNEL-VERSION +CONTAINER-RUNTIME" k get nodes -o wide
t "get nodes -o wide row" "^$NODE +Ready .*127\.0\.0\.1 +<none> +Debian GNU/Linux 12 \(bookworm\) +6\.1\.0 +slurm://1\.0" k get nodes -o wide
t "get node -l" "^$NODE " k get nodes -l "kubectl-test=$SFX"
t "get node jsonpath" "^2$" k get node "$NODE" -o jsonpath='{.status.allocatable.nvidia\.com/gpu}'
t "label node" "node/$NODE labeled" k label node "$NODE" extra=yes
t "apply -f (create)" "pod/kp1 created" k apply -f "$WORK/pod.yaml"
t "apply -f (unchanged)" "pod/kp1 unchanged" k apply -f "$WORK/pod.yaml"
sed -i 's/app: kubectl-test/app: kubectl-test2/' "$WORK/pod.yaml"
t "apply -f (configured)" "pod/kp1 configured" k apply -f "$WORK/pod.yaml"
t "apply result" "^kubectl-test2$" k get pod kp1 -n "$NS" -o jsonpath='{.metadata.labels.app}'
t "create -f" "pod/kp2 created" k create -f "$WORK/pod2.yaml"
t "create -f duplicate" 'AlreadyExists|already exists' k create -f "$WORK/pod2.yaml"
for _ in $(seq 600); do [ -n "$(k get pod kp2 -n "$NS" -o jsonpath='{.spec.nodeName}')" ] && break; sleep 0.1; done
t "get pods -o wide -A" "^NAMESPACE +NAME +READY +STATUS +RESTARTS +AGE +IP +NODE +NOMINATED NODE +READINESS GATES" k get pods -o wide -A
t "get pods -o wide -A row" "^$NS +kp1 +0/1 +Pending +0 +[0-9]+[smh].* +<none> +$NODE +<none> +<none>" k get pods -o wide -A
t "get pod -o yaml defaults" "restartPolicy: Always" k get pod kp1 -n "$NS" -o yaml
t "describe node" "Non-terminated Pods: +\(2 in total\)" k describe node "$NODE"
t "describe node gpu" "nvidia.com/gpu +2 +2" k describe node "$NODE"
t "describe pod" "Node: +$NODE/" k describe pod kp1 -n "$NS"
t "describe pod events" "Successfully assigned $NS/kp1 to $NODE" k describe pod kp1 -n "$NS"
t "get events" "^LAST SEEN +TYPE +REASON +OBJECT +MESSAGE" k get events -n "$NS"
t "get events row" "Normal +Scheduled +pod/kp1 +Successfully assigned" k get events -n "$NS"
t "get leases" "^$NODE +$NODE " k get leases -n kube-node-lease
t "logs" "^log line 1 \(main\)$" k logs kp1 -n "$NS"
t "logs --tail" "^log line 5 \(main\)$" k logs kp1 -n "$NS" --tail=1
tn "logs --tail=1 has one line" "log line 4" k logs kp1 -n "$NS" --tail=1
# kubectl logs -f streams until it is stopped: it passes once "follow line 2"
# arrived (within 60 s), then it is stopped.
"$KUBECTL" logs -f kp1 -n "$NS" >"$WORK/follow.out" 2>&1 &
FOLLOW_PID=$!
for _ in $(seq 600); do grep -q "^follow line 2$" "$WORK/follow.out" && break; sleep 0.1; done
kill "$FOLLOW_PID" 2>/dev/null; wait "$FOLLOW_PID" 2>/dev/null
t "logs -f" "^follow line 2$" cat "$WORK/follow.out"
t "logs -c wrong" "container nope is not valid for pod kp1" k logs kp1 -n "$NS" -c nope
. "$HERE/kubectl_streams.sh"
. "$HERE/kubectl_top.sh"
t "cordon" "node/$NODE cordoned" k cordon "$NODE"
t "get nodes cordoned" "^$NODE +Ready,SchedulingDisabled " k get nodes
t "uncordon" "node/$NODE uncordoned" k uncordon "$NODE"
t "delete --wait=false" "pod \"kp2\" deleted" k delete pod kp2 -n "$NS" --wait=false
t "get pods terminating" "^kp2 +0/1 +Terminating " k get pods -n "$NS"
# kubectl delete waits until the pod is gone: play the node agent's final delete
UID1=$(k get pod kp1 -n "$NS" -o jsonpath='{.metadata.uid}')
# (once kubectl's graceful delete has set the pod's deletionTimestamp, not
# after a fixed time: kubectl may start slowly)
( for _ in $(seq 600); do
    api GET "/api/v1/namespaces/$NS/pods/kp1" | grep -q '"deletionTimestamp"' && break; sleep 0.1
  done
  api DELETE "/api/v1/namespaces/$NS/pods/kp1" "{\"gracePeriodSeconds\":0,\"preconditions\":{\"uid\":\"$UID1\"}}" >/dev/null ) &
FINAL_PID=$!
t "delete (waits for final delete)" "pod \"kp1\" deleted" k delete pod kp1 -n "$NS" --timeout=20s
wait "$FINAL_PID"
t "get pod after delete" "NotFound|not found" k get pod kp1 -n "$NS"
t "delete node" "node \"$NODE\" deleted" k delete node "$NODE"
t "lease garbage-collected" "NotFound|not found" k get lease "$NODE" -n kube-node-lease
t "create serviceaccount" "serviceaccount/ksa created" k create serviceaccount ksa -n "$NS"
t "get sa" "^ksa +0 +[0-9]+s$" k get sa -n "$NS"
SA_TOKEN=$(k create token ksa -n "$NS" 2>&1)
t "create token: whoami" "^Username +system:serviceaccount:$NS:ksa$" k auth whoami --token="$SA_TOKEN"
# --- CertificateSigningRequests: kubectl get csr, kubectl certificate approve / deny
CSR_OK=kc-csr-$SFX CSR_NO=kc-deny-$SFX
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$WORK/kc.key" -out "$WORK/kc.csr" \
    -subj "/O=system:nodes/CN=system:node:$NODE" -addext "subjectAltName=DNS:$NODE,IP:192.0.2.10" 2>/dev/null
for n in "$CSR_OK" "$CSR_NO"; do
    cat >"$WORK/$n.json" <<EOF
{"apiVersion":"certificates.k8s.io/v1","kind":"CertificateSigningRequest","metadata":{"name":"$n"},
 "spec":{"request":"$(base64 -w0 "$WORK/kc.csr")","signerName":"kubernetes.io/kubelet-serving","expirationSeconds":3600,
  "usages":["digital signature","key encipherment","server auth"]}}
EOF
done
t "create -f csr" "certificatesigningrequest.certificates.k8s.io/$CSR_OK created" k create -f "$WORK/$CSR_OK.json"
k create -f "$WORK/$CSR_NO.json" >/dev/null 2>&1
t "get csr header" "^NAME +AGE +SIGNERNAME +REQUESTOR +REQUESTEDDURATION +CONDITION$" k get csr
t "get csr row (pending)" "^$CSR_OK +[0-9]+s +kubernetes.io/kubelet-serving +admin +60m +Pending$" k get csr "$CSR_OK"
t "certificate approve" "^certificatesigningrequest.certificates.k8s.io/$CSR_OK approved$" k certificate approve "$CSR_OK"
for _ in $(seq 600); do [ -n "$(k get csr "$CSR_OK" -o jsonpath='{.status.certificate}')" ] && break; sleep 0.1; done
t "get csr row (approved, issued)" "^$CSR_OK +[0-9]+s +kubernetes.io/kubelet-serving +admin +60m +Approved,Issued$" k get csr "$CSR_OK"
t "approve condition" "^KubectlApprove This CSR was approved by kubectl certificate approve.$" \
    k get csr "$CSR_OK" -o jsonpath='{.status.conditions[0].reason} {.status.conditions[0].message}'
k get csr "$CSR_OK" -o jsonpath='{.status.certificate}' | base64 -d >"$WORK/kc.crt" 2>/dev/null
t "issued certificate" "DNS:$NODE, IP Address:192.0.2.10" openssl x509 -in "$WORK/kc.crt" -noout -ext subjectAltName
t "certificate deny" "^certificatesigningrequest.certificates.k8s.io/$CSR_NO denied$" k certificate deny "$CSR_NO"
t "get csr row (denied)" "^$CSR_NO +[0-9]+s +kubernetes.io/kubelet-serving +admin +60m +Denied$" k get csr "$CSR_NO"
t "deny an approved one" "is already Approved" k certificate deny "$CSR_OK"
t "delete csr" "certificatesigningrequest.certificates.k8s.io \"$CSR_OK\" deleted" k delete csr "$CSR_OK"
k delete csr "$CSR_NO" >/dev/null 2>&1
t "delete namespace" "namespace \"$NS\" deleted" k delete namespace "$NS" --wait=false
t "api-resources" "^leases +coordination\.k8s\.io/v1 +true +Lease" k api-resources --api-group=coordination.k8s.io
t "no rights" "Forbidden|forbidden" k get nodes --token="$(cat "$SD/noright.token")"
t "api-resources: review APIs" "^tokenreviews +authentication\.k8s\.io/v1 +false +TokenReview" k api-resources --api-group=authentication.k8s.io
t "auth can-i (agent: tokenreviews)" "^yes$" k auth can-i create tokenreviews --token="$(cat "$SD/agent.token")"
t "auth can-i (noright: subjectaccessreviews)" "^no$" k auth can-i create subjectaccessreviews --token="$(cat "$SD/noright.token")"
t "auth whoami" "^Username +slurm-k8s-agent$" k auth whoami --token="$(cat "$SD/agent.token")"

if [ -n "${KUBE_TEST_SUMMARY:-}" ]; then echo "$pass $fail $skip" >"$KUBE_TEST_SUMMARY"; fi
echo "kubectl: $pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
